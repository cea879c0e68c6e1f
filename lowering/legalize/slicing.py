"""dynamic_slice / dynamic_update_slice (and gather) with unsigned start indices.

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
        if op.name == "stablehlo.gather":
            _bound_unsigned_gather_indices(op)
            continue
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


def _bound_unsigned_gather_indices(op: ir.Operation) -> None:
    """gather clamps each start index to [0, dim - size] like dynamic_slice, and upstream
    reads ui64 indices as signed: 2^64 - 1 became -1 and clamped to 0 instead of to the end.
    Bounding them by the largest operand dimension first (an unsigned min, exact since the
    clamp bound never exceeds it) leaves every value the clamp treats alike. Narrower unsigned
    indices are zero-extended upstream, which is already exact."""
    indices = op.operands[1]
    itype = ir.RankedTensorType(indices.type)
    element = itype.element_type
    shape = ir.RankedTensorType(op.operands[0].type).shape
    if not (isinstance(element, ir.IntegerType) and element.is_unsigned and element.width == 64) \
            or not itype.has_static_shape \
            or any(d == ir.ShapedType.get_dynamic_size() for d in shape):
        return
    with ir.InsertionPoint(op), op.location:
        bound = ir.Operation.create(
            "stablehlo.constant", results=[itype],
            attributes={"value": ir.DenseElementsAttr.get_splat(
                itype, ir.IntegerAttr.get(element, max(shape, default=0)))})
        low = ir.Operation.create("stablehlo.minimum", results=[itype],
                                  operands=[indices, bound.result])
    op.operands[1] = low.result


# --- Slices pushed into the pads and concatenations they read ------------------------------
#
# slice(pad(x)) and slice(concatenate(a, b, ...)) materialize the whole padded or
# concatenated tensor to keep a part of it (jnp.pad(...)[::2], concat-then-crop). When the
# pad or concatenate has no other user, Kiln slices its operands instead: pad(slice(x)) and
# concatenate(slice(a), slice(b), ...) produce the same elements while moving only the ones
# the result keeps (XLA's elemental emitter gets the same effect by fusing the chain).
# Rewriting to a fixed point pushes a slice through chains of pads and concatenations.


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def _slice_attrs(op: ir.Operation) -> tuple[list[int], list[int], list[int]]:
    return tuple(list(ir.DenseI64ArrayAttr(op.attributes[n]))
                 for n in ("start_indices", "limit_indices", "strides"))


def _kept(start: int, stride: int, count: int, lo: int, hi: int) -> tuple[int, int]:
    """The first and last i in [0, count) with lo <= start + i * stride < hi (first > last
    when there is none)."""
    first = max(0, _ceil_div(lo - start, stride))
    last = min(count - 1, (hi - 1 - start) // stride)
    return first, last


def _new_slice(value: ir.Value, start: list[int], limit: list[int], strides: list[int],
               location) -> ir.Value:
    source = ir.RankedTensorType(value.type)
    shape = [_ceil_div(e - s, t) for s, e, t in zip(start, limit, strides)]
    with location:
        return ir.Operation.create(
            "stablehlo.slice", results=[ir.RankedTensorType.get(shape, source.element_type)],
            operands=[value],
            attributes={"start_indices": ir.DenseI64ArrayAttr.get(start),
                        "limit_indices": ir.DenseI64ArrayAttr.get(limit),
                        "strides": ir.DenseI64ArrayAttr.get(strides)}).result


def _through_pad(op: ir.Operation, pad: ir.Operation) -> list[ir.Value] | None:
    """pad(x[kept], low', high'), for a pad without interior padding."""
    if any(list(ir.DenseI64ArrayAttr(pad.attributes["interior_padding"]))):
        return None
    low = list(ir.DenseI64ArrayAttr(pad.attributes["edge_padding_low"]))
    x, value = pad.operands
    shape = ir.RankedTensorType(x.type).shape
    count = ir.RankedTensorType(op.result.type).shape
    start, _, strides = _slice_attrs(op)
    starts, limits, new_low, new_high = [], [], [], []
    for d, n in enumerate(shape):
        # output i reads padded position start + i * stride, which is x[. - low] when inside
        first, last = _kept(start[d], strides[d], count[d], low[d], low[d] + n)
        if first > last:
            return None   # all padding along d: leave it to the pad's own lowering
        starts.append(start[d] + first * strides[d] - low[d])
        limits.append(start[d] + last * strides[d] - low[d] + 1)
        new_low.append(first)
        new_high.append(count[d] - 1 - last)
    inner = _new_slice(x, starts, limits, strides, op.location)
    with op.location:
        return [ir.Operation.create(
            "stablehlo.pad", results=[op.result.type], operands=[inner, value],
            attributes={"edge_padding_low": ir.DenseI64ArrayAttr.get(new_low),
                        "edge_padding_high": ir.DenseI64ArrayAttr.get(new_high),
                        "interior_padding": ir.DenseI64ArrayAttr.get([0] * len(shape))}).result]


def _through_concatenate(op: ir.Operation, concat: ir.Operation) -> list[ir.Value] | None:
    """concatenate of each piece's slice, dropping the pieces the slice skips."""
    axis = ir.IntegerAttr(concat.attributes["dimension"]).value
    count = ir.RankedTensorType(op.result.type).shape[axis]
    start, limit, strides = _slice_attrs(op)
    pieces, offset = [], 0
    for piece in concat.operands:
        n = ir.RankedTensorType(piece.type).shape[axis]
        first, last = _kept(start[axis], strides[axis], count, offset, offset + n)
        if first <= last:
            s, e = list(start), list(limit)
            s[axis] = start[axis] + first * strides[axis] - offset
            e[axis] = start[axis] + last * strides[axis] - offset + 1
            pieces.append(_new_slice(piece, s, e, strides, op.location))
        offset += n
    if not pieces:
        return None
    if len(pieces) == 1:
        return pieces
    with op.location:
        return [ir.Operation.create(
            "stablehlo.concatenate", results=[op.result.type], operands=pieces,
            attributes={"dimension": concat.attributes["dimension"]}).result]


def _push_one(op: ir.Operation) -> bool:
    producer = op.operands[0].owner
    if isinstance(producer, ir.Block):
        return False
    producer = producer.operation
    if producer.name not in ("stablehlo.pad", "stablehlo.concatenate") or \
            len(list(producer.result.uses)) != 1:
        return False
    if not all(ir.RankedTensorType(v.type).has_static_shape
               for v in (*producer.operands, op.result)):
        return False
    with ir.InsertionPoint(op):
        rewrite = _through_pad if producer.name == "stablehlo.pad" else _through_concatenate
        new = rewrite(op, producer)
    if new is None:
        return False
    op.result.replace_all_uses_with(new[0])
    op.erase()
    producer.erase()
    return True


def push_slices_into_producers(module: ir.Module) -> None:
    changed = True
    while changed:   # each rewrite makes new slices, one producer further up
        changed = False
        for op in list(walk(module.operation)):
            if op.name == "stablehlo.slice" and _push_one(op):
                changed = True
                break
