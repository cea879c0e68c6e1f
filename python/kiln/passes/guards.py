"""Guards for inputs known to crash MLIR's C++ passes: each rejects one pattern with a located
KilnError naming the op and the fix, before any pass runs."""
from __future__ import annotations

from torch_mlir import ir

GUARDS: list = []


def check_guards(module: ir.Module) -> None:
    for guard in GUARDS:
        guard(module)
