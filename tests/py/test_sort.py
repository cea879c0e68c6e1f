"""stablehlo.sort (Kiln's merge sort, passes/legalize/sort.py) against JAX on CPU and numpy."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import kiln


pytestmark = pytest.mark.usefixtures("jax_x64")  # 64-bit reference results


def via_jax(fn, *args):
    text = jax.jit(fn, keep_unused=True).lower(*args).as_text()
    assert '"stablehlo.sort"' in text
    got = kiln.compile(text)(*[np.array(a, copy=True) for a in args])
    want = jax.jit(fn)(*args)
    want = want if isinstance(want, (tuple, list)) else (want,)
    return got, [np.asarray(w) for w in want]


def assert_same(fn, *args):
    got, want = via_jax(fn, *args)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
        if g.dtype.kind == "f":  # where -0.0 and 0.0 land matters too
            np.testing.assert_array_equal(np.signbit(g), np.signbit(w))


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_sort_each_axis(axis):
    x = np.random.default_rng(axis).standard_normal((4, 7, 5)).astype(np.float32)
    assert_same(lambda a: jnp.sort(a, axis=axis), x)


def test_float_total_order_with_nan_inf_and_signed_zero():
    x = np.array([np.nan, 1.0, -0.0, np.inf, 0.0, -np.inf, -1.0, 0.0, -0.0, np.nan, 3.0], np.float64)
    got, want = via_jax(jnp.sort, x)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(np.signbit(got[0]), np.signbit(want[0]))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64,
                                   np.float16, np.bool_])
def test_element_types(dtype):
    rng = np.random.default_rng(3)
    if dtype == np.bool_:
        x = rng.random((3, 9)) < 0.5
    elif np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, (3, 9), endpoint=True, dtype=dtype)
    else:
        x = rng.standard_normal((3, 9)).astype(dtype)
    assert_same(lambda a: jnp.sort(a, axis=1), x)


def test_stable_argsort_with_many_ties():
    # Keys with heavy duplication: a stable sort must keep the original order of equal keys.
    x = np.random.default_rng(4).integers(0, 4, 37).astype(np.int32)
    got, want = via_jax(lambda a: jnp.argsort(a, stable=True), x)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[0], np.argsort(x, kind="stable"))


def test_multi_operand_sort_moves_values_with_keys():
    keys = np.array([3, 1, 2, 1, 3, 0], np.int32)
    vals = np.array([0.5, 1.5, 2.5, 3.5, 4.5, 5.5], np.float32)
    more = np.arange(6, dtype=np.int64)
    assert_same(lambda k, v, m: lax.sort((k, v, m), num_keys=1, is_stable=True), keys, vals, more)


def test_two_key_lexicographic_sort():
    a = np.array([2, 1, 2, 1, 0, 2], np.int32)
    b = np.array([5.0, 7.0, -1.0, 7.0, 3.0, np.nan], np.float32)
    assert_same(lambda x, y: lax.sort((x, y), num_keys=2), a, b)


def test_custom_descending_comparator_and_non_stable_flag():
    src = """
func.func @main(%x: tensor<8xi32>) -> tensor<8xi32> {
  %0 = "stablehlo.sort"(%x) ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %gt = stablehlo.compare GT, %a, %b, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %gt : tensor<i1>
  }) {dimension = 0 : i64, is_stable = false} : (tensor<8xi32>) -> tensor<8xi32>
  return %0 : tensor<8xi32>
}"""
    x = np.array([5, -3, 9, 0, 9, -2**31, 2**31 - 1, 1], np.int32)
    (got,) = kiln.compile(src)(x)
    np.testing.assert_array_equal(got, np.sort(x)[::-1])


def test_comparator_on_second_operand_only():
    # Sort (a, b) by b descending: the comparator ignores the first operand's pair.
    src = """
func.func @main(%a: tensor<5xf32>, %b: tensor<5xi64>) -> (tensor<5xf32>, tensor<5xi64>) {
  %0:2 = "stablehlo.sort"(%a, %b) ({
  ^bb0(%a0: tensor<f32>, %a1: tensor<f32>, %b0: tensor<i64>, %b1: tensor<i64>):
    %gt = stablehlo.compare GT, %b0, %b1, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %gt : tensor<i1>
  }) {dimension = 0 : i64, is_stable = true} : (tensor<5xf32>, tensor<5xi64>) -> (tensor<5xf32>, tensor<5xi64>)
  return %0#0, %0#1 : tensor<5xf32>, tensor<5xi64>
}"""
    a = np.array([0.0, 1.0, 2.0, 3.0, 4.0], np.float32)
    b = np.array([2, 9, 2, -4, 9], np.int64)
    ga, gb = kiln.compile(src)(a, b)
    np.testing.assert_array_equal(gb, [9, 9, 2, 2, -4])
    np.testing.assert_array_equal(ga, [1.0, 4.0, 0.0, 2.0, 3.0])  # ties keep input order


@pytest.mark.parametrize("shape", [(1,), (0,), (3, 0), (5, 1)])
def test_trivial_sizes(shape):
    src = f"""
func.func @main(%x: tensor<{'x'.join(map(str, shape))}xf32>) -> tensor<{'x'.join(map(str, shape))}xf32> {{
  %0 = "stablehlo.sort"(%x) ({{
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %lt = stablehlo.compare LT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }}) {{dimension = {len(shape) - 1} : i64}} : (tensor<{'x'.join(map(str, shape))}xf32>) -> tensor<{'x'.join(map(str, shape))}xf32>
  return %0 : tensor<{'x'.join(map(str, shape))}xf32>
}}"""
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    (got,) = kiln.compile(src)(x)
    np.testing.assert_array_equal(got, np.sort(x, axis=-1))


def test_large_sort_is_n_log_n():
    # 300k elements: an O(n^2) sort would not finish within the test timeout.
    x = np.random.default_rng(6).standard_normal(300_000).astype(np.float32)
    got, _ = via_jax(jnp.sort, x)
    np.testing.assert_array_equal(got[0], np.sort(x))
