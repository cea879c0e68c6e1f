"""What every target provides: its stages after the shared front half, and a way to load the
lowered module as a callable program."""
from __future__ import annotations

from typing import Callable

import numpy as np
from torch_mlir import ir

from ..pipeline import PyPass, Stage
from ..lowering.checks import outline_checks
from ..lowering.ir_util import functions
from ..lowering.tuples import fold_tuples
from ..lowering.entry import dedupe_results, make_entry_only_public
from ..lowering.verify import validate_module

# A loaded program: takes the packed list of input and output arrays and fills the outputs.
Invoker = Callable[[list[np.ndarray]], None]


def common_stages(entry: str | None) -> list[Stage]:
    """Target-independent stages on StableHLO (XLA's HLO verifier and optimization passes)."""
    return [
        Stage("verify", "MLIR verifier plus Kiln's input validation (rejects what would crash C++)", [
            PyPass("validate", lambda m: validate_module(m)),
        ]),
        Stage("optimize", "inline calls into the entry, outline checks, simplify", [
            PyPass("make-entry-only-public", lambda m: make_entry_only_public(m, entry)),
            "inline{default-pipeline=}",  # no canonicalization yet: it would drop unused check.eq calls
            PyPass("outline-checks", lambda m: outline_checks(m, entry)),
            PyPass("fold-tuples", lambda m: [fold_tuples(f) for f in functions(m)]),
            "symbol-dce",
            "canonicalize",
            # dynamic_* ops whose shape operands are constants become their static forms.
            "func.func(stablehlo-canonicalize-dynamism)",
            "cse",
            PyPass("dedupe-results", lambda m: dedupe_results(m, entry)),
        ]),
    ]


class Target:
    name = "abstract"

    def __init__(self, **options):
        self.options = options

    def stages(self, entry: str | None) -> list[Stage]:
        raise NotImplementedError

    def load(self, module: ir.Module, entry: str) -> Invoker:
        """Turn the fully lowered module into a callable; the module's context must outlive it."""
        raise NotImplementedError
