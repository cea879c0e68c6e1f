"""The one place that makes an MLIR context: upstream dialects, StableHLO, Kiln's own.

Each compile owns its context (no hidden global), so Executables are independent. The context
knows every dialect an input may use (StableHLO, CHLO, VHLO, the interpreter's `check` ops) and
Kiln's own `kiln` dialect, and allows no other: an unknown op is a located parse error
(diagnostics.py) instead of IR no pass understands.
"""
from __future__ import annotations

import threading

from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo

from torch_mlir._mlir_libs import _mlir

from .dialects import load_all

_passes_registered = False
# Contexts are made one at a time: loading Python-defined (`ext`) dialects and registering
# passes touch process-wide state, and threads doing it at once crash (seen with kiln.compile
# from several threads).
_lock = threading.Lock()
# Where the bindings find (empty) Python modules for StableHLO's and CHLO's ops, so that they
# stop searching for them on every op (dialects/op_classes/__init__.py).
_mlir.globals.append_dialect_search_prefix("kiln.dialects.op_classes")


def make_context() -> ir.Context:
    global _passes_registered
    with _lock:
        ctx = ir.Context()
        _stablehlo.register_dialect(ctx)
        _stablehlo.register_interpreter_dialect(ctx)
        load_all(ctx)
        ctx.allow_unregistered_dialects = False
        if not _passes_registered:
            _stablehlo.register_stablehlo_passes()
            _passes_registered = True
    return ctx
