"""A stablehlo.reduce over zero elements: its results are its init values, broadcast.

The spec reduces each result element over the elements of its window of the inputs; where a
reduced dimension has size 0 that window is empty and the element is the init value
(schedule of zero applications of the body). Upstream's legalize-to-linalg leaves such a
reduce alone, so it failed with "cannot lower". Called by kiln-fold-empty-values
(empty_values.py), before upstream sees the op: each result becomes
`broadcast_in_dim(init, dims = [])` of its type. Only static shapes: a size that is 0 at run
time only runs the lowered loops zero times, which is already right.
"""
from __future__ import annotations

from torch_mlir import ir

from .patterns import replace_op


def reduces_nothing(op: ir.Operation) -> bool:
    """Whether `op` is a stablehlo.reduce with static results and a reduced dimension of
    static size 0 (every window is empty)."""
    if op.name != "stablehlo.reduce":
        return False
    count = len(op.results)
    inputs = op.operands[:count]
    if not all(isinstance(v.type, ir.RankedTensorType) for v in (*inputs, *op.results)):
        return False
    if not all(ir.RankedTensorType(r.type).has_static_shape for r in op.results):
        return False
    shape = ir.RankedTensorType(inputs[0].type).shape
    return any(shape[d] == 0 for d in ir.DenseI64ArrayAttr(op.attributes["dimensions"]))


def fold_empty_reduction(op: ir.Operation) -> None:
    """Replace `op` (reduces_nothing) by its init values broadcast to its result types."""
    count = len(op.results)
    inits = op.operands[count:]
    with ir.InsertionPoint(op), op.location:
        results = [ir.Operation.create(
            "stablehlo.broadcast_in_dim", results=[r.type], operands=[init],
            attributes={"broadcast_dimensions": ir.DenseI64ArrayAttr.get([])}).result
            for r, init in zip(op.results, inits)]
    replace_op(op, results)
