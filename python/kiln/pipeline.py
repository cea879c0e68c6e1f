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

Two things keep passes that have nothing to do cheap: a Python pass that names the ops it
rewrites (`PyPass.applies_to`) is skipped when the module has none of them (one walk collects
the op names for a run of such passes), and a process that compiles many programs in one
context (a compile worker) keeps each stage's pass manager, whose passes MLIR initializes
once (`reuse_pass_managers`).
"""
from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Union

from torch_mlir import ir, passmanager

from . import environment
from .diagnostics import mlir_errors
from .errors import KilnError


@dataclass(frozen=True)
class PyPass:
    """A pass written in Python over the MLIR bindings: `run(module)` rewrites in place."""
    name: str
    run: Callable[[ir.Module], None]
    summary: str = ""
    verify: bool = True  # False: the pass only reads the IR (observers)
    # The ops the pass rewrites (names, or dialect prefixes ending in '.'): a module without
    # any has nothing for it, and the pass is not run. None: it always runs.
    applies_to: frozenset[str] | None = None

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
    as the manager's verifier would.

    The manager's callbacks run the steps of the current run (`start`), so that a manager
    kept for reuse (`reuse_pass_managers`) serves later runs of the same pipeline."""

    def __init__(self):
        self.module: ir.Module | None = None
        self.steps: list[Step] = []
        self.callbacks: list = []  # held here for as long as the manager may call them
        self.start(None, [])

    def start(self, module: ir.Module | None, steps: list[Step]) -> None:
        self.module, self.steps = module, steps
        self.failure: BaseException | None = None
        self.failed_pass: str | None = None
        self.last_finished: int | None = None  # index of the last Python step that completed
        self.invalid: ir.MLIRError | None = None  # the verifier's error after that step
        self.present: set[str] | None = None  # the op names in the module, while known

    def callback(self, index: int, check: bool):
        def run(op: ir.Operation, pass_) -> None:
            step = self.steps[index]
            try:
                if index and not isinstance(self.steps[index - 1], PyPass):
                    self.present = None  # an upstream pass ran since they were collected
                if self._has_work(step):
                    # The manager runs on module.operation; passes take the ir.Module itself.
                    step.run(self.module)
                    if step.verify:
                        self.present = None  # it may have rewritten anything
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

    def _has_work(self, step: PyPass) -> bool:
        """Whether the module holds an op `step` applies to. The op names are collected in
        one walk and kept until a pass may have changed them, so that a run of passes with
        nothing to do (most of `legalize`'s lowerings, for most programs) costs one walk."""
        if step.applies_to is None:
            return True
        if self.present is None:
            self.present = op_names(self.module.operation)
        return any(name in self.present if not name.endswith(".") else
                   any(p.startswith(name) for p in self.present) for name in step.applies_to)


def op_names(op: ir.Operation) -> set[str]:
    """The names of the ops nested in `op` (and its own)."""
    names: set[str] = set()

    def visit(child: ir.Operation):
        names.add(child.name)
        return ir.WalkResult.ADVANCE
    op.walk(visit)
    return names


class _ReusedManagers:
    """Pass managers kept, per pipeline, for later runs in one context (see
    `reuse_pass_managers`). MLIR initializes a manager's passes on its first run and again
    only when the context's dialect registry changes: canonicalize, for one, builds and
    freezes every pattern of every loaded dialect there (about 0.4 ms a time, five times a
    compile). A manager is lent to one run at a time; one that failed is not kept."""

    def __init__(self):
        self.context: ir.Context | None = None
        self.idle: dict[tuple, tuple[passmanager.PassManager, _PythonPassHost]] = {}
        self.lock = threading.Lock()

    def take(self, module: ir.Module, key: tuple):
        with self.lock:
            if self.context is None or module.context is not self.context:
                return None
            return self.idle.pop(key, None)

    def give_back(self, module: ir.Module, key: tuple, manager, host) -> None:
        host.start(None, [])  # the module is not kept alive by the cache
        with self.lock:
            if self.context is not None and module.context is self.context:
                self.idle.setdefault(key, (manager, host))


_reused = _ReusedManagers()


def reuse_pass_managers(context: ir.Context | None) -> None:
    """Keep the pass managers of pipelines run in `context` for later runs of the same
    pipelines there (None: keep none). For a process that compiles many programs in one
    context, such as a compile worker (driver/worker.py), where a manager's initialization
    is paid once, not once per compile."""
    with _reused.lock:
        _reused.context = context
        _reused.idle.clear()


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
    if BEFORE_INLINING and any(isinstance(step, str) and _INLINE.search(step) for step in steps):
        # Before MLIR's inliner copies bodies: a program whose calls multiply is refused.
        with module.context:
            for check in BEFORE_INLINING:
                check(module, filename)
    if observe is not None:
        steps = _with_observer(steps, observe)
    check_after, check_at_end = _checks(steps)
    # Observed runs (timing, dumps, reproducers) are rare: their managers are not kept; nor
    # are those of passes that keep state across runs (_NOT_REUSABLE).
    key = None if observe is not None or any(
        isinstance(s, str) and _NOT_REUSABLE.search(s) for s in steps) \
        else _pipeline_key(stage, steps, check_after)
    reused = _reused.take(module, key) if key is not None else None
    with module.context:
        if reused is not None:
            manager, host = reused
        else:
            manager, host = _build_manager(steps, stage, check_after)
        host.start(module, steps)
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
    if key is not None:
        _reused.give_back(module, key, manager, host)


# Checks run on a module before any pipeline that holds MLIR's inliner: `check(module,
# filename)` raises a located KilnError. The passes register theirs (kiln.lowering.call_bounds
# bounds the growth of inlining) so that this layer does not import the one above it.
BEFORE_INLINING: list[Callable[[ir.Module, str], None]] = []
_INLINE = re.compile(r"(?<![\w-])inline(?![\w-])")  # MLIR's inliner in pass-pipeline text


# stablehlo-refine-arguments adds its `types` to the refinements again on every run of its
# manager: a second run refined "4 vs 2" arguments and failed.
_NOT_REUSABLE = re.compile(r"stablehlo-refine-arguments")


def _pipeline_key(stage: str, steps: list[Step], check_after: list[bool]) -> tuple:
    """What makes two runs' managers interchangeable: the upstream passes' text, where the
    Python passes are (they are called through the host, so which functions they are does
    not matter) and where the IR is verified."""
    return (stage, _verify_each_pass(), tuple(check_after),
            tuple(("python", s.name) if isinstance(s, PyPass) else s for s in steps))


def _build_manager(steps: list[Step], stage: str, check_after: list[bool]
                   ) -> tuple[passmanager.PassManager, _PythonPassHost]:
    host = _PythonPassHost()
    manager = passmanager.PassManager("builtin.module")
    manager.enable_verifier(_verify_each_pass())
    for index, step in enumerate(steps):
        if isinstance(step, PyPass):
            manager.add(host.callback(index, check_after[index]), name=step.name,
                        argument=step.name, description=step.summary)
        else:
            _add_upstream(manager, step, stage)
    return manager, host


def _verify_each_pass() -> bool:
    return environment.get("KILN_VERIFY_EACH_PASS") not in ("", "0")


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
