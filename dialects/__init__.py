"""Dialects Kiln defines or reads that the MLIR wheel lacks.

check.py: the interpreter tests' `check` ops; kiln.py: Kiln's own names; sdy.py: why Shardy is
not registered, and how its annotations are dropped.
"""


def load_all(ctx) -> None:
    """Register Kiln's Python-defined dialects in `ctx` (a torch_mlir context)."""
    from . import check, kiln
    check.load(ctx)
    kiln.load(ctx)
