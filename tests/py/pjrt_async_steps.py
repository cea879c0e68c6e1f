"""Concurrent calls through Kiln's PJRT plugin, run as a script under JAX_PLATFORMS=kiln by
test_pjrt_async.py; prints one JSON object of what it saw.

8 Python threads at once, each: compiles a program of its own (a shape only it uses) while the
others run; calls one shared jitted function on its own inputs, feeding its results to a second
function (a result buffer used as an argument); donates a buffer of its own; waits with
block_until_ready. Every thread checks its values against numpy.
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
    return seen


if __name__ == "__main__":
    print(json.dumps(main()))
