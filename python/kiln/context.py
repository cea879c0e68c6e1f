"""The one place that makes an MLIR context: upstream dialects, StableHLO, Kiln's own.

Each compile owns its context (no hidden global), so Executables are independent.
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo

_passes_registered = False


def make_context() -> ir.Context:
    global _passes_registered
    ctx = ir.Context()
    _stablehlo.register_dialect(ctx)
    _stablehlo.register_interpreter_dialect(ctx)
    # The conformance programs' `check.*` ops (and custom calls of other front ends) arrive in
    # generic form from dialects the bindings lack; Kiln rewrites them before lowering.
    ctx.allow_unregistered_dialects = True
    if not _passes_registered:
        _stablehlo.register_stablehlo_passes()
        _passes_registered = True
    return ctx
