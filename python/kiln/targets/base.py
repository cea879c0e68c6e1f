"""What every target provides: its stages after the shared front half, and a way to load the
lowered module as a callable program."""
from __future__ import annotations

from typing import Callable

import numpy as np
from torch_mlir import ir

from ..errors import KilnError
from ..lowering.registry import resolve_steps
from ..lowering.scripting import as_steps
from ..pipeline import Stage

# A loaded program: takes the packed list of input and output arrays and fills the outputs.
Invoker = Callable[[list[np.ndarray]], None]

# The target-independent stages on StableHLO (XLA's HLO verifier and optimization passes).
# Steps are registered Kiln pass names (`kiln-opt --list-passes`) or upstream pass-pipeline
# text; passes on the entry function get the compiled entry's name.
COMMON_STAGES: list[Stage] = [
    Stage("verify", "MLIR verifier plus Kiln's input validation (rejects what would crash C++)", [
        "kiln-validate",
    ]),
    Stage("optimize", "inline calls into the entry, outline checks, simplify", [
        "kiln-make-entry-only-public",
        "inline{default-pipeline=}",  # no canonicalization yet: it would drop unused check.eq calls
        "kiln-outline-checks",
        "kiln-fold-tuples",
        "symbol-dce",
        "canonicalize",
        # dynamic_* ops whose shape operands are constants become their static forms.
        "func.func(stablehlo-canonicalize-dynamism)",
        "cse",
        "kiln-dedupe-results",
    ]),
]


class Target:
    """A target's pipeline is data: `pipeline`, its stages in order (see targets/cpu.py).

    Option `extra_passes={stage: steps}` appends a user's steps (registered names, upstream
    pass text, Python functions `fn(module)`, a `kiln.lowering.Pipeline`) to a stage."""
    name = "abstract"
    pipeline: list[Stage] = []

    def __init__(self, **options):
        self.options = options

    def stages(self, entry: str | None) -> list[Stage]:
        """The pipeline with Kiln's names resolved to their passes, on `entry`."""
        extra = dict(self.options.get("extra_passes") or {})
        unknown = sorted(set(extra) - {s.name for s in self.pipeline})
        if unknown:
            raise KilnError(f"extra_passes names unknown stage(s) {', '.join(unknown)}",
                            hint="stages: " + ", ".join(s.name for s in self.pipeline))
        return [Stage(s.name, s.doc, resolve_steps(s.steps, entry)
                      + as_steps(extra.get(s.name, []), entry))
                for s in self.pipeline]

    def load(self, module: ir.Module, entry: str) -> Invoker:
        """Turn the fully lowered module into a callable; the module's context must outlive it."""
        raise NotImplementedError
