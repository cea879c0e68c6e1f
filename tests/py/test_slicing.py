"""Slicing ops (upstream's lowerings, checked here for the spec's corner cases): start indices
of dynamic_slice / dynamic_update_slice clamp so the slice fits; pad with negative and
interior padding; strided slices. Numpy models of the spec are the oracle."""
import numpy as np
import pytest

import kiln


def dynamic_slice_program(index_type: str) -> str:
    return f"""
func.func @main(%x: tensor<5x6xf32>, %i: tensor<{index_type}>, %j: tensor<{index_type}>) -> tensor<2x4xf32> {{
  %0 = stablehlo.dynamic_slice %x, %i, %j, sizes = [2, 4] : (tensor<5x6xf32>, tensor<{index_type}>, tensor<{index_type}>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}}"""


def clamp(start: int, size: int, extent: int) -> int:
    return min(max(start, 0), extent - size)


@pytest.mark.parametrize("index_type,dtype", [("i32", np.int32), ("i64", np.int64), ("i8", np.int8),
                                              ("ui32", np.uint32), ("ui8", np.uint8)])
def test_dynamic_slice_clamps_start_indices(index_type, dtype):
    x = np.arange(30, dtype=np.float32).reshape(5, 6)
    exe = kiln.compile(dynamic_slice_program(index_type))
    info = np.iinfo(dtype)
    for i, j in [(0, 0), (3, 2), (4, 5), (info.max, info.max), (info.min, 1), (info.max // 2 + 1, info.min)]:
        (got,) = exe(x, np.array(i, dtype), np.array(j, dtype))
        a, b = clamp(int(i), 2, 5), clamp(int(j), 4, 6)
        np.testing.assert_array_equal(got, x[a:a + 2, b:b + 4], err_msg=f"start ({i}, {j})")


@pytest.mark.parametrize("index_type,dtype", [("i32", np.int32), ("ui64", np.uint64)])
def test_dynamic_update_slice_clamps_start_indices(index_type, dtype):
    src = f"""
func.func @main(%x: tensor<4x5xi16>, %u: tensor<2x3xi16>, %i: tensor<{index_type}>, %j: tensor<{index_type}>) -> tensor<4x5xi16> {{
  %0 = stablehlo.dynamic_update_slice %x, %u, %i, %j : (tensor<4x5xi16>, tensor<2x3xi16>, tensor<{index_type}>, tensor<{index_type}>) -> tensor<4x5xi16>
  return %0 : tensor<4x5xi16>
}}"""
    exe = kiln.compile(src)
    x = np.arange(20, dtype=np.int16).reshape(4, 5)
    u = -np.arange(1, 7, dtype=np.int16).reshape(2, 3)
    info = np.iinfo(dtype)
    for i, j in [(0, 0), (2, 2), (3, 4), (info.max, 1), (info.min, info.max)]:
        (got,) = exe(x.copy(), u, np.array(i, dtype), np.array(j, dtype))
        a, b = clamp(int(i), 2, 4), clamp(int(j), 3, 5)
        want = x.copy()
        want[a:a + 2, b:b + 3] = u
        np.testing.assert_array_equal(got, want, err_msg=f"start ({i}, {j})")


def pad_model(x, value, low, high, interior):
    """The spec's pad: interior padding between elements, then edges (negative: cut)."""
    out = x
    for d in range(x.ndim):
        n = out.shape[d]
        size = max(n + (n - 1) * interior[d], 0) if n else 0
        shape = list(out.shape)
        shape[d] = size
        spread = np.full(shape, value, x.dtype)
        index = [slice(None)] * x.ndim
        index[d] = slice(0, size, interior[d] + 1)
        spread[tuple(index)] = out
        lo, hi = low[d], high[d]
        shape[d] = size + max(lo, 0) + max(hi, 0)
        padded = np.full(shape, value, x.dtype)
        index[d] = slice(max(lo, 0), max(lo, 0) + size)
        padded[tuple(index)] = spread
        index[d] = slice(max(-lo, 0), shape[d] - max(-hi, 0))
        out = padded[tuple(index)]
    return out


@pytest.mark.parametrize("low,high,interior", [
    ([1, 2], [1, 2], [0, 0]),
    ([0, 1], [2, 1], [1, 2]),
    ([-1, 0], [0, -2], [0, 0]),
    ([-2, 3], [-1, -4], [2, 1]),
    ([0, 0], [0, 0], [3, 0]),
])
def test_pad_negative_and_interior(low, high, interior):
    x = np.arange(1, 13, dtype=np.float64).reshape(3, 4)
    want = pad_model(x, -0.5, low, high, interior)
    t_out = f"tensor<{want.shape[0]}x{want.shape[1]}xf64>"
    src = f"""
func.func @main(%x: tensor<3x4xf64>, %v: tensor<f64>) -> {t_out} {{
  %0 = stablehlo.pad %x, %v, low = {low}, high = {high}, interior = {interior} : (tensor<3x4xf64>, tensor<f64>) -> {t_out}
  return %0 : {t_out}
}}"""
    (got,) = kiln.compile(src)(x, np.array(-0.5))
    np.testing.assert_array_equal(got, want)


def test_strided_slice_returned_directly():
    # The result is a strided view of the input: it must reach the caller as a dense copy.
    src = """
func.func @main(%x: tensor<7x9xui8>) -> tensor<3x3xui8> {
  %0 = stablehlo.slice %x [1:7:2, 0:9:4] : (tensor<7x9xui8>) -> tensor<3x3xui8>
  return %0 : tensor<3x3xui8>
}"""
    x = np.arange(63, dtype=np.uint8).reshape(7, 9)
    (got,) = kiln.compile(src)(x)
    np.testing.assert_array_equal(got, x[1:7:2, 0:9:4])
