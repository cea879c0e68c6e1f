"""`kiln bench models`: real models (model_zoo.py) on Kiln beside XLA:CPU, one export for both.

Per model, the parent process builds the model with random weights and exports it once with
`jax.export` (the inputs flattened: every weight is a positional array). Then:

- **cold compile and memory**, for each compiler in a *fresh process* with an *empty cache*
  (`python -m kiln.bench.models --child PEER DIR`): Kiln compiles the serialized export
  (`kiln.compile`) with a new empty KILN_CACHE_DIR; XLA:CPU compiles the same export
  (`jax.jit(exported.call)`, jax's persistent cache off). The child times the compile alone
  (imports and start-up are not compile time), calls twice, then measures the peak resident
  memory one call adds (Linux VmHWM, reset through /proc/self/clear_refs) and saves its outputs;
- **correctness**: Kiln's outputs against XLA's, within the model's tolerance;
- **speed**: in this process, interleaved as `kiln bench` does (runner.py): rounds of a block of
  calls per compiler, the median kept. Kiln's compile here reuses the child's cache directory,
  so it is a cache hit, not a second cold compile;
- with `load=True`, the same timing again beside a competing busy-loop process (one core), and
  each compiler's slowdown against its quiet median.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .. import environment
from . import model_zoo
from .peers import timed
from .runner import BLOCK, compare, geomean

PEERS = ("kiln", "xla")
BUSY_LOOP = "while True: pass"
CHILD_TIMEOUT_S = 600


@dataclass
class PeerResult:
    status: str = "ok"                 # ok | error | mismatch
    reason: str = ""
    compile_s: float | None = None     # fresh process, empty cache
    peak_mb: float | None = None       # resident memory one call adds, fresh process
    median_s: float | None = None      # quiet machine (as quiet as it is)
    loaded_s: float | None = None      # beside one busy-loop process (--load)
    max_err: float | None = None       # Kiln: worst |kiln - xla| over the tolerance

    @property
    def slowdown(self) -> float | None:
        return self.loaded_s / self.median_s if self.loaded_s and self.median_s else None


@dataclass
class ModelRow:
    model: str
    note: str
    training: bool
    tol: tuple
    results: dict[str, PeerResult] = field(default_factory=dict)

    def _both(self, attr: str) -> tuple | None:
        k, x = self.results.get("kiln"), self.results.get("xla")
        if not k or not x or k.status != "ok" or x.status != "ok":
            return None
        a, b = getattr(k, attr), getattr(x, attr)
        return (a, b) if a and b else None

    @property
    def correct(self) -> bool | None:
        k = self.results.get("kiln")
        if k is None or k.max_err is None:
            return None
        return k.status == "ok"

    @property
    def speed(self) -> float | None:
        """XLA's time over Kiln's (>1: Kiln is faster)."""
        pair = self._both("median_s")
        return pair[1] / pair[0] if pair else None

    @property
    def compile_ratio(self) -> float | None:
        """Kiln's cold compile time over XLA's (<1: Kiln compiles faster)."""
        pair = self._both("compile_s")
        return pair[0] / pair[1] if pair else None

    @property
    def memory_ratio(self) -> float | None:
        """Kiln's peak call memory over XLA's (<1: Kiln needs less); both under 1 MB: None.
        Each side counts as at least 1 MB: below that the high-water mark is page and
        allocator noise, and a call that reuses warm buffers would give a ratio of ~0."""
        k, x = self.results.get("kiln"), self.results.get("xla")
        if not k or not x or k.peak_mb is None or x.peak_mb is None or max(k.peak_mb, x.peak_mb) < 1:
            return None
        return max(k.peak_mb, 1.0) / max(x.peak_mb, 1.0)


# -- the export and its inputs ---------------------------------------------------------------------
def prepare(model: model_zoo.Model, workdir: str) -> None:
    """Export `model` (inputs and outputs as flat lists of arrays) into `workdir`."""
    import jax
    fn, args = model.make()
    leaves, treedef = jax.tree.flatten(args)
    leaves = [np.asarray(x) for x in leaves]

    def flat_fn(*flat):
        return jax.tree.leaves(fn(*jax.tree.unflatten(treedef, flat)))
    exported = jax.export.export(jax.jit(flat_fn), platforms=("cpu",))(*leaves)
    with open(os.path.join(workdir, "export.bin"), "wb") as f:
        f.write(exported.serialize())
    np.savez(os.path.join(workdir, "inputs.npz"), *leaves)


def load_inputs(workdir: str) -> list[np.ndarray]:
    with np.load(os.path.join(workdir, "inputs.npz")) as data:
        return [data[f"arr_{i}"] for i in range(len(data.files))]


def load_outputs(path: str) -> list[np.ndarray]:
    with np.load(path) as data:
        return [data[f"arr_{i}"] for i in range(len(data.files))]


def load_export(workdir: str) -> tuple[bytes, list[np.ndarray]]:
    with open(os.path.join(workdir, "export.bin"), "rb") as f:
        return f.read(), load_inputs(workdir)


def compile_peer(peer: str, serialized: bytes, inputs: list[np.ndarray], name: str):
    """Compile the serialized export on `peer`; returns a call running it on `inputs` that
    gives back the flat outputs as numpy arrays."""
    if peer == "kiln":
        import kiln
        exe = kiln.compile(serialized, filename=f"<bench models:{name}>")
        return lambda: list(exe(*inputs))
    if peer == "xla":
        import jax
        exported = jax.export.deserialize(bytearray(serialized))
        cpu = jax.devices("cpu")[0]
        on_device = [jax.device_put(x, cpu) for x in inputs]
        compiled = jax.jit(exported.call).lower(*on_device).compile()

        def run():
            out = compiled(*on_device)
            jax.block_until_ready(out)
            return [np.asarray(x) for x in out]
        return run
    raise ValueError(f"unknown peer {peer!r}")


# -- the fresh-process half: cold compile, memory, outputs ------------------------------------------
def _rss_kb(name: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    raise OSError(f"no {name} in /proc/self/status")


def call_peak_mb(run) -> float | None:
    """MB resident above the pre-call size at the high-water mark of one call (Linux only)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current resident size
        before = _rss_kb("VmRSS")
    except OSError:
        return None
    out = run()
    peak = _rss_kb("VmHWM")
    del out
    return max(0, peak - before) / 1024


def child_main(peer: str, workdir: str) -> dict:
    """In a fresh process: import, then time the compile alone, call, measure a call's memory."""
    if peer == "xla":
        import jax
        jax.config.update("jax_enable_compilation_cache", False)
    else:
        import kiln  # noqa: F401  (its import is start-up, not compile time)
    serialized, inputs = load_export(workdir)   # reading the files is not compile time
    start = time.perf_counter()
    run = compile_peer(peer, serialized, inputs, os.path.basename(workdir))
    compile_s = time.perf_counter() - start
    outputs = run()
    run()
    peak = call_peak_mb(run)
    np.savez(os.path.join(workdir, f"outputs-{peer}.npz"), *outputs)
    return {"compile_s": compile_s, "peak_mb": peak}


# What Kiln says when code compiled by one build of it is loaded by another: Kiln's sources
# changed while the compile ran (a source tree being edited). Such a compile is run once more.
STALE_BUILD = "was compiled by Kiln"


def run_child(peer: str, workdir: str, cache_dir: str, timeout_s: float = CHILD_TIMEOUT_S) -> dict:
    """`child_main` in a fresh process (twice if Kiln's build changed meanwhile); failures come
    back as {'error': why}."""
    result = _run_child_once(peer, workdir, cache_dir, timeout_s)
    if STALE_BUILD in result.get("error", ""):
        shutil.rmtree(cache_dir, ignore_errors=True)   # empty again, for a cold compile
        result = _run_child_once(peer, workdir, cache_dir, timeout_s)
    return result


def _run_child_once(peer: str, workdir: str, cache_dir: str, timeout_s: float) -> dict:
    env = dict(os.environ, KILN_CACHE_DIR=cache_dir, KERAS_BACKEND="jax")
    env.pop("KILN_CACHE", None)   # the cache on, but empty: what a first run sees
    env.pop("JAX_PLATFORMS", None)
    try:
        proc = subprocess.run([sys.executable, "-m", "kiln.bench.models", "--child", peer, workdir],
                              capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout_s:.0f} s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": _last_error_line(proc.stderr) or f"exit status {proc.returncode}"}
    return json.loads(lines[-1])


def _last_error_line(stderr: str) -> str:
    """The error a child died of: the last line naming an exception, else the last line."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    errors = [line for line in lines if "Error" in line.split(":")[0] or line.startswith("kiln:")]
    return ((errors or lines or [""])[-1])[:300]


# -- the in-process half: speed, quiet and loaded ----------------------------------------------------
def time_interleaved(runners: dict, budget_s: float, min_rounds: int = 3,
                     max_rounds: int = 50) -> dict[str, float]:
    """Median seconds per call of each runner, in rounds of BLOCK calls each (first not kept)."""
    per_round = sum(timed(r) for r in runners.values()) * BLOCK or 1e-3
    rounds = int(min(max_rounds, max(min_rounds, budget_s / per_round)))
    samples = {name: [] for name in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            run()
            samples[name].extend(timed(run) for _ in range(BLOCK - 1))
    return {name: statistics.median(s) for name, s in samples.items()}


class BusyLoop:
    """A competing process spinning on one core for the duration of a `with` block."""

    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", BUSY_LOOP])
        time.sleep(0.2)   # let it get scheduled before timing starts
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


# -- one model ---------------------------------------------------------------------------------
def measure(model: model_zoo.Model, *, budget_s: float = 5.0, load: bool = False,
            log=lambda s: None) -> ModelRow:
    row = ModelRow(model.name, model.note, model.training, model.tol)
    workdir = tempfile.mkdtemp(prefix=f"kiln-bench-{model.name}-")
    cache_dir = os.path.join(workdir, "kiln-cache")
    try:
        try:
            prepare(model, workdir)
        except ImportError as exc:
            reason = f"{exc.name} is not installed (pip install 'kiln[models]')"
            row.results = {p: PeerResult("error", reason) for p in PEERS}
            return row
        except Exception as exc:   # the library or jax failed: nothing to compare
            reason = f"export: {_first_line(exc)}"
            row.results = {p: PeerResult("error", reason) for p in PEERS}
            return row
        for peer in PEERS:
            cold = run_child(peer, workdir, cache_dir)
            r = row.results[peer] = PeerResult()
            if "error" in cold:
                r.status, r.reason = "error", cold["error"]
                log(f"  {peer}: error: {r.reason}")
                continue
            r.compile_s, r.peak_mb = cold["compile_s"], cold["peak_mb"]
            log(f"  {peer}: compiled in {r.compile_s:.2f} s (fresh process, empty cache)")
        if all(row.results[p].status == "ok" for p in PEERS):
            check_outputs(row, workdir)
            if row.results["kiln"].status == "mismatch":
                log(f"  kiln: {row.results['kiln'].reason}")
        runners = {}
        for peer in PEERS:
            if row.results[peer].status in ("ok", "mismatch"):
                try:
                    runners[peer] = _warm_runner(peer, workdir, cache_dir)
                except Exception as exc:   # it ran in the child: worth showing, not fatal
                    row.results[peer].status = "error"
                    row.results[peer].reason = f"in the timing process: {_first_line(exc)}"
        if runners:
            for peer, median in time_interleaved(runners, budget_s).items():
                row.results[peer].median_s = median
            if load:
                with BusyLoop():
                    for peer, median in time_interleaved(runners, budget_s).items():
                        row.results[peer].loaded_s = median
        return row
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _warm_runner(peer: str, workdir: str, cache_dir: str):
    """The export compiled here for timing (Kiln's from the child's cache), called once."""
    serialized, inputs = load_export(workdir)
    name = os.path.basename(workdir)
    with _cache_dir(cache_dir):
        try:
            run = compile_peer(peer, serialized, inputs, name)
        except Exception as exc:
            if STALE_BUILD not in str(exc):
                raise
            run = compile_peer(peer, serialized, inputs, name)
    run()
    return run


def check_outputs(row: ModelRow, workdir: str) -> None:
    """Kiln's outputs (saved by its child) against XLA's, within the model's tolerance."""
    ours = load_outputs(os.path.join(workdir, "outputs-kiln.npz"))
    theirs = load_outputs(os.path.join(workdir, "outputs-xla.npz"))
    ok, worst, why = compare(ours, theirs, row.tol)
    kiln = row.results["kiln"]
    kiln.max_err = worst
    if not ok:
        kiln.status, kiln.reason = "mismatch", f"vs xla: {why}" + _worst_output(ours, theirs, row.tol)


def _worst_output(ours, theirs, tol) -> str:
    """Where a mismatch is: the output furthest off, and how many are off at all."""
    if len(ours) != len(theirs):
        return ""
    errors = [compare([a], [b], tol)[1] for a, b in zip(ours, theirs)]
    worst = max(range(len(errors)), key=errors.__getitem__)
    off = sum(1 for e in errors if e > 1)
    return (f" (worst: output {worst} of {len(errors)}, shape {tuple(np.shape(theirs[worst]))};"
            f" {off} output(s) off)")


class _cache_dir:
    """KILN_CACHE_DIR set to `path` for the duration: the child's cache, now warm."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        self.old = environment.raw("KILN_CACHE_DIR")
        os.environ["KILN_CACHE_DIR"] = self.path

    def __exit__(self, *exc):
        if self.old is None:
            os.environ.pop("KILN_CACHE_DIR", None)
        else:
            os.environ["KILN_CACHE_DIR"] = self.old


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


# -- machine load, table, JSON ---------------------------------------------------------------------
def load_line() -> tuple[str, bool]:
    """The machine's load average against its cores, and whether it counts as busy (over half
    the cores already taken: timings are then not a quiet machine's)."""
    one, five, fifteen = os.getloadavg()
    cores = os.cpu_count() or 1
    busy = one > 0.5 * cores
    text = f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {cores} cores"
    return (text + (": machine busy, timings are not a quiet machine's" if busy else "")), busy


def _ms(s):
    return "-" if s is None else f"{s * 1e3:.3g}" if s < 0.1 else f"{s * 1e3:.0f}"


def _s(s):
    return "-" if s is None else f"{s:.2f}"


def _x(v):
    return "-" if v is None else f"{v:.2f}x"


def table(rows: list[ModelRow], load: bool = False) -> str:
    head = ["model", "kiln ms", "xla ms", "speed xla/kiln", "kiln compile s", "xla compile s",
            "compile kiln/xla", "peak MB kiln/xla", "memory kiln/xla", "correct"]
    if load:
        head += ["kiln loaded ms", "xla loaded ms", "kiln slowdown", "xla slowdown"]
    lines = [head]
    for r in rows:
        k, x = r.results["kiln"], r.results["xla"]
        correct = {True: f"yes ({k.max_err:.2f}x tol)" if k.max_err is not None else "yes",
                   False: "NO", None: "-"}[r.correct]
        peaks = "-" if k.peak_mb is None or x.peak_mb is None else f"{k.peak_mb:.0f}/{x.peak_mb:.0f}"
        cells = [r.model, _ms(k.median_s), _ms(x.median_s), _x(r.speed), _s(k.compile_s),
                 _s(x.compile_s), _x(r.compile_ratio), peaks, _x(r.memory_ratio), correct]
        if load:
            cells += [_ms(k.loaded_s), _ms(x.loaded_s), _x(k.slowdown), _x(x.slowdown)]
        lines.append(cells)
    means = summary(rows)
    foot = ["geomean", "", "", _x(means["speed"]), "", "", _x(means["compile"]), "",
            _x(means["memory"]), f"{means['correct']}/{len(rows)}"]
    if load:
        foot += ["", "", _x(means["kiln_slowdown"]), _x(means["xla_slowdown"])]
    lines.append(foot)
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = []
    for i, line in enumerate(lines):
        if i == len(lines) - 1 or i == 1:
            out.append("  ".join("-" * w for w in widths))
        out.append("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip())
    notes = [f"  {r.model} / {p}: {m.status}: {m.reason}" for r in rows
             for p, m in r.results.items() if m.status != "ok"]
    if notes:
        out += ["", "failed:"] + notes
    return "\n".join(out)


def summary(rows: list[ModelRow]) -> dict:
    """Geometric means over the models both compilers ran, and the count of correct ones."""
    return {"speed": geomean([r.speed for r in rows]),
            "compile": geomean([r.compile_ratio for r in rows]),
            "memory": geomean([r.memory_ratio for r in rows]),
            "kiln_slowdown": geomean([r.results["kiln"].slowdown for r in rows
                                      if r.results["kiln"].status == "ok"]),
            "xla_slowdown": geomean([r.results["xla"].slowdown for r in rows
                                     if r.results["xla"].status == "ok"]),
            "correct": sum(1 for r in rows if r.correct)}


def to_json(rows: list[ModelRow], machine: dict) -> dict:
    return {"machine": machine,
            "models": [{"model": r.model, "note": r.note, "training": r.training,
                        "tol": list(r.tol), "correct": r.correct, "speed": r.speed,
                        "compile_ratio": r.compile_ratio, "memory_ratio": r.memory_ratio,
                        "results": {p: {**asdict(m), "slowdown": m.slowdown}
                                    for p, m in r.results.items()}} for r in rows],
            "geomean": summary(rows)}


def run(models: list[model_zoo.Model], *, budget_s: float = 5.0, load: bool = False,
        log=lambda s: None) -> list[ModelRow]:
    model_zoo.use_jax_backend()
    rows = []
    for model in models:
        log(f"[{model.name}] {model.note}")
        rows.append(measure(model, budget_s=budget_s, load=load, log=log))
        log(f"  = {row_line(rows[-1])}")
    return rows


def row_line(row: ModelRow) -> str:
    """One model's figures on one line (the progress log: a run cut short keeps them)."""
    k, x = row.results["kiln"], row.results["xla"]
    text = (f"kiln {_ms(k.median_s)} ms, xla {_ms(x.median_s)} ms ({_x(row.speed)}); compile "
            f"kiln {_s(k.compile_s)} s, xla {_s(x.compile_s)} s ({_x(row.compile_ratio)}); "
            f"memory {_x(row.memory_ratio)}; correct: {row.correct}")
    if k.loaded_s or x.loaded_s:
        text += f"; loaded slowdown kiln {_x(k.slowdown)}, xla {_x(x.slowdown)}"
    return text


def _main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] != "--child" or argv[1] not in PEERS:
        print("usage: python -m kiln.bench.models --child kiln|xla WORKDIR", file=sys.stderr)
        return 2
    print(json.dumps(child_main(argv[1], argv[2])), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
