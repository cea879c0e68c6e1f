"""stablehlo.gather corner cases (upstream's lowering): start indices clamped so the slice
fits, batching dims, unsigned and narrow index types; against JAX on CPU (XLA semantics)."""
import jax
import numpy as np
import pytest
from jax import lax

import kiln


pytestmark = pytest.mark.usefixtures("jax_x64")  # 64-bit reference results


PROMISE = lax.GatherScatterMode.PROMISE_IN_BOUNDS  # JAX adds no clamping: the op itself must


def assert_same(fn, *args):
    text = jax.jit(fn, keep_unused=True).lower(*args).as_text()
    assert '"stablehlo.gather"' in text
    (got,) = kiln.compile(text)(*[np.array(a, copy=True) for a in args])
    want = np.asarray(jax.jit(fn)(*args))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    return got


@pytest.mark.parametrize("index_dtype", [np.int8, np.uint8, np.int32, np.uint32, np.int64])
def test_out_of_bounds_starts_are_clamped(index_dtype):
    x = np.arange(50, dtype=np.float32).reshape(10, 5)
    raw = [[0, 0], [9, 4], [8, 3], [100, 100], [-3, 2], [127, -128]]
    if np.dtype(index_dtype).kind == "u":
        raw = [[abs(a), abs(b)] for a, b in raw]
    idx = np.array(raw, np.int64).astype(index_dtype)
    dn = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(),
                                    start_index_map=(0, 1))
    got = assert_same(lambda a, i: lax.gather(a, i, dn, (2, 3), mode=PROMISE), x, idx)
    np.testing.assert_array_equal(got[3], x[8:10, 2:5])  # (100, 100) clamps to (8, 2)


def test_collapsed_dims_and_permuted_start_index_map():
    x = np.random.default_rng(0).integers(-99, 99, (4, 6, 3)).astype(np.int32)
    idx = np.array([[[5, 0]], [[-1, 3]], [[2, 9]]], np.int32)
    dn = lax.GatherDimensionNumbers(offset_dims=(2,), collapsed_slice_dims=(0, 1),
                                    start_index_map=(1, 0))
    assert_same(lambda a, i: lax.gather(a, i, dn, (1, 1, 3), mode=PROMISE), x, idx)


def test_batching_dims():
    x = np.random.default_rng(1).standard_normal((3, 10, 2)).astype(np.float64)
    idx = np.array([[[1], [9]], [[0], [20]], [[-5], [4]]], np.int64)  # per batch row
    dn = lax.GatherDimensionNumbers(offset_dims=(2,), collapsed_slice_dims=(1,),
                                    start_index_map=(1,), operand_batching_dims=(0,),
                                    start_indices_batching_dims=(0,))
    assert_same(lambda a, i: lax.gather(a, i, dn, (1, 1, 2), mode=PROMISE), x, idx)


@pytest.mark.parametrize("mode", ["clip", "fill"])
def test_take_modes(mode):
    x = np.array([1.5, -0.0, np.nan, np.inf, -7.0], np.float32)
    idx = np.array([0, 4, 5, -1, -6, 2], np.int32)
    got = assert_same(lambda a, i: a.at[i].get(mode=mode, fill_value=-1.0), x, idx)
    assert np.signbit(got[np.flatnonzero(idx == 0)]).sum() == 0


def test_full_slice_and_zero_sized_indices():
    x = np.arange(12, dtype=np.int16).reshape(3, 4)
    dn = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(),
                                    start_index_map=(0,))
    assert_same(lambda a, i: lax.gather(a, i, dn, (3, 4), mode=PROMISE), x,
                np.array([[2], [-1]], np.int32))
    empty = """
func.func @main(%x: tensor<3x4xi16>, %i: tensor<0x1xi32>) -> tensor<0x3x4xi16> {
  %0 = "stablehlo.gather"(%x, %i) {dimension_numbers = #stablehlo.gather<offset_dims = [1, 2],
      start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 3, 4>}
     : (tensor<3x4xi16>, tensor<0x1xi32>) -> tensor<0x3x4xi16>
  return %0 : tensor<0x3x4xi16>
}"""
    (got,) = kiln.compile(empty)(x, np.zeros((0, 1), np.int32))
    assert got.shape == (0, 3, 4) and got.dtype == np.int16
