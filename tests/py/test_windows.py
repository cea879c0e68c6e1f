"""Windowed ops: select_and_scatter (Kiln's lowering, passes/legalize/windows.py) and
reduce_window with padding and dilations (upstream's lowering), against JAX on CPU."""
import jax
import numpy as np
import pytest
from jax import lax
from jax._src.lax.windowed_reductions import _select_and_scatter_add

import kiln


pytestmark = pytest.mark.usefixtures("jax_x64")  # 64-bit reference results


def via_jax(fn, op, *args):
    text = jax.jit(fn, keep_unused=True).lower(*args).as_text()
    assert f'"stablehlo.{op}"' in text
    got = kiln.compile(text)(*[np.array(a, copy=True) for a in args])
    want = jax.jit(fn)(*args)
    return got[0], np.asarray(want)


@pytest.mark.parametrize("select,window,strides,padding", [
    (lax.ge_p, (2, 2), (2, 2), ((0, 0), (0, 0))),          # max pool, no overlap
    (lax.ge_p, (3, 3), (1, 1), ((1, 1), (1, 1))),          # overlapping, SAME padding
    (lax.le_p, (3, 2), (2, 1), ((0, 1), (2, 0))),          # min pool, uneven padding
    (lax.ge_p, (1, 4), (1, 3), ((0, 0), (3, 3))),          # windows entirely in padding
])
def test_select_and_scatter_add(select, window, strides, padding):
    rng = np.random.default_rng(0)
    # Few distinct values force ties: the first element in row-major window order must win.
    operand = rng.integers(0, 3, (5, 7)).astype(np.float32)
    out_shape = [(operand.shape[d] + sum(padding[d]) - window[d]) // strides[d] + 1 for d in range(2)]
    source = rng.integers(1, 9, out_shape).astype(np.float32)
    got, want = via_jax(lambda s, o: _select_and_scatter_add(s, o, select, window, strides, padding),
                        "select_and_scatter", source, operand)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int64, np.float16, np.float64])
def test_select_and_scatter_element_types(dtype):
    rng = np.random.default_rng(1)
    operand = rng.integers(0, 100, (2, 4, 6)).astype(dtype)
    source = rng.integers(0, 100, (1, 3, 5)).astype(dtype)
    got, want = via_jax(lambda s, o: _select_and_scatter_add(s, o, lax.ge_p, (2, 2, 2), (1, 1, 1),
                                                            ((0, 0), (0, 0), (0, 0))),
                        "select_and_scatter", source, operand)
    np.testing.assert_array_equal(got, want)


def test_select_and_scatter_nan_and_init_value():
    # A custom scatter (multiply) and init 1: elements nobody selects stay 1. With GE, a NaN
    # never wins against the current choice, and NaN first in a window is replaced.
    src = """
func.func @main(%operand: tensor<6xf32>, %source: tensor<3xf32>) -> tensor<6xf32> {
  %one = stablehlo.constant dense<1.0> : tensor<f32>
  %0 = "stablehlo.select_and_scatter"(%operand, %source, %one) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %ge = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %ge : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.multiply %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) {window_dimensions = array<i64: 2>, window_strides = array<i64: 2>}
     : (tensor<6xf32>, tensor<3xf32>, tensor<f32>) -> tensor<6xf32>
  return %0 : tensor<6xf32>
}"""
    operand = np.array([np.nan, 3.0, 5.0, np.nan, -np.inf, -1.0], np.float32)
    source = np.array([2.0, 3.0, 4.0], np.float32)
    (got,) = kiln.compile(src)(operand, source)
    # window 0: NaN then 3 -> GE(NaN, 3) false -> 3 wins; window 1: 5 then NaN -> GE(5, NaN)
    # false -> NaN wins; window 2: -inf then -1 -> -1 wins.
    np.testing.assert_array_equal(got, [1.0, 2.0, 1.0, 3.0, 1.0, 4.0])


@pytest.mark.parametrize("base_dilation,window_dilation,padding", [
    ((1, 1), (1, 1), ((1, 2), (0, 1))),
    ((2, 1), (1, 1), ((0, 0), (1, 1))),
    ((1, 1), (2, 3), ((1, 1), (2, 2))),
    ((2, 3), (2, 1), ((1, 0), (0, 2))),
])
@pytest.mark.parametrize("kind", ["add", "max"])
def test_reduce_window_padding_and_dilation(base_dilation, window_dilation, padding, kind):
    x = np.random.default_rng(2).integers(-20, 20, (5, 6)).astype(np.float32)
    init, op = (0.0, lax.add) if kind == "add" else (-np.inf, lax.max)
    got, want = via_jax(lambda a: lax.reduce_window(a, init, op, (2, 3), (1, 2), padding,
                                                    base_dilation, window_dilation),
                        "reduce_window", x)
    np.testing.assert_array_equal(got, want)
