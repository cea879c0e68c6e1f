"""Lowerings: control_flow (see passes/legalize/__init__.py).

Upstream `stablehlo-legalize-to-linalg` leaves StableHLO's region-carrying control flow alone,
so Kiln turns it into `scf` before that pass runs; the ops inside the regions stay StableHLO and
upstream lowers them in place like any other op:

* `stablehlo.while`  -> `scf.while`: the cond block becomes the "before" region, ending in
  `scf.condition` on the extracted i1 and forwarding its arguments unchanged; the body becomes
  the "after" region, ending in `scf.yield`. Every carried value is its own loop value (no
  tuples), so bufferization can update each buffer in place.
* `stablehlo.if`     -> `scf.if` on the extracted predicate.
* `stablehlo.case`   -> `scf.index_switch`: branch i for index i in [0, N-1), and the spec's
  "any other index runs the last branch" as the default region.
* Values of these ops that are 0-d tensors (a loop counter, a scalar state, a scalar branch
  result) are carried as their element instead: the op takes and yields scalars, and a
  `tensor.from_elements` at the top of each region (after the op, for its results) stands for
  the tensor. The op is marked SCALARIZE_ATTR, so the 0-d ops inside become scalar code
  (scalarize.py) and canonicalize folds each extract/from_elements pair: a loop of scalar
  steps then runs in registers, with no buffer allocated or copied per iteration.
* Tokens carried by a `while` or returned by an `if`/`case` are dropped first
  (`_without_tokens`): a token holds no data, and Kiln runs a program's effects in program
  order, which is the order tokens impose. Inside a region a dropped token argument becomes a
  fresh `stablehlo.after_all`, as does a dropped result after the op, so the effectful ops
  that take tokens (custom calls, infeed, send...) still get one.
* `stablehlo.optimization_barrier` -> its operands (it only constrains XLA's scheduling).
* `stablehlo.get_dimension_size` -> a constant for static dimensions (shapes are refined
  before this point), `tensor.dim` otherwise.
* `stablehlo.composite` -> a call of its decomposition (upstream's
  `stablehlo-legalize-composite-to-call`), then inlined.
* `stablehlo.rng` on floats: see rng.py (its steps run here, before upstream).

`func.call` of functions the optimize stage could not inline (recursion) stays a call; every
function is legalized and bufferized on its own. Multi-operand `reduce` with a non-commutative
body is upstream's, which folds left to right from the init value like the reference
interpreter (tests/py/test_control_flow.py).

Blocks are moved, not cloned: each region's single block keeps its operations and arguments and
only the terminator changes.
"""
from __future__ import annotations

from typing import Sequence

from torch_mlir import ir
from torch_mlir.dialects import tensor

from ...errors import KilnError
from ..patterns import pattern_pass, replace_op
from .loops import SCALARIZE_ATTR

_OPS = ("stablehlo.while", "stablehlo.if", "stablehlo.case", "stablehlo.optimization_barrier",
        "stablehlo.get_dimension_size")


def _terminator(block: ir.Block) -> ir.Operation:
    return block.operations[len(block.operations) - 1].operation


def _extract_scalar(value: ir.Value) -> ir.Value:
    """The element of a 0-d tensor (the predicate or index), at the current insertion point."""
    element = ir.RankedTensorType(value.type).element_type
    return ir.Operation.create("tensor.extract", results=[element], operands=[value]).result


def _replace_terminator(block: ir.Block, name: str, operands_for,
                        scalars: Sequence[int] = ()) -> None:
    """Swap the block's `stablehlo.return` for `name` with operands `operands_for(old)`,
    yielding the element of each operand at a position in `scalars`."""
    old = _terminator(block)
    with ir.InsertionPoint(old), old.location:
        ir.Operation.create(name, operands=_unwrapped(operands_for(old), scalars))
    old.erase()


# ---- 0-d values carried as scalars ----------------------------------------------------------

def _scalar_positions(types: Sequence[ir.Type]) -> list[int]:
    return [i for i, t in enumerate(types)
            if isinstance(t, ir.RankedTensorType) and t.rank == 0]


def _element_types(types: Sequence[ir.Type], scalars: Sequence[int]) -> list[ir.Type]:
    return [ir.RankedTensorType(t).element_type if i in scalars else t
            for i, t in enumerate(types)]


def _unwrapped(values: Sequence[ir.Value], scalars: Sequence[int]) -> list[ir.Value]:
    """`values`, each at a position in `scalars` replaced by its element (at the current
    insertion point)."""
    return [tensor.extract(v, []) if i in scalars else v for i, v in enumerate(values)]


def _rewrapped(values: Sequence[ir.Value], types: Sequence[ir.Type],
               scalars: Sequence[int]) -> list[ir.Value]:
    """The inverse of `_unwrapped`: scalars at `scalars` back into tensors of `types`."""
    return [tensor.from_elements(types[i], [v]) if i in scalars else v
            for i, v in enumerate(values)]


def _scalarize_arguments(block: ir.Block, scalars: Sequence[int]) -> None:
    """Make the block's arguments at `scalars` (0-d tensors) their elements; a
    tensor.from_elements at the block's top stands for each in the block's ops."""
    if not scalars:
        return
    first = block.operations[0]
    with ir.InsertionPoint(first), first.location:
        for i in scalars:
            arg = block.arguments[i]
            tensor_type = arg.type
            arg.set_type(ir.RankedTensorType(tensor_type).element_type)
            packed = tensor.from_elements(tensor_type, [arg])
            arg.replace_all_uses_except(packed, packed.owner.operation)


def _mark(new: ir.Operation) -> None:
    # The 0-d ops inside become scalar code after upstream's lowering (scalarize.py).
    new.attributes[SCALARIZE_ATTR] = ir.UnitAttr.get()


def _move_region(src: ir.Region, dst: ir.Region) -> ir.Block:
    if len(src.blocks) != 1:
        raise KilnError("control flow with multi-block regions is not supported",
                        location=str(src.owner.location),
                        hint="StableHLO regions have one block; run the MLIR verifier on the input")
    block = src.blocks[0]
    block.append_to(dst)
    return block


def _finish(op: ir.Operation, new: ir.Operation, scalars: Sequence[int] = ()) -> None:
    """Hand op's uses over to `new`'s results, rewrapping the scalar ones."""
    with ir.InsertionPoint(op), op.location:
        results = _rewrapped(list(new.results), [r.type for r in op.results], scalars)
    replace_op(op, results)


def _is_token(t: ir.Type) -> bool:
    return str(t) == "!stablehlo.token"


def _fresh_token(token_type: ir.Type) -> ir.Value:
    return ir.Operation.create("stablehlo.after_all", results=[token_type]).result


def _without_tokens(op: ir.Operation, carried: bool) -> ir.Operation:
    """`op` (a while when `carried`, else an if or case) rebuilt without its token results
    (and, for a while, its token operands and region arguments); `op` itself when it has none."""
    types = [r.type for r in op.results]
    drop = [i for i, t in enumerate(types) if _is_token(t)]
    if not drop:
        return op
    keep = [i for i in range(len(types)) if i not in drop]
    operands = list(op.operands)
    if carried:
        operands = [operands[i] for i in keep]
    with ir.InsertionPoint(op), op.location:
        new = ir.Operation.create(op.name, results=[types[i] for i in keep], operands=operands,
                                  attributes={a.name: a.attr for a in op.attributes},
                                  regions=len(op.regions))
    for index, region in enumerate(op.regions):
        block = _move_region(region, new.regions[index])
        if carried:  # the token arguments: a fresh token at the top of the block
            for i in reversed(drop):
                argument = block.arguments[i]
                with ir.InsertionPoint.at_block_begin(block), op.location:
                    argument.replace_all_uses_with(_fresh_token(argument.type))
                block.erase_argument(i)
        ret = _terminator(block)
        if not carried or index == 1:  # a body or branch (not a condition): tokens dropped
            with ir.InsertionPoint(ret), ret.location:
                ir.Operation.create(ret.name, operands=[ret.operands[i] for i in keep])
            ret.erase()
    with ir.InsertionPoint.after(new), op.location:
        results, kept = [], iter(new.results)
        for t in types:
            results.append(_fresh_token(t) if _is_token(t) else next(kept))
    replace_op(op, results)
    return new


def _lower_while(op: ir.Operation) -> None:
    op = _without_tokens(op, carried=True)
    types = [r.type for r in op.results]
    scalars = _scalar_positions(types)
    with ir.InsertionPoint(op), op.location:
        loop = ir.Operation.create("scf.while", results=_element_types(types, scalars),
                                   operands=_unwrapped(list(op.operands), scalars), regions=2)
    _mark(loop)
    cond = _move_region(op.regions[0], loop.regions[0])
    body = _move_region(op.regions[1], loop.regions[1])
    _scalarize_arguments(cond, scalars)
    _scalarize_arguments(body, scalars)
    ret = _terminator(cond)
    with ir.InsertionPoint(ret), ret.location:
        flag = _extract_scalar(ret.operands[0])
        ir.Operation.create("scf.condition", operands=[flag, *cond.arguments])
    ret.erase()
    _replace_terminator(body, "scf.yield", lambda r: list(r.operands), scalars)
    _finish(op, loop, scalars)


def _lower_if(op: ir.Operation) -> None:
    op = _without_tokens(op, carried=False)
    types = [r.type for r in op.results]
    scalars = _scalar_positions(types)
    with ir.InsertionPoint(op), op.location:
        flag = _extract_scalar(op.operands[0])
        new = ir.Operation.create("scf.if", results=_element_types(types, scalars),
                                  operands=[flag], regions=2)
    _mark(new)
    for i in range(2):
        block = _move_region(op.regions[i], new.regions[i])
        _replace_terminator(block, "scf.yield", lambda r: list(r.operands), scalars)
    _finish(op, new, scalars)


def _lower_case(op: ir.Operation) -> None:
    op = _without_tokens(op, carried=False)
    branches = len(op.regions)
    types = [r.type for r in op.results]
    scalars = _scalar_positions(types)
    with ir.InsertionPoint(op), op.location:
        index = ir.Operation.create("arith.index_cast", results=[ir.IndexType.get()],
                                    operands=[_extract_scalar(op.operands[0])]).result
        # Regions of scf.index_switch: the default first, then one per listed case value.
        new = ir.Operation.create(
            "scf.index_switch", results=_element_types(types, scalars), operands=[index],
            attributes={"cases": ir.DenseI64ArrayAttr.get(list(range(branches - 1)))},
            regions=branches)
    _mark(new)
    order = [branches - 1] + list(range(branches - 1))
    for dst, src in enumerate(order):
        block = _move_region(op.regions[src], new.regions[dst])
        _replace_terminator(block, "scf.yield", lambda r: list(r.operands), scalars)
    _finish(op, new, scalars)


def _lower_barrier(op: ir.Operation) -> None:
    replace_op(op, list(op.operands))


def _lower_dimension_size(op: ir.Operation) -> None:
    operand = op.operands[0]
    dim = ir.IntegerAttr(op.attributes["dimension"]).value
    shape = ir.RankedTensorType(operand.type)
    result_type = op.results[0].type
    with ir.InsertionPoint(op), op.location:
        if not shape.is_dynamic_dim(dim):
            value = ir.DenseElementsAttr.get_splat(
                result_type, ir.IntegerAttr.get(ir.IntegerType.get_signless(32), shape.get_dim_size(dim)))
            new = ir.Operation.create("stablehlo.constant", results=[result_type],
                                      attributes={"value": value})
        else:
            index = ir.Operation.create(
                "arith.constant", results=[ir.IndexType.get()],
                attributes={"value": ir.IntegerAttr.get(ir.IndexType.get(), dim)}).result
            size = ir.Operation.create("tensor.dim", results=[ir.IndexType.get()],
                                       operands=[operand, index]).result
            i32 = ir.Operation.create("arith.index_cast", results=[ir.IntegerType.get_signless(32)],
                                      operands=[size]).result
            new = ir.Operation.create("tensor.from_elements", results=[result_type], operands=[i32])
    _finish(op, new)


_LOWER = {"stablehlo.while": _lower_while, "stablehlo.if": _lower_if, "stablehlo.case": _lower_case,
          "stablehlo.optimization_barrier": _lower_barrier,
          "stablehlo.get_dimension_size": _lower_dimension_size}


# Moving a region keeps the ops in it alive, so whether the walk driver reaches an inner while
# before or after the outer one does not matter.
lower_control_flow = pattern_pass(_LOWER)
