"""A corpus of JAX programs, each run two ways and compared with JAX's own outputs:
exported (`jax.export`, serialized) and run by `kiln run`, and called through `kiln.jit`.

CORPUS_PASSING runs. CORPUS_PENDING lists programs that need a lowering Kiln does not have
yet (named beside each); they are not run at all (no skip, no xfail). Re-enable one by
moving its name to CORPUS_PASSING. Tolerances are per program: (rtol, atol) for floating
results; integer and boolean results must match exactly.
"""
from __future__ import annotations

import functools
import zlib

import numpy as np
import pytest

import kiln
from kiln.cli.main import main as kiln_main

jax = pytest.importorskip("jax")
pytest.importorskip("flatbuffers", reason="jax's Exported.serialize() needs the flatbuffers package")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

F32 = np.float32
PROGRAMS: dict[str, tuple] = {}   # name -> (fn, make_args(rng), (rtol, atol))


def program(name: str, tol=(1e-5, 1e-5)):
    def register(make):
        fn, make_args = make()
        PROGRAMS[name] = (fn, make_args, tol)
        return make
    return register


def normal(rng, *shape, dtype=F32):
    return rng.standard_normal(shape).astype(dtype)


# -- models ---------------------------------------------------------------------------------
def _mlp_params(rng):
    return {"w1": normal(rng, 8, 16) * 0.3, "b1": normal(rng, 16), "w2": normal(rng, 16, 4) * 0.3,
            "b2": normal(rng, 4)}


def _mlp(p, x):
    h = jax.nn.relu(x @ p["w1"] + p["b1"])
    return jax.nn.log_softmax(h @ p["w2"] + p["b2"])


@program("mlp")
def _():
    return _mlp, lambda rng: (_mlp_params(rng), normal(rng, 5, 8))


@program("mlp_grad", tol=(1e-4, 1e-5))
def _():
    def loss(p, x, y):
        return -jnp.mean(jnp.sum(_mlp(p, x) * y, axis=-1))
    return jax.grad(loss), lambda rng: (_mlp_params(rng), normal(rng, 5, 8),
                                        np.eye(4, dtype=F32)[rng.integers(0, 4, 5)])


@program("cnn", tol=(1e-4, 1e-5))
def _():
    def cnn(w, k, x):
        y = lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = jax.nn.relu(y)
        y = lax.reduce_window(y, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4
        return y.reshape(y.shape[0], -1) @ w
    return cnn, lambda rng: (normal(rng, 4 * 4 * 3, 2), normal(rng, 3, 3, 2, 3), normal(rng, 2, 8, 8, 2))


def _attention(q, k, v):
    s = jnp.einsum("bqd,bkd->bqk", q, k) / np.sqrt(q.shape[-1]).astype(F32)
    return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, axis=-1), v)


@program("attention", tol=(1e-5, 1e-5))
def _():
    return _attention, lambda rng: tuple(normal(rng, 2, 6, 8) for _ in range(3))


@program("transformer_block", tol=(1e-4, 1e-4))
def _():
    def layer_norm(x, g):
        m = x.mean(-1, keepdims=True)
        return (x - m) * lax.rsqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5) * g

    def block(p, x):
        h = layer_norm(x, p["g1"])
        q, k, v = (h @ p[n] for n in ("wq", "wk", "wv"))
        split = lambda t: t.reshape(t.shape[0], t.shape[1], 2, -1).transpose(0, 2, 1, 3).reshape(  # noqa: E731
            t.shape[0] * 2, t.shape[1], -1)
        a = _attention(split(q), split(k), split(v))
        a = a.reshape(x.shape[0], 2, x.shape[1], -1).transpose(0, 2, 1, 3).reshape(x.shape)
        x = x + a @ p["wo"]
        return x + jax.nn.gelu(layer_norm(x, p["g2"]) @ p["w1"]) @ p["w2"]

    def args(rng):
        p = {n: normal(rng, 8, 8) * 0.3 for n in ("wq", "wk", "wv", "wo")}
        p.update(g1=np.ones(8, F32), g2=np.ones(8, F32), w1=normal(rng, 8, 16) * 0.3,
                 w2=normal(rng, 16, 8) * 0.3)
        return p, normal(rng, 2, 5, 8)
    return block, args


@program("lstm_scan", tol=(1e-5, 1e-5))
def _():
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
    return lstm, lambda rng: (normal(rng, 3, 16) * 0.5, normal(rng, 4, 16) * 0.5, normal(rng, 5, 2, 3))


# -- control flow ---------------------------------------------------------------------------
@program("while_loop")
def _():
    def newton_sqrt(a):
        def body(s):
            x, i = s
            return 0.5 * (x + a / x), i + 1
        return lax.while_loop(lambda s: (s[1] < 20) & (jnp.max(jnp.abs(s[0] * s[0] - a)) > 1e-6),
                              body, (jnp.ones_like(a), 0))
    return newton_sqrt, lambda rng: (np.abs(normal(rng, 6)) + 0.5,)


@program("cond")
def _():
    return (lambda p, x: lax.cond(p > 0, jnp.sin, jnp.cos, x)), \
        lambda rng: (np.int32(rng.integers(-1, 2)), normal(rng, 4))


@program("switch")
def _():
    return (lambda i, x: lax.switch(i, [jnp.sin, jnp.cos, lambda y: y * 2], x)), \
        lambda rng: (np.int32(2), normal(rng, 4))


# -- data movement ---------------------------------------------------------------------------
@program("sort")
def _():
    return (lambda x, y: (jnp.sort(x, axis=-1), jnp.argsort(x, axis=0), lax.sort((x, y), num_keys=1))), \
        lambda rng: (normal(rng, 4, 5), rng.integers(0, 9, (4, 5)).astype(np.int32))


@program("top_k")
def _():
    return (lambda x: lax.top_k(x, 3)), lambda rng: (normal(rng, 3, 7),)


@program("cumulative")
def _():
    return (lambda x: (jnp.cumsum(x, axis=1), jnp.cumprod(x, axis=0), lax.cummax(x, axis=1),
                       jnp.cumsum(x.astype(np.int32), axis=0))), lambda rng: (normal(rng, 3, 5),)


@program("gather")
def _():
    return (lambda x, i: (x[i], jnp.take_along_axis(x[:4], i[:, None] % 3, axis=1), x[i, 1:3])), \
        lambda rng: (normal(rng, 5, 3), rng.integers(0, 5, 4).astype(np.int32))


@program("scatter")
def _():
    return (lambda x, i, v: (x.at[i].add(v), x.at[i].set(v), x.at[i].max(v))), \
        lambda rng: (normal(rng, 6, 2), np.array([0, 3, 3, 5], np.int32), normal(rng, 4, 2))


@program("dynamic_slice")
def _():
    return (lambda x, i, j: (lax.dynamic_slice(x, (i, j), (2, 3)),
                             lax.dynamic_update_slice(x, jnp.ones((2, 2), x.dtype), (j, i)))), \
        lambda rng: (normal(rng, 5, 6), np.int32(4), np.int32(1))


# -- integers and types -------------------------------------------------------------------------
@program("int_bitops")
def _():
    def bits(a, b):
        return (a & b, a | b, a ^ b, ~a, a << (b & 7), lax.shift_right_logical(a, b & 7),
                a >> (b & 7), lax.population_count(a), lax.clz(a), a // jnp.maximum(b, 1),
                a % jnp.maximum(b, 1), a * b)
    return bits, lambda rng: (rng.integers(-2**31, 2**31 - 1, 8).astype(np.int32),
                              rng.integers(-50, 50, 8).astype(np.int32))


@program("type_conversions")
def _():
    def conv(x, u):
        return (x.astype(np.int32), x.astype(jnp.bfloat16), x.astype(np.float16), u.astype(F32),
                (u + np.uint8(200)), lax.bitcast_convert_type(x, np.int32), x.astype(bool),
                x.astype(np.uint8))
    return conv, lambda rng: (normal(rng, 6) * 100, rng.integers(0, 255, 6).astype(np.uint8))


@program("bf16_matmul", tol=(2e-2, 2e-2))
def _():
    # The bf16 operands are made inside: .npz files cannot carry bfloat16 into `kiln run`.
    def matmul(a, b):
        a, b = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)
        return jnp.dot(a, b), jnp.dot(a, b, preferred_element_type=F32)
    return matmul, lambda rng: (normal(rng, 4, 8), normal(rng, 8, 3))


@program("fft", tol=(1e-4, 1e-4))
def _():
    return (lambda x: (jnp.fft.fft(x), jnp.fft.rfft(x.real), jnp.fft.irfft(jnp.fft.rfft(x.real)),
                       jnp.fft.ifft2(x))), \
        lambda rng: ((normal(rng, 4, 8) + 1j * normal(rng, 4, 8)).astype(np.complex64),)


@program("threefry_random")
def _():
    return (lambda key: (jax.random.uniform(key, (6,)), jax.random.normal(key, (2, 3)),
                         jax.random.bits(key, (4,)))), \
        lambda rng: (np.asarray(jax.random.key_data(jax.random.key(7))),)


# -- linear algebra (LAPACK custom calls on CPU) -------------------------------------------------
def _spd(rng, n):
    x = normal(rng, n, n)
    return x @ x.T + n * np.eye(n, dtype=F32)


@program("cholesky", tol=(1e-4, 1e-4))
def _():
    return jnp.linalg.cholesky, lambda rng: (_spd(rng, 4),)


@program("solve", tol=(1e-4, 1e-4))
def _():
    return jnp.linalg.solve, lambda rng: (_spd(rng, 4), normal(rng, 4, 2))


@program("triangular_solve", tol=(1e-4, 1e-4))
def _():
    return (lambda a, b: jax.scipy.linalg.solve_triangular(a, b, lower=True)), \
        lambda rng: (np.tril(_spd(rng, 4)), normal(rng, 4, 3))


@program("qr", tol=(1e-4, 1e-4))
def _():
    return (lambda a: tuple(jnp.linalg.qr(a))), lambda rng: (normal(rng, 5, 3),)


@program("eigh", tol=(1e-4, 1e-4))
def _():
    # Eigenvectors are defined up to sign: compare what does not depend on it.
    def eigh(a):
        w, v = jnp.linalg.eigh(a)
        return w, jnp.abs(v)
    return eigh, lambda rng: (_spd(rng, 4),)


@program("svd", tol=(1e-4, 1e-4))
def _():
    def svd(a):
        u, s, vt = jnp.linalg.svd(a, full_matrices=False)
        return s, (u * s) @ vt
    return svd, lambda rng: (normal(rng, 5, 3),)


@program("linalg_chain", tol=(1e-4, 1e-4))
def _():
    # Several LAPACK calls reading the same matrix (getrf, trsm, geqrf, orgqr).
    return (lambda a, b: (jnp.linalg.solve(a, b), jnp.linalg.qr(a)[1], jnp.linalg.det(a))), \
        lambda rng: (_spd(rng, 4), normal(rng, 4, 2))


# -- windows, einsum, special functions ------------------------------------------------------------
@program("reduce_window")
def _():
    return (lambda x: (lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2), (1, 2, 2), "VALID"),
                       lax.reduce_window(x, 0.0, lax.add, (1, 3, 3), (1, 1, 1), "SAME"))), \
        lambda rng: (normal(rng, 2, 6, 6),)


@program("select_and_scatter")
def _():
    def pool_grad(x):
        pool = lambda y: lax.reduce_window(y, -jnp.inf, lax.max, (2, 2), (2, 2), "VALID").sum()  # noqa: E731
        return jax.grad(pool)(x)
    return pool_grad, lambda rng: (normal(rng, 6, 6),)


@program("einsum", tol=(1e-5, 1e-5))
def _():
    return (lambda a, b, c: (jnp.einsum("ij,jk->ik", a, b), jnp.einsum("ij,ij->i", a, a),
                             jnp.einsum("bij,jk,bk->bi", c, b, c[:, 0, :3]), jnp.einsum("ii->", a[:3, :3]))), \
        lambda rng: (normal(rng, 3, 4), normal(rng, 4, 3), normal(rng, 2, 3, 4))


@program("special_functions", tol=(1e-5, 1e-5))
def _():
    from jax.scipy import special
    return (lambda x: (lax.erf(x), special.erfc(x), lax.lgamma(jnp.abs(x) + 0.5),
                       lax.digamma(jnp.abs(x) + 0.5), special.erfinv(jnp.tanh(x) * 0.9),
                       jax.nn.sigmoid(x), jnp.log1p(jnp.abs(x)), special.i0e(x),
                       jax.nn.gelu(x, approximate=False))), \
        lambda rng: (normal(rng, 8),)


CORPUS_PASSING = [
    "mlp", "mlp_grad", "cnn", "attention", "transformer_block", "lstm_scan",
    "while_loop", "cond", "switch",
    "sort", "top_k", "cumulative", "gather", "scatter", "dynamic_slice",
    "int_bitops", "type_conversions", "bf16_matmul", "fft", "threefry_random",
    "cholesky", "solve", "triangular_solve", "qr", "eigh", "svd",
    "reduce_window", "select_and_scatter", "einsum", "special_functions", "linalg_chain",
]
CORPUS_PENDING: dict[str, str] = {}  # name -> what it waits for


def test_corpus_lists_are_a_partition_of_the_programs():
    assert sorted(CORPUS_PASSING + list(CORPUS_PENDING)) == sorted(PROGRAMS)


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def _compare(got: list, want: list, tol, how: str):
    assert len(got) == len(want), f"{how}: {len(got)} results, JAX gives {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, \
            f"{how}: result {i} is {g.dtype}{list(g.shape)}, JAX gives {w.dtype}{list(w.shape)}"
        if np.issubdtype(w.dtype, np.inexact) or w.dtype == jnp.bfloat16:
            np.testing.assert_allclose(g.astype(np.complex128 if np.iscomplexobj(w) else np.float64),
                                       w.astype(np.complex128 if np.iscomplexobj(w) else np.float64),
                                       rtol=tol[0], atol=tol[1], err_msg=f"{how}: result {i}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{how}: result {i}")


@functools.lru_cache(maxsize=None)
def _case(name: str):
    fn, make_args, tol = PROGRAMS[name]
    args = make_args(np.random.default_rng(zlib.crc32(name.encode())))
    return fn, args, tol, _leaves(jax.jit(fn)(*args))


def run_exported(name: str, tmp_path) -> list[np.ndarray]:
    fn, args, _, _ = _case(name)
    exp = jax.export.export(jax.jit(fn), platforms=("cpu",))(*args)
    src = tmp_path / f"{name}.jax"
    src.write_bytes(bytes(exp.serialize()))
    np.savez(tmp_path / "in.npz", *_leaves(args))
    rc = kiln_main(["run", str(src), "--inputs", str(tmp_path / "in.npz"),
                    "--output", str(tmp_path / "out.npz")])
    assert rc == 0, f"kiln run {name} failed"
    with np.load(tmp_path / "out.npz", allow_pickle=False) as out:
        got = [out[f"arr_{i}"] for i in range(len(out.files))]
    # .npz stores ml_dtypes types (bfloat16...) as raw bytes ('V2'): view them as JAX's type.
    want = _case(name)[3]
    return [g.view(w.dtype) if g.dtype.kind == "V" and len(got) == len(want) and
            g.dtype.itemsize == w.dtype.itemsize else g for g, w in zip(got, want)]


def run_jit(name: str) -> list[np.ndarray]:
    fn, args, _, _ = _case(name)
    return _leaves(kiln.jit(fn)(*args))


@pytest.mark.parametrize("name", CORPUS_PASSING)
def test_exported_program_runs_with_kiln_run(name, tmp_path):
    _, _, tol, want = _case(name)
    _compare(run_exported(name, tmp_path), want, tol, f"kiln run {name}")


@pytest.mark.parametrize("name", CORPUS_PASSING)
def test_program_runs_with_kiln_jit(name):
    _, _, tol, want = _case(name)
    _compare(run_jit(name), want, tol, f"kiln.jit {name}")
