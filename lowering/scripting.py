"""Pass pipelines scripted from Python.

    from kiln.lowering import Pipeline
    pipeline = Pipeline(["kiln-fold-tuples", "canonicalize", my_pass, "func.func(cse)"])
    pipeline.run(module)                     # in place, as one MLIR pass manager
    for name, ir_text in pipeline.trace(module): ...   # the IR after each step

A step is a registered Kiln pass name (`kiln-opt --list-passes`, with `{entry=NAME}` for
passes on the entry function), upstream pass-pipeline text ("canonicalize",
"func.func(cse)", a whole "builtin.module(...)"), or a Python function `fn(module) -> None`
that rewrites the module in place. The result compiles like any module
(`kiln.compile(module)`), and `kiln.compile(..., extra_passes={stage: steps})` runs steps
inside a target's own pipeline.
"""
from __future__ import annotations

import re
from typing import Callable, Iterable, Union

from torch_mlir import ir

from ..errors import KilnError
from ..pipeline import Observer, PyPass, Step, run_steps
from .registry import check_upstream, resolve, split_pipeline

UserStep = Union[str, PyPass, Callable[[ir.Module], None], "Pipeline"]


class Pipeline:
    """An ordered list of passes to run on a module; see the module docstring."""

    def __init__(self, steps: Iterable[UserStep] = (), *, entry: str | None = None):
        self.entry = entry
        self.steps: list[Step] = as_steps(list(steps), entry)

    def __str__(self) -> str:
        return "builtin.module(" + ",".join(str(s) for s in self.steps) + ")"

    def __repr__(self) -> str:
        return f"Pipeline({[str(s) for s in self.steps]!r})"

    def run(self, module: ir.Module, *, observe: Observer | None = None,
            filename: str = "<pipeline>") -> ir.Module:
        """Run every step on `module`, in place, and return it. `observe(step, module)` is
        called after each step. Failures are KilnErrors located in `filename`."""
        if not isinstance(module, ir.Module):
            raise KilnError(f"Pipeline.run takes an ir.Module, not {type(module).__name__}",
                            hint="kiln.load(path) parses a file into one")
        for step in self.steps:
            if isinstance(step, str):
                check_upstream(step, module.context)
        run_steps(module, self.steps, filename, "pipeline", observe=observe)
        return module

    def trace(self, module: ir.Module, *, filename: str = "<pipeline>") -> list[tuple[str, str]]:
        """Run like `run` and return (step, IR text after it) for every step."""
        snapshots: list[tuple[str, str]] = []
        self.run(module, observe=lambda name, m: snapshots.append((name, str(m))),
                 filename=filename)
        return snapshots


def as_steps(steps: Iterable[UserStep], entry: str | None = None) -> list[Step]:
    """A user's steps as pipeline steps: names resolved in the registry, pipelines spliced,
    functions wrapped as Python passes named after them."""
    if isinstance(steps, (str, Pipeline)) or callable(steps):
        steps = [steps]
    resolved: list[Step] = []
    for step in steps:
        if isinstance(step, Pipeline):
            resolved.extend(step.steps)
        elif isinstance(step, PyPass):
            resolved.append(step)
        elif isinstance(step, str):
            resolved.extend(resolve(element, entry) for element in split_pipeline(step))
        elif callable(step):
            resolved.append(PyPass(_callable_name(step), step,
                                   (step.__doc__ or "").strip().split("\n")[0]))
        else:
            raise KilnError(f"a pipeline step must be a pass name, pipeline text or a function "
                            f"module -> None, not {type(step).__name__}: {step!r}")
    return resolved


def _callable_name(fn: Callable) -> str:
    name = getattr(fn, "__name__", type(fn).__name__)
    return "py-" + (re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "pass")
