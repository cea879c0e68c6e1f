"""The conformance runner: every program in its own process, judged by its checks or, for
programs without checks, against the StableHLO reference interpreter.

A crash (signal) or a hang past the timeout fails that file only. Files may hold several
modules split by `// -----` (the interpret suite's form); each module's zero-argument public
functions are the cases, reported per file with counts.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import re
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

SPLIT = re.compile(r"^// -----\s*$", re.M)
DYNAMIC_DIM = 3  # the size generated inputs give every dynamic dimension


@dataclass
class CaseResult:
    name: str
    passed: bool
    detail: str = ""


@dataclass
class FileResult:
    path: str
    passed: bool
    detail: str
    seconds: float
    cases: list[CaseResult] = field(default_factory=list)


def discover(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        # .hlo: HLO text, for the HLO-only ops (tests/conformance/ops/async_start_done.hlo)
        files.extend(sorted(f for f in p.rglob("*") if f.suffix in (".mlir", ".hlo"))
                     if p.is_dir() else [p])
    return files


def _generated_inputs(exe) -> list[np.ndarray]:
    """Deterministic inputs; scalar integer parameters in front of dynamic tensors are JAX's
    dimension variables, so they get the same size every dynamic dimension gets."""
    rng = np.random.default_rng(0)
    arrays = []
    for spec in exe.arg_specs:
        shape = tuple(DYNAMIC_DIM if d is None else d for d in spec.shape)
        dtype = spec.dtype
        if not spec.shape and dtype.kind in "iu" and not all(s.is_static for s in exe.arg_specs):
            arrays.append(np.array(DYNAMIC_DIM, dtype))
        elif dtype == np.bool_:
            arrays.append(rng.random(shape) < 0.5)
        elif dtype.kind in "iu":
            arrays.append(rng.integers(0, 5, shape).astype(dtype))
        elif dtype.kind == "c":
            arrays.append((rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype))
        else:
            arrays.append(rng.standard_normal(shape).astype(dtype))
    return arrays


def _run_case(source: str, filename: str, entry: str | None) -> CaseResult:
    import kiln
    from kiln.runtime import checks as check_eval
    from kiln import parallel_programs
    parallel = parallel_programs.parse_if_run_parallel(source, filename) if entry is None \
        else None
    if parallel is not None:
        _, outcomes = parallel_programs.run_parallel_module(parallel, filename)
        failed = [o for o in outcomes if not o.passed]
        return CaseResult("main", not failed, str(failed[0]) if failed else
                          f"{len(outcomes)} checks over several devices")
    exe = kiln.compile(source, entry=entry, filename=filename, **_TARGET)
    inputs = _generated_inputs(exe)
    outputs, outcomes = exe.run_checks(*inputs)
    name = entry or exe.entry
    if outcomes:
        failed = [o for o in outcomes if not o.passed]
        return CaseResult(name, not failed, str(failed[0]) if failed else f"{len(outcomes)} checks")
    # No checks: the reference interpreter decides.
    from kiln.reference import evaluate
    shapes = [a.shape for a in inputs]
    refined = exe.ir("optimize", arg_shapes=shapes)
    types = [s.mlir_type(tuple(a.shape)) for s, a in zip(exe.arg_specs, inputs)]
    expected = evaluate(refined, inputs, types, exe.entry)
    for i, (got, want) in enumerate(zip(outputs, expected)):
        outcome = check_eval.evaluate({"kind": "reference", "loc": f"result {i}"},
                                      [got, want.astype(got.dtype).reshape(got.shape)])
        if not outcome.passed:
            return CaseResult(name, False, f"differs from reference interpreter: {outcome}")
    return CaseResult(name, True, f"{len(outputs)} results match the reference interpreter")


def _cases(text: str) -> list[tuple[str, str | None]]:
    """(module text, entry) pairs: one per split module, or per zero-argument public function
    when a module has no @main."""
    from kiln.context import make_context
    from kiln.frontend import import_module
    from kiln.lowering.ir_util import function_type, functions, is_public, symbol_name
    cases = []
    chunks = SPLIT.split(text)
    for chunk in chunks:
        if not chunk.strip():
            continue
        entries: list[str | None] = [None]
        if "@main" not in chunk:
            try:
                # Through the front end: the chunk may use the check dialect's syntax or CHLO.
                module, _ = import_module(chunk, make_context(), "<chunk>")
                if not functions(module):
                    continue  # an empty module (the interpret suite has some): nothing to run
                entries = [symbol_name(f) for f in functions(module)
                           if is_public(f) and not len(function_type(f).inputs)] or [None]
            except Exception:
                pass  # compiling the chunk reports the parse error properly
        cases.extend((chunk, e) for e in entries)
    return cases


def _read_text(path: str) -> str:
    """A test file's text; a zip archive (a `.kx` executable) or bytes that are not UTF-8
    are a KilnError, never run or misread."""
    from kiln.errors import KilnError
    from kiln.frontend.detect import refuse_archive
    data = Path(path).read_bytes()
    refuse_archive(data, path)
    try:
        # as text-mode reading did: universal newlines
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as exc:
        raise KilnError(f"is not UTF-8 text ({exc.reason} at byte {exc.start})",
                        location=path) from None


def run_file(path: str) -> FileResult:
    """Run one file in this process (the parent isolates it)."""
    from kiln.errors import KilnError
    start = time.perf_counter()
    try:
        text = _read_text(path)
    except KilnError as exc:
        return FileResult(path, False, exc.one_line(), time.perf_counter() - start)
    results = []
    for chunk, entry in _cases(text):
        try:
            results.append(_run_case(chunk, path, entry))
        except KilnError as exc:
            results.append(CaseResult(entry or "main", False, exc.one_line()))
        except Exception as exc:  # a Kiln bug: report it, with where, instead of dying
            tb = traceback.extract_tb(exc.__traceback__)[-1]
            results.append(CaseResult(entry or "main", False,
                                      f"internal error {type(exc).__name__}: {exc} "
                                      f"({Path(tb.filename).name}:{tb.lineno})"))
    passed = all(r.passed for r in results) and bool(results)
    failed = [r for r in results if not r.passed]
    if len(results) == 1:
        detail = results[0].detail
    else:
        detail = f"{len(results) - len(failed)}/{len(results)} cases passed" + \
                 (f"; first failure {failed[0].name}: {failed[0].detail}" if failed else "")
    return FileResult(path, passed, detail, time.perf_counter() - start, results)


def _child(path: str, conn) -> None:
    # This child is already the isolation a compile worker gives (a crash fails its file
    # only): compile here rather than start a worker per file.
    os.environ["KILN_COMPILE_IN_PROCESS"] = "1"
    try:
        conn.send(asdict(run_file(path)))
    finally:
        conn.close()


class _Running:
    """One file's child process and the pipe its result comes back on."""

    def __init__(self, path: str):
        ctx = mp.get_context("fork")
        self.path = path
        self.conn, child = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_child, args=(path, child), daemon=True)
        self.start = time.perf_counter()
        self.proc.start()
        child.close()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def collect(self) -> FileResult:
        """The child's result, or why there is none (it died, or the pipe closed early)."""
        try:
            data = self.conn.recv()
            data["cases"] = [CaseResult(**c) for c in data["cases"]]
            result = FileResult(**data)
        except (EOFError, OSError):
            self.proc.join()
            result = FileResult(self.path, False, f"process died with {_signal_name(self.proc.exitcode)}",
                                self.elapsed())
        self.finish()
        return result

    def kill(self, timeout: float) -> FileResult:
        self.finish()
        return FileResult(self.path, False, f"timed out after {timeout:.0f} s", self.elapsed())

    def finish(self) -> None:
        self.conn.close()
        self.proc.join(1)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


def _signal_name(code: int | None) -> str:
    import signal
    if code is not None and code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            pass
    return f"exit code {code}"


# The target the cases compile for (`kiln conformance --target`), inherited by the forked
# children; empty: kiln.compile's default.
_TARGET: dict = {}


def run(paths: list[str], jobs: int = 1, timeout: float = 120.0, report=print,
        target: str | None = None) -> list[FileResult]:
    """Run every file, `jobs` at a time, each in a process forked from this warm interpreter
    (MLIR is imported once); results come back in file order."""
    from multiprocessing.connection import wait
    _TARGET.clear()
    if target:
        _TARGET["target"] = target

    import kiln  # noqa: F401  (warm the import before forking)
    from .lowering.registry import register_all
    register_all()  # and the passes' modules: ~1 s of imports a child would repeat per file
    files = [str(f) for f in discover(paths)]
    done: dict[str, FileResult] = {}
    running: list[_Running] = []
    pending = list(reversed(files))
    next_to_report = 0
    while pending or running:
        while pending and len(running) < max(1, jobs):
            running.append(_Running(pending.pop()))
        ready = wait([r.conn for r in running], timeout=1.0)
        for r in list(running):
            if r.conn in ready:
                done[r.path] = r.collect()
            elif r.elapsed() > timeout:
                done[r.path] = r.kill(timeout)
            else:
                continue
            running.remove(r)
        while next_to_report < len(files) and files[next_to_report] in done:
            result = done[files[next_to_report]]
            report(f"{'PASS' if result.passed else 'FAIL'} {result.path} ({result.seconds:.1f}s)"
                   + ("" if result.passed else f": {result.detail}"))
            next_to_report += 1
    return [done[f] for f in files]


def summary(results: list[FileResult]) -> str:
    passed = sum(r.passed for r in results)
    return f"{passed} passed, {len(results) - passed} failed"


def write_json(results: list[FileResult], path: str) -> None:
    Path(path).write_text(json.dumps({"summary": summary(results),
                                      "files": [asdict(r) for r in results]}, indent=1))
