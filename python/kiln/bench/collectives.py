"""`kiln bench --collectives`: a large all_reduce on 2 devices, Kiln against JAX, same run.

Four ways, each timed as the median of several calls of one compiled program:
- kiln/threads: two devices as threads of one process (distributed/fabric.py);
- xla/threads: JAX's psum on two forced host devices of one process;
- kiln/mpi: `mpiexec -n 2`, one device per rank, MPI_Allreduce underneath (distributed/mpi.py);
- xla/gloo: two JAX processes joined by jax.distributed, XLA:CPU's collectives over gloo (TCP).
Each runs in its own process(es), so that JAX's device count and MPI's launch stay apart;
results are checked (every element equals the sum of the inputs).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROUNDS = 7


def _program(count: int) -> str:
    return f"""module attributes {{mhlo.num_replicas = 1 : i32, mhlo.num_partitions = 2 : i32}} {{
  func.func @main(%x: tensor<{count}xf32>) -> tensor<{count}xf32> {{
    %r = "stablehlo.all_reduce"(%x) ({{
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %s = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }}) {{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>,
          channel_handle = #stablehlo.channel_handle<handle = 1, type = 0>,
          use_global_device_ids}} : (tensor<{count}xf32>) -> tensor<{count}xf32>
    return %r : tensor<{count}xf32>
  }}
}}"""


def _inputs(count: int, rank: int) -> np.ndarray:
    return np.full(count, rank + 1, np.float32)


def _median(run) -> tuple[float, object]:
    out = run()  # warm up
    samples = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        out = run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), out


# ---- the workers (each in its own process) -------------------------------------------------

def kiln_threads(count: int) -> dict:
    import kiln
    exe = kiln.compile(_program(count), filename="<bench:all_reduce>")
    args = [[_inputs(count, 0)], [_inputs(count, 1)]]
    seconds, out = _median(lambda: exe.run_devices(args))
    return {"seconds": seconds, "ok": bool(np.all(out[0][0] == 3) and np.all(out[1][0] == 3))}


def kiln_mpi(count: int) -> dict:
    import kiln
    from kiln.distributed import mpi
    comm = mpi.world().COMM_WORLD
    exe = kiln.compile(_program(count), filename="<bench:all_reduce>")
    x = _inputs(count, comm.rank)
    from kiln.distributed.collectives import on_device
    fabric = exe.fabric

    def once():  # this rank's device only: the collective, not the gathering of results
        comm.Barrier()
        with on_device(fabric, comm.rank):
            return exe.device_call([x])
    seconds, out = _median(once)
    ok = bool(np.all(out[0] == 3))
    return {"seconds": seconds, "ok": ok, "rank": comm.rank}


def xla_threads(count: int) -> dict:
    import jax
    import jax.numpy as jnp  # noqa: F401
    from jax.sharding import NamedSharding, PartitionSpec as P
    mesh = jax.make_mesh((2,), ("x",))
    f = jax.jit(jax.shard_map(lambda a: jax.lax.psum(a, "x"), mesh=mesh, in_specs=P("x"),
                              out_specs=P("x")))
    x = jax.device_put(np.concatenate([_inputs(count, 0), _inputs(count, 1)]),
                       NamedSharding(mesh, P("x")))
    seconds, out = _median(lambda: f(x).block_until_ready())
    return {"seconds": seconds, "ok": bool(np.all(np.asarray(out) == 3))}


def xla_gloo(count: int, rank: int, port: int) -> dict:
    import jax
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2,
                               process_id=rank)
    from jax.sharding import NamedSharding, PartitionSpec as P
    mesh = jax.make_mesh((2,), ("x",))
    f = jax.jit(jax.shard_map(lambda a: jax.lax.psum(a, "x"), mesh=mesh, in_specs=P("x"),
                              out_specs=P("x")))
    sharding = NamedSharding(mesh, P("x"))
    local = _inputs(count, rank)
    x = jax.make_array_from_process_local_data(sharding, local, (2 * count,))
    seconds, out = _median(lambda: f(x).block_until_ready())
    ok = all(bool(np.all(np.asarray(s.data) == 3)) for s in out.addressable_shards)
    jax.distributed.shutdown()
    return {"seconds": seconds, "ok": ok, "rank": rank}


# ---- the driver -------------------------------------------------------------------------------

def _run(cmd: list[str], env: dict | None = None, timeout: float = 600) -> list[dict]:
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    lines = [json.loads(l) for l in done.stdout.splitlines() if l.startswith("{")]
    if done.returncode != 0 or not lines:
        return [{"error": (done.stderr.strip().splitlines() or ["failed"])[-1][:200]}]
    return lines


def _worker(kind: str, count: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "kiln.bench.collectives", "--worker", kind, str(count), *extra]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(megabytes: float = 64.0) -> dict:
    count = int(megabytes * 2 ** 20 / 4)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    results = {"megabytes": megabytes}
    results["kiln/threads"] = _run(_worker("kiln-threads", count), env)[0]
    results["xla/threads"] = _run(_worker("xla-threads", count),
                                  {**env, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"})[0]
    mpiexec = shutil.which("mpiexec") or str(Path(sys.executable).parent / "mpiexec")
    if Path(mpiexec).exists():
        ranks = _run([mpiexec, "-n", "2", "-iface", "lo", *_worker("kiln-mpi", count)], env)
        results["kiln/mpi"] = max(ranks, key=lambda r: r.get("seconds", 0))
    else:
        results["kiln/mpi"] = {"error": "mpiexec not found (pip install 'kiln[mpi]')"}
    port = _free_port()
    procs = [subprocess.Popen(_worker("xla-gloo", count, str(rank), str(port)), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for rank in range(2)]
    outs = []
    for p in procs:
        try:
            stdout, stderr = p.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            p.kill()
            stdout, stderr = "", "timed out"
        lines = [json.loads(l) for l in stdout.splitlines() if l.startswith("{")]
        outs.append(lines[0] if lines else {"error": (stderr.strip().splitlines() or ["failed"])[-1][:200]})
    results["xla/gloo"] = max(outs, key=lambda r: r.get("seconds", 0))
    return results


def table(results: dict) -> str:
    mb = results["megabytes"]
    lines = [f"all_reduce (sum) of {mb:g} MB f32 between 2 devices: median of {ROUNDS} calls",
             f"{'way':14} {'time':>10} {'GB/s':>8}  check"]
    for key in ("kiln/threads", "xla/threads", "kiln/mpi", "xla/gloo"):
        r = results.get(key, {})
        if "seconds" in r:
            lines.append(f"{key:14} {r['seconds'] * 1e3:9.1f}ms {mb / 1024 / r['seconds']:8.2f}  "
                         + ("ok" if r.get("ok") else "WRONG RESULT"))
        else:
            lines.append(f"{key:14} {'-':>10} {'-':>8}  {r.get('error', 'not run')}")

    def ratio(a, b):
        ra, rb = results.get(a, {}), results.get(b, {})
        return f"{rb['seconds'] / ra['seconds']:.2f}x" if "seconds" in ra and "seconds" in rb else "-"
    lines.append(f"kiln/threads vs xla/threads: {ratio('kiln/threads', 'xla/threads')}   "
                 f"kiln/mpi vs xla/gloo: {ratio('kiln/mpi', 'xla/gloo')}  (>1: Kiln faster)")
    return "\n".join(lines)


def _main(argv: list[str]) -> None:
    kind, count = argv[1], int(argv[2])
    if kind == "kiln-threads":
        out = kiln_threads(count)
    elif kind == "kiln-mpi":
        out = kiln_mpi(count)
    elif kind == "xla-threads":
        out = xla_threads(count)
    else:
        out = xla_gloo(count, int(argv[3]), int(argv[4]))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _main(sys.argv[1:])
