"""Ordinary JAX programs for the PJRT plugin tests (test_pjrt_jax.py).

Run as a script under JAX_PLATFORMS=kiln, it runs every case through Kiln's plugin and saves
the results (or the error) to an .npz file; the test runs the same cases on JAX's CPU backend
and compares. Each case is a function of no arguments returning a pytree of arrays; inputs come
from a seeded numpy generator so both runs see the same values.
"""
from __future__ import annotations

import sys
import threading

import numpy as np


def _rng():
    return np.random.default_rng(0)


def cases():
    import jax
    import jax.numpy as jnp
    import ml_dtypes

    r = _rng()
    a = r.standard_normal((5, 7)).astype(np.float32)
    b = r.standard_normal((7, 3)).astype(np.float32)
    sq = r.standard_normal((4, 4)).astype(np.float32)
    spd = (sq @ sq.T + 4 * np.eye(4)).astype(np.float32)
    big = r.standard_normal((6, 8, 10)).astype(np.float32)

    def scan_fn(xs):
        return jax.lax.scan(lambda c, x: (c + x, c * x), jnp.zeros(3), xs)

    def while_fn(n):
        return jax.lax.while_loop(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] * 1.5), (0, 1.0))

    return {
        "elementwise": lambda: jax.jit(lambda x: jnp.sin(x) * 2 + jnp.exp(-x * x))(a),
        "matmul": lambda: jax.jit(jnp.matmul)(a, b),
        "reductions": lambda: jax.jit(lambda x: (x.sum(0), x.max(1), jnp.argmin(x, 1),
                                                 x.mean()))(big),
        "several_outputs": lambda: jax.jit(lambda x, y: (x @ y, x.T, y.sum()))(a, b),
        # a transposed and a sliced (strided) input: BufferFromHostBuffer's byte strides
        "transposed_input": lambda: jax.jit(lambda x: x * 1.0)(a.T),
        "strided_input": lambda: jax.jit(lambda x: x + 0.0)(big[::2, 1::3, ::-1]),
        "device_put_roundtrip": lambda: np.asarray(jax.device_put(big.transpose(2, 0, 1))),
        "grad": lambda: jax.grad(lambda x: jnp.sum(jnp.tanh(x @ b) ** 2))(a),
        "vmap": lambda: jax.vmap(lambda x, y: jnp.dot(x, y), in_axes=(0, None))(big, big[0, 0]),
        "scan": lambda: jax.jit(scan_fn)(a[:, :3]),
        "while": lambda: jax.jit(while_fn)(7),
        "cond": lambda: jax.jit(lambda p, x: jax.lax.cond(p > 0, jnp.sin, jnp.cos, x))(1, a),
        "random": lambda: jax.random.normal(jax.random.key(42), (4, 5)),
        "random_uniform_bits": lambda: jax.random.bits(jax.random.key(7), (16,), jnp.uint32),
        "bf16": lambda: jax.jit(lambda x: x * 3 + 1)(a.astype(ml_dtypes.bfloat16)),
        "f16": lambda: jax.jit(lambda x: jnp.tanh(x))(a.astype(np.float16)),
        "f64": lambda: jax.jit(lambda x: x * 2)(a.astype(np.float64)),
        "c64": lambda: jax.jit(lambda x: x + jnp.conj(x))(a.astype(np.complex64)),
        "int8": lambda: jax.jit(lambda x: x * 3)(np.arange(-4, 4, dtype=np.int8)),
        "uint32": lambda: jax.jit(lambda x: x >> 1)(np.arange(8, dtype=np.uint32)),
        "bool": lambda: jax.jit(lambda x: jnp.logical_not(x))(a > 0),
        "empty": lambda: jax.jit(lambda x: x + 1)(np.zeros((0, 3), np.float32)),
        "scalar": lambda: jax.jit(lambda x: x * x)(np.float32(3.0)),
        "no_arguments": lambda: jax.jit(lambda: jnp.arange(5) * 2)(),
        "identity": lambda: jax.jit(lambda x: x)(a),
        "eigh": lambda: jnp.abs(jnp.linalg.eigh(spd)[0]),
        "svd": lambda: jnp.linalg.svd(sq, compute_uv=False),
        "qr_r": lambda: jnp.abs(jnp.linalg.qr(sq)[1]),
        "cholesky": lambda: jnp.linalg.cholesky(spd),
        "solve": lambda: jnp.linalg.solve(spd, a[:4, :2]),
        "fft": lambda: jnp.fft.fft(a),
        # tokens in and out of a jitted function: JAX passes an empty bool array for one and
        # wraps what comes back as a Token
        "tokens": lambda: _tokens(jax.jit(lambda t, x: (x * 2, jax.lax.after_all(t)))(
            jax.lax.create_token(), a)),
    }


def _tokens(outputs):
    from jax._src import core
    array, token = outputs
    return array, np.asarray(isinstance(token, core.Token))


def threads_case():
    """8 threads calling one jitted function at once: each checks its own results."""
    import jax
    import jax.numpy as jnp

    f = jax.jit(lambda x, k: jnp.sin(x) * k)
    inputs = [np.full((64, 32), i, np.float32) for i in range(8)]
    errors = []

    def work(i):
        try:
            for _ in range(10):
                got = np.asarray(f(inputs[i], np.float32(i)))
                want = np.sin(inputs[i]) * i
                if not np.allclose(got, want, rtol=1e-5, atol=1e-5):
                    errors.append(f"thread {i}: wrong values")
        except Exception as exc:  # noqa: BLE001 - reported to the test
            errors.append(f"thread {i}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def error_case() -> str:
    """A program Kiln cannot compile (a custom call it does not know): the error text."""
    import jax
    import jax.numpy as jnp

    def bad(x):
        return jax.ffi.ffi_call("kiln_test_no_such_target", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    try:
        jax.jit(bad)(jnp.ones(3))
    except Exception as exc:  # noqa: BLE001 - the test looks at the type and text
        return f"{type(exc).__name__}: {exc}"
    return "no error"


def donation_case() -> dict:
    """Donating an argument consumes its buffer (as on XLA), the other stays usable."""
    import jax
    import jax.numpy as jnp

    f = jax.jit(lambda x, y: (x + 1, y * 2), donate_argnums=(0,))
    x, y = jnp.arange(4.0), jnp.arange(4.0)
    a, b = f(x, y)
    try:
        x + 1
        reuse = "no error"
    except Exception as exc:  # noqa: BLE001 - the test looks at the text
        reuse = f"{type(exc).__name__}: {exc}"
    z = jnp.arange(4.0)
    try:  # the donated buffer passed twice in one call: refused, as XLA refuses it
        f(z, z)
        twice = "no error"
    except Exception as exc:  # noqa: BLE001 - the test looks at the type and text
        twice = f"{type(exc).__name__}: {exc}"
    try:  # a misspelt compiler option is refused; XLA's own (xla_*) are taken
        jax.jit(lambda v: v + 1, compiler_options={"exec_time_compilation_effort": 0.0})(z)
        misspelt = "no error"
    except Exception as exc:  # noqa: BLE001
        misspelt = f"{type(exc).__name__}: {exc}"
    xla_option = np.asarray(jax.jit(lambda v: v * 3, compiler_options={
        "xla_embed_ir_in_executable": True, "xla_dump_max_hlo_modules": 2})(z))
    return {"x_deleted": np.array(x.is_deleted()), "y_deleted": np.array(y.is_deleted()),
            "a": np.asarray(a), "b": np.asarray(b), "reuse": np.array(reuse),
            "twice": np.array(twice), "twice_z_alive": np.array(not z.is_deleted()),
            "misspelt": np.array(misspelt), "xla_option": xla_option}


def native_case() -> dict:
    """Plain programs run from C without Kiln's Python (runtime/pjrt/kiln_pjrt_direct.c); a
    run there that a custom call stops still reports the target's error, and the program
    after it runs on."""
    import jax
    import jax.numpy as jnp

    import kiln
    from kiln.pjrt import bridge

    f = jax.jit(lambda x, y: (x * 2 + y, jnp.sum(x)))
    x = jnp.arange(6.0, dtype=jnp.float32).reshape(2, 3)
    y = jnp.ones((2, 3), jnp.float32)
    f(x, y)
    before = bridge.counts["python_execute"]
    for _ in range(20):
        a, s = f(x, y)
    python_calls = bridge.counts["python_execute"] - before

    def fails(results, operands, *, attributes, backend_config):
        raise kiln.KilnError("kiln_test_fails was asked to fail")
    kiln.register_custom_call("kiln_test_fails", fails, api_version=4)
    g = jax.jit(lambda x: jax.ffi.ffi_call("kiln_test_fails",
                                           jax.ShapeDtypeStruct(x.shape, x.dtype))(x))
    g_python_calls = bridge.counts["python_execute"]
    try:
        g(x).block_until_ready()
        stop = "no error"
    except Exception as exc:  # noqa: BLE001 - the test looks at the type and text
        stop = f"{type(exc).__name__}: {exc}"
    python_calls += bridge.counts["python_execute"] - g_python_calls
    after, _ = f(x, y)
    return {"python_calls": np.array(python_calls), "a": np.asarray(a), "s": np.asarray(s),
            "stop": np.array(stop), "after": np.asarray(after)}


def main(out_path: str) -> None:
    import jax

    results = {"platform": np.array(jax.default_backend()),
               "devices": np.array([str(d) for d in jax.devices()])}
    for name, case in cases().items():
        try:
            leaves = jax.tree.leaves(case())
            for i, leaf in enumerate(leaves):
                results[f"{name}/{i}"] = np.asarray(leaf)
            results[f"{name}/count"] = np.array(len(leaves))
        except Exception as exc:  # noqa: BLE001 - recorded for the test to show
            results[f"{name}/error"] = np.array(f"{type(exc).__name__}: {exc}")
    results["threads/errors"] = np.array(threads_case() or [""])
    results["error/text"] = np.array(error_case())
    results.update({f"donation/{k}": v for k, v in donation_case().items()})
    results.update({f"native/{k}": v for k, v in native_case().items()})
    # npz keeps numpy's own dtypes only: bfloat16 results go as float32 (exact)
    np.savez(out_path, **{k: v.astype(np.float32) if str(v.dtype) == "bfloat16" else v
                          for k, v in results.items()})


if __name__ == "__main__":
    main(sys.argv[1])
