"""The JAX programs Kiln's tests export (tests/py/test_jax_corpus.py, test_jax_export.py), as
(function, inputs) pairs for the compile-time benchmark: small models, control flow, data
movement, integer and float types, LAPACK calls, special functions.

Kept here, not imported from the tests, so that the benchmark runs from an installed Kiln.
Each entry's inputs are made from a generator seeded by its name, like the tests' are.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

F32 = np.float32


@dataclass(frozen=True)
class JaxProgram:
    name: str
    make: Callable[[], tuple[Callable, tuple]]   # -> (jax function, inputs)


def _normal(rng, *shape):
    return rng.standard_normal(shape).astype(F32)


def _spd(rng, n):
    x = _normal(rng, n, n)
    return x @ x.T + n * np.eye(n, dtype=F32)


def _rng(name: str):
    return np.random.default_rng(zlib.crc32(name.encode()))


# -- models -------------------------------------------------------------------------------------
def _mlp_params(rng):
    return {"w1": _normal(rng, 8, 16) * 0.3, "b1": _normal(rng, 16), "w2": _normal(rng, 16, 4) * 0.3,
            "b2": _normal(rng, 4)}


def _mlp(p, x):
    import jax
    h = jax.nn.relu(x @ p["w1"] + p["b1"])
    return jax.nn.log_softmax(h @ p["w2"] + p["b2"])


def _attention(q, k, v):
    import jax
    import jax.numpy as jnp
    s = jnp.einsum("bqd,bkd->bqk", q, k) / np.sqrt(q.shape[-1]).astype(F32)
    return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, axis=-1), v)


def mlp():
    rng = _rng("mlp")
    return _mlp, (_mlp_params(rng), _normal(rng, 5, 8))


def mlp_grad():
    import jax
    import jax.numpy as jnp

    def loss(p, x, y):
        return -jnp.mean(jnp.sum(_mlp(p, x) * y, axis=-1))
    rng = _rng("mlp_grad")
    return jax.grad(loss), (_mlp_params(rng), _normal(rng, 5, 8),
                            np.eye(4, dtype=F32)[rng.integers(0, 4, 5)])


def cnn():
    import jax
    from jax import lax

    def net(w, k, x):
        y = lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = jax.nn.relu(y)
        y = lax.reduce_window(y, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4
        return y.reshape(y.shape[0], -1) @ w
    rng = _rng("cnn")
    return net, (_normal(rng, 4 * 4 * 3, 2), _normal(rng, 3, 3, 2, 3), _normal(rng, 2, 8, 8, 2))


def attention():
    rng = _rng("attention")
    return _attention, tuple(_normal(rng, 2, 6, 8) for _ in range(3))


def transformer_block():
    import jax
    from jax import lax

    def layer_norm(x, g):
        m = x.mean(-1, keepdims=True)
        return (x - m) * lax.rsqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5) * g

    def split(t):
        return t.reshape(t.shape[0], t.shape[1], 2, -1).transpose(0, 2, 1, 3).reshape(
            t.shape[0] * 2, t.shape[1], -1)

    def block(p, x):
        h = layer_norm(x, p["g1"])
        q, k, v = (h @ p[n] for n in ("wq", "wk", "wv"))
        a = _attention(split(q), split(k), split(v))
        a = a.reshape(x.shape[0], 2, x.shape[1], -1).transpose(0, 2, 1, 3).reshape(x.shape)
        x = x + a @ p["wo"]
        return x + jax.nn.gelu(layer_norm(x, p["g2"]) @ p["w1"]) @ p["w2"]
    rng = _rng("transformer_block")
    p = {n: _normal(rng, 8, 8) * 0.3 for n in ("wq", "wk", "wv", "wo")}
    p.update(g1=np.ones(8, F32), g2=np.ones(8, F32), w1=_normal(rng, 8, 16) * 0.3,
             w2=_normal(rng, 16, 8) * 0.3)
    return block, (p, _normal(rng, 2, 5, 8))


def lstm_scan():
    import jax
    import jax.numpy as jnp
    from jax import lax

    def lstm(w, u, xs):
        def step(carry, x):
            h, c = carry
            z = x @ w + h @ u
            i, f, g, o = jnp.split(z, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h
        zeros = jnp.zeros((xs.shape[1], u.shape[0]), xs.dtype)
        return lax.scan(step, (zeros, zeros), xs)
    rng = _rng("lstm_scan")
    return lstm, (_normal(rng, 3, 16) * 0.5, _normal(rng, 4, 16) * 0.5, _normal(rng, 5, 2, 3))


# -- control flow -------------------------------------------------------------------------------
def while_loop():
    import jax.numpy as jnp
    from jax import lax

    def newton_sqrt(a):
        def body(s):
            x, i = s
            return 0.5 * (x + a / x), i + 1
        return lax.while_loop(lambda s: (s[1] < 20) & (jnp.max(jnp.abs(s[0] * s[0] - a)) > 1e-6),
                              body, (jnp.ones_like(a), 0))
    return newton_sqrt, (np.abs(_normal(_rng("while_loop"), 6)) + 0.5,)


def cond():
    import jax.numpy as jnp
    from jax import lax
    rng = _rng("cond")
    return (lambda p, x: lax.cond(p > 0, jnp.sin, jnp.cos, x)), \
        (np.int32(rng.integers(-1, 2)), _normal(rng, 4))


def switch():
    import jax.numpy as jnp
    from jax import lax
    return (lambda i, x: lax.switch(i, [jnp.sin, jnp.cos, lambda y: y * 2], x)), \
        (np.int32(2), _normal(_rng("switch"), 4))


# -- data movement ------------------------------------------------------------------------------
def sort():
    import jax.numpy as jnp
    from jax import lax
    rng = _rng("sort")
    return (lambda x, y: (jnp.sort(x, axis=-1), jnp.argsort(x, axis=0), lax.sort((x, y), num_keys=1))), \
        (_normal(rng, 4, 5), rng.integers(0, 9, (4, 5)).astype(np.int32))


def top_k():
    from jax import lax
    return (lambda x: lax.top_k(x, 3)), (_normal(_rng("top_k"), 3, 7),)


def cumulative():
    import jax.numpy as jnp
    from jax import lax
    return (lambda x: (jnp.cumsum(x, axis=1), jnp.cumprod(x, axis=0), lax.cummax(x, axis=1),
                       jnp.cumsum(x.astype(np.int32), axis=0))), (_normal(_rng("cumulative"), 3, 5),)


def gather():
    import jax.numpy as jnp
    rng = _rng("gather")
    return (lambda x, i: (x[i], jnp.take_along_axis(x[:4], i[:, None] % 3, axis=1), x[i, 1:3])), \
        (_normal(rng, 5, 3), rng.integers(0, 5, 4).astype(np.int32))


def scatter():
    rng = _rng("scatter")
    return (lambda x, i, v: (x.at[i].add(v), x.at[i].set(v), x.at[i].max(v))), \
        (_normal(rng, 6, 2), np.array([0, 3, 3, 5], np.int32), _normal(rng, 4, 2))


def dynamic_slice():
    import jax.numpy as jnp
    from jax import lax
    return (lambda x, i, j: (lax.dynamic_slice(x, (i, j), (2, 3)),
                             lax.dynamic_update_slice(x, jnp.ones((2, 2), x.dtype), (j, i)))), \
        (_normal(_rng("dynamic_slice"), 5, 6), np.int32(4), np.int32(1))


# -- integers and types -------------------------------------------------------------------------
def int_bitops():
    import jax.numpy as jnp
    from jax import lax

    def bits(a, b):
        return (a & b, a | b, a ^ b, ~a, a << (b & 7), lax.shift_right_logical(a, b & 7),
                a >> (b & 7), lax.population_count(a), lax.clz(a), a // jnp.maximum(b, 1),
                a % jnp.maximum(b, 1), a * b)
    rng = _rng("int_bitops")
    return bits, (rng.integers(-2**31, 2**31 - 1, 8).astype(np.int32),
                  rng.integers(-50, 50, 8).astype(np.int32))


def type_conversions():
    import jax.numpy as jnp
    from jax import lax

    def conv(x, u):
        return (x.astype(np.int32), x.astype(jnp.bfloat16), x.astype(np.float16), u.astype(F32),
                (u + np.uint8(200)), lax.bitcast_convert_type(x, np.int32), x.astype(bool),
                x.astype(np.uint8))
    rng = _rng("type_conversions")
    return conv, (_normal(rng, 6) * 100, rng.integers(0, 255, 6).astype(np.uint8))


def bf16_matmul():
    import jax.numpy as jnp

    def matmul(a, b):
        a, b = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)
        return jnp.dot(a, b), jnp.dot(a, b, preferred_element_type=F32)
    rng = _rng("bf16_matmul")
    return matmul, (_normal(rng, 4, 8), _normal(rng, 8, 3))


def fft():
    import jax.numpy as jnp
    rng = _rng("fft")
    return (lambda x: (jnp.fft.fft(x), jnp.fft.rfft(x.real), jnp.fft.irfft(jnp.fft.rfft(x.real)),
                       jnp.fft.ifft2(x))), \
        ((_normal(rng, 4, 8) + 1j * _normal(rng, 4, 8)).astype(np.complex64),)


def threefry_random():
    import jax
    return (lambda key: (jax.random.uniform(key, (6,)), jax.random.normal(key, (2, 3)),
                         jax.random.bits(key, (4,)))), \
        (np.asarray(jax.random.key_data(jax.random.key(7))),)


# -- linear algebra (LAPACK custom calls on CPU) -------------------------------------------------
def cholesky():
    import jax.numpy as jnp
    return jnp.linalg.cholesky, (_spd(_rng("cholesky"), 4),)


def solve():
    import jax.numpy as jnp
    rng = _rng("solve")
    return jnp.linalg.solve, (_spd(rng, 4), _normal(rng, 4, 2))


def triangular_solve():
    import jax
    rng = _rng("triangular_solve")
    return (lambda a, b: jax.scipy.linalg.solve_triangular(a, b, lower=True)), \
        (np.tril(_spd(rng, 4)), _normal(rng, 4, 3))


def qr():
    import jax.numpy as jnp
    return (lambda a: tuple(jnp.linalg.qr(a))), (_normal(_rng("qr"), 5, 3),)


def eigh():
    import jax.numpy as jnp

    def f(a):
        w, v = jnp.linalg.eigh(a)
        return w, jnp.abs(v)
    return f, (_spd(_rng("eigh"), 4),)


def svd():
    import jax.numpy as jnp

    def f(a):
        u, s, vt = jnp.linalg.svd(a, full_matrices=False)
        return s, (u * s) @ vt
    return f, (_normal(_rng("svd"), 5, 3),)


def linalg_chain():
    import jax.numpy as jnp
    rng = _rng("linalg_chain")
    return (lambda a, b: (jnp.linalg.solve(a, b), jnp.linalg.qr(a)[1], jnp.linalg.det(a))), \
        (_spd(rng, 4), _normal(rng, 4, 2))


# -- windows, einsum, special functions ---------------------------------------------------------
def reduce_window():
    import jax.numpy as jnp
    from jax import lax
    return (lambda x: (lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2), (1, 2, 2), "VALID"),
                       lax.reduce_window(x, 0.0, lax.add, (1, 3, 3), (1, 1, 1), "SAME"))), \
        (_normal(_rng("reduce_window"), 2, 6, 6),)


def select_and_scatter():
    import jax
    import jax.numpy as jnp
    from jax import lax

    def pool_grad(x):
        def pool(y):
            return lax.reduce_window(y, -jnp.inf, lax.max, (2, 2), (2, 2), "VALID").sum()
        return jax.grad(pool)(x)
    return pool_grad, (_normal(_rng("select_and_scatter"), 6, 6),)


def einsum():
    import jax.numpy as jnp
    rng = _rng("einsum")
    return (lambda a, b, c: (jnp.einsum("ij,jk->ik", a, b), jnp.einsum("ij,ij->i", a, a),
                             jnp.einsum("bij,jk,bk->bi", c, b, c[:, 0, :3]),
                             jnp.einsum("ii->", a[:3, :3]))), \
        (_normal(rng, 3, 4), _normal(rng, 4, 3), _normal(rng, 2, 3, 4))


def special_functions():
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.scipy import special
    return (lambda x: (lax.erf(x), special.erfc(x), lax.lgamma(jnp.abs(x) + 0.5),
                       lax.digamma(jnp.abs(x) + 0.5), special.erfinv(jnp.tanh(x) * 0.9),
                       jax.nn.sigmoid(x), jnp.log1p(jnp.abs(x)), special.i0e(x),
                       jax.nn.gelu(x, approximate=False))), \
        (_normal(_rng("special_functions"), 8),)


# -- test_jax_export.py's programs --------------------------------------------------------------
def pytree_dense():
    import jax.numpy as jnp
    rng = _rng("pytree_dense")

    def f(params, x):
        return {"y": jnp.tanh(x @ params["w"] + params["b"]) * 2, "aux": x.sum()}
    return f, ({"w": _normal(rng, 4, 3), "b": _normal(rng, 3)}, _normal(rng, 2, 4))


def cos_scale():
    import jax.numpy as jnp
    return (lambda x: jnp.cos(x) * 3), (np.ones(4, F32),)


def sin_dict():
    import jax.numpy as jnp
    return (lambda x, y: {"s": jnp.sin(x) * y, "t": (x + y,)}), \
        (np.linspace(0, 1, 4, dtype=F32), np.full(4, 3, F32))


def tanh_sum_mean():
    import jax.numpy as jnp
    return (lambda x: jnp.tanh(x).sum(0) * x.shape[0] + jnp.mean(x)), \
        (_normal(_rng("tanh_sum_mean"), 7, 16),)


JAX_PROGRAMS: list[JaxProgram] = [JaxProgram(f.__name__, f) for f in (
    mlp, mlp_grad, cnn, attention, transformer_block, lstm_scan,
    while_loop, cond, switch,
    sort, top_k, cumulative, gather, scatter, dynamic_slice,
    int_bitops, type_conversions, bf16_matmul, fft, threefry_random,
    cholesky, solve, triangular_solve, qr, eigh, svd, linalg_chain,
    reduce_window, select_and_scatter, einsum, special_functions,
    pytree_dense, cos_scale, sin_dict, tanh_sum_mean,
)]
