"""`kiln bench --memory`: what a call needs in memory, Kiln beside XLA:CPU, per workload.

Each (workload, peer) runs in a fresh Python process, so that neither the other peer's
allocations nor earlier workloads' cached pages hide what this one needs. The child builds the
inputs, compiles, then measures two calls:

- **first call**: the resident high-water mark above the resident size just before the call
  (Linux VmHWM, reset through /proc/self/clear_refs). This is what a user sees the first time:
  outputs, temporaries and any pool or allocator growth;
- **steady call**: the same for a second call, once pools and allocators are warm.

Beside them the compilers' own accounts of temporaries: Kiln's buffer assignment (the static
arena of `Executable.buffer_assignment()`) and the peak its buffer pool had live during a call;
XLA's `memory_analysis()` (its buffer assignment's temp allocation).
"""
from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np

MB = 2 ** 20
# The "big" workloads by default: inputs and outputs of at least this many bytes together.
BIG_BYTES = 8 * MB


def _rss_kb(field_name: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    raise OSError(f"no {field_name} in /proc/self/status")


def _call_peak_mb(run) -> float:
    """MB resident above the pre-call size at the high-water mark of one call of `run`."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS
    before = _rss_kb("VmRSS")
    out = run()
    peak = _rss_kb("VmHWM")
    del out
    return max(0, peak - before) / 1024


def measure_here(workload, peer: str) -> dict:
    """In this process: compile `workload` on `peer` ('kiln' or 'xla') and measure one first
    and one steady call. Meant to run in a fresh process (see `measure`)."""
    fn, args, text = workload.build()
    result = {"workload": workload.name, "peer": peer,
              "io_mb": (sum(a.nbytes for a in args)) / MB}
    if peer == "kiln":
        import kiln
        from .peers import pool_peak
        exe = kiln.compile(text, filename=f"<bench:{workload.name}>")
        run = lambda: exe(*args)  # noqa: E731
        assignment = exe.buffer_assignment()
        result["static_temp_mb"] = assignment.temp_bytes / MB
        result["first_call_mb"] = _call_peak_mb(run)
        result["steady_call_mb"] = _call_peak_mb(run)
        result["pool_peak_mb"] = pool_peak(run)
    elif peer == "xla":
        import jax
        with workload.jax_mode():
            dev = [jax.device_put(a) for a in args]
            compiled = jax.jit(fn).lower(*dev).compile()
        stats = compiled.memory_analysis()

        def run():
            out = jax.tree_util.tree_leaves(compiled(*dev))
            jax.block_until_ready(out)
            return out
        result["static_temp_mb"] = stats.temp_size_in_bytes / MB
        result["first_call_mb"] = _call_peak_mb(run)
        result["steady_call_mb"] = _call_peak_mb(run)
    else:
        raise ValueError(f"--memory measures kiln and xla, not {peer!r}")
    return result


def measure(workload, peer: str, timeout_s: float = 600) -> dict:
    """`measure_here` in a fresh process; failures come back as {'error': why}."""
    try:
        proc = subprocess.run([sys.executable, "-m", "kiln.bench.memory", workload.name, peer],
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"workload": workload.name, "peer": peer, "error": f"timed out ({timeout_s:.0f} s)"}
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    if proc.returncode != 0 or not lines:
        why = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return {"workload": workload.name, "peer": peer, "error": why[:160]}
    return json.loads(lines[-1])


def big(workloads: list) -> list:
    """The workloads whose inputs and outputs together reach BIG_BYTES."""
    import jax
    picked = []
    for w in workloads:
        fn, args, _ = w.build()
        with w.jax_mode():
            outs = jax.eval_shape(fn, *args)
        out_bytes = sum(math.prod(o.shape) * np.dtype(o.dtype).itemsize
                        for o in jax.tree_util.tree_leaves(outs))
        if sum(a.nbytes for a in args) + out_bytes >= BIG_BYTES:
            picked.append(w)
    return picked


def table(results: list[tuple[dict, dict]]) -> str:
    head = ["workload", "inputs MB", "kiln 1st call", "xla 1st call", "kiln steady",
            "xla steady", "kiln temps (static/pool)", "xla temps", "1st call kiln/xla"]
    lines = [head]
    ratios = []
    for k, x in results:
        def cell(r, key):
            return r.get("error", "error")[:24] if "error" in r else f"{r[key]:.1f}"
        ratio = "-"
        if "error" not in k and "error" not in x and x["first_call_mb"] > 0.5:
            value = k["first_call_mb"] / x["first_call_mb"]
            ratio = f"{value:.2f}"
            if k["first_call_mb"] > 0.5:   # the geomean leaves out calls that add ~nothing
                ratios.append(value)
        temps = ("error" if "error" in k else
                 f"{k['static_temp_mb']:.1f}/" + (f"{k['pool_peak_mb']:.1f}"
                                                  if k.get("pool_peak_mb") is not None else "-"))
        io = k.get("io_mb", x.get("io_mb"))
        lines.append([k["workload"], f"{io:.1f}" if io is not None else "-",
                      cell(k, "first_call_mb"), cell(x, "first_call_mb"),
                      cell(k, "steady_call_mb"), cell(x, "steady_call_mb"), temps,
                      cell(x, "static_temp_mb"), ratio])
    widths = [max(len(l[i]) for l in lines) for i in range(len(head))]
    out = ["  ".join(c.ljust(w) for c, w in zip(l, widths)).rstrip() for l in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    if ratios:
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        out.append(f"MB resident a first call adds (fresh process per peer); geomean kiln/xla "
                   f"{geo:.2f} over the {len(ratios)} workloads where both add over 0.5 MB "
                   f"(below 1: Kiln needs less)")
    return "\n".join(out)


def _main(argv: list[str]) -> int:
    from .workloads import by_name
    name, peer = argv
    (workload,) = by_name([name])
    print(json.dumps(measure_here(workload, peer)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
