"""dynamic_slice / dynamic_update_slice with unsigned start indices.

Upstream casts the start indices to `index` as if they were signed, so a ui8 255 or a ui64
above 2^63 becomes negative and clamps to 0 instead of to the last position that fits. Kiln
rewrites unsigned starts first: min(start, dim) (an unsigned comparison) then a conversion
to i64. That is exact: the spec clamps to [0, dim - size] anyway, and dim fits in i64.
"""
from __future__ import annotations

from torch_mlir import ir

from ..ir_util import walk


def widen_unsigned_starts(module: ir.Module) -> None:
    for op in list(walk(module.operation)):
        if op.name == "stablehlo.dynamic_slice":
            first = 1
        elif op.name == "stablehlo.dynamic_update_slice":
            first = 2
        else:
            continue
        shape = ir.RankedTensorType(op.operands[0].type).shape
        starts = list(op.operands)[first:]
        if not starts:
            continue
        element = ir.RankedTensorType(starts[0].type).element_type
        # All starts share one type (a verifier rule), so they are rewritten together.
        if not (isinstance(element, ir.IntegerType) and element.is_unsigned) or \
                any(d == ir.ShapedType.get_dynamic_size() for d in shape):
            continue
        i64 = ir.RankedTensorType.get([], ir.IntegerType.get_signless(64), loc=op.location)
        for k, start in enumerate(starts):
            limit = min(shape[k], (1 << element.width) - 1)
            with ir.InsertionPoint(op), op.location:
                bound = ir.Operation.create(
                    "stablehlo.constant", results=[start.type],
                    attributes={"value": ir.DenseElementsAttr.get_splat(
                        start.type, ir.IntegerAttr.get(element, limit))})
                low = ir.Operation.create("stablehlo.minimum", results=[start.type],
                                          operands=[start, bound.result])
                wide = ir.Operation.create("stablehlo.convert", results=[i64], operands=[low.result])
            op.operands[first + k] = wide.result
