"""Dynamic slices as gathers: `tensor.extract_slice` / `tensor.insert_slice` whose offsets
are computed by the program (stablehlo.dynamic_slice, dynamic_update_slice) become
linalg.generics that index their source inside the body.

Bufferized as they are, such slices are subviews whose offsets the host must know: it would
read the offset from device memory. As generics, each thread computes the offset itself
(the scalar code computing it is copied into the body) and reads the element, so the host
keeps only launches. An update copies its whole destination, which an in-place update of
the slice alone would avoid; that is left to a later fusion of the two.
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, linalg, tensor

# Scalar ops copied into a generic's body to recompute a slice offset there.
_MOVABLE = ("arith.", "math.", "index.", "tensor.extract")


def dynamic_slices_as_gathers(module: ir.Module) -> None:
    found = []

    def visit(op):
        op = op.operation
        if op.name in ("tensor.extract_slice", "tensor.insert_slice") and _dynamic_offsets(op) \
                and _plain(op):
            found.append(op)
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    for op in found:
        with ir.InsertionPoint(op), op.location:
            replacement = _gather(op) if op.name == "tensor.extract_slice" else _update(op)
        op.results[0].replace_all_uses_with(replacement)
        op.erase()


def _array(op, name) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


def _dynamic_offsets(op) -> bool:
    return any(ir.ShapedType.is_dynamic_size(o) for o in _array(op, "static_offsets"))


def _plain(op) -> bool:
    """Static sizes, unit strides, no rank change, static shapes: what _gather handles."""
    sizes, strides = _array(op, "static_sizes"), _array(op, "static_strides")
    small = ir.RankedTensorType(op.operands[0].type if op.name == "tensor.extract_slice"
                                else op.operands[0].type)
    big = ir.RankedTensorType(op.operands[0].type if op.name == "tensor.extract_slice"
                              else op.operands[1].type)
    result = ir.RankedTensorType(op.results[0].type)
    return (all(not ir.ShapedType.is_dynamic_size(s) for s in sizes) and all(s == 1 for s in strides)
            and small.rank == big.rank == len(sizes) and result.has_static_shape
            and big.has_static_shape)


def _offsets(op) -> list:
    """Each offset: an int, or the SSA value computing it."""
    dynamic = iter(op.operands[(1 if op.name == "tensor.extract_slice" else 2):])
    return [next(dynamic) if ir.ShapedType.is_dynamic_size(o) else o
            for o in _array(op, "static_offsets")]


def _generic(result_type, inputs, body_builder):
    rank = result_type.rank
    identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))
    empty = tensor.empty(result_type.shape, result_type.element_type)
    op = ir.Operation.create(
        "linalg.generic", results=[result_type], operands=[*inputs, empty],
        attributes={
            "indexing_maps": ir.ArrayAttr.get([identity] * (len(inputs) + 1)),
            "iterator_types": ir.ArrayAttr.get(
                [ir.Attribute.parse("#linalg.iterator_type<parallel>")] * rank),
            "operandSegmentSizes": ir.DenseI32ArrayAttr.get([len(inputs), 1])},
        regions=1)
    element = result_type.element_type
    block = op.regions[0].blocks.append(*([element] * (len(inputs) + 1)))
    with ir.InsertionPoint(block):
        linalg.YieldOp([body_builder(block)])
    return op.results[0]


class _Copier:
    """Copies the scalar code an offset needs into the body, once per value."""

    def __init__(self, top: ir.Block):
        self.top, self.mapped = top, {}

    def __call__(self, value):
        if isinstance(value, int):
            return arith.constant(ir.IndexType.get(), value)
        if value in self.mapped:
            return self.mapped[value]
        owner = value.owner
        if isinstance(owner, ir.Block) or not owner.name.startswith(_MOVABLE) \
                or owner.operation.parent is None or owner.regions:
            return value  # a block argument or a tensor: captured
        operands = [self(v) if not _is_tensor(v) else v for v in owner.operands]
        clone = owner.operation.clone()
        for i, v in enumerate(operands):
            clone.operands[i] = v
        for old, new in zip(owner.results, clone.results):
            self.mapped[old] = new
        return self.mapped[value]


def _index(dim: int) -> ir.Value:
    return ir.Operation.create("linalg.index", results=[ir.IndexType.get()], attributes={
        "dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim)}).results[0]


def _is_tensor(value) -> bool:
    try:
        ir.RankedTensorType(value.type)
        return True
    except ValueError:
        return False


def _gather(op) -> ir.Value:
    source = op.operands[0]
    result_type = ir.RankedTensorType(op.results[0].type)
    offsets = _offsets(op)

    def body(block):
        copy = _Copier(op.operation.parent)
        indices = [arith.addi(_index(k), copy(o)) for k, o in enumerate(offsets)]
        return tensor.extract(source, indices)
    return _generic(result_type, [], body)


def _update(op) -> ir.Value:
    update, dest = op.operands[0], op.operands[1]
    result_type = ir.RankedTensorType(op.results[0].type)
    sizes = _array(op, "static_sizes")
    offsets = _offsets(op)

    def body(block):
        copy = _Copier(op.operation.parent)
        index_t = ir.IndexType.get()
        zero = arith.constant(index_t, 0)
        inside, indices = None, []
        for k, (o, n) in enumerate(zip(offsets, sizes)):
            relative = arith.subi(_index(k), copy(o))
            within = arith.andi(arith.cmpi(arith.CmpIPredicate.sge, relative, zero),
                                arith.cmpi(arith.CmpIPredicate.slt, relative,
                                           arith.constant(index_t, n)))
            inside = within if inside is None else arith.andi(inside, within)
            # clamped: a thread outside the slice reads a valid element it then discards
            indices.append(arith.minsi(arith.maxsi(relative, zero),
                                       arith.constant(index_t, max(n - 1, 0))))
        value = tensor.extract(update, indices)
        return arith.select(inside, value, block.arguments[0])
    return _generic(result_type, [dest], body)
