"""kiln-fold-empty-values: data-movement ops with zero-element results -> `dense<>` constants.

A slice with no elements is valid wherever its start lies in [0, dim]: StableHLO's
`slice %x [1:2, 4:4]` on a tensor<2x4xf32> has start == dim in its empty dimension. Upstream's
legalize-to-linalg turns it into a `tensor.extract_slice` at offset 4, which the tensor
dialect's verifier rejects ("offset 1 is out-of-bounds: 4 >= 4"), and a `real_dynamic_slice`
with constant bounds becomes the same slice once canonicalized. A zero-element result has
no contents to compute, so the op is replaced by a zero-element constant of its type
before upstream sees it. A constant, not a `tensor.empty`: bufferization may let an in-place
consumer write into a `tensor.empty`'s buffer, so an entry returning both the empty value
and, say, its negation would return one buffer twice, which `buffer-results-to-out-params`
crashes on (fuzz finding F7); a constant is read-only and never shared that way. Runs after Kiln's run-time guards (kiln-guard-run-time-shapes), so the
checks of run-time starts and limits stay.

Only the ops listed below are replaced: ops that read their operands and nothing else, have
no side effects and no run-time error of their own, so dropping them changes nothing but the
code. Results with dynamic sizes are left alone (their size is known only when run).
"""
from __future__ import annotations

from torch_mlir import ir

from .empty_operands import fold_padding_only, reads_only_padding
from .empty_reductions import fold_empty_reduction, reduces_nothing
from .ir_util import walk
from .patterns import replace_op

# Pure data movement: a zero-element result reads nothing.
EMPTY_FOLDABLE = frozenset({
    "stablehlo.slice",
    "stablehlo.dynamic_slice",
    "stablehlo.real_dynamic_slice",
    "stablehlo.gather",
    "stablehlo.pad",
    "stablehlo.reduce",   # also over zero elements: its init values (empty_reductions.py)
    "stablehlo.reduce_window",  # over an empty operand: over its padding (empty_operands.py)
})


# Ops that compute their results from their operands alone: no side effects, no run-time
# error (integer division by zero has no elements to happen on). Their zero-element results
# are constants too: upstream canonicalizes some of them to a `tensor.empty` that an in-place
# consumer then writes into, and an entry returning both gave one buffer twice to
# `buffer-results-to-out-params`, which crashed (fuzz, seed 2028: a reshape and a maximum of
# 1x0 values). Ops with regions qualify when every op in them does.
PURE = frozenset("stablehlo." + name for name in (
    "abs add and atan2 cbrt ceil clamp compare complex convert bitcast_convert cosine "
    "count_leading_zeros divide exponential exponential_minus_one floor imag is_finite log "
    "log_plus_one logistic maximum minimum multiply negate not or popcnt power real "
    "reduce_precision remainder round_nearest_afz round_nearest_even rsqrt select "
    "shift_left shift_right_arithmetic shift_right_logical sign sine sqrt subtract tan tanh "
    "xor reshape broadcast_in_dim transpose reverse concatenate iota dynamic_update_slice "
    "dot_general dot convolution sort scatter select_and_scatter map constant return "
    "broadcast").split())


def fold_empty_values(module: ir.Module) -> None:
    with module.context:
        # Innermost ops first: a folded op takes its regions with it, already visited.
        for op in reversed(list(walk(module.operation))):
            if op.name not in EMPTY_FOLDABLE and op.name not in PURE:
                continue
            if reduces_nothing(op):
                fold_empty_reduction(op)
            elif reads_only_padding(op):
                fold_padding_only(op)
            elif op.name != "stablehlo.constant" and op.results and \
                    all(_is_static_and_empty(r.type) for r in op.results) and _pure_regions(op):
                ip = ir.InsertionPoint(op)
                replace_op(op, [_empty_constant(r.type, op.location, ip).result
                                for r in op.results])


def _pure_regions(op: ir.Operation) -> bool:
    return all(inner.name in PURE or inner.name in EMPTY_FOLDABLE
               for region in op.regions for block in region.blocks
               for nested in block.operations for inner in walk(nested.operation))


def _empty_constant(result_type: ir.Type, loc: ir.Location,
                    ip: ir.InsertionPoint) -> ir.Operation:
    """A `stablehlo.constant dense<>` of `result_type`, built at `ip`. Parsed as text and
    cloned: the Python bindings cannot hold a complex-typed dense attribute
    (`ir.Attribute.parse` of one raises), but the parser builds it without handing it over."""
    holder = ir.Module.parse(
        f'%0 = "stablehlo.constant"() <{{value = dense<> : {result_type}}}> '
        f': () -> {result_type} {loc}', loc.context)
    return holder.body.operations[0].operation.clone(ip=ip)


def _is_static_and_empty(t: ir.Type) -> bool:
    if not isinstance(t, ir.RankedTensorType):
        return False
    shape = ir.RankedTensorType(t)
    return shape.has_static_shape and 0 in shape.shape
