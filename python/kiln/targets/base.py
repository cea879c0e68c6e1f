"""What every target provides: its stages after the shared front half, and a way to load the
lowered module as a callable program."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from torch_mlir import ir

from ..errors import KilnError
from ..pipeline import Stage

# A loaded program: takes the packed list of input and output arrays and fills the outputs.
Invoker = Callable[[list[np.ndarray]], None]


@dataclass
class CompiledCode:
    """A target's compiled program: object code, its entry symbol, and the symbols it needs
    from the process that loads it."""
    code: bytes
    symbol: str
    externals: list[str]


# The target-independent stages on StableHLO (XLA's HLO verifier and optimization passes).
# Steps are registered Kiln pass names (`kiln-opt --list-passes`) or upstream pass-pipeline
# text; passes on the entry function get the compiled entry's name.
COMMON_STAGES: list[Stage] = [
    Stage("verify", "MLIR verifier plus Kiln's input validation (rejects what would crash C++)", [
        "kiln-validate",
        "kiln-check-buffer-sizes",    # no size that wraps or exceeds memory (size_limits.py)
    ]),
    # Before `optimize`, which reads the compiled signature: each device's share of it.
    Stage("partition", "a program over several devices -> the program one device runs "
                       "(XLA: sharding propagation and the SPMD partitioner)", [
        "kiln-spmd-partition",
    ]),
    # Before `optimize`: the compiled signature is read after it, and results must be
    # distinct per layout before kiln-dedupe-results merges equal ones.
    Stage("layout", "entry layouts decided; non-default ones become physical arrays, so the "
                    "program works row-major (XLA: layout assignment, normalization)", [
        "kiln-layout-assignment",
        "kiln-layout-normalization",
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
        # values whose sizes set_dimension_size sets: at their bound, padding masked
        "kiln-pad-bounded-dims",
        # results whose shapes the program computes: static once their sizes are constants
        "kiln-fold-dynamic-top-k",
        "kiln-fold-dynamic-reduce-window",
        "kiln-refine-entry-results",
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
        # Imported here: the passes are needed to compile, not to load compiled code.
        from ..lowering.registry import resolve_steps
        from ..lowering.scripting import as_steps
        return [Stage(s.name, s.doc, resolve_steps(s.steps, entry)
                      + as_steps(extra.get(s.name, []), entry))
                for s in self.pipeline]

    def after_optimize(self, module: ir.Module) -> None:
        """Called with the program's StableHLO after the `optimize` stage (its shapes final):
        decisions the target takes on the whole program go on the module as attributes."""

    def emit(self, module: ir.Module, entry: str) -> CompiledCode:
        """Compile the fully lowered module into code that can leave this process."""
        raise NotImplementedError

    def load(self, code: CompiledCode, call_sites: list, what: str) -> Invoker:
        """Make `code` callable in this process (its custom-call sites made here)."""
        raise NotImplementedError
