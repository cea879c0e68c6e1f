"""Sizes that must fit, part of kiln-guard-run-time-shapes (bounds_guards.py).

Where an op's result size is a function of its operands' sizes (reshape keeps the element
count, pad adds its edges, reduce_window and convolution slide a window), a static result
size fixes what the operand's size must be. StableHLO's verifiers check that only where the
operand's size is static too: with a dynamic operand the lowering trusted the result type, so
a reshape of 16 elements to 2x4 read 8 of them, a pad of a too-long operand wrote past its
result (heap corruption), a too-short one read past its operand. Each guard below compares the
operand's run-time size with what the spec's formula requires: a few scalar operations and a
branch per op, nothing per element. A dynamic result size is computed by the lowering from
the operands, so it needs no guard.

Also here: region results. While/if/case declare their results' types; StableHLO accepts a
region that returns a dynamic size for a static one ("compatible"), which scf does not (the
program failed verification after lowering). The yield gets a guard that its run-time sizes
are the declared ones, then a tensor.cast to the declared type.
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo
from torch_mlir.dialects import arith, tensor

_NE, _SLT, _SGT = 1, 2, 4


def _shape(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def _dynamic(size: int) -> bool:
    return ir.ShapedType.is_dynamic_size(size)


def _ints(op: ir.Operation, name: str, rank: int, default: int) -> list[int]:
    if name not in op.attributes:
        return [default] * rank
    attr = op.attributes[name]
    try:
        return list(ir.DenseI64ArrayAttr(attr))
    except (ValueError, TypeError):
        return [int(v) for v in ir.DenseIntElementsAttr(attr)]


def _padding(op: ir.Operation, rank: int) -> list[tuple[int, int]]:
    if "padding" not in op.attributes:
        return [(0, 0)] * rank
    flat = [int(v) for v in ir.DenseIntElementsAttr(op.attributes["padding"])]
    return [(flat[2 * i], flat[2 * i + 1]) for i in range(rank)]


def _ranked(op: ir.Operation) -> bool:
    return all(isinstance(v.type, ir.RankedTensorType) for v in (*op.operands, *op.results))


# ---- one formula per op: the conditions under which the run-time sizes do not fit ----------

def _window_size(g, size: ir.Value, window: ir.Value, stride: int, base_dilation: int,
                 window_dilation: int, low: int, high: int) -> ir.Value:
    """The spec's result size of a window slid over `size` elements (reduce_window,
    convolution's spatial dimensions): 0 when the dilated window does not fit the padded,
    dilated operand, else floor((padded - window) / stride) + 1. Operands are real buffer
    sizes and attributes, so no step overflows 64 bits."""
    zero, one = g.const(0), g.const(1)
    dilated = arith.addi(arith.muli(arith.subi(size, one), g.const(base_dilation)), one)
    dilated = arith.select(g.cmp(_SGT, size, zero), dilated, zero)
    padded = arith.addi(dilated, g.const(low + high))
    span = arith.addi(arith.muli(arith.subi(window, one), g.const(window_dilation)), one)
    fits = arith.addi(arith.divsi(arith.subi(padded, span), g.const(stride)), one)
    return arith.select(g.cmp(_SLT, padded, span), zero, fits)


def _broadcast_in_dim(g, op: ir.Operation) -> None:
    operand, result = op.operands[0], op.results[0]
    dims = list(ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"]))
    bad = []
    for i, d in enumerate(dims):
        if _dynamic(_shape(operand)[i]) and not _dynamic(_shape(result)[d]):
            size = g.dim(operand, i)
            bad.append(arith.andi(g.cmp(_NE, size, g.const(1)),
                                  g.cmp(_NE, size, g.const(_shape(result)[d]))))
    g.fail_if(bad, op, "an operand dimension is neither 1 nor the result dimension it is "
                       "broadcast to")


def _reshape(g, op: ir.Operation) -> None:
    operand, result = op.operands[0], op.results[0]
    if not ir.RankedTensorType(result.type).has_static_shape:
        return
    count = g.const(1)
    for d in range(len(_shape(operand))):
        count = arith.muli(count, g.dim(operand, d))   # the element count of a real buffer
    want = 1
    for n in _shape(result):
        want *= n
    g.fail_if([g.cmp(_NE, count, g.const(want))], op,
              f"the operand's run-time element count differs from the result's {want}")


def _pad(g, op: ir.Operation) -> None:
    operand, result = op.operands[0], op.results[0]
    rank = len(_shape(operand))
    low = list(ir.DenseI64ArrayAttr(op.attributes["edge_padding_low"]))
    high = list(ir.DenseI64ArrayAttr(op.attributes["edge_padding_high"]))
    interior = list(ir.DenseI64ArrayAttr(op.attributes["interior_padding"]))
    zero, one = g.const(0), g.const(1)
    bad = []
    for d in range(rank):
        if not _dynamic(_shape(operand)[d]) or _dynamic(_shape(result)[d]):
            continue
        n = g.dim(operand, d)
        # low + n + (n - 1) * interior + high, with no interior padding in an empty operand
        inner = arith.muli(arith.subi(n, one), g.const(interior[d]))
        inner = arith.select(g.cmp(_SGT, n, zero), inner, zero)
        size = arith.addi(arith.addi(n, inner), g.const(low[d] + high[d]))
        bad += g.static_size_differs(result, d, size)
    g.fail_if(bad, op, "the operand's run-time size does not give the result's static size "
                       "(edge_padding_low + dim(operand) + interior padding + edge_padding_high)")


def _reduce_window(g, op: ir.Operation) -> None:
    operand = op.operands[0]
    rank = len(_shape(operand))
    window = _ints(op, "window_dimensions", rank, 1)
    strides = _ints(op, "window_strides", rank, 1)
    base = _ints(op, "base_dilations", rank, 1)
    dilation = _ints(op, "window_dilations", rank, 1)
    padding = _padding(op, rank)
    bad = []
    for d in range(rank):
        if not _dynamic(_shape(operand)[d]):
            continue
        size = _window_size(g, g.dim(operand, d), g.const(window[d]), strides[d], base[d],
                            dilation[d], *padding[d])
        for result in op.results:
            bad += g.static_size_differs(result, d, size)
    g.fail_if(bad, op, "the operand's run-time size does not give the result's static size "
                       "(the spec's window formula)")


def _convolution(g, op: ir.Operation) -> None:
    lhs, rhs, result = op.operands[0], op.operands[1], op.results[0]
    dn = _stablehlo.ConvDimensionNumbers(op.attributes["dimension_numbers"])
    groups = ir.IntegerAttr(op.attributes["feature_group_count"]).value
    batches = ir.IntegerAttr(op.attributes["batch_group_count"]).value
    lhs_f, rhs_i = dn.input_feature_dimension, dn.kernel_input_feature_dimension
    bad = []
    if _dynamic(_shape(lhs)[lhs_f]) or _dynamic(_shape(rhs)[rhs_i]):
        features = arith.muli(g.dim(rhs, rhs_i), g.const(groups))
        bad.append(g.cmp(_NE, g.dim(lhs, lhs_f), features))
    g.fail_if(bad, op, f"run-time sizes disagree: the lhs's feature dimension must be the "
                       f"kernel's input feature dimension times feature_group_count ({groups})")
    out = []
    if _dynamic(_shape(lhs)[dn.input_batch_dimension]):
        batch = arith.divsi(g.dim(lhs, dn.input_batch_dimension), g.const(batches))
        out += g.static_size_differs(result, dn.output_batch_dimension, batch)
    if _dynamic(_shape(rhs)[dn.kernel_output_feature_dimension]):
        out += g.static_size_differs(result, dn.output_feature_dimension,
                                     g.dim(rhs, dn.kernel_output_feature_dimension))
    spatial = list(zip(dn.input_spatial_dimensions, dn.kernel_spatial_dimensions,
                       dn.output_spatial_dimensions))
    rank = len(spatial)
    strides = _ints(op, "window_strides", rank, 1)
    base = _ints(op, "lhs_dilation", rank, 1)
    dilation = _ints(op, "rhs_dilation", rank, 1)
    padding = _padding(op, rank)
    for k, (a, w, o) in enumerate(spatial):
        if _dynamic(_shape(lhs)[a]) or _dynamic(_shape(rhs)[w]):
            size = _window_size(g, g.dim(lhs, a), g.dim(rhs, w), strides[k], base[k],
                                dilation[k], *padding[k])
            out += g.static_size_differs(result, o, size)
    g.fail_if(out, op, "the operands' run-time sizes do not give the result's static shape")


GUARDS = {
    "stablehlo.broadcast_in_dim": _broadcast_in_dim,
    "stablehlo.reshape": _reshape,
    "stablehlo.pad": _pad,
    "stablehlo.reduce_window": _reduce_window,
    "stablehlo.convolution": _convolution,
}


def needed(op: ir.Operation) -> bool:
    """Whether `op` (one of GUARDS) may need a guard: an operand has a dynamic size (else its
    verifier has checked the formula)."""
    from .shape_agreement import has_dynamic_operand
    return _ranked(op) and has_dynamic_operand(op)


# ---- region results ---------------------------------------------------------------------------

# scf ops that kiln-lower-control-flow made of StableHLO's, with the name they had.
REGION_OPS = {"scf.if": "stablehlo.if", "scf.index_switch": "stablehlo.case",
              "scf.while": "stablehlo.while"}


def _refinable(source: ir.Type, target: ir.Type) -> bool:
    return (source != target and isinstance(source, ir.RankedTensorType)
            and isinstance(target, ir.RankedTensorType)
            and ir.RankedTensorType(source).rank == ir.RankedTensorType(target).rank
            and ir.RankedTensorType(source).element_type
            == ir.RankedTensorType(target).element_type)


def mismatched_yields(op: ir.Operation) -> list[tuple[ir.Operation, list[ir.Type]]]:
    """The terminators of `op`'s regions (scf.if / index_switch / while, lowered from
    StableHLO's) whose operand types differ from the types they flow into, with those types."""
    out = []
    if op.name == "scf.while":
        expected = [[a.type for a in op.regions[0].blocks[0].arguments]]
        regions = [op.regions[1]]
    else:
        expected = [[r.type for r in op.results]] * len(op.regions)
        regions = list(op.regions)
    for region, types in zip(regions, expected):
        if not region.blocks:
            continue
        block = region.blocks[0]
        terminator = block.operations[len(block.operations) - 1].operation
        if any(_refinable(v.type, t) for v, t in zip(terminator.operands, types)):
            out.append((terminator, types))
    return out


def guard_yield(g, op: ir.Operation, terminator: ir.Operation, types: list[ir.Type]) -> None:
    """Before `terminator`: check each operand's dynamic sizes against the static ones of the
    type it flows into, then cast it to that type (scf requires the types to be equal)."""
    bad = []
    for value, target in zip(terminator.operands, types):
        if _refinable(value.type, target):
            for d, n in enumerate(ir.RankedTensorType(target).shape):
                if _dynamic(_shape(value)[d]) and not _dynamic(n):
                    bad.append(g.cmp(_NE, g.dim(value, d), g.const(n)))
    g.fail_if(bad, op, "a region result's run-time shape differs from the declared type",
              name=REGION_OPS[op.name])
    for i, (value, target) in enumerate(zip(list(terminator.operands), types)):
        if _refinable(value.type, target):
            terminator.operands[i] = tensor.CastOp(target, value).result
