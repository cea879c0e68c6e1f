"""stablehlo.sort -> a bitonic sorting network, each compare-exchange step one fully parallel
linalg.generic over every element of every row (the GPU target; the CPU target's merge sort,
lowering/legalize/sort.py, would run in one thread).

The network sorts each 1-D slice along `dimension` in log2(N) merge phases, N the length n
rounded up to a power of two. Phase k (k = 2, 4, ..., N) first compares each position i with
its mirror in its aligned block of k (partner i xor (k-1)), then with i xor j for
j = k/4, ..., 1. Every comparison orders the pair ascending in the comparator's sense: the
element at the lower position keeps the one that comes first.

Lengths that are not a power of two need no padding: pad elements would sort last, and with
this all-ascending form of the network they start at positions >= n and never move (after
each phase every block is sorted, so a block's pads are its tail; a mirror compare pairs a
pad only with an element below it, which stays; the half-cleaners never move a maximum
down). So a comparison whose partner lies at or past n keeps the element, and positions past
n are never computed.

The op's own comparator region decides every comparison (cloned into the generic's body over
0-d tensors; legalization turns it into scalar code: the generic carries the scalarize mark
the shared lowerings' loops carry, lowering/legalize/scalarize.py). A bitonic network is not
stable, so the original position of every element travels with it (an i32 sorted as one
more operand, which the first step computes from the index) and breaks ties: comparator(a, b), or neither precedes the other and a started
first. The order is then a total one, which makes the sort stable whether or not the op asks
for it (XLA's CPU sort, which the testdata records, is). Both elements of a pair evaluate the
same comparison (upper element against lower), so the pair stays a permutation even under a
comparator that is not a strict weak order.

Each step reads the previous step's tensors at the partner position (a tensor.extract in the
body), so elementwise fusion leaves the steps apart: one kernel launch each.
"""
from __future__ import annotations

from math import prod

from torch_mlir import ir
from torch_mlir.dialects import arith, linalg, tensor

from ..legalize.loops import SCALARIZE_ATTR, apply_region
from ..patterns import pattern_pass, replace_op

_SLT = arith.CmpIPredicate.slt
_ULT = arith.CmpIPredicate.ult


def network_masks(n: int) -> list[int]:
    """The partner masks (i xor mask) of the network's steps for a row of n elements."""
    size = 1
    while size < n:
        size *= 2
    masks = []
    k = 2
    while k <= size:
        masks.append(k - 1)          # the mirror compare: merges two sorted halves
        j = k // 4
        while j >= 1:                # half-cleaners
            masks.append(j)
            j //= 2
        k *= 2
    return masks


def _static_ranked(values) -> bool:
    return all(isinstance(v.type, ir.RankedTensorType) and ir.RankedTensorType(v.type)
               .has_static_shape for v in values)


def _lower(op: ir.Operation) -> bool | None:
    inputs = list(op.operands)
    if not inputs or not _static_ranked(inputs):
        return False  # the shared lowering names what it cannot handle
    shape = list(ir.RankedTensorType(inputs[0].type).shape)
    rank = len(shape)
    dim = ir.IntegerAttr(op.attributes["dimension"]).value if "dimension" in op.attributes \
        else -1
    if dim < 0:
        dim += rank
    if rank == 0 or shape[dim] <= 1 or prod(shape) == 0 or shape[dim] >= 2 ** 31:
        return False  # nothing to sort (the shared lowering forwards the operands)
    n = shape[dim]
    with ir.InsertionPoint(op), op.location:
        values = [*inputs, None]  # the first step computes the original positions
        for mask in network_masks(n):
            values = _step(op.regions[0], values, dim, n, mask)
    replace_op(op, values[:-1])
    return None


def _index(d: int) -> ir.Value:
    return ir.Operation.create("linalg.index", results=[ir.IndexType.get()], attributes={
        "dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), d)}).results[0]


def _step(comparator: ir.Region, values: list[ir.Value | None], dim: int, n: int,
          mask: int) -> list[ir.Value]:
    """One compare-exchange step: every element against its partner at i xor mask. The last
    value is the elements' original positions (i32); None at the first step, where the
    position of each element is its index."""
    read = values if values[-1] is not None else values[:-1]
    shape = list(ir.RankedTensorType(values[0].type).shape)
    i32 = ir.IntegerType.get_signless(32)
    elements = [ir.RankedTensorType(v.type).element_type for v in values[:-1]] + [i32]
    types = [ir.RankedTensorType.get(shape, e) for e in elements]
    rank = len(shape)
    identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))
    inits = [tensor.empty(shape, e) for e in elements]
    generic = ir.Operation.create(
        "linalg.generic", results=types, operands=[*read, *inits],
        attributes={
            "indexing_maps": ir.ArrayAttr.get([identity] * (len(read) + len(inits))),
            "iterator_types": ir.ArrayAttr.get(
                [ir.Attribute.parse("#linalg.iterator_type<parallel>")] * rank),
            "operandSegmentSizes": ir.DenseI32ArrayAttr.get([len(read), len(inits)])},
        regions=1)
    # the comparator's 0-d StableHLO ops become scalar code (lowering/legalize/scalarize.py)
    generic.attributes[SCALARIZE_ATTR] = ir.UnitAttr.get()
    block = generic.regions[0].blocks.append(*[ir.RankedTensorType(v.type).element_type
                                               for v in read], *elements)
    with ir.InsertionPoint(block):
        index_t = ir.IndexType.get()
        coords = [_index(d) for d in range(rank)]
        i = coords[dim]
        partner = arith.xori(i, arith.constant(index_t, mask))
        # unsigned: a partner past n is also past any valid position, so one compare
        in_row = arith.cmpi(_ULT, partner, arith.constant(index_t, n))
        safe = arith.select(in_row, partner, i)
        at = list(coords)
        at[dim] = safe
        mine = list(block.arguments)[:len(read)]
        theirs = [tensor.extract(v, at) for v in read]
        if len(read) < len(values):
            mine.append(arith.index_cast(i32, i))
            theirs.append(arith.index_cast(i32, safe))
        i_lower = arith.cmpi(_ULT, i, safe)
        lows = [arith.select(i_lower, a, b) for a, b in zip(mine, theirs)]
        highs = [arith.select(i_lower, b, a) for a, b in zip(mine, theirs)]
        swap = arith.andi(in_row, _precedes(comparator, highs, lows))
        linalg.YieldOp([arith.select(swap, b, a) for a, b in zip(mine, theirs)])
    return list(generic.results)


def _precedes(comparator: ir.Region, a: list[ir.Value], b: list[ir.Value]) -> ir.Value:
    """Does element a come strictly before element b? The comparator on the operands (the
    last value of each is the original position), ties broken by the original position."""
    i1 = ir.IntegerType.get_signless(1)

    def compare(x, y):
        pairs = [v for l, r in zip(x[:-1], y[:-1]) for v in (l, r)]
        return apply_region(comparator, pairs, [i1])[0]

    before = compare(a, b)
    after = compare(b, a)
    true = arith.constant(i1, 1)
    tie = arith.xori(arith.ori(before, after), true)
    first = arith.cmpi(_SLT, a[-1], b[-1])
    return arith.ori(before, arith.andi(tie, first))


bitonic_sorts = pattern_pass({"stablehlo.sort": _lower})
