"""Pass infrastructure: stages (named after XLA's, seed 002) and running them.

A stage is a list of steps; a step is either an element of a textual pass pipeline (an
upstream MLIR pass such as `canonicalize` or `func.func(cse)`) or a pass written in Python
(`PyPass`: a function `module -> None` over the IR, for work the bundled passes cannot
express). Kiln's own passes are registered by name in `kiln.lowering.registry`; each
target's pipeline (targets/cpu.py) lists them by those names. `kiln-opt --print-pipeline`
prints the stages.

Every stage runs as ONE MLIR pass manager: Python passes join it through
`PassManager.add(callable)`. The IR is verified before an upstream pass that follows Python
passes (the bindings let a pass build invalid IR, which C++ passes must not see) and at the
end of every stage, not after each pass as MLIR's pass manager does by default: verifying
after each of the 61 passes was a third of the time of Kiln's stages. `KILN_VERIFY_EACH_PASS=1`
verifies after every pass, to find which one broke the IR.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable, Union

from torch_mlir import ir, passmanager

from .diagnostics import mlir_errors
from .errors import KilnError


@dataclass(frozen=True)
class PyPass:
    """A pass written in Python over the MLIR bindings: `run(module)` rewrites in place."""
    name: str
    run: Callable[[ir.Module], None]
    summary: str = ""
    verify: bool = True  # False: the pass only reads the IR (observers)

    def __str__(self) -> str:
        return self.name


Step = Union[str, PyPass]
# Called after a step with its name and the module, e.g. to keep snapshots of the IR.
Observer = Callable[[str, ir.Module], None]


@dataclass
class Stage:
    name: str
    doc: str
    steps: list[Step] = field(default_factory=list)

    def text(self) -> str:
        return ",".join(str(s) for s in self.steps)


@dataclass
class PassTiming:
    name: str
    seconds: float


@dataclass
class StageTiming:
    name: str
    seconds: float
    passes: list[PassTiming] = field(default_factory=list)  # only when asked for (timing=)


class _PythonPassHost:
    """Runs Python passes inside an MLIR pass manager. A Python exception is not left to
    unwind through the pass manager's C++ frames (LLVM code is not written for exceptions:
    its cleanups, such as the pass instrumentation's, might not run): a failing pass records
    its exception and signals failure, and the exception is raised again once
    `PassManager.run` has returned, as if the pass had raised it to the caller.

    A pass marked to check (`callback(..., check=True)`) verifies the IR after it, failing
    as the manager's verifier would."""

    def __init__(self, module: ir.Module):
        self.module = module
        self.failure: BaseException | None = None
        self.failed_pass: str | None = None
        self.last_finished: int | None = None  # index of the last Python step that completed
        self.invalid: ir.MLIRError | None = None  # the verifier's error after that step
        self.callbacks: list = []  # held here for as long as the manager may call them

    def callback(self, step: PyPass, index: int, check: bool):
        def run(op: ir.Operation, pass_) -> None:
            try:
                # The manager runs on module.operation; passes take the ir.Module itself.
                step.run(self.module)
            except BaseException as exc:  # noqa: BLE001 (Ctrl-C too: re-raised after run)
                self.failure, self.failed_pass = exc, step.name
                pass_.signal_pass_failure()
                return
            self.last_finished = index
            if check:
                try:
                    self.module.operation.verify()
                except ir.MLIRError as exc:
                    self.invalid = exc
                    pass_.signal_pass_failure()
        self.callbacks.append(run)
        return run


def _upstream_after(steps: list[Step], index: int | None) -> str:
    """The upstream steps that ran after Python step `index` (all if None), up to the next
    Python step: where an MLIR failure happened, for the message."""
    start = 0 if index is None else index + 1
    segment = []
    for step in steps[start:]:
        if isinstance(step, PyPass):
            break
        segment.append(step)
    return ",".join(segment)


def _python_run_before(steps: list[Step], index: int) -> list[str]:
    """The names of the Python passes that ran since the IR was last verified, up to step
    `index` (observers left out)."""
    run = []
    for step in reversed(steps[:index + 1]):
        if not isinstance(step, PyPass):
            break
        if step.verify:
            run.append(step.name)
    return run[::-1]


def _checks(steps: list[Step]) -> tuple[list[bool], bool]:
    """Where to verify: after which steps (Python passes only), and whether at the end. The
    IR is verified before any upstream pass that follows Python passes, and at the end of a
    stage; KILN_VERIFY_EACH_PASS=1 lets the manager verify after every pass instead."""
    if _verify_each_pass():
        return [False] * len(steps), False
    after = [False] * len(steps)
    pending_python = pending_upstream = None
    for index, step in enumerate(steps):
        if isinstance(step, PyPass):
            if step.verify:
                pending_python, pending_upstream = index, None
        else:
            if pending_python is not None:
                after[pending_python] = True
                pending_python = None
            pending_upstream = index
    if pending_python is not None:
        after[pending_python] = True
    return after, pending_upstream is not None


def run_steps(module: ir.Module, steps: list[Step], filename: str, stage: str, *,
              observe: Observer | None = None) -> None:
    """Run `steps` in order as one pass manager. `observe(step_name, module)` is called after
    each step (the IR between passes); KilnErrors raised by Python passes reach the caller
    unchanged, MLIR's failures become one located KilnError."""
    if not steps:
        return
    if observe is not None:
        steps = _with_observer(steps, observe)
    host = _PythonPassHost(module)
    check_after, check_at_end = _checks(steps)
    with module.context:
        manager = passmanager.PassManager("builtin.module")
        manager.enable_verifier(_verify_each_pass())
        for index, step in enumerate(steps):
            if isinstance(step, PyPass):
                manager.add(host.callback(step, index, check_after[index]), name=step.name,
                            argument=step.name, description=step.summary)
            else:
                _add_upstream(manager, step, stage)
        try:
            manager.run(module.operation)
            if check_at_end:
                module.operation.verify()
        except ir.MLIRError as exc:
            if host.failure is None:
                after = steps[host.last_finished].name if host.last_finished is not None else None
                where = f"stage '{stage}' failed" + (f" after {after}" if after else "")
                if host.invalid is not None:
                    unchecked = _python_run_before(steps, host.last_finished)
                    if len(unchecked) > 1:
                        where += (f" (the IR is verified after '{','.join(unchecked)}'; "
                                  "KILN_VERIFY_EACH_PASS=1 verifies after each)")
                    exc = host.invalid
                else:
                    segment = _upstream_after(steps, host.last_finished)
                    where += f" in '{segment}'" if segment else ""
                with mlir_errors(filename, where):
                    raise exc from None
        if host.failure is not None:
            with mlir_errors(filename, f"stage '{stage}', {host.failed_pass}"):
                raise host.failure


def _verify_each_pass() -> bool:
    return os.environ.get("KILN_VERIFY_EACH_PASS", "") not in ("", "0")


def _add_upstream(manager: passmanager.PassManager, text: str, stage: str) -> None:
    try:
        manager.add(text)
    except ValueError as exc:
        detail = str(exc).splitlines()[0].split("error: ")[-1]
        raise KilnError(f"stage '{stage}': cannot parse pass pipeline '{text}': {detail}",
                        hint="`kiln-opt --list-passes` lists Kiln's passes; upstream passes are "
                             "written as in mlir-opt's --pass-pipeline") from None


def _with_observer(steps: list[Step], observe: Observer) -> list[Step]:
    """`steps` with a Python pass after each that hands the IR to `observe`."""
    observed: list[Step] = []
    for step in steps:
        name = str(step)
        observed.append(step)
        observed.append(PyPass(f"observe({name})", lambda m, name=name: observe(name, m),
                               verify=False))
    return observed


# Called after every pass of a stage with (stage, pass, module), e.g. to dump the IR.
PassHook = Callable[[str, str, ir.Module], None]


class _PassClock:
    """Times each step of a stage from the observer that runs after it: a step's time is
    from the end of the previous observation to the start of its own, so it covers the pass
    and MLIR's verifier after it, but not the observers' own work (dumping the IR)."""

    def __init__(self):
        self.passes: list[PassTiming] = []
        self.overhead = 0.0
        self.mark = time.perf_counter()

    def observer(self, stage: str, after_pass: PassHook | None) -> Observer:
        def observe(step: str, module: ir.Module) -> None:
            start = time.perf_counter()
            self.passes.append(PassTiming(step, start - self.mark))
            if after_pass is not None:
                after_pass(stage, step, module)
            self.mark = time.perf_counter()
            self.overhead += self.mark - start
        return observe


def run_stages(module: ir.Module, stages: list[Stage], filename: str, *, until: str | None = None,
               timings: list[StageTiming] | None = None,
               dump: Callable[[str, ir.Module], None] | None = None,
               after_pass: PassHook | None = None, pass_timing: bool = False,
               before_stage: Callable[[str, ir.Module], None] | None = None) -> None:
    """Run `stages` in order (stopping after `until`), recording timings (per pass too with
    `pass_timing`), handing the IR after each stage to `dump` (XLA's --xla_dump_to) and
    after each pass to `after_pass`; `before_stage(name, module)` is called as each stage
    starts (progress, reproducers). Per-pass hooks observe the IR from inside the stage's
    pass manager (`run_steps`' observer), so they cost nothing when unused."""
    for stage in stages:
        if before_stage is not None:
            before_stage(stage.name, module)
        clock = _PassClock() if (pass_timing or after_pass is not None) else None
        start = time.perf_counter()
        run_steps(module, stage.steps, filename, stage.name,
                  observe=clock.observer(stage.name, after_pass) if clock else None)
        elapsed = time.perf_counter() - start
        if timings is not None:
            passes = clock.passes if clock is not None and pass_timing else []
            overhead = clock.overhead if clock is not None else 0.0
            timings.append(StageTiming(stage.name, elapsed - overhead, passes))
        if dump is not None:
            dump(stage.name, module)
        if stage.name == until:
            return


def format_timings(timings: list[StageTiming], title: str = "Kiln compile time") -> str:
    """A wall-time report in the shape of MLIR's -mlir-timing: one row per stage, its passes
    indented under it, each with its share of the total."""
    total = sum(t.seconds for t in timings)
    share = (lambda s: 100.0 * s / total) if total > 0 else (lambda s: 0.0)
    rule = "=" + "-" * 78 + "="
    lines = [rule, f"... {title} report ...".center(80), rule,
             f"  Total wall time: {total:.4f} seconds", "",
             "  ----Wall Time----  ----Name----"]
    for stage in timings:
        lines.append(f"  {stage.seconds:7.4f} ({share(stage.seconds):5.1f}%)  {stage.name}")
        for step in stage.passes:
            lines.append(f"  {step.seconds:7.4f} ({share(step.seconds):5.1f}%)    {step.name}")
    lines.append(f"  {total:7.4f} (100.0%)  Total")
    return "\n".join(lines)


def format_pipeline(stages: list[Stage]) -> str:
    lines = []
    for stage in stages:
        lines.append(f"// {stage.name}: {stage.doc}")
        lines.extend(f"  {step}" for step in stage.steps)
    return "\n".join(lines)
