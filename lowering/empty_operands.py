"""pad and reduce_window over a zero-element operand: every element they read is padding.

`stablehlo.pad` of a tensor<0x1xf32> to tensor<1x3xf32> is valid (every result element is
the padding value), and so is a `reduce_window` whose padded base holds only padding. Upstream's
legalize-to-linalg places the operand into the padded tensor with a `tensor.insert_slice` at
the low padding offset, which for an empty dimension can equal the dimension's size: the
tensor dialect's verifier rejects that slice ("offset 2 is out-of-bounds: 2 >= 2"), so the
compile failed (generated-program fuzz findings, seed 2027). Called by
kiln-fold-empty-values (empty_values.py) before upstream sees the op:
- pad -> `broadcast_in_dim(padding_value)` of the result type;
- reduce_window -> the same reduce_window over `broadcast_in_dim(init)` of the padded,
  dilated base's shape, with no padding and no base dilation: the base it reduces is the
  same tensor of init values, so each window reduces the same elements.
Static shapes only: a dimension that is 0 only at run time lowers to loops that run zero
times, which is already right.
"""
from __future__ import annotations

from torch_mlir import ir

from .patterns import replace_op


def reads_only_padding(op: ir.Operation) -> bool:
    """Whether `op` is a pad or reduce_window with static shapes whose (first) operand has a
    static zero-size dimension and whose result is not itself empty (empty_values.py folds
    those to `dense<>`)."""
    if op.name not in ("stablehlo.pad", "stablehlo.reduce_window"):
        return False
    values = [*op.operands, *op.results]
    if not all(isinstance(v.type, ir.RankedTensorType) for v in values):
        return False
    if not all(ir.RankedTensorType(v.type).has_static_shape for v in values):
        return False
    if any(0 in ir.RankedTensorType(r.type).shape for r in op.results):
        return False
    return 0 in ir.RankedTensorType(op.operands[0].type).shape


def fold_padding_only(op: ir.Operation) -> None:
    """Replace `op` (reads_only_padding) as the module docstring says."""
    if op.name == "stablehlo.pad":
        with ir.InsertionPoint(op), op.location:
            filled = _broadcast(op.operands[1], op.results[0].type)
        replace_op(op, [filled])
        return
    _reduce_window_over_init(op)


def _reduce_window_over_init(op: ir.Operation) -> None:
    count = len(op.results)
    inputs, inits = op.operands[:count], op.operands[count:]
    shape = ir.RankedTensorType(inputs[0].type).shape
    rank = len(shape)
    attrs = op.attributes
    dilations = _i64s(attrs, "base_dilations", [1] * rank)
    padding = _padding(attrs, rank)
    # XLA's dilated size of a dimension: (n - 1) * d + 1, and 0 for n == 0.
    base = [(n - 1) * d + 1 if n else 0 for n, d in zip(shape, dilations)]
    padded = [b + lo + hi for b, (lo, hi) in zip(base, padding)]
    with ir.InsertionPoint(op), op.location:
        operands = [_broadcast(init, ir.RankedTensorType.get(
            padded, ir.RankedTensorType(v.type).element_type)) for v, init in zip(inputs, inits)]
        new_attrs = {name: attrs[name] for name in ("window_dimensions", "window_strides",
                                                    "window_dilations") if name in attrs}
        replacement = ir.Operation.create(
            "stablehlo.reduce_window", results=[r.type for r in op.results],
            operands=[*operands, *inits], attributes=new_attrs, regions=1)
    # The reducer body moves over unchanged.
    old = op.regions[0].blocks[0]
    replacement.regions[0].blocks.append(*[a.type for a in old.arguments],
                                         arg_locs=[a.location for a in old.arguments])
    body = replacement.regions[0].blocks[0]
    for new_arg, old_arg in zip(body.arguments, old.arguments):
        old_arg.replace_all_uses_with(new_arg)
    for inner in list(old.operations):
        body.append(inner.operation)
    replace_op(op, list(replacement.results))


def _broadcast(scalar: ir.Value, result_type: ir.Type) -> ir.Value:
    return ir.Operation.create(
        "stablehlo.broadcast_in_dim", results=[result_type], operands=[scalar],
        attributes={"broadcast_dimensions": ir.DenseI64ArrayAttr.get([])}).result


def _i64s(attrs, name: str, default: list[int]) -> list[int]:
    return list(ir.DenseI64ArrayAttr(attrs[name])) if name in attrs else default


def _padding(attrs, rank: int) -> list[tuple[int, int]]:
    if "padding" not in attrs:
        return [(0, 0)] * rank
    flat = [int(x) for x in ir.DenseIntElementsAttr(attrs["padding"])]
    return [(flat[2 * i], flat[2 * i + 1]) for i in range(rank)]
