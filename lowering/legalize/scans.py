"""Cumulative `stablehlo.reduce_window` -> a linear scan (`jnp.cumsum`, `cumprod`, `cummax`...).

JAX writes a cumulative reduction along dimension d of size n as a reduce_window whose window
spans all n elements of d, padded with n - 1 init values on one side, stride 1. Lowered as a
window, output i reduces its whole window: O(n^2) work (1M floats: 49 s). As a scan it is
O(n): carry the running value along d, combining it with one slice at a time, and write each
step into the result. It combines in index order, starting from init, as the window's
definition does (the window lowering may reassociate, so the last bits of a float sum can
differ from it).

Only windows of that exact shape whose body is one elementwise binary op of its two
arguments become scans; everything else is left to the window lowering.
"""
from __future__ import annotations

from torch_mlir import ir

from ..patterns import pattern_pass
from .hlo_builder import HloBuilder, replace_op
from .loops import SCALARIZE_ATTR

# Bodies that combine elementwise, so the scan can apply them to a whole slice at once.
_COMBINERS = {"stablehlo.add", "stablehlo.multiply", "stablehlo.maximum", "stablehlo.minimum",
              "stablehlo.and", "stablehlo.or", "stablehlo.xor"}


def _ints(op: ir.Operation, name: str, rank: int, default: int) -> list[int]:
    if name not in op.attributes:
        return [default] * rank
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


def _scan_plan(op: ir.Operation) -> tuple[int, bool, str] | None:
    """(dimension, reverse, combiner) when `op` is a cumulative reduction, else None."""
    if len(op.operands) != 2 or len(op.results) != 1:
        return None
    x_type = op.operands[0].type
    if not isinstance(x_type, ir.RankedTensorType) or not x_type.has_static_shape:
        return None
    shape, rank = list(x_type.shape), x_type.rank
    window = _ints(op, "window_dimensions", rank, 1)
    if _ints(op, "window_strides", rank, 1) != [1] * rank or \
            _ints(op, "base_dilations", rank, 1) != [1] * rank or \
            _ints(op, "window_dilations", rank, 1) != [1] * rank:
        return None
    padding = [[0, 0]] * rank
    if "padding" in op.attributes:
        flat = [int(v) for v in ir.DenseIntElementsAttr(op.attributes["padding"])]
        padding = [flat[2 * i:2 * i + 2] for i in range(rank)]
    scanned = [d for d in range(rank) if window[d] != 1 or padding[d] != [0, 0]]
    if len(scanned) != 1:
        return None
    d = scanned[0]
    n = shape[d]
    if n < 2 or window[d] != n or padding[d] not in ([n - 1, 0], [0, n - 1]):
        return None
    body = op.regions[0].blocks[0]
    ops = [o.operation for o in body.operations]
    if len(ops) != 2 or ops[0].name not in _COMBINERS or ops[1].name != "stablehlo.return":
        return None
    args = list(body.arguments)
    if set(map(_value_id, ops[0].operands)) != set(map(_value_id, args)) or \
            _value_id(ops[1].operands[0]) != _value_id(ops[0].results[0]):
        return None
    return d, padding[d] == [0, n - 1], ops[0].name.split(".", 1)[1]


def _value_id(value: ir.Value):
    return value  # ir.Value hashes and compares by the underlying value


def _lower_scan(op: ir.Operation) -> bool | None:
    plan = _scan_plan(op)
    if plan is None:
        return False
    d, reverse, combiner = plan
    x, init = op.operands[0], op.operands[1]
    x_type = ir.RankedTensorType(x.type)
    shape, n, etype = list(x_type.shape), x_type.shape[d], x_type.element_type
    row = [s for k, s in enumerate(shape) if k != d]            # one step's values
    step = [1 if k == d else s for k, s in enumerate(shape)]    # ... as a slice of x
    with ir.InsertionPoint(op), op.location:
        h = HloBuilder()
        zero = h.constant(0, "i64")
        last = h.constant(n - 1, "i64")

        def body(i, carried):
            running, out = carried
            at = h.sub(last, i) if reverse else i
            starts = [at if k == d else zero for k in range(len(shape))]
            value = h.reshape(h.dynamic_slice(x, starts, step), row)
            running = h.binary(combiner, running, value)
            return [running, h.dynamic_update_slice(out, h.reshape(running, step), starts)]

        start = h.broadcast(init, row, [])
        running, out = h.for_loop(n, [start, h.broadcast(init, shape, [])], body)
        if not row:  # one scalar a step: no buffer per iteration (scalarize.py)
            out.owner.attributes[SCALARIZE_ATTR] = ir.UnitAttr.get()
    replace_op(op, [out])


lower_cumulative_windows = pattern_pass({"stablehlo.reduce_window": _lower_scan})
