"""kiln.jit: JAX functions traced by jax, compiled and run by Kiln (kiln/jit.py)."""
from __future__ import annotations

import numpy as np
import pytest

import kiln

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

F32 = np.float32


def test_pytrees_numpy_results_and_one_compile_per_signature(rng):
    @kiln.jit
    def layer(p, x, *, act=None):
        y = x @ p["w"] + p["b"]
        return {"y": jnp.tanh(y), "norm": (jnp.sum(y * y),)}
    p = {"w": rng.standard_normal((4, 3)).astype(F32), "b": rng.standard_normal(3).astype(F32)}
    for batch in (2, 5, 2, 5, 2):
        x = rng.standard_normal((batch, 4)).astype(F32)
        out = layer(p, x)
        assert isinstance(out["y"], np.ndarray) and isinstance(out["norm"], tuple)
        y = x @ p["w"] + p["b"]
        np.testing.assert_allclose(out["y"], np.tanh(y), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out["norm"][0], np.sum(y * y), rtol=1e-5)
    assert layer.compile_count == 2
    layer(p, rng.standard_normal((2, 4)))  # float64 becomes float32 as in JAX: same signature
    assert layer.compile_count == 2
    layer({"w": p["w"].astype(np.float16), "b": p["b"]}, np.ones((2, 4), np.float16))
    assert layer.compile_count == 3  # a new dtype is a new signature
    assert layer.__name__ == "layer"


def test_return_jax_gives_jax_arrays():
    f = kiln.jit(lambda x: (jnp.cumsum(x), x * 2), return_jax=True)
    a, b = f(np.arange(4, dtype=F32))
    assert isinstance(a, jax.Array) and isinstance(b, jax.Array)
    np.testing.assert_array_equal(np.asarray(a), [0, 1, 3, 6])


def test_composes_with_grad_and_vmap(rng):
    def loss(w, x, y):
        return jnp.mean((jnp.tanh(x @ w) - y) ** 2)
    w, x, y = (rng.standard_normal(s).astype(F32) for s in ((3, 2), (6, 3), (6, 2)))
    grad = kiln.jit(jax.grad(loss))
    np.testing.assert_allclose(grad(w, x, y), jax.grad(loss)(w, x, y), rtol=1e-5, atol=1e-6)
    value_and_grad = kiln.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    v, (gw, gx) = value_and_grad(w, x, y)
    want_v, (want_gw, want_gx) = jax.value_and_grad(loss, argnums=(0, 1))(w, x, y)
    np.testing.assert_allclose(v, want_v, rtol=1e-5)
    np.testing.assert_allclose(gx, want_gx, rtol=1e-5, atol=1e-6)
    batched = kiln.jit(jax.vmap(lambda a, b: jnp.dot(a, b), in_axes=(0, None)))
    np.testing.assert_allclose(batched(x, w[:, 0]), x @ w[:, 0], rtol=1e-5, atol=1e-6)
    per_example = kiln.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))
    got = per_example(w, x[:, None, :], y[:, None, :])
    want = jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(w, x[:, None, :], y[:, None, :])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_static_argnums_and_python_scalars():
    @kiln.jit(static_argnums=(1,))
    def power(x, n, scale):
        return x ** n * scale
    x = np.arange(4, dtype=F32)
    np.testing.assert_array_equal(power(x, 2, 3.0), x ** 2 * 3)
    np.testing.assert_array_equal(power(x, 3, 1.0), x ** 3)
    np.testing.assert_array_equal(power(x, 3, 2.0), x ** 3 * 2)
    assert power.compile_count == 2  # one per static value; the float scalar is traced


def test_unused_arguments_and_integer_outputs():
    f = kiln.jit(lambda x, unused, k: (jnp.argsort(x), x.astype(jnp.int32) + k))
    order, ints = f(np.array([3.0, 1.0, 2.0], F32), np.zeros(7, F32), np.int32(5))
    np.testing.assert_array_equal(order, [1, 2, 0])
    np.testing.assert_array_equal(ints, [8, 6, 7])
    assert ints.dtype == np.int32


def test_trace_errors_are_kiln_errors():
    f = kiln.jit(lambda x, n: jnp.zeros(n) + x)
    with pytest.raises(kiln.KilnError, match="static_argnums"):
        f(np.ones(3, F32), np.int32(3))


def test_transforming_the_kiln_function_is_a_clear_error():
    f = kiln.jit(lambda x: jnp.sum(jnp.sin(x)))
    with pytest.raises(kiln.KilnError, match="inside a JAX transformation"):
        jax.grad(f)(np.ones(3, F32))
