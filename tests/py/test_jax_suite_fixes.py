"""Fixes for failures that JAX's own test suite found through the PJRT plugin (issue 26,
tests/jax_suite/run_jax_tests.py), checked here on small programs against numpy."""
import numpy as np

import kiln

REDUCE_NO_DIMENSIONS = """
func.func @main(%x: tensor<2x3xf32>, %i: tensor<2x3xi32>) -> (tensor<2x3xf32>, tensor<2x3xi32>, tensor<2x3xf32>) {
  %f0 = stablehlo.constant dense<0.5> : tensor<f32>
  %i0 = stablehlo.constant dense<3> : tensor<i32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %0:2 = stablehlo.reduce(%x init: %f0), (%i init: %i0) across dimensions = [] : (tensor<2x3xf32>, tensor<2x3xi32>, tensor<f32>, tensor<i32>) -> (tensor<2x3xf32>, tensor<2x3xi32>)
    reducer(%a: tensor<f32>, %b: tensor<f32>) (%c: tensor<i32>, %d: tensor<i32>) {
      %s = stablehlo.add %a, %b : tensor<f32>
      %p = stablehlo.multiply %c, %d : tensor<i32>
      stablehlo.return %s, %p : tensor<f32>, tensor<i32>
    }
  %1 = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  return %0#0, %0#1, %1 : tensor<2x3xf32>, tensor<2x3xi32>, tensor<2x3xf32>
}
"""


def test_reduce_over_no_dimensions_combines_each_element_with_the_initial_value():
    x = np.array([[1.0, -2.0, np.nan], [np.inf, 0.0, 7.5]], np.float32)
    i = np.arange(6, dtype=np.int32).reshape(2, 3)
    total, product, largest = kiln.compile(REDUCE_NO_DIMENSIONS)(x, i)
    np.testing.assert_array_equal(total, x + np.float32(0.5))
    np.testing.assert_array_equal(product, i * 3)
    np.testing.assert_array_equal(largest, x)  # max(-inf, x) is x, NaN included


REDUCE_OF_NOTHING = """
func.func @main(%x: tensor<3x0xf32>, %i: tensor<3x0xi32>) -> (tensor<3xf32>, tensor<3xi32>) {
  %f0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %i0 = stablehlo.constant dense<7> : tensor<i32>
  %0:2 = stablehlo.reduce(%x init: %f0), (%i init: %i0) across dimensions = [1] : (tensor<3x0xf32>, tensor<3x0xi32>, tensor<f32>, tensor<i32>) -> (tensor<3xf32>, tensor<3xi32>)
    reducer(%a: tensor<f32>, %b: tensor<f32>) (%c: tensor<i32>, %d: tensor<i32>) {
      %s = stablehlo.maximum %a, %b : tensor<f32>
      %p = stablehlo.add %c, %d : tensor<i32>
      stablehlo.return %s, %p : tensor<f32>, tensor<i32>
    }
  return %0#0, %0#1 : tensor<3xf32>, tensor<3xi32>
}
"""


def test_reduce_of_no_elements_gives_the_initial_values():
    largest, total = kiln.compile(REDUCE_OF_NOTHING)(np.zeros((3, 0), np.float32),
                                                      np.zeros((3, 0), np.int32))
    np.testing.assert_array_equal(largest, np.full(3, -np.inf, np.float32))
    np.testing.assert_array_equal(total, np.full(3, 7, np.int32))
