"""The host function's scalar arithmetic as plan steps (evaluated per call by
kiln.runtime.gpu_host_ops): what host control flow needs, a loop counter or a predicate."""
from __future__ import annotations

from torch_mlir import ir

from ...runtime.gpu_host_ops import SUPPORTED, runtime_type

__all__ = ["runtime_type", "scalar_step"]


def scalar_step(op: ir.Operation, operand_ids: list) -> dict | str:
    """The step computing `op`'s result on the host, or why it cannot be one."""
    if op.name not in SUPPORTED or len(op.results) != 1:
        return f"'{op.name}' has no host evaluation"
    result = runtime_type(str(op.results[0].type))
    source = runtime_type(str(op.operands[0].type)) if len(op.operands) else None
    if result is None or (len(op.operands) and source is None):
        return f"'{op.name}' on {op.results[0].type} has no host evaluation"
    step = {"op": "scalar", "name": op.name, "type": result, "operand_type": source,
            "operands": operand_ids}
    if op.name in ("arith.cmpi", "arith.cmpf"):
        step["predicate"] = ir.IntegerAttr(op.attributes["predicate"]).value
    if op.name == "arith.select":
        step["operand_type"] = runtime_type(str(op.operands[1].type))
    return step
