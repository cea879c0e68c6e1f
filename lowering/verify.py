"""Input validation before MLIR's C++ sees the IR: the verifier, and guards for inputs known to
crash passes (each guard names the op and the fix)."""
from __future__ import annotations

from torch_mlir import ir



def validate_module(module: ir.Module) -> None:
    from .guards import check_guards
    from .trust import check_unless_imported
    check_unless_imported(module)  # first: an untrusted program's dialects, attributes, symbols
    module.operation.verify()
    check_guards(module)


def check_legalized(module: ir.Module) -> None:
    """After legalization no StableHLO/CHLO op may remain: name the first one, with its place,
    instead of letting bufferization fail on it obscurely."""
    from ..errors import KilnError
    from .ir_util import walk
    for op in walk(module.operation):
        if op.name.split(".")[0] in ("stablehlo", "chlo", "mhlo", "check"):
            raise KilnError(f"Kiln cannot lower '{op.name}' here yet", location=str(op.location),
                            hint="see docs/reference/ops.md (kiln's op-support table) for supported operations")
