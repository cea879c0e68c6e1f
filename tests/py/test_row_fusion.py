"""kiln-fuse-rows (lowering/codegen/rows.py): chains of row-wise ops (softmax, layer norm,
RMS norm, log-softmax) run one block of rows at a time through every op. Results must match
JAX (bit for bit where no reduction order changes) over odd shapes and every float width,
and runs that would read another row of what they write must not fuse."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kiln

MARK = re.compile(r"kiln\.fused_rows = (\d+)")


def compile_jax(fn, *args):
    text = jax.jit(fn).lower(*args).as_text()
    return kiln.compile(text)


def fused_runs(exe) -> list[int]:
    """The number of ops of each fused run in the compiled program."""
    return [int(n) for n in MARK.findall(exe.ir("codegen"))]


def softmax(x):
    return jax.nn.softmax(x, axis=-1)


def log_softmax(x):
    return jax.nn.log_softmax(x, axis=-1)


def layernorm(x, g, b):
    x32 = x.astype(jnp.float32) if x.dtype in (jnp.bfloat16, jnp.float16) else x
    m = x32.mean(-1, keepdims=True)
    v = ((x32 - m) ** 2).mean(-1, keepdims=True)
    return ((x32 - m) * jax.lax.rsqrt(v + 1e-5) * g + b).astype(x.dtype)


def rmsnorm(x, g):
    x32 = x.astype(jnp.float32) if x.dtype in (jnp.bfloat16, jnp.float16) else x
    return (x32 * jax.lax.rsqrt((x32 * x32).mean(-1, keepdims=True) + 1e-6) * g).astype(x.dtype)


TOL = {np.float32: 2e-5, np.float64: 1e-12, jnp.bfloat16: 2e-2, np.float16: 2e-3}


def data(rng, shape, dtype):
    return (rng.standard_normal(shape) * 3).astype(dtype)


def check(fn, args, dtype, want_fused=True):
    with jax.enable_x64(dtype == np.float64):
        exe = compile_jax(fn, *args)
        want = np.asarray(jax.jit(fn)(*args)).astype(np.float64)
    (got,) = exe(*args)
    assert got.dtype == np.asarray(want).dtype or got.dtype == args[0].dtype
    tol = TOL[dtype]   # reductions are reassociated (vectorized): relative to the scale
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol,
                               atol=tol * max(1.0, float(np.abs(want).max())))
    runs = fused_runs(exe)
    if want_fused:
        assert runs and max(runs) >= 3, runs
    return exe


@pytest.mark.parametrize("shape", [(1025, 257), (64, 3000), (4097, 64), (3, 129, 301)])
@pytest.mark.parametrize("fn", [softmax, log_softmax], ids=["softmax", "log_softmax"])
def test_softmax_family_f32(rng, shape, fn):
    check(fn, (data(rng, shape, np.float32),), np.float32)


@pytest.mark.parametrize("dtype", [np.float64, np.float16, jnp.bfloat16],
                         ids=["f64", "f16", "bf16"])
def test_softmax_other_widths(rng, dtype):
    check(softmax, (data(rng, (777, 333), dtype),), dtype)


@pytest.mark.parametrize("dtype,shape", [(np.float32, (1001, 513)), (np.float64, (333, 700)),
                                         (jnp.bfloat16, (2049, 300)),
                                         (np.float16, (517, 1024))],
                         ids=["f32", "f64", "bf16", "f16"])
def test_layernorm(rng, dtype, shape):
    g = data(rng, shape[-1:], np.float32 if dtype != np.float64 else np.float64)
    b = data(rng, shape[-1:], g.dtype)
    exe = check(layernorm, (data(rng, shape, dtype), g, b), dtype)
    if dtype == jnp.bfloat16:
        # the f32 `x - mean` temporary shrinks to a block: no full-size f32 buffer is left
        assert not re.search(r"memref\.alloc\(\)[^\n]*memref<2049x300xf32>", exe.ir("codegen"))


@pytest.mark.parametrize("dtype", [np.float32, jnp.bfloat16], ids=["f32", "bf16"])
def test_rmsnorm(rng, dtype):
    x = data(rng, (1531, 257), dtype)
    check(rmsnorm, (x, data(rng, (257,), np.float32)), dtype)


def test_attention_scores_softmax_blocks_leading_dims(rng):
    s = data(rng, (2, 3, 200, 171), np.float32)
    check(softmax, (s,), np.float32)


def test_small_programs_are_left_alone(rng):
    exe = check(softmax, (data(rng, (16, 32), np.float32),), np.float32, want_fused=False)
    assert fused_runs(exe) == []


def test_reading_another_row_does_not_fuse(rng):
    # y's scale is the sum of the mirrored row: an op that reads row n-1-i of a value the run
    # writes at row i must not join it (its block of s is not computed yet).
    def mirrored(x):
        s = x.sum(-1)
        return x * s[::-1, None] + jnp.exp(x)
    x = data(rng, (1023, 300), np.float32)
    exe = check(mirrored, (x,), np.float32, want_fused=False)
    text = exe.ir("codegen")
    # whatever fused, the reversed read is outside every run: the scf.for carrying the mark
    # does not contain the mirrored index arithmetic (-d0 + 1022)
    for run in text.split("kiln.fused_rows")[1:]:
        assert "1022" not in run.split("scf.for", 1)[0]


def test_column_sum_then_rows_does_not_fuse_the_column_sum(rng):
    # the column sum reduces over the rows: it cannot run one row block at a time
    def centered(x):
        c = x - x.mean(0, keepdims=True)
        return c / jnp.abs(c).sum(-1, keepdims=True)
    x = data(rng, (901, 300), np.float32)
    check(centered, (x,), np.float32, want_fused=False)


@pytest.mark.parametrize("shape,axes", [((4096, 1024), (0,)), ((1000, 37), (0,)),
                                        ((4100, 3, 129), (0,)), ((64, 70, 300), (0, 1)),
                                        ((3, 5000, 129), (0,))])
def test_column_sums(rng, shape, axes):
    x = data(rng, shape, np.float32)
    exe = compile_jax(lambda x: x.sum(axis=axes), x)
    (got,) = exe(x)
    want = x.astype(np.float64).sum(axes)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(x).sum(axes).max())
    rows = int(np.prod([shape[a] for a in axes]))
    if rows >= 4096:   # split into blocks of rows: 16 partial rows, then one combination
        assert "16x" in exe.ir("codegen").split("kiln_parallel_for")[0] or \
            re.search(r"memref<16x\d+xf32>", exe.ir("codegen"))


def test_integer_column_max_and_sum_are_exact(rng):
    x = rng.integers(-2**20, 2**20, (4099, 300)).astype(np.int32)
    exe = compile_jax(lambda x: (x.sum(axis=0), x.max(axis=0)), x)
    got = exe(x)
    np.testing.assert_array_equal(got[0], x.sum(0, dtype=np.int32))
    np.testing.assert_array_equal(got[1], x.max(0))


def test_in_place_results_match_exactly(rng):
    # exp, then divide in place (bufferization reuses the output): the blocks must read
    # the block of exp the run wrote, never a stale one; exact against the unfused order
    x = data(rng, (2000, 500), np.float32)
    exe = compile_jax(lambda x: jnp.exp(x - x.max(-1, keepdims=True)) * 2.0, x)
    (got,) = exe(x)
    want = np.exp(x - x.max(-1, keepdims=True)) * np.float32(2.0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
