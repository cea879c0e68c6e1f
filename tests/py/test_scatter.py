"""stablehlo.scatter (Kiln's own lowering, passes/legalize/scatter.py) against JAX on CPU,
i.e. XLA's semantics, and against a sequential Python model for regions JAX cannot express."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import kiln


pytestmark = pytest.mark.usefixtures("jax_x64")  # 64-bit reference results


def via_jax(fn, *args):
    """Compile fn's StableHLO with Kiln; return (kiln result, JAX result)."""
    text = jax.jit(fn, keep_unused=True).lower(*args).as_text()
    assert '"stablehlo.scatter"' in text  # the test exercises Kiln's lowering, not a JAX rewrite
    got = kiln.compile(text)(*[np.array(a, copy=True) for a in args])
    want = jax.jit(fn)(*args)
    if not isinstance(want, (tuple, list)):
        want = (want,)
    return got, [np.asarray(w) for w in want]


def assert_same(fn, *args):
    got, want = via_jax(fn, *args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


DROP = lax.GatherScatterMode.FILL_OR_DROP


@pytest.mark.parametrize("kind", ["add", "mul", "min", "max", "set"])
def test_duplicate_and_out_of_bounds_indices(kind):
    # Integer-valued floats keep sums exact, so any application order gives the same answer.
    x = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
    idx = np.array([1, 3, 1, 4, -1, 1, 0], np.int32)  # 4 is past the end; -1 is below 0
    u = np.arange(21, dtype=np.float32).reshape(7, 3) - 10
    dn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
    op = {"add": lax.scatter_add, "mul": lax.scatter_mul, "min": lax.scatter_min,
          "max": lax.scatter_max, "set": lax.scatter}[kind]
    if kind == "set":  # duplicates with `set` are order-dependent: keep indices unique
        idx = np.array([1, 3, 4, -1, 0], np.int32)
        u = u[:5]
    assert_same(lambda a, i, b: op(a, i[:, None], b, dn, mode=DROP), x, idx, u)


def test_window_partially_out_of_bounds_is_skipped_whole():
    # A 2x2 window starting at row 3 of a 4-row operand does not fit: XLA drops all of it.
    x = np.zeros((4, 5), np.int32)
    idx = np.array([[0, 0], [3, 1], [2, 3], [2, 4], [1, -1]], np.int64)
    u = np.arange(20, dtype=np.int32).reshape(5, 2, 2) + 1
    dn = lax.ScatterDimensionNumbers(update_window_dims=(1, 2), inserted_window_dims=(),
                                     scatter_dims_to_operand_dims=(0, 1))
    got, want = via_jax(lambda a, i, b: lax.scatter_add(a, i, b, dn, mode=DROP), x, idx, u)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[0][2:, 3:].sum() == u[2].sum()  # only the in-bounds window landed there


def test_index_vector_dim_in_the_middle_and_permuted_operand_dims():
    rng = np.random.default_rng(0)
    x = rng.integers(-9, 9, (3, 4, 2)).astype(np.int64)
    idx = np.array([[[0, 2], [1, 0], [2, 1]], [[0, 1], [1, 0], [0, 9]]], np.int64)
    u = np.ones((2, 3, 2, 2), np.int64)
    dn = lax.ScatterDimensionNumbers(update_window_dims=(2, 3), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(1, 0))
    # index_vector_dim is last in JAX; move it to the middle in the StableHLO ourselves.
    text = jax.jit(lambda a, i, b: lax.scatter_add(a, i, b, dn, mode=DROP)).lower(x, idx, u).as_text()
    assert "index_vector_dim = 2" in text
    (got,) = kiln.compile(text)(x.copy(), idx.copy(), u.copy())
    want = x.copy()
    for p in np.ndindex(2, 3):
        i1, i0 = idx[p]
        if 0 <= i0 <= 2 and 0 <= i1 <= 2:
            want[i0, i1:i1 + 2, :] += 1
    np.testing.assert_array_equal(got, want)


def test_batching_dims():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 50, (2, 5, 3)).astype(np.int32)
    idx = np.array([[[4], [0], [4]], [[1], [1], [7]]], np.int32)  # 7: out of bounds
    u = rng.integers(0, 50, (2, 3, 3)).astype(np.int32)
    dn = lax.ScatterDimensionNumbers(update_window_dims=(2,), inserted_window_dims=(1,),
                                     scatter_dims_to_operand_dims=(1,),
                                     operand_batching_dims=(0,), scatter_indices_batching_dims=(0,))
    assert_same(lambda a, i, b: lax.scatter_add(a, i, b, dn, mode=DROP), x, idx, u)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int64, np.uint64, np.float16, np.bool_,
                                   np.complex64])
def test_element_types(dtype):
    x = np.zeros((6,), dtype)
    idx = np.array([[5], [0], [5], [2]], np.uint32)
    if dtype == np.bool_:
        u = np.array([True, False, True, True])
        fn = lambda a, i, b: a.at[i[:, 0]].max(b, mode="drop")
    else:
        u = (np.array([200, 3, 100, 7]) if np.dtype(dtype).kind == "u" else np.array([100, -3, 100, 7])).astype(dtype)
        fn = lambda a, i, b: a.at[i[:, 0]].add(b, mode="drop")  # 8-bit sums wrap
    assert_same(fn, x, idx, u)


def test_integer_overflow_wraps():
    x = np.array([2**31 - 1, -2**31], np.int32)
    assert_same(lambda a: a.at[jnp.array([0, 1, 0])].add(jnp.array([1, -1, 5], jnp.int32)), x)


def test_float_special_values():
    x = np.array([0.0, -0.0, 1.0, np.nan], np.float32)
    u = np.array([-0.0, np.inf, -np.inf, np.nan, 2.0], np.float32)
    idx = np.array([0, 1, 2, 2, 3], np.int32)
    got, want = via_jax(lambda a, i, b: (a.at[i].add(b), a.at[i].min(b), a.at[i].max(b)), x, idx, u)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)  # NaN where JAX has NaN
        # The signs of zeros and infinities; a NaN's sign is unspecified (IEEE 754's minimum
        # and maximum, LLVM's llvm.minimum/maximum) and differs between LLVM's code generators.
        numbers = ~np.isnan(w)
        np.testing.assert_array_equal(np.signbit(g)[numbers], np.signbit(w)[numbers])


def test_variadic_scatter_argmax_like():
    # (key, value) pairs: keep the update with the larger key; a tie keeps the earlier one.
    src = """
func.func @main(%k: tensor<4xi32>, %v: tensor<4xf32>, %idx: tensor<5x1xi64>, %uk: tensor<5xi32>, %uv: tensor<5xf32>) -> (tensor<4xi32>, tensor<4xf32>) {
  %0:2 = "stablehlo.scatter"(%k, %v, %idx, %uk, %uv) ({
  ^bb0(%ok: tensor<i32>, %ov: tensor<f32>, %nk: tensor<i32>, %nv: tensor<f32>):
    %gt = stablehlo.compare GT, %nk, %ok : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %rk = stablehlo.select %gt, %nk, %ok : tensor<i1>, tensor<i32>
    %rv = stablehlo.select %gt, %nv, %ov : tensor<i1>, tensor<f32>
    stablehlo.return %rk, %rv : tensor<i32>, tensor<f32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0],
      scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}
     : (tensor<4xi32>, tensor<4xf32>, tensor<5x1xi64>, tensor<5xi32>, tensor<5xf32>) -> (tensor<4xi32>, tensor<4xf32>)
  return %0#0, %0#1 : tensor<4xi32>, tensor<4xf32>
}"""
    k = np.array([0, 0, 0, 0], np.int32)
    v = np.array([0, 0, 0, 0], np.float32)
    idx = np.array([[1], [1], [3], [1], [-2]], np.int64)
    uk = np.array([5, 9, 2, 9, 100], np.int32)
    uv = np.array([1.5, 2.5, 3.5, 4.5, 5.5], np.float32)
    rk, rv = kiln.compile(src)(k, v, idx, uk, uv)
    np.testing.assert_array_equal(rk, [0, 9, 0, 2])
    np.testing.assert_array_equal(rv, [0, 2.5, 0, 3.5])


def test_non_commutative_region_applies_updates_in_order():
    # result = 10 * old + new: the digits record the order the duplicates were applied in.
    src = """
func.func @main(%x: tensor<3xi64>, %idx: tensor<6xi32>, %u: tensor<6xi64>) -> tensor<3xi64> {
  %0 = "stablehlo.scatter"(%x, %idx, %u) ({
  ^bb0(%old: tensor<i64>, %new: tensor<i64>):
    %ten = stablehlo.constant dense<10> : tensor<i64>
    %m = stablehlo.multiply %old, %ten : tensor<i64>
    %s = stablehlo.add %m, %new : tensor<i64>
    stablehlo.return %s : tensor<i64>
  }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0],
      scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}
     : (tensor<3xi64>, tensor<6xi32>, tensor<6xi64>) -> tensor<3xi64>
  return %0 : tensor<3xi64>
}"""
    idx = np.array([2, 0, 2, 2, 0, 1], np.int32)
    u = np.array([1, 2, 3, 4, 5, 6], np.int64)
    (got,) = kiln.compile(src)(np.array([7, 8, 9], np.int64), idx, u)
    np.testing.assert_array_equal(got, [725, 86, 9134])


def test_empty_updates_return_the_operand():
    src = """
func.func @main(%x: tensor<4xf32>, %idx: tensor<0x1xi32>, %u: tensor<0xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.scatter"(%x, %idx, %u) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0],
      scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}
     : (tensor<4xf32>, tensor<0x1xi32>, tensor<0xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}"""
    x = np.array([1, -0.0, np.nan, 4], np.float32)
    (got,) = kiln.compile(src)(x, np.zeros((0, 1), np.int32), np.zeros((0,), np.float32))
    np.testing.assert_array_equal(got.view(np.uint32), x.view(np.uint32))


def test_large_scatter_is_linear_time():
    # 200k updates into 1000 bins: a quadratic lowering would not finish in the test timeout.
    rng = np.random.default_rng(2)
    x = np.zeros(1000, np.int64)
    idx = rng.integers(-10, 1010, 200_000).astype(np.int32)
    u = rng.integers(-5, 5, 200_000).astype(np.int64)
    got, want = via_jax(lambda a, i, b: a.at[i].add(b, mode="drop"), x, idx, u)
    np.testing.assert_array_equal(got[0], want[0])


def test_dynamic_operand_without_arguments_is_a_clear_error():
    src = """
func.func @main(%x: tensor<?xf32>, %i: tensor<2x1xi32>, %u: tensor<2xf32>) -> tensor<?xf32> {
  %0 = "stablehlo.scatter"(%x, %i, %u) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0],
      scatter_dims_to_operand_dims = [0], index_vector_dim = 1>} : (tensor<?xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}"""
    with pytest.raises(kiln.KilnError) as info:
        kiln.compile(src, filename="dyn.mlir").ir("legalize")
    assert info.value.location.startswith("dyn.mlir:3:")
    assert "dynamically shaped" in str(info.value) and info.value.hint
    # Called with concrete arguments, the shapes are refined and the scatter runs.
    (got,) = kiln.compile(src)(np.zeros(4, np.float32), np.array([[1], [1]], np.int32),
                               np.ones(2, np.float32))
    np.testing.assert_array_equal(got, [0, 2, 0, 0])


def test_implicit_index_vector_dim_matches_reference_interpreter():
    # index_vector_dim == rank(indices): each index is a scalar. In-bounds windows only, where
    # XLA and the StableHLO reference interpreter agree.
    from kiln.reference import evaluate
    src = """
func.func @main(%x: tensor<4x3xf32>, %i: tensor<2x2xi32>, %u: tensor<2x2x3xf32>) -> tensor<4x3xf32> {
  %0 = "stablehlo.scatter"(%x, %i, %u) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.subtract %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [2], inserted_window_dims = [0],
      scatter_dims_to_operand_dims = [0], index_vector_dim = 2>}
     : (tensor<4x3xf32>, tensor<2x2xi32>, tensor<2x2x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}"""
    rng = np.random.default_rng(7)
    args = [rng.standard_normal((4, 3)).astype(np.float32), np.array([[3, 0], [3, 1]], np.int32),
            rng.standard_normal((2, 2, 3)).astype(np.float32)]
    (got,) = kiln.compile(src)(*[a.copy() for a in args])
    (want,) = evaluate(src, args, ["tensor<4x3xf32>", "tensor<2x2xi32>", "tensor<2x2x3xf32>"])
    np.testing.assert_allclose(got, want, rtol=1e-6)
