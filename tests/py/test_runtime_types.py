"""The runtime passes every element type numpy/ml_dtypes can hold, both ways."""
import ml_dtypes
import numpy as np
import pytest

import kiln
from conftest import binary, unary

IDENTITY_TYPES = [
    ("i1", np.bool_), ("i8", np.int8), ("ui8", np.uint8), ("i16", np.int16), ("ui16", np.uint16),
    ("i32", np.int32), ("ui32", np.uint32), ("i64", np.int64), ("ui64", np.uint64),
    ("i2", ml_dtypes.int2), ("ui2", ml_dtypes.uint2), ("i4", ml_dtypes.int4), ("ui4", ml_dtypes.uint4),
    ("f16", np.float16), ("bf16", ml_dtypes.bfloat16), ("f32", np.float32), ("f64", np.float64),
    ("f8E4M3FN", ml_dtypes.float8_e4m3fn), ("f8E5M2", ml_dtypes.float8_e5m2),
    ("f8E4M3FNUZ", ml_dtypes.float8_e4m3fnuz), ("f8E5M2FNUZ", ml_dtypes.float8_e5m2fnuz),
    ("f8E4M3B11FNUZ", ml_dtypes.float8_e4m3b11fnuz),
    ("complex<f32>", np.complex64), ("complex<f64>", np.complex128),
]


def sample(dtype, shape, rng):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu" or dtype.name.startswith(("int", "uint")):
        info = ml_dtypes.iinfo(dtype)
        raw = rng.integers(int(info.min), int(info.max), shape, endpoint=True,
                           dtype=np.uint64 if dtype == np.uint64 else np.int64)
        return raw.astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.uniform(-4, 4, shape).astype(dtype)


@pytest.mark.parametrize("mlir_type,dtype", IDENTITY_TYPES, ids=[t for t, _ in IDENTITY_TYPES])
def test_round_trip_through_compiled_code(mlir_type, dtype, rng):
    # `reverse` moves every element, so a wrong element size or stride shows up.
    t = f"tensor<3x5x{mlir_type}>"
    exe = kiln.compile(f"func.func @main(%x: {t}) -> {t} {{\n"
                       f"  %0 = stablehlo.reverse %x, dims = [1] : {t}\n  return %0 : {t}\n}}")
    x = sample(dtype, (3, 5), rng)
    (y,) = exe(x)
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(y.view(np.uint8), x[:, ::-1].copy().view(np.uint8))


@pytest.mark.parametrize("mlir_type,dtype", [("i8", np.int8), ("ui8", np.uint8), ("i32", np.int32),
                                             ("ui32", np.uint32), ("i64", np.int64), ("ui64", np.uint64)])
def test_integer_add_wraps(mlir_type, dtype, rng):
    info = np.iinfo(dtype)
    x = np.array([info.max, info.min, 0, 1], dtype)
    y = np.array([1, -1 if info.min < 0 else info.max, 0, info.max], dtype)
    (z,) = kiln.compile(binary("stablehlo.add", f"tensor<4x{mlir_type}>"))(x, y)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(z, x + y)


def test_unsigned_divide_and_compare_use_unsigned_semantics():
    x = np.array([4000000000, 7, 255], np.uint32)
    y = np.array([3, 2, 5], np.uint32)
    (q,) = kiln.compile(binary("stablehlo.divide", "tensor<3xui32>"))(x, y)
    np.testing.assert_array_equal(q, x // y)


@pytest.mark.parametrize("mlir_type,dtype,tol", [("f16", np.float16, 1e-3), ("bf16", ml_dtypes.bfloat16, 1e-2),
                                                 ("f32", np.float32, 1e-6), ("f64", np.float64, 1e-14)])
def test_float_arithmetic_matches_numpy(mlir_type, dtype, tol, rng):
    x = sample(dtype, (8,), rng)
    y = sample(dtype, (8,), rng)
    (z,) = kiln.compile(binary("stablehlo.multiply", f"tensor<8x{mlir_type}>"))(x, y)
    np.testing.assert_allclose(z.astype(np.float64), (x * y).astype(np.float64), rtol=tol)


def test_complex_multiply():
    x = np.array([1 + 2j, -3.5 + 0.5j], np.complex64)
    y = np.array([2 - 1j, 1j], np.complex64)
    (z,) = kiln.compile(binary("stablehlo.multiply", "tensor<2xcomplex<f32>>"))(x, y)
    np.testing.assert_allclose(z, x * y, rtol=1e-6)


def test_scalar_rank0():
    (z,) = kiln.compile(binary("stablehlo.subtract", "tensor<f64>"))(np.float64(5.5), np.float64(2.0))
    assert z.shape == () and z == 3.5


def test_zero_size_dimension():
    x = np.zeros((2, 0, 3), np.float32)
    (z,) = kiln.compile(unary("stablehlo.negate", "tensor<2x0x3xf32>"))(x)
    assert z.shape == (2, 0, 3)


def test_multiple_results_and_repeated_result():
    exe = kiln.compile("""
    func.func @main(%x: tensor<3xi32>) -> (tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>) {
      %0 = stablehlo.add %x, %x : tensor<3xi32>
      %1 = stablehlo.multiply %x, %x : tensor<3xi32>
      return %0, %1, %0, %x : tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>
    }""")
    x = np.array([1, 2, 3], np.int32)
    a, b, c, d = exe(x)
    np.testing.assert_array_equal(a, 2 * x)
    np.testing.assert_array_equal(b, x * x)
    np.testing.assert_array_equal(c, 2 * x)
    np.testing.assert_array_equal(d, x)
    a[0] = 99  # results are independent arrays, even the repeated one
    assert c[0] == 2


def test_inputs_are_not_modified():
    exe = kiln.compile(unary("stablehlo.exponential", "tensor<4xf32>"))
    x = np.ones(4, np.float32)
    exe(x)
    np.testing.assert_array_equal(x, np.ones(4, np.float32))


def test_non_contiguous_and_array_like_inputs():
    exe = kiln.compile(unary("stablehlo.negate", "tensor<2x3xf64>"))
    base = np.arange(12, dtype=np.float64).reshape(3, 4)
    view = base[:2, 1:]  # strided view
    (z,) = exe(view)
    np.testing.assert_array_equal(z, -view)

    class ArrayLike:
        def __array__(self, dtype=None, copy=None):
            return np.full((2, 3), 2.0)

    (z,) = exe(ArrayLike())
    np.testing.assert_array_equal(z, np.full((2, 3), -2.0))


def test_dlpack_input():
    jnp = pytest.importorskip("jax.numpy", reason="jax is not installed")
    exe = kiln.compile(unary("stablehlo.negate", "tensor<3xf32>"))
    (z,) = exe(jnp.arange(3, dtype=jnp.float32))
    np.testing.assert_array_equal(z, -np.arange(3, dtype=np.float32))


def test_entry_tuples_are_flattened():
    exe = kiln.compile("""
    func.func @main(%t: tuple<tensor<2xf32>, tuple<tensor<i32>, tensor<2xf32>>>) -> tuple<tensor<2xf32>, tuple<tensor<i32>>> {
      %0 = stablehlo.get_tuple_element %t[0] : (tuple<tensor<2xf32>, tuple<tensor<i32>, tensor<2xf32>>>) -> tensor<2xf32>
      %1 = stablehlo.get_tuple_element %t[1] : (tuple<tensor<2xf32>, tuple<tensor<i32>, tensor<2xf32>>>) -> tuple<tensor<i32>, tensor<2xf32>>
      %2 = stablehlo.get_tuple_element %1[1] : (tuple<tensor<i32>, tensor<2xf32>>) -> tensor<2xf32>
      %3 = stablehlo.get_tuple_element %1[0] : (tuple<tensor<i32>, tensor<2xf32>>) -> tensor<i32>
      %4 = stablehlo.add %0, %2 : tensor<2xf32>
      %5 = stablehlo.tuple %3 : tuple<tensor<i32>>
      %6 = stablehlo.tuple %4, %5 : tuple<tensor<2xf32>, tuple<tensor<i32>>>
      return %6 : tuple<tensor<2xf32>, tuple<tensor<i32>>>
    }""")
    assert [str(s) for s in exe.arg_specs] == ["tensor<2xf32>", "tensor<i32>", "tensor<2xf32>"]
    a, b = exe(np.ones(2, np.float32), np.int32(7), np.full(2, 3, np.float32))
    np.testing.assert_array_equal(a, [4, 4])
    assert b == 7


def test_in_place_updates_never_write_into_inputs():
    t = "tensor<5xf32>"
    exe = kiln.compile(f"""func.func @main(%x: {t}, %u: tensor<2xf32>, %i: tensor<i32>) -> {t} {{
      %0 = stablehlo.dynamic_update_slice %x, %u, %i : ({t}, tensor<2xf32>, tensor<i32>) -> {t}
      return %0 : {t}
    }}""")
    x = np.zeros(5, np.float32)
    (y,) = exe(x, np.ones(2, np.float32), np.int32(1))
    np.testing.assert_array_equal(y, [0, 1, 1, 0, 0])
    np.testing.assert_array_equal(x, np.zeros(5, np.float32))
