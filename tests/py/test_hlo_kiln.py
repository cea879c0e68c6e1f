"""HLO text from JAX, both before optimization and after (fusions, layouts), compiled to native
code by Kiln and compared with JAX's own results."""
from __future__ import annotations

import numpy as np
import pytest

import kiln

jax = pytest.importorskip("jax", reason="jax is not installed")
jnp = jax.numpy
from jax import lax  # noqa: E402

rng = np.random.default_rng(7)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def mlp_loss(params, x):
    w1, b1, w2 = params
    h = jax.nn.relu(x @ w1 + b1)
    return jnp.mean(jnp.tanh(h @ w2) ** 2)


def mlp_train_step(w1, b1, w2, x):
    loss, grads = jax.value_and_grad(mlp_loss)((w1, b1, w2), x)
    return (loss, *grads)


def cnn(x, k):
    y = lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y = jax.nn.relu(y)
    return lax.reduce_window(y, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0


def cnn_grad(x, k):
    return jax.grad(lambda k: jnp.sum(cnn(x, k) ** 2))(k)


def attention(q, k, v):
    s = jnp.einsum("bqd,bkd->bqk", q, k) / np.float32(np.sqrt(q.shape[-1]))
    return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, axis=-1), v)


def elementwise(x, y):
    return (jnp.exp(x) * jnp.sin(y) + jnp.maximum(x, y) - jnp.abs(x) / (1 + y * y),
            jnp.where(x > y, x, y).astype(jnp.int32), jnp.sum(x, axis=0))


def lstm(xs, h0, w):
    def cell(h, x):
        h = jnp.tanh(jnp.concatenate([h, x]) @ w)
        return h, h
    return lax.scan(cell, h0, xs)


def sort_ops(x, k):
    return jnp.sort(x, axis=-1), jnp.argsort(k), lax.top_k(x, 3)[0]


def scatter_ops(x, idx, upd):
    return x.at[idx].add(upd), x.at[idx].set(upd), x[idx]


def fft_ops(x):
    return jnp.fft.fft(x).real, jnp.fft.irfft(jnp.fft.rfft(x), n=x.shape[-1])


def random_ops(seed):
    key = jax.random.key(seed)
    return jax.random.uniform(key, (4, 5)), jax.random.bits(jax.random.fold_in(key, 3), (7,))


PROGRAMS = {
    "lstm_scan": (lstm, lambda: (randn(6, 3), randn(4), randn(7, 4))),
    "sort": (sort_ops, lambda: (randn(4, 9), rng.integers(0, 5, 10).astype(np.int32))),
    "scatter": (scatter_ops, lambda: (randn(6, 3), np.array([4, 0, 4], np.int32), randn(3, 3))),
    "fft": (fft_ops, lambda: (randn(3, 10),)),
    "random_threefry": (random_ops, lambda: (np.uint32(42),)),
    "mlp_train_step": (mlp_train_step, lambda: (randn(8, 16), randn(16), randn(16, 4), randn(5, 8))),
    "cnn_forward": (cnn, lambda: (randn(2, 8, 8, 3), randn(3, 3, 3, 4))),
    "cnn_gradient": (cnn_grad, lambda: (randn(2, 8, 8, 3), randn(3, 3, 3, 4))),
    "attention": (attention, lambda: (randn(2, 6, 8), randn(2, 5, 8), randn(2, 5, 8))),
    "elementwise": (elementwise, lambda: (randn(4, 6), randn(4, 6))),
}


@pytest.mark.parametrize("dump", ["hlo", "optimized"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_jax_hlo_runs_natively(name, dump, tmp_path):
    f, make_args = PROGRAMS[name]
    args = make_args()
    lowered = jax.jit(f).lower(*args)
    compiled = lowered.compile()
    expected = [np.asarray(e) for e in jax.tree_util.tree_leaves(compiled(*args))]
    text = lowered.as_text(dialect="hlo") if dump == "hlo" else compiled.as_text()
    path = tmp_path / f"{name}.{dump}.txt"  # content, not the suffix, says it is HLO
    path.write_text(text)
    got = kiln.compile(path)(*args)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        if e.dtype.kind in "iub":
            np.testing.assert_array_equal(g, e)
        else:
            np.testing.assert_allclose(g, e, rtol=2e-5, atol=2e-5)
