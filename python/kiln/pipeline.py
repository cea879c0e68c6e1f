"""Compilation stages, named after XLA's (seed 002), kept in this one place.

A stage is a list of steps; a step is either an element of a textual pass pipeline (run by
MLIR's pass manager) or a Kiln Python pass (a function `module -> None` over the IR, for work
the bundled passes cannot express). `kiln-opt --print-pipeline` prints these lists.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Union

from torch_mlir import ir, passmanager

from .diagnostics import mlir_errors


@dataclass(frozen=True)
class PyPass:
    """A Kiln pass written in Python over the MLIR bindings."""
    name: str
    run: Callable[[ir.Module], None]

    def __str__(self) -> str:
        return f"kiln:{self.name}"


Step = Union[str, PyPass]


@dataclass
class Stage:
    name: str
    doc: str
    steps: list[Step] = field(default_factory=list)

    def text(self) -> str:
        return ",".join(str(s) for s in self.steps)


@dataclass
class StageTiming:
    name: str
    seconds: float


def run_steps(module: ir.Module, steps: list[Step], filename: str, stage: str) -> None:
    """Run steps in order, batching consecutive textual passes into one pass manager run."""
    batch: list[str] = []

    def flush():
        if batch:
            text = "builtin.module(" + ",".join(batch) + ")"
            with module.context, mlir_errors(filename, f"stage '{stage}' failed in '{text}'"):
                passmanager.PassManager.parse(text).run(module.operation)
            batch.clear()

    for step in steps:
        if isinstance(step, PyPass):
            flush()
            with module.context, mlir_errors(filename, f"stage '{stage}', {step}"):
                step.run(module)
        else:
            batch.append(step)
    flush()


def run_stages(module: ir.Module, stages: list[Stage], filename: str, *, until: str | None = None,
               timings: list[StageTiming] | None = None,
               dump: Callable[[str, ir.Module], None] | None = None) -> None:
    """Run `stages` in order (stopping after `until`), recording timings and handing the IR
    after each stage to `dump` (XLA's --xla_dump_to)."""
    for stage in stages:
        start = time.perf_counter()
        run_steps(module, stage.steps, filename, stage.name)
        if timings is not None:
            timings.append(StageTiming(stage.name, time.perf_counter() - start))
        if dump is not None:
            dump(stage.name, module)
        if stage.name == until:
            return


def directory_dumper(directory: str, program: str) -> Callable[[str, ir.Module], None]:
    """Write `<directory>/<program>.<n>.<stage>.mlir` after each stage, numbered in order."""
    from pathlib import Path
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    counter = iter(range(1000))

    def dump(stage: str, module: ir.Module) -> None:
        (root / f"{program}.{next(counter):02d}.{stage}.mlir").write_text(str(module))

    return dump


def format_pipeline(stages: list[Stage]) -> str:
    lines = []
    for stage in stages:
        lines.append(f"// {stage.name}: {stage.doc}")
        lines.extend(f"  {step}" for step in stage.steps)
    return "\n".join(lines)
