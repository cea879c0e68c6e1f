"""Data movement and windows on all cores (issue #13): concatenate, pad, slice, dynamic
slices, gather and reduce_window, compiled with kiln-parallelize forced on for every size
(so small shapes exercise the outlined bodies, captured memrefs and scalars, shifted
`linalg.index`, copies as generics, hoisted gather index loads) and with slices pushed into
pads and concatenations; results against JAX on CPU (XLA semantics), exactly where the
computation moves data, to rounding for windowed sums."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

import kiln
from kiln.lowering.codegen import parallel


pytestmark = pytest.mark.usefixtures("jax_x64")


@pytest.fixture(autouse=True)
def every_op_parallel(monkeypatch):
    # Compiled here (a compile worker would not see the patched threshold) and never taken
    # from the compile cache (whose key does not know it).
    monkeypatch.setenv("KILN_COMPILE_IN_PROCESS", "1")
    monkeypatch.setenv("KILN_CACHE", "0")
    monkeypatch.setattr(parallel, "MIN_ITERATIONS", 1)


DTYPES = [np.float32, np.float64, np.int8, np.int32, np.int64, np.uint16, np.bool_,
          ml_dtypes.bfloat16, np.complex64]


def sample(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dtype.kind in "iu":
        return rng.integers(0, 100, shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def run(fn, *args, exact=True):
    """Kiln's result of `fn` (each output) against jax's; the compiled program's codegen IR."""
    text = jax.jit(fn).lower(*args).as_text()
    program = kiln.compile(text)
    got = program(*[np.array(a, copy=True) for a in args])
    want = jax.jit(fn)(*args)
    want = want if isinstance(want, (tuple, list)) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    return program


def parallel_calls(program) -> int:
    return program.ir("codegen").count("call @kiln_parallel_for")


@pytest.mark.parametrize("dtype", DTYPES)
def test_concat_pad_strided_slice_every_dtype(dtype):
    rng = np.random.default_rng(1)
    a, b = sample(rng, (37, 21), dtype), sample(rng, (37, 10), dtype)

    def f(a, b):
        c = jnp.concatenate([a, b], axis=1)
        return lax.pad(c, jnp.zeros((), c.dtype), [(1, 2, 0), (3, 1, 0)])[::2, 1::3]
    program = run(f, a, b)
    text = program.ir("legalize")
    assert "tensor<40x35x" not in text    # the padded 40x35 tensor is never built
    assert "tensor<37x31x" not in text    # nor the concatenation


@pytest.mark.parametrize("shapes,axis", [
    ([(5, 7), (5, 1), (5, 13)], 1), ([(3, 4, 5), (2, 4, 5)], 0), ([(2, 3, 1), (2, 3, 6)], 2),
    ([(1,), (17,), (2,)], 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.bool_, np.complex64, ml_dtypes.bfloat16])
def test_concatenate(shapes, axis, dtype):
    rng = np.random.default_rng(2)
    args = [sample(rng, s, dtype) for s in shapes]
    program = run(lambda *xs: jnp.concatenate(xs, axis=axis) * 1, *args)
    if dtype == np.float32:
        assert parallel_calls(program) >= 1   # loads of the pieces, captured by the body


@pytest.mark.parametrize("config", [
    [(1, 2, 0), (0, 0, 0)], [(-1, 2, 0), (2, -3, 0)], [(0, 0, 1), (2, 1, 2)],
    [(-2, -1, 1), (1, 1, 3)], [(3, 3, 0), (-4, 0, 0)]])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.complex64])
def test_pad_negative_and_interior(config, dtype):
    rng = np.random.default_rng(3)
    x = sample(rng, (9, 11), dtype)
    value = sample(rng, (), dtype)
    run(lambda x, v: lax.pad(x, v, config), x, value)


@pytest.mark.parametrize("config,window", [
    ([(2, 3, 0), (1, 1, 0)], (slice(0, None, 2), slice(None, None, 3))),
    ([(-2, 5, 0), (4, 0, 0)], (slice(1, 9, 4), slice(3, 9, 1))),
    ([(6, 0, 0), (0, 6, 0)], (slice(0, 5, 1), slice(1, None, 2))),    # all padding in dim 0
    ([(0, 0, 1), (1, 1, 0)], (slice(1, None, 3), slice(None))),        # interior: not pushed
])
def test_slice_of_pad(config, window):
    rng = np.random.default_rng(4)
    x = sample(rng, (10, 9), np.float32)
    run(lambda x: lax.pad(x, np.float32(-7), config)[window], x)


@pytest.mark.parametrize("window", [
    slice(0, None, 2), slice(3, 17, 5), slice(9, 12, 1), slice(14, None, 7), slice(0, 1, 1),
    slice(4, 5, 1)])
def test_slice_of_concatenate_along_its_axis(window):
    rng = np.random.default_rng(5)
    a, b, c = (sample(rng, (3, n), np.int32) for n in (4, 6, 9))
    run(lambda a, b, c: jnp.concatenate([a, b, c], axis=1)[:, window], a, b, c)


def test_slice_of_concatenate_across_its_axis_and_shared_producer():
    rng = np.random.default_rng(6)
    a, b = sample(rng, (8, 5), np.float32), sample(rng, (6, 5), np.float32)

    def f(a, b):
        c = jnp.concatenate([a, b], axis=0)
        return c[1:12:3, ::2], c.sum()    # c has two users: it stays whole
    run(f, a, b, exact=False)


@pytest.mark.parametrize("dtype", [np.float32, np.uint16, np.bool_, np.complex64])
def test_strided_slices(dtype):
    rng = np.random.default_rng(7)
    x = sample(rng, (13, 7, 5), dtype)
    run(lambda x: x[1::4, ::3, 2:], x)


@pytest.mark.parametrize("start", [(0, 0), (3, 2), (100, -5), (-9, 100)])
def test_dynamic_slice_and_update_clamp(start):
    rng = np.random.default_rng(8)
    x = sample(rng, (11, 9), np.float32)
    u = sample(rng, (4, 5), np.float32)
    i, j = np.int32(start[0]), np.int32(start[1])
    run(lambda x, u, i, j: (lax.dynamic_slice(x, (i, j), (4, 5)),
                            lax.dynamic_update_slice(x, u, (i, j))), x, u, i, j)


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_, ml_dtypes.bfloat16,
                                   np.complex64, np.float64])
@pytest.mark.parametrize("rows,width", [(37, 1), (64, 128), (5, 3)])
def test_gather_rows_with_out_of_bounds_indices(dtype, rows, width):
    rng = np.random.default_rng(9)
    table = sample(rng, (rows, width), dtype)
    idx = rng.integers(-2 * rows, 2 * rows, 301).astype(np.int32)
    mode = lax.GatherScatterMode.CLIP
    program = run(lambda t, i: t.at[i].get(mode=mode), table, idx)
    if dtype == np.float32:
        text = program.ir("codegen")
        assert "kiln.read_only" not in text    # marks are gone after the hoisting pass
        assert parallel_calls(program) >= 1


def test_gather_raw_out_of_bounds_starts_clamp():
    """StableHLO's own clamp (no JAX clamping): start indices move so the slice fits."""
    x = np.arange(4 * 6 * 5, dtype=np.float32).reshape(4, 6, 5)
    idx = np.array([[0, 0], [3, 5], [9, -4], [-1, 2], [2, 100]], np.int32)
    dn = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(0,),
                                    start_index_map=(0, 1))
    fn = lambda a, i: lax.gather(a, i, dn, (1, 3, 5),   # noqa: E731
                                 mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS)
    run(fn, x, idx)
    (got,) = kiln.compile(jax.jit(fn).lower(x, idx).as_text())(x, idx)
    np.testing.assert_array_equal(got[2], x[3, 0:3, :])    # (9, -4) clamps to (3, 0)
    np.testing.assert_array_equal(got[4], x[2, 3:6, :])    # (2, 100) clamps to (2, 3)


def test_gather_2d_indices_and_embedding_grad():
    rng = np.random.default_rng(10)
    table = sample(rng, (50, 16), np.float32)
    idx = rng.integers(0, 50, (7, 9)).astype(np.int32)
    g = sample(rng, (7, 9, 16), np.float32)
    run(lambda t, i, g: (t[i], jnp.zeros_like(t).at[i].add(g)), table, idx, g, exact=False)


@pytest.mark.parametrize("window,strides,padding,base,dilation", [
    ((1, 3, 3, 1), (1, 1, 1, 1), "SAME", None, None),
    ((1, 3, 3, 1), (1, 2, 2, 1), "SAME", None, None),
    ((1, 2, 3, 1), (1, 1, 2, 1), "VALID", None, None),
    ((1, 3, 2, 1), (1, 2, 1, 1), [(0, 0), (2, 1), (0, 3), (0, 0)], None, (1, 2, 1, 1)),
    ((1, 2, 2, 1), (1, 1, 1, 1), [(0, 0), (1, 1), (1, 0), (0, 0)], (1, 2, 1, 1), None),
    ((2, 3, 3, 3), (1, 1, 2, 2), "VALID", None, (1, 1, 2, 1)),
])
@pytest.mark.parametrize("op", ["add", "max"])
def test_reduce_window(window, strides, padding, base, dilation, op):
    rng = np.random.default_rng(11)
    x = sample(rng, (3, 13, 11, 7), np.float32)
    init, combine = (0.0, lax.add) if op == "add" else (-np.inf, lax.max)
    program = run(lambda x: lax.reduce_window(x, np.float32(init), combine, window, strides,
                                              padding, base_dilation=base,
                                              window_dilation=dilation),
                  x, exact=(op == "max"))
    assert parallel_calls(program) >= 1   # window maps (d1 + d4) split along an outer dim


@pytest.mark.parametrize("dtype", [np.int32, ml_dtypes.bfloat16, np.float64])
def test_avgpool_dtypes(dtype):
    rng = np.random.default_rng(12)
    x = sample(rng, (2, 9, 10, 5), dtype)
    run(lambda x: lax.reduce_window(x, dtype(0), lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME"),
        x, exact=np.dtype(dtype).kind == "i")


def test_large_copies_split_across_cores(monkeypatch):
    """A pad of a 512x512 tensor at the real threshold: its fill and copy are generics now,
    split by kiln-parallelize, and the result is exact."""
    x = sample(np.random.default_rng(13), (512, 512), np.float32)
    monkeypatch.setattr(parallel, "MIN_ITERATIONS", 1 << 18)
    program = run(lambda x: lax.pad(x, np.float32(1.5), [(3, 4, 0), (5, 0, 0)]), x)
    assert parallel_calls(program) >= 2


@pytest.mark.parametrize("window", [(1, 2, 2, 1), (1, 5, 5, 1), (2, 1, 1, 3)])
@pytest.mark.parametrize("combine,init,dtype", [
    (lax.mul, 1, np.int32), (lax.min, np.inf, np.float32), (lax.max, -128, np.int8),
    (lax.add, 0, np.complex64), (lax.bitwise_or, False, np.bool_)])
def test_reduce_window_combiners(window, combine, init, dtype):
    """Windows of 4, 25 (left as a loop) and 6 positions, every combiner kind: the unrolled
    body applies the combiner in the loop's order (exact where order cannot matter)."""
    rng = np.random.default_rng(14)
    x = sample(rng, (4, 9, 8, 6), dtype)
    if np.dtype(dtype).kind == "i":
        x = (x % 3 + 1).astype(dtype)    # products stay small
    exact = np.dtype(dtype).kind in "iub" or combine in (lax.min, lax.max)   # float sums round
    run(lambda x: lax.reduce_window(x, dtype(init), combine, window, (1, 1, 1, 1), "SAME"), x,
        exact=exact)


def test_variadic_reduce_window_argmax():
    """Two results (value, index) of one window: not unrolled, still correct."""
    rng = np.random.default_rng(15)
    x = sample(rng, (3, 10, 10, 4), np.float32)
    idx = np.broadcast_to(np.arange(10, dtype=np.int32)[None, :, None, None], x.shape).copy()

    def combine(a, b):
        pick = a[0] >= b[0]
        return lax.select(pick, a[0], b[0]), lax.select(pick, a[1], b[1])
    run(lambda x, i: lax.reduce_window((x, i), (np.float32(-np.inf), np.int32(0)), combine,
                                       (1, 3, 3, 1), (1, 1, 1, 1), "SAME"), x, idx)


def test_unrolled_window_is_bit_identical_to_the_window_loop(monkeypatch):
    """The same float sums, in the same order, as the loop over the window it replaces."""
    from kiln.lowering.codegen import windows
    rng = np.random.default_rng(16)
    x = sample(rng, (2, 15, 13, 24), np.float32) * np.float32(1e3)
    text = jax.jit(lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 2, 1, 1),
                                               "SAME")).lower(x).as_text()
    unrolled = kiln.compile(text)
    assert "to %c3 step" not in unrolled.ir("codegen")    # no loop over the window
    monkeypatch.setattr(windows, "_plan", lambda op: None)
    looped = kiln.compile(text)
    assert "to %c3 step" in looped.ir("codegen")
    np.testing.assert_array_equal(unrolled(x)[0], looped(x)[0])
