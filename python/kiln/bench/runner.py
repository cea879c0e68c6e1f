"""Measure every workload on every peer in one process, interleaved, and tabulate.

Per workload: compile on each peer (timed), warm up, check each peer's outputs against the
reference peer (XLA when present), then time calls in rounds across peers, a block of calls per
peer per round (the first of each block not kept), so that noise from other processes hits
all of them alike; report the median. Peak memory is the process's
resident high-water mark above the resident size before the call (Linux: VmHWM, reset via
/proc/self/clear_refs), i.e. what one call needed beyond inputs and code; for Kiln also the
peak of temporaries live at once in its buffer pool (runtime/kiln_parallel.c).
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .peers import Peer, all_peers, timed
from .workloads import Workload

BLOCK = 4  # calls per peer per round of timing (see `measure`)


@dataclass
class Measurement:
    peer: str
    status: str = "ok"            # ok | missing | skipped | unsupported | error | mismatch
    reason: str = ""
    compile_s: float | None = None
    median_s: float | None = None
    rate: float | None = None     # GFLOP/s or GB/s
    peak_mb: float | None = None
    temp_mb: float | None = None  # Kiln only: peak live temporaries in its buffer pool
    max_err: float | None = None  # max |kiln - reference| relative to the tolerance, if checked
    samples: list[float] = field(default_factory=list)


@dataclass
class Row:
    workload: str
    note: str
    unit: str
    tol: tuple
    results: dict[str, Measurement] = field(default_factory=dict)

    def ratio(self, peer: str, base: str = "kiln") -> float | None:
        """Throughput of `base` over `peer` (>1: base is faster)."""
        a, b = self.results.get(base), self.results.get(peer)
        if a and b and a.status == "ok" and b.status == "ok" and a.median_s and b.median_s:
            return b.median_s / a.median_s
        return None


def _rss_kb(field_name: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _first_line(exc: BaseException) -> str:
    text = getattr(exc, "one_line", None)
    text = text() if callable(text) else str(exc)
    return (text.strip().splitlines() or [type(exc).__name__])[0][:160]


def compare(outs, ref, tol) -> tuple[bool, float, str]:
    """Every output within rtol/atol of the reference; returns (ok, worst err/allowed, why)."""
    rtol, atol = tol
    outs, ref = list(outs), list(ref)
    if len(outs) != len(ref):
        return False, math.inf, f"{len(outs)} outputs, reference has {len(ref)}"
    worst = 0.0
    for i, (a, b) in enumerate(zip(outs, ref)):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return False, math.inf, f"output {i} shape {a.shape} != {b.shape}"
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        same_special = (np.isnan(a64) & np.isnan(b64)) | (a64 == b64)
        allowed = atol + rtol * np.abs(b64)
        err = np.where(same_special, 0.0, np.abs(a64 - b64))
        ratio = float(np.max(err / np.maximum(allowed, 1e-300))) if err.size else 0.0
        worst = max(worst, ratio)
    return worst <= 1.0, worst, "" if worst <= 1.0 else f"error {worst:.3g}x the tolerance"


def measure(workload: Workload, peers: list[Peer], *, budget_s: float = 3.0, min_rounds: int = 5,
            max_rounds: int = 100, log=lambda s: None) -> Row:
    row = Row(workload.name, workload.note, workload.unit, workload.tol)
    runners = {}
    try:
        workload.build()
    except Exception as exc:  # jax could not even produce the program: nothing to compare
        for p in peers:
            row.results[p.name] = Measurement(p.name, "error", f"jax lowering: {_first_line(exc)}")
        return row
    for p in peers:
        m = row.results[p.name] = Measurement(p.name)
        if p.missing:
            m.status, m.reason = "missing", p.missing
            continue
        if p.name in workload.skip:
            m.status, m.reason = "skipped", workload.skip[p.name]
            continue
        start = time.perf_counter()
        try:
            runners[p.name] = p.compile(workload)
            m.compile_s = time.perf_counter() - start
        except Exception as exc:
            from ..errors import KilnError
            from .peers import NotApplicable
            # A KilnError is Kiln declining the program (an op it cannot lower yet); anything
            # else is a bug, shown as such.
            m.status = "unsupported" if isinstance(exc, KilnError) else \
                "n/a" if isinstance(exc, NotApplicable) else "error"
            m.reason = _first_line(exc)
            if m.status != "n/a":
                log(f"  {p.name}: {m.status}: {m.reason}")
    outputs = {}
    for name, run in list(runners.items()):  # warm up (twice) and keep outputs for checking
        try:
            run()
            outputs[name] = run()
        except Exception as exc:
            row.results[name].status, row.results[name].reason = "error", _first_line(exc)
            del runners[name]
    ref_name = next((n for n in ("xla", "iree") if n in outputs), None)
    if ref_name:
        for name in list(runners):
            if name == ref_name:
                continue
            ok, worst, why = compare(outputs[name], outputs[ref_name], workload.tol)
            row.results[name].max_err = worst
            if not ok:
                row.results[name].status = "mismatch"
                row.results[name].reason = f"vs {ref_name}: {why}"
    # Interleaved timing, in blocks: each round gives every peer BLOCK calls in a row and
    # keeps all but the first. Alternating single calls measured each peer just after the
    # other: caches full of the other's buffers, its thread pool still spinning on the cores
    # (gelu: Kiln 2x and XLA 1.5x slower than either alone). A block's later calls are the
    # steady state a program calling one executable sees; rounds still alternate, so noise
    # from other processes hits all peers alike.
    per_call = sum(timed(r) for r in runners.values()) or 1e-3
    rounds = int(min(max_rounds, max(min_rounds, budget_s / (per_call * BLOCK))))
    samples = {n: [] for n in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            run()  # the block's first call: after the other peer, not kept
            samples[name].extend(timed(run) for _ in range(BLOCK - 1))
    for name, run in runners.items():
        m = row.results[name]
        m.samples = samples[name]
        m.median_s = statistics.median(samples[name])
        m.rate = workload.rate(m.median_s)
        if name == "kiln":
            from .peers import pool_peak
            m.temp_mb = pool_peak(run)
        if _reset_hwm():
            base = _rss_kb("VmRSS")
            run()
            hwm = _rss_kb("VmHWM")
            if base is not None and hwm is not None:
                m.peak_mb = max(0, hwm - base) / 1024
    return row


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def _fmt_time(s):
    return "-" if s is None else (f"{s * 1e3:.2f}ms" if s < 10 else f"{s:.1f}s")


def _shows_plugin(peers: list[str]) -> bool:
    """Whether the pjrt/xla ratio is shown: Kiln through the PJRT plugin against XLA, the
    ratio a JAX user sees."""
    return "pjrt" in peers and "xla" in peers


def table(rows: list[Row], peers: list[str]) -> str:
    others = [p for p in peers if p != "kiln"]
    plugin = ["pjrt/xla"] if _shows_plugin(peers) else []
    head = ["workload", "unit"] + [f"{p} time" for p in peers] + [f"{p} rate" for p in peers] \
        + [f"kiln/{p}" for p in others] + plugin \
        + ["check", "kiln compile", "kiln RSS+ MB", "kiln temps MB"]
    lines = [head]
    for r in rows:
        cells = [r.workload, r.unit]
        for p in peers:
            m = r.results.get(p)
            cells.append(_status_cell(m) if m.status not in ("ok", "mismatch") else _fmt_time(m.median_s))
        for p in peers:
            m = r.results.get(p)
            cells.append(f"{m.rate:.3g}" if m.rate is not None else "-")
        for p in others:
            ratio = r.ratio(p)
            cells.append(f"{ratio:.2f}x" if ratio is not None else "-")
        if plugin:
            ratio = r.ratio("xla", base="pjrt")
            cells.append(f"{ratio:.2f}x" if ratio is not None else "-")
        k = r.results.get("kiln")
        if k.status == "mismatch":
            cells.append(f"FAIL ({k.reason})")
        elif k.max_err is not None:
            cells.append(f"ok (rtol={r.tol[0]:g} atol={r.tol[1]:g}, err {k.max_err:.2f}x tol)")
        else:
            cells.append("-")
        cells.append(f"{k.compile_s:.2f}s" if k.compile_s is not None else "-")
        cells.append(f"{k.peak_mb:.0f}" if k.peak_mb is not None else "-")
        cells.append(f"{k.temp_mb:.1f}" if k.temp_mb is not None else "-")
        lines.append(cells)
    foot = ["geomean", ""] + [""] * (2 * len(peers))
    pairs = [(p, "kiln") for p in others] + [("xla", "pjrt")] * len(plugin)
    for p, base in pairs:
        found = [r.ratio(p, base) for r in rows if r.ratio(p, base)]
        g = geomean(found)
        foot.append(f"{g:.2f}x ({len(found)})" if g else "-")
    lines.append(foot + ["", "", "", ""])
    widths = [max(len(l[i]) for l in lines) for i in range(len(head))]
    out = []
    for i, l in enumerate(lines):
        out.append("  ".join(c.ljust(w) for c, w in zip(l, widths)).rstrip())
        if i == 0 or i == len(lines) - 2:
            out.append("  ".join("-" * w for w in widths))
    notes = []
    for r in rows:
        for p in peers:
            m = r.results[p]
            if m.status not in ("ok", "n/a") and m.reason:
                notes.append(f"  {r.workload} / {p}: {m.status}: {m.reason}")
    if notes:
        out.append("")
        out.append("not measured / failed:")
        out.extend(dict.fromkeys(notes))
    return "\n".join(out)


def _status_cell(m):
    return m.status


def to_json(rows: list[Row], peers: list[str], machine: dict) -> dict:
    others = [p for p in peers if p != "kiln"]
    return {
        "machine": machine,
        "workloads": [{"workload": r.workload, "note": r.note, "unit": r.unit, "tol": list(r.tol),
                       "results": {k: asdict(v) for k, v in r.results.items()},
                       "ratios": {p: r.ratio(p) for p in others}} for r in rows],
        "geomean": {p: geomean([r.ratio(p) for r in rows if r.ratio(p)]) for p in others},
        **({"pjrt/xla": geomean([r.ratio("xla", "pjrt") for r in rows
                                 if r.ratio("xla", "pjrt")])}
           if _shows_plugin(peers) else {}),
    }


def rows_from_json(data: dict) -> list[Row]:
    """The rows of a `--json` report, to print its table again."""
    rows = []
    for w in data["workloads"]:
        row = Row(w["workload"], w["note"], w["unit"], tuple(w["tol"]))
        row.results = {k: Measurement(**v) for k, v in w["results"].items()}
        rows.append(row)
    return rows


def run(workloads: list[Workload], peers: list[Peer] | None = None, **kw) -> list[Row]:
    peers = peers or all_peers()
    return [measure(w, peers, **kw) for w in workloads]
