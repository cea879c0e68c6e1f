"""Input validation before MLIR's C++ sees the IR: the verifier, and guards for inputs known to
crash passes (each guard names the op and the fix)."""
from __future__ import annotations

from torch_mlir import ir

from ..diagnostics import mlir_errors


def validate_module(module: ir.Module) -> None:
    with mlir_errors("<module>", "invalid IR"):
        module.operation.verify()
