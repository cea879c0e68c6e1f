"""Results whose shapes are computed by the program: made static once the shapes are known.

After specialisation and inlining, a result can still carry a `?` because the op that makes
it has no static form upstream's shape refinement knows, although every size it depends on is
now a constant:

* `stablehlo.dynamic_top_k` (a custom call JAX exports for `lax.top_k` with a symbolic `k`,
  e.g. `k = b - 1`): with a constant k it is a top-k of static shape (`chlo.top_k`'s
  definition, written in StableHLO).
* `stablehlo.dynamic_reduce_window` (JAX's reduce_window with symbolic window sizes, e.g. a
  cumsum along a symbolic axis): with constant window operands it is `stablehlo.reduce_window`.
* a result type the callee declared dynamic (`tensor<4x?xf32>`), reached through the inlined
  call as a `tensor.cast` from the static value actually computed: the entry returns the
  static value, and its signature says so.

What stays dynamic after these is reported by the driver, never guessed at run time.
"""
from __future__ import annotations

import numpy as np
from torch_mlir import ir

from .ir_util import constant_ints, find_entry, function_type, walk
from .legalize.hlo_builder import HloBuilder

DYNAMIC_TOP_K = "stablehlo.dynamic_top_k"


def fold_dynamic_top_k(module: ir.Module) -> None:
    """`custom_call @stablehlo.dynamic_top_k(x, k)` with a constant k -> a static top-k."""
    for op in [o for o in walk(module.operation) if o.name == "stablehlo.custom_call"]:
        if ir.StringAttr(op.attributes["call_target_name"]).value != DYNAMIC_TOP_K:
            continue
        if len(op.operands) != 2 or len(op.results) != 2:
            continue  # malformed: left for the custom-call lowering to report
        k = constant_ints(op.operands[1])
        k = k[0] if k and len(k) == 1 else None
        operand = ir.RankedTensorType(op.operands[0].type)
        if k is None or operand.rank == 0 or \
                ir.ShapedType.is_dynamic_size(operand.shape[-1]) or not 0 <= k <= operand.shape[-1]:
            continue
        index_type = ir.RankedTensorType(op.results[1].type).element_type
        with ir.InsertionPoint(op), op.location:
            _replace_with_static(op, _top_k(op.operands[0], k, index_type))


def _replace_with_static(op: ir.Operation, values) -> None:
    """Replace `op`'s results by `values` of more static types, then erase it. StableHLO
    users take the static values (their verifiers accept them); other users, a return
    among them, keep the declared type through a `tensor.cast` (refine_entry_results)."""
    for old, new in zip(op.results, values):
        cast = None
        for use in list(old.uses):
            user = use.owner
            if user.name.startswith("stablehlo."):
                user.operands[use.operand_number] = new
            else:
                if cast is None:
                    cast = ir.Operation.create("tensor.cast", results=[old.type],
                                               operands=[new]).results[0]
                user.operands[use.operand_number] = cast
    op.erase()


DYNAMIC_REDUCE_WINDOW = "stablehlo.dynamic_reduce_window"


def fold_dynamic_reduce_window(module: ir.Module) -> None:
    """`custom_call @stablehlo.dynamic_reduce_window(inputs..., inits..., window_dimensions,
    window_strides, base_dilations, window_dilations, padding)` whose window operands are
    constants -> `stablehlo.reduce_window` (its body calls the called computation; the
    `inline` of `legalize` folds it in)."""
    for op in [o for o in walk(module.operation) if o.name == "stablehlo.custom_call"]:
        if ir.StringAttr(op.attributes["call_target_name"]).value != DYNAMIC_REDUCE_WINDOW:
            continue
        n = len(op.results)
        operands = list(op.operands)
        if len(operands) != 2 * n + 5 or "called_computations" not in op.attributes:
            continue  # malformed: left for the custom-call lowering to report
        window = [constant_ints(v) for v in operands[2 * n:]]
        inputs = [ir.RankedTensorType(v.type) for v in operands[:n]]
        if any(w is None for w in window) or not all(t.has_static_shape for t in inputs):
            continue
        dims, strides, base, dilations, padding = window
        rank = inputs[0].rank
        shape = []
        for d in range(rank):
            size = (inputs[0].shape[d] - 1) * base[d] + 1 + padding[2 * d] + padding[2 * d + 1]
            extent = (dims[d] - 1) * dilations[d] + 1
            shape.append(max(0, (size - extent) // strides[d] + 1) if size >= extent else 0)
        reducer = ir.FlatSymbolRefAttr(ir.ArrayAttr(op.attributes["called_computations"])[0]).value
        i64 = ir.IntegerType.get_signless(64)
        with ir.InsertionPoint(op), op.location:
            result_types = [ir.RankedTensorType.get(shape, t.element_type) for t in inputs]
            reduce = ir.Operation.create(
                "stablehlo.reduce_window", results=result_types, operands=operands[:2 * n],
                attributes={
                    "window_dimensions": ir.DenseI64ArrayAttr.get(dims),
                    "window_strides": ir.DenseI64ArrayAttr.get(strides),
                    "base_dilations": ir.DenseI64ArrayAttr.get(base),
                    "window_dilations": ir.DenseI64ArrayAttr.get(dilations),
                    "padding": ir.DenseElementsAttr.get(
                        np.array(padding, np.int64).reshape(rank, 2), type=i64)},
                regions=1)
            scalars = [ir.RankedTensorType.get([], t.element_type) for t in inputs] * 2
            block = reduce.regions[0].blocks.append(*scalars)
            with ir.InsertionPoint(block):
                call = ir.Operation.create(
                    "func.call", results=[ir.RankedTensorType.get([], t.element_type)
                                          for t in inputs],
                    operands=list(block.arguments),
                    attributes={"callee": ir.FlatSymbolRefAttr.get(reducer)})
                ir.Operation.create("stablehlo.return", operands=list(call.results))
            _replace_with_static(op, list(reduce.results))


def _top_k(x: ir.Value, k: int, index_type: ir.Type) -> tuple[ir.Value, ir.Value]:
    """The k largest entries along the last dimension and their indices, as `chlo.top_k`
    defines them (a stable descending sort of (x, iota), then the first k): StableHLO ops,
    CHLO not being registered."""
    h = HloBuilder()
    t = ir.RankedTensorType(x.type)
    shape, last = list(t.shape), t.rank - 1
    iota = h.iota(shape, last, index_type)
    sort = ir.Operation.create(
        "stablehlo.sort", results=[t, iota.type], operands=[x, iota],
        attributes={"dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), last),
                    "is_stable": ir.BoolAttr.get(True)},
        regions=1)
    scalars = [ir.RankedTensorType.get([], e) for e in (t.element_type, index_type)]
    block = sort.regions[0].blocks.append(*[s for s in scalars for _ in (0, 1)])
    with ir.InsertionPoint(block):
        kind = "TOTALORDER" if isinstance(t.element_type, ir.FloatType) else None
        greater = h.compare("GT", block.arguments[0], block.arguments[1], kind)
        ir.Operation.create("stablehlo.return", operands=[greater])
    values, indices = (h.slice(v, [0] * len(shape), shape[:-1] + [k]) for v in sort.results)
    return values, indices


def refine_entry_results(module: ir.Module, entry: str | None = None) -> None:
    """Let the entry return the most static form of each result: through `tensor.cast`s to
    a less static type, and with its signature updated to match."""
    func = find_entry(module, entry)
    block = func.regions[0].blocks[0]
    ret = block.operations[len(block.operations) - 1]
    changed = False
    for i, value in enumerate(list(ret.operands)):
        source = value
        while isinstance(source, ir.OpResult) and source.owner.operation.name == "tensor.cast":
            source = source.owner.operation.operands[0]
        if source != value and _more_static(source.type, value.type):
            ret.operands[i] = source
            changed = True
    if not changed:
        return
    ftype = function_type(func)
    results = [v.type for v in ret.operands]
    func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(ftype.inputs, results))


def _more_static(new: ir.Type, old: ir.Type) -> bool:
    try:
        new_t, old_t = ir.RankedTensorType(new), ir.RankedTensorType(old)
    except ValueError:
        return False
    if new_t.rank != old_t.rank or new_t.element_type != old_t.element_type:
        return False
    return all(not ir.ShapedType.is_dynamic_size(o) and n == o or ir.ShapedType.is_dynamic_size(o)
               for n, o in zip(new_t.shape, old_t.shape)) and new_t != old_t
