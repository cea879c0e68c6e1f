"""`kiln bench --compile-time`: how long Kiln takes to compile JAX's exports, against XLA:CPU
compiling the very same StableHLO, in the same process.

Every program (the benchmark workloads and the JAX programs Kiln's tests export) is exported
with `jax.export`. Kiln compiles the serialized export, as `kiln run` would read it; XLA
compiles the export's StableHLO module through the PJRT CPU client (no jax tracing, no jax
caches). Rounds alternate which compiler goes first, and every compile is cold: the client
compiles afresh each time, and Kiln runs with `KILN_CACHE=0` (no persistent compile cache).
The time per program is the median over rounds; the summary is the geometric mean of
kiln/xla over the programs both compile.
"""
from __future__ import annotations

import contextlib
import math
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

from .. import environment
from .jax_programs import JAX_PROGRAMS
from .workloads import WORKLOADS

WORKLOAD_GROUP = "workload"
SETTLE_S = 0.1  # the pause before every timed compile (see `measure`)
EXPORT_GROUP = "export"


@dataclass(frozen=True)
class Program:
    name: str
    group: str                                   # WORKLOAD_GROUP or EXPORT_GROUP
    make: Callable[[], tuple[Callable, tuple]]   # -> (jax function, inputs)
    x64: bool = False                            # traced with jax's 64-bit types on


def programs(names: list[str] | None = None, groups: tuple[str, ...] = (WORKLOAD_GROUP, EXPORT_GROUP)
             ) -> list[Program]:
    """The benchmark's programs, in order; `names` picks some (a workload's name, or
    "export/NAME" for a test program; a bare name also matches a test program)."""
    found = []
    if WORKLOAD_GROUP in groups:
        found += [Program(w.name, WORKLOAD_GROUP, w.make, w.x64) for w in WORKLOADS]
    if EXPORT_GROUP in groups:
        found += [Program(f"{EXPORT_GROUP}/{p.name}", EXPORT_GROUP, p.make) for p in JAX_PROGRAMS]
    if not names:
        return found
    picked = [p for p in found if p.name in names or p.name.split("/")[-1] in names]
    known = {p.name for p in found} | {p.name.split("/")[-1] for p in found}
    missing = [n for n in names if n not in known]
    if missing:
        from ..errors import KilnError
        raise KilnError(f"unknown program(s): {', '.join(missing)}",
                        hint="`kiln bench --compile-time --list` names them")
    return picked


@dataclass
class Exported:
    serialized: bytes      # what Kiln compiles (`jax.export.Exported.serialize()`)
    stablehlo: str         # what XLA compiles: the export's module, as text


def export(program: Program) -> Exported:
    import jax
    with jax.enable_x64(program.x64):
        fn, args = program.make()
        exp = jax.export.export(jax.jit(fn), platforms=("cpu",))(*args)
    return Exported(bytes(exp.serialize()), exp.mlir_module())


class XlaCompiler:
    """XLA:CPU's compile of StableHLO text, as jax.jit's compile step calls it."""

    def __init__(self):
        from jax._src import compiler, xla_bridge
        from jax._src.lib import xla_client
        self._options = lambda: compiler.get_compile_options(num_replicas=1, num_partitions=1)
        self._backend = xla_bridge.get_backend("cpu")
        self._devices = xla_client.DeviceList(tuple(self._backend.local_devices()[:1]))

    def __call__(self, stablehlo: str):
        return self._backend.compile_and_load(stablehlo, executable_devices=self._devices,
                                              compile_options=self._options())


def kiln_compiler(**options) -> Callable[[bytes, str], object]:
    def compile_export(serialized: bytes, name: str):
        import kiln
        return kiln.compile(serialized, filename=f"<compile-time:{name}>", **options)
    return compile_export


@dataclass
class Result:
    program: str
    group: str
    status: str = "ok"          # ok | kiln error | xla error | export error
    reason: str = ""
    kiln_s: float | None = None
    xla_s: float | None = None
    kiln_samples: list[float] = field(default_factory=list)
    xla_samples: list[float] = field(default_factory=list)
    kiln_stages: dict[str, float] = field(default_factory=dict)  # Kiln's own stage times

    @property
    def ratio(self) -> float | None:
        if self.kiln_s and self.xla_s:
            return self.kiln_s / self.xla_s
        return None


@contextlib.contextmanager
def kiln_cache_off():
    """Kiln's persistent compile cache off for the duration (a cold compile every time)."""
    old = environment.raw("KILN_CACHE")
    os.environ["KILN_CACHE"] = "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["KILN_CACHE"]
        else:
            os.environ["KILN_CACHE"] = old


def _timed(fn, *args) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn(*args)
    return time.perf_counter() - start, value


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]


def measure(program: Program, *, rounds: int = 3, xla=None, kiln=None) -> Result:
    """Compile `program` `rounds` times with each compiler, alternating which goes first."""
    result = Result(program.name, program.group)
    try:
        exported = export(program)
    except Exception as exc:  # jax itself could not export it: nothing to compare
        result.status, result.reason = "export error", _first_line(exc)
        return result
    xla = xla or XlaCompiler()
    kiln = kiln or kiln_compiler()
    compilers = {"kiln": lambda: kiln(exported.serialized, program.name),
                 "xla": lambda: xla(exported.stablehlo)}
    samples: dict[str, list[float]] = {"kiln": [], "xla": []}
    failed: dict[str, str] = {}
    for r in range(rounds):
        order = ["kiln", "xla"] if r % 2 == 0 else ["xla", "kiln"]
        for who in order:
            if who in failed:
                continue
            # Each compile starts on a quiet machine: after answering, Kiln's compile server
            # forks and warms its next child in the background (driver/worker.py), which
            # must not be billed to the compile that follows, whoever's it is.
            time.sleep(SETTLE_S)
            try:
                seconds, value = _timed(compilers[who])
            except Exception as exc:
                failed[who] = _first_line(exc)
                continue
            samples[who].append(seconds)
            if who == "kiln" and not result.kiln_stages:
                result.kiln_stages = {s.name: s.seconds for s in getattr(value, "timings", [])}
    result.kiln_samples, result.xla_samples = samples["kiln"], samples["xla"]
    result.kiln_s = statistics.median(samples["kiln"]) if samples["kiln"] else None
    result.xla_s = statistics.median(samples["xla"]) if samples["xla"] else None
    if failed:
        who = sorted(failed)[0]
        result.status, result.reason = f"{who} error", failed[who]
    return result


def warm_up(xla, kiln) -> None:
    """One compile each of a tiny program: one-time costs (LLVM's and the client's start-up,
    imports) are not any program's compile time."""
    import jax.numpy as jnp
    import numpy as np
    exported = export(Program("warm-up", EXPORT_GROUP,
                              lambda: (lambda x: jnp.sin(x) * 2, (np.ones(4, np.float32),))))
    xla(exported.stablehlo)
    kiln(exported.serialized, "warm-up")


def run(selected: list[Program], *, rounds: int = 3, kiln_options: dict | None = None,
        log=lambda s: None) -> list[Result]:
    results = []
    with kiln_cache_off():
        xla, kiln = XlaCompiler(), kiln_compiler(**(kiln_options or {}))
        warm_up(xla, kiln)
        for program in selected:
            result = measure(program, rounds=rounds, xla=xla, kiln=kiln)
            log(_line(result))
            results.append(result)
    return results


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def summary(results: list[Result]) -> dict[str, float | None]:
    """Geometric mean of kiln/xla: over all programs and per group."""
    out = {"all": geomean([r.ratio for r in results if r.ratio])}
    for group in (WORKLOAD_GROUP, EXPORT_GROUP):
        ratios = [r.ratio for r in results if r.group == group and r.ratio]
        if ratios:
            out[group] = geomean(ratios)
    return out


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"


def _line(r: Result) -> str:
    if r.status != "ok" and r.ratio is None:
        return f"  {r.program}: {r.status}: {r.reason}"
    return f"  {r.program}: kiln {_ms(r.kiln_s)} ms, xla {_ms(r.xla_s)} ms" + \
        (f" ({r.ratio:.2f}x)" if r.ratio else "")


def table(results: list[Result]) -> str:
    """Per program: Kiln's and XLA's compile time, their ratio, and the share of Kiln's time
    spent in its own stages (the rest is LLVM, loading and Python)."""
    head = ["program", "kiln ms", "xla ms", "kiln/xla", "kiln stages ms", "status"]
    lines = [head]
    for r in results:
        stages = sum(r.kiln_stages.values()) if r.kiln_stages else None
        lines.append([r.program, _ms(r.kiln_s), _ms(r.xla_s),
                      f"{r.ratio:.2f}x" if r.ratio else "-", _ms(stages),
                      r.status if r.status == "ok" else f"{r.status}: {r.reason}"])
    widths = [max(len(line[i]) for line in lines) for i in range(len(head) - 1)]
    out = []
    for i, line in enumerate(lines):
        out.append("  ".join([c.ljust(w) for c, w in zip(line, widths)] + [line[-1]]).rstrip())
        if i == 0:
            out.append("  ".join("-" * w for w in widths + [6]))
    means = summary(results)
    out.append("")
    for key, value in means.items():
        counted = sum(1 for r in results if r.ratio and (key == "all" or r.group == key))
        shown = f"{value:.2f}x" if value else "-"
        out.append(f"geomean kiln/xla ({key}, {counted} programs): {shown}")
    return "\n".join(out)


def to_json(results: list[Result], machine: dict, rounds: int, kiln_options: dict) -> dict:
    return {"machine": machine, "rounds": rounds, "kiln_options": kiln_options,
            "programs": [{**asdict(r), "ratio": r.ratio} for r in results],
            "geomean": summary(results)}
