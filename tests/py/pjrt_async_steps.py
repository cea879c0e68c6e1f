"""Concurrent calls through Kiln's PJRT plugin, run as a script under JAX_PLATFORMS=kiln by
test_pjrt_async.py; prints one JSON object of what it saw.

8 Python threads at once, each: compiles a program of its own (a shape only it uses) while the
others run; calls one shared jitted function on its own inputs, feeding its results to a second
function (a result buffer used as an argument); donates a buffer of its own; waits with
block_until_ready. Every thread checks its values against numpy.

Then runs big enough to be queued (Execute returns before they are done): a chain of them,
results fed back while still being written, from 4 threads at once; a donated argument that
is still being written; results dropped before they are; a failing queued run, whose error
comes with the result; and how long dispatching took against the runs.
"""
from __future__ import annotations

import json
import threading

import numpy as np

THREADS = 8
ROUNDS = 6


def main() -> dict:
    import jax
    import jax.numpy as jnp

    shared = jax.jit(lambda x, k: jnp.sin(x) * k + x.T.sum())
    follow = jax.jit(lambda y: (y @ y.T, y.max()))
    donating = jax.jit(lambda a, b: a * 2 + b, donate_argnums=(0,))
    errors: list[str] = []
    seen = {"ready_after_block": [], "donated_deleted": []}
    start = threading.Barrier(THREADS)

    def work(i: int) -> None:
        try:
            rng = np.random.default_rng(i)
            x = rng.standard_normal((16, 16)).astype(np.float32)
            k = np.float32(i + 1)
            start.wait()  # all threads enter JAX at once
            own = jax.jit(lambda v: jnp.cumsum(v * (i + 1)))  # a program only this thread has
            v = np.arange(i + 3, dtype=np.float32)
            for _ in range(ROUNDS):
                y = shared(jax.device_put(x), k)
                square, top = follow(y)  # y is a result buffer, used as an argument
                square.block_until_ready()
                seen["ready_after_block"].append(bool(square.is_ready()))
                want_y = np.sin(x) * k + x.T.sum()
                if not np.allclose(np.asarray(y), want_y, rtol=1e-5, atol=1e-4):
                    errors.append(f"thread {i}: shared result wrong")
                if not np.allclose(np.asarray(square), want_y @ want_y.T, rtol=1e-4, atol=1e-3) \
                        or not np.isclose(float(top), want_y.max(), rtol=1e-5):
                    errors.append(f"thread {i}: chained result wrong")
                if not np.allclose(np.asarray(own(v)), np.cumsum(v * (i + 1)), rtol=1e-6):
                    errors.append(f"thread {i}: own program wrong")
                a = jnp.full((8,), float(i))
                b = jnp.arange(8.0)
                out = donating(a, b).block_until_ready()
                seen["donated_deleted"].append(bool(a.is_deleted()) and not b.is_deleted())
                if not np.array_equal(np.asarray(out), np.full(8, 2.0 * i) + np.arange(8.0)):
                    errors.append(f"thread {i}: donated call wrong")
        except Exception as exc:  # noqa: BLE001 - reported to the test
            errors.append(f"thread {i}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    seen["hung"] = sum(t.is_alive() for t in threads)
    seen["errors"] = errors
    seen["platform"] = jax.devices()[0].platform
    seen.update(queued_runs(jax, jnp))
    return seen


def queued_runs(jax, jnp) -> dict:
    import time

    import kiln
    out: dict = {"queued_errors": []}
    n = 384  # 576 KiB an array: a run over two of them and its result is queued
    step = jax.jit(lambda a: jnp.tanh(a @ a) * 0.5 + a * 0.25)

    def want_chain(a, count):
        for _ in range(count):
            a = np.tanh(a @ a) * 0.5 + a * 0.25
        return a

    def chain(i: int) -> None:
        try:
            a0 = np.random.default_rng(100 + i).standard_normal((n, n)).astype(np.float32) / n
            z = jax.device_put(a0)
            for _ in range(4):
                z = step(z)  # z is still being written when it is passed again
            if not np.allclose(np.asarray(z), want_chain(a0.astype(np.float64), 4),
                               rtol=1e-4, atol=1e-5):
                out["queued_errors"].append(f"chain {i} wrong")
        except Exception as exc:  # noqa: BLE001 - reported to the test
            out["queued_errors"].append(f"chain {i}: {type(exc).__name__}: {exc}")

    chain(0)  # compiled once, before the threads
    threads = [threading.Thread(target=chain, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    out["queued_hung"] = sum(t.is_alive() for t in threads)

    x = jnp.full((n, n), 1.0 / n, jnp.float32)
    step(x).block_until_ready()
    start = time.perf_counter()
    results = [step(x) for _ in range(12)]
    dispatched = time.perf_counter() - start
    for r in results:
        r.block_until_ready()
    out["dispatch_s"], out["total_s"] = dispatched, time.perf_counter() - start

    for _ in range(6):  # results dropped while their runs are queued
        step(x)
    donating = jax.jit(lambda a, b: a * 2 + b, donate_argnums=(0,))
    pending = step(x)
    doubled = donating(pending, x)
    out["donated_pending_deleted"] = bool(pending.is_deleted())
    want = want_chain(np.full((n, n), 1.0 / n), 1)
    out["donated_pending_right"] = bool(np.allclose(np.asarray(doubled), want * 2 + 1.0 / n,
                                                    rtol=1e-5))

    def fails(results, operands, *, attributes, backend_config):
        raise kiln.KilnError("kiln_test_queued_fails was asked to fail")
    kiln.register_custom_call("kiln_test_queued_fails", fails, api_version=4)
    bad = jax.jit(lambda v: jax.ffi.ffi_call(
        "kiln_test_queued_fails", jax.ShapeDtypeStruct(v.shape, v.dtype))(v @ v))
    try:
        np.asarray(step(bad(x)))  # the failure reaches a run that reads the failed result
        out["queued_failure"] = "no error"
    except Exception as exc:  # noqa: BLE001 - the test looks at the type and text
        out["queued_failure"] = f"{type(exc).__name__}: {exc}"
    out["after_failure_right"] = bool(np.allclose(np.asarray(step(x)), want, rtol=1e-5))
    return out


if __name__ == "__main__":
    print(json.dumps(main()))
