"""A stable sort whose results are only read through leading slices -> an O(n) top-k.

JAX's `lax.top_k` (`chlo.top_k`, decomposed by jaxlib), `lax.approx_max_k`/`approx_min_k`
(ApproxTopK, see jax_targets.py) and a fixed-k `stablehlo.dynamic_top_k` all reach Kiln as a
`stablehlo.sort` along one dimension whose results are read only by slices keeping positions
[0, k) of that dimension. A full merge sort for that is O(n log n) comparator calls and a
sorted copy of every operand; XLA selects the k first instead.

This pass does too, per 1-D slice along the dimension: a buffer of the k first elements so
far, in sorted order, carried in scalars (k per operand: registers, no memory), and one pass
over the n positions in index order. An element enters only when the buffer has room or the
comparator says it strictly precedes the buffer's last element; CHUNK positions at a time
are first tested branch-free against that last element, so most elements cost one
vectorizable comparison. Entering, it goes before the first buffered element it strictly
precedes and the rest shift right by one (branch-free selects over the k slots).
Because positions arrive in increasing order and ties never displace, the result is exactly
the first k of the stable sort (equal keys: the lower index first), for any comparator that
is a strict weak order (the sort's own requirement), cloned as is: XLA's float total order
(NaN, -0.0 < +0.0) comes with it.

An operand that is an iota along the dimension (top_k's indices) is not read from memory:
its value at position i is i.

Worst case (the input already in order) every element enters and shifts the buffer: O(n k),
so only k <= MAX_K (and k < n) takes this path; larger k keep the sort.
"""
from __future__ import annotations

from math import prod

from torch_mlir import ir
from torch_mlir.dialects import arith, tensor

from ..ir_util import walk
from .loops import IndexConstants, apply_region, boolean, delinearize, for_loop, if_else

MAX_K = 32
CHUNK = 8  # positions tested together against the buffer's last element

_SLT = arith.CmpIPredicate.slt
_SGE = arith.CmpIPredicate.sge


def _ints(attr) -> list[int]:
    return list(ir.DenseI64ArrayAttr(attr))


def _leading_slice_k(user: ir.Operation, shape: list[int], dim: int) -> int | None:
    """k when `user` is a stablehlo.slice keeping [0, k) of `dim` and all of every other
    dimension, with unit strides; else None."""
    if user.name != "stablehlo.slice":
        return None
    starts = _ints(user.attributes["start_indices"])
    limits = _ints(user.attributes["limit_indices"])
    strides = _ints(user.attributes["strides"])
    if any(s != 0 for s in starts) or any(s != 1 for s in strides):
        return None
    if any(limits[d] != shape[d] for d in range(len(shape)) if d != dim):
        return None
    return limits[dim]


def _iota_along(value: ir.Value, dim: int) -> bool:
    owner = value.owner
    if not isinstance(owner, ir.Operation):
        owner = getattr(owner, "operation", owner)
    if not isinstance(owner, ir.Operation) or owner.name != "stablehlo.iota":
        return False
    element = ir.RankedTensorType(value.type).element_type
    return ir.IntegerAttr(owner.attributes["iota_dimension"]).value == dim and \
        isinstance(element, ir.IntegerType) and ir.IntegerType(element).is_signless


def _lower(op: ir.Operation) -> bool:
    types = [value.type for value in op.operands]
    if not types or not all(isinstance(t, ir.RankedTensorType) and t.has_static_shape
                            for t in types):
        return False
    shape = list(ir.RankedTensorType(types[0]).shape)
    rank = len(shape)
    if rank == 0 or prod(shape) == 0:
        return False
    dim = ir.IntegerAttr(op.attributes["dimension"]).value if "dimension" in op.attributes else -1
    if dim < 0:
        dim += rank
    n = shape[dim]
    ks = []
    for result in op.results:
        for use in result.uses:
            k = _leading_slice_k(use.owner, shape, dim)
            if k is None:
                return False
            ks.append(k)
    if not ks:
        return False
    k = max(ks)
    if k == 0 or k >= n or k > MAX_K:
        return False

    elements = [ir.RankedTensorType(t).element_type for t in types]
    if not all(isinstance(e, (ir.FloatType, ir.IntegerType)) for e in elements):
        return False
    iotas = [_iota_along(v, dim) for v in op.operands]
    out_shape = list(shape)
    out_shape[dim] = k
    with ir.InsertionPoint(op), op.location:
        index = IndexConstants()
        outs = _select(op, index, elements, iotas, dim, n, k, shape)
    _replace_slices(op, outs, out_shape)
    return True


def _select(op: ir.Operation, index: IndexConstants, elements: list[ir.Type],
            iotas: list[bool], dim: int, n: int, k: int, shape: list[int]) -> list[ir.Value]:
    """Loops: rows (every slice but `dim`) > chunks of positions > positions. The buffer is
    carried in scalars (k per operand), so entering is branch-free selects in registers."""
    comparator = op.regions[0]
    i1 = ir.IntegerType.get_signless(1)
    c0, c1 = index(0), index(1)
    inputs = list(op.operands)
    m = len(inputs)
    other = [s for d, s in enumerate(shape) if d != dim]
    out_shape = list(shape)
    out_shape[dim] = k
    outs = [tensor.empty(out_shape, e) for e in elements]

    def row(flat_row: ir.Value, dsts: list[ir.Value]) -> list[ir.Value]:
        row_coords = delinearize(index, flat_row, other)

        def at(pos: ir.Value) -> list[ir.Value]:
            coords = list(row_coords)
            coords.insert(dim, pos)
            return coords

        def precedes(a: list[ir.Value], b: list[ir.Value]) -> ir.Value:
            pairs = [v for x, y in zip(a, b) for v in (x, y)]
            return apply_region(comparator, pairs, [i1])[0]

        def read(i: ir.Value) -> list[ir.Value]:
            return [arith.index_cast(e, i) if iota else tensor.extract(src, at(i))
                    for src, e, iota in zip(inputs, elements, iotas)]

        def slot(buf: list[ir.Value], j: int) -> list[ir.Value]:
            return buf[j * m:(j + 1) * m]

        def before_slot(values, buf, count, j) -> ir.Value:
            # An empty slot (j >= count) is after everything.
            empty = arith.cmpi(_SGE, index(j), count)
            return arith.ori(empty, precedes(values, slot(buf, j)))

        def enter(values, buf, count) -> list[ir.Value]:
            # The buffer is sorted, so "values precedes slot j" holds for a suffix of the
            # slots: slot j takes the previous slot's element where it already held at j - 1,
            # else `values` itself where it holds, else keeps its own.
            new = []
            held_before = None
            for j in range(k):
                here = before_slot(values, buf, count, j)
                for a in range(m):
                    shifted = values[a] if held_before is None else \
                        arith.select(held_before, slot(buf, j - 1)[a], values[a])
                    new.append(arith.select(here, shifted, slot(buf, j)[a]))
                held_before = here
            return new

        def position(i: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
            count, buf = carried[0], carried[1:]
            values = read(i)
            enters = before_slot(values, buf, count, k - 1)
            new_count = arith.minsi(arith.addi(count, c1), index(k))
            entered = if_else(enters, [v.type for v in buf],
                              lambda: enter(values, buf, count), lambda: buf)
            return [new_count, *entered]

        def scan(lo: ir.Value, hi: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
            return for_loop(lo, hi, c1, carried, position, scalarize=True)

        def chunk(start: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
            # A branch-free test of CHUNK positions against the buffer's last element;
            # only a chunk with a candidate is scanned element by element.
            count, buf = carried[0], carried[1:]
            last = slot(buf, k - 1)

            def test(t: ir.Value, any_: list[ir.Value]) -> list[ir.Value]:
                return [arith.ori(any_[0], precedes(read(arith.addi(start, t)), last))]
            (candidate,) = for_loop(c0, index(CHUNK), c1, [boolean(False)], test,
                                    scalarize=True)
            candidate = arith.ori(candidate, arith.cmpi(_SLT, count, index(k)))
            return if_else(candidate, [v.type for v in carried],
                           lambda: scan(start, arith.addi(start, index(CHUNK)), carried),
                           lambda: carried)

        chunked = (n // CHUNK) * CHUNK
        # Empty slots hold anything; position 0's values are at hand (and of any type).
        carried = [c0] + read(c0) * k
        if chunked:
            carried = for_loop(c0, index(chunked), index(CHUNK), carried, chunk, scalarize=True)
        if chunked < n:
            carried = scan(index(chunked), index(n), carried)
        buf = carried[1:]
        # k < n, so every slot is filled by now.
        for j in range(k):
            dsts = [tensor.insert(v, d, at(index(j))) for v, d in zip(slot(buf, j), dsts)]
        return dsts

    return for_loop(c0, index(prod(other)), c1, outs, row)


def _replace_slices(op: ir.Operation, outs: list[ir.Value], out_shape: list[int]) -> None:
    """Each slice of the sort's results now reads the k-buffer (itself when it keeps all k)."""
    for result, buf in zip(op.results, outs):
        for use in list(result.uses):
            user = use.owner
            limits = _ints(user.attributes["limit_indices"])
            if limits == out_shape:
                user.results[0].replace_all_uses_with(buf)
            else:
                with ir.InsertionPoint(user), user.location:
                    sliced = ir.Operation.create(
                        "stablehlo.slice", results=[user.results[0].type], operands=[buf],
                        attributes={"start_indices": user.attributes["start_indices"],
                                    "limit_indices": user.attributes["limit_indices"],
                                    "strides": user.attributes["strides"]})
                user.results[0].replace_all_uses_with(sliced.result)
            user.erase()
    op.erase()


def lower_top_k(module: ir.Module) -> None:
    """The pass. A plain walk, not a rewrite pattern: the rewrite also replaces and erases
    the sort's users (the slices)."""
    sorts = [o for o in walk(module.operation) if o.name == "stablehlo.sort"]
    for sort in sorts:
        _lower(sort)
