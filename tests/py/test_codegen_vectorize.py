"""The CPU loop strategy (kiln.lowering.codegen: loop_order, reductions, parallel): loops
reordered for locality, reductions with register accumulators, full reductions split over
the cores. Results are compared with numpy over odd shapes (not multiples of any vector
width), every dtype, reductions over each axis, transposes, pads, concatenations, windows;
small shapes run serially, large ones on the threads."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import kiln
from kiln.lowering.codegen import loop_order, reductions

RNG = np.random.default_rng(7)
DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int8, np.int32, np.bool_]


def data(shape, dtype):
    if dtype == np.bool_:
        return RNG.random(shape) < 0.5
    if np.issubdtype(np.dtype(dtype), np.integer):
        return RNG.integers(-5, 6, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def run(fn, *args):
    """`fn` (jax) compiled by Kiln from its StableHLO, run on `args`."""
    wide = any(np.asarray(a).dtype.itemsize == 8 for a in args)
    with jax.enable_x64(wide):    # f64 stays f64 in the traced program
        exe = kiln.compile(jax.jit(fn).lower(*args).as_text())
    out = exe(*args)
    return out[0] if len(out) == 1 else out


def check(got, want, dtype):
    got = np.asarray(got)
    if dtype in (np.float16, ml_dtypes.bfloat16):
        np.testing.assert_allclose(got.astype(np.float32), np.asarray(want, np.float32),
                                   rtol=5e-2, atol=5e-1)
    elif np.issubdtype(np.dtype(dtype), np.floating):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    else:
        np.testing.assert_array_equal(got, want)


# Small: serial loops; large: above parallel.MIN_ITERATIONS, on the threads.
SHAPES_3D = [(7, 13, 5), (67, 129, 33)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES_3D, ids=str)
def test_reduce_each_axis(shape, dtype):
    x = data(shape, dtype)
    for axis in (0, 1, 2, (0, 2)):
        if dtype == np.bool_:
            check(run(lambda a: jnp.any(a, axis=axis), x), np.any(x, axis=axis), dtype)
            check(run(lambda a: jnp.all(a, axis=axis), x), np.all(x, axis=axis), dtype)
            continue
        got = run(lambda a: jnp.sum(a, axis=axis, dtype=a.dtype), x)
        if dtype in (np.float16, ml_dtypes.bfloat16):
            # accumulated in the narrow type: the error grows with the sum of magnitudes
            bound = 8 * float(ml_dtypes.finfo(dtype).eps) * np.abs(x.astype(np.float64)).sum(axis)
            assert np.all(np.abs(np.asarray(got, np.float64) - x.astype(np.float64).sum(axis))
                          <= bound + 1e-2)
        else:
            want = x.astype(np.float64).sum(axis=axis) if dtype != np.int8 else \
                x.sum(axis=axis, dtype=np.int8)
            check(got, want, dtype)
        check(run(lambda a: jnp.max(a, axis=axis), x), x.max(axis=axis), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int8, np.float64],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("n", [(1 << 18) + 13, 3 * 7 * 12289, 1 << 19])
def test_full_reductions_split_over_cores(n, dtype):
    """Above reductions.CPU_SPLIT.min_elements, with a tail past the last whole chunk."""
    x = data((n,), dtype)
    if dtype == np.int8:
        check(run(lambda a: jnp.sum(a, dtype=a.dtype), x), x.sum(dtype=np.int8), dtype)
    else:
        check(run(lambda a: jnp.sum(a), x), x.astype(np.float64).sum().astype(dtype), dtype)
    check(run(lambda a: jnp.max(a), x), x.max(), dtype)
    check(run(lambda a: jnp.min(a), x), x.min(), dtype)
    if dtype in (np.float32, np.float64):
        check(run(lambda a: jnp.sum(a * a), x), (x.astype(np.float64) ** 2).sum(), dtype)


def test_full_reduction_of_matrix_and_nan():
    x = data((515, 1027), np.float32)
    check(run(lambda a: jnp.sum(a), x), x.astype(np.float64).sum(), np.float32)
    x[300, 17] = np.nan
    assert np.isnan(run(lambda a: jnp.max(a), x))
    assert np.isnan(run(lambda a: jnp.sum(a), x))


def test_full_reduction_keeps_the_initial_value():
    """The output's initial value is combined once, not once per chunk."""
    x = data((1 << 18) + 5, np.float32)
    got = run(lambda a: jax.lax.reduce(a, np.float32(1000.0), jax.lax.add, (0,)), x)
    np.testing.assert_allclose(got, 1000.0 + x.astype(np.float64).sum(), rtol=1e-4)
    xi = data((1 << 18) + 5, np.int32)
    got = run(lambda a: jax.lax.reduce(a, np.int32(7), jax.lax.max, (0,)), xi)
    assert got == max(7, xi.max())


@pytest.mark.parametrize("shape", [(4096 + 3, 129), (9, 1031)], ids=str)
def test_argmax_each_axis_with_ties(shape):
    x = RNG.integers(0, 4, shape).astype(np.float32)   # many ties: the first index wins
    for axis in (0, 1):
        check(run(lambda a: jnp.argmax(a, axis=axis), x), np.argmax(x, axis=axis), np.int32)
        check(run(lambda a: jnp.argmin(a, axis=axis), x), np.argmin(x, axis=axis), np.int32)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape,perm", [((67, 131, 33), (2, 0, 1)), ((67, 131, 33), (1, 2, 0)),
                                        ((513, 517), (1, 0)), ((5, 3, 7), (2, 1, 0))], ids=str)
def test_transpose(shape, perm, dtype):
    x = data(shape, dtype)
    np.testing.assert_array_equal(np.asarray(run(lambda a: jnp.transpose(a, perm), x)),
                                  np.transpose(x, perm))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_concat_pad_slice(dtype):
    a, b = data((513, 255), dtype), data((513, 259), dtype)

    def f(a, b):
        c = jnp.concatenate([a, b], axis=1)
        return jnp.pad(c, ((1, 2), (3, 1)))[::2, 1::3], jnp.concatenate([a.T, b.T], axis=0)
    got = run(f, a, b)
    c = np.concatenate([a, b], axis=1)
    np.testing.assert_array_equal(np.asarray(got[0]), np.pad(c, ((1, 2), (3, 1)))[::2, 1::3])
    np.testing.assert_array_equal(np.asarray(got[1]), np.concatenate([a.T, b.T], axis=0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(2, 57, 61, 19), (3, 9, 7, 5)], ids=str)
def test_window_sum_and_max(shape, dtype):
    x = data(shape, dtype)
    zero, low = dtype(0), (dtype(-1e30) if dtype != np.int32 else np.int32(-2 ** 31))
    got = run(lambda a: (jax.lax.reduce_window(a, zero, jax.lax.add, (1, 3, 3, 1), (1, 1, 1, 1),
                                               "SAME"),
                         jax.lax.reduce_window(a, low, jax.lax.max, (1, 3, 2, 1), (1, 2, 1, 1),
                                               "VALID")), x)
    p = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    want_sum = sum(p[:, i:i + shape[1], j:j + shape[2], :] for i in range(3) for j in range(3))
    h, w = (shape[1] - 3) // 2 + 1, shape[2] - 1
    want_max = np.max([x[:, i:i + 2 * h:2, j:j + w, :] for i in range(3) for j in range(2)],
                      axis=0)
    check(got[0], want_sum, dtype)
    check(got[1], want_max, dtype)


def test_softmax_and_layernorm_rows():
    x = data((1031, 517), np.float32)
    got = run(lambda a: (jax.nn.softmax(a, axis=-1),
                         (a - a.mean(-1, keepdims=True)) / (a.std(-1, keepdims=True) + 1e-5)), x)
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(got[0], e / e.sum(-1, keepdims=True), rtol=1e-4, atol=1e-6)
    want = (x - x.mean(-1, keepdims=True)) / (x.std(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got[1], want, rtol=1e-3, atol=1e-4)


def test_column_sum_walks_rows_outermost():
    """The loop order the pass picks for a column sum: the reduction dimension outermost,
    the contiguous one innermost (a vertical accumulation)."""
    x = data((601, 1029), np.float32)
    exe = kiln.compile(jax.jit(lambda a: a.sum(axis=0)).lower(x).as_text())
    np.testing.assert_allclose(exe(x)[0], x.astype(np.float64).sum(0), rtol=1e-4, atol=1e-3)
    text = exe.ir("codegen")
    assert "kiln_parallel_for" in text     # the parallel (column) dimension spread over cores


def test_order_keeps_reduction_dimensions_in_order():
    """choose_order never swaps two reduction dimensions (the accumulation order)."""
    from torch_mlir import ir
    from kiln.context import make_context
    src = """
#in = affine_map<(d0, d1, d2) -> (d2, d1, d0)>
#out = affine_map<(d0, d1, d2) -> (d0)>
func.func @f(%a: memref<64x32x16xf32>, %o: memref<16xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%a : memref<64x32x16xf32>) outs(%o : memref<16xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %acc, %x : f32
    linalg.yield %s : f32
  }
  return
}"""
    with make_context():
        module = ir.Module.parse(src)
        generic = next(op for op in module.body.operations[0].regions[0].blocks[0].operations
                       if op.operation.name == "linalg.generic").operation
        order = loop_order.choose_order(generic)
    # d2 has the largest input stride but is a reduction after d1: d1 stays before d2
    assert order is not None and order.index(1) < order.index(2)
    assert order[-1] == 0                  # the contiguous dimension innermost


def test_identities():
    from torch_mlir import ir
    from kiln.context import make_context
    with make_context(), ir.Location.unknown():
        f32, i8 = ir.F32Type.get(), ir.IntegerType.get_signless(8)
        assert str(reductions._identity("arith.addf", f32)) == "-0.000000e+00 : f32"
        assert ir.IntegerAttr(reductions._identity("arith.maxsi", i8)).value == -128
        assert ir.IntegerAttr(reductions._identity("arith.minsi", i8)).value == 127
        assert ir.IntegerAttr(reductions._identity("arith.andi", i8)).value == -1
        assert reductions._identity("arith.divf", f32) is None
