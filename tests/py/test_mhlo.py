"""MHLO inputs: converted through jaxlib's hlo-legalize-to-stablehlo."""
from __future__ import annotations

import numpy as np

import kiln
from kiln.frontend.mhlo import has_mhlo


def test_detects_ops_not_jax_attributes():
    assert has_mhlo("%0 = mhlo.add %x, %x : tensor<f32>")
    assert has_mhlo('%0 = "mhlo.abs"(%x) : (tensor<f32>) -> tensor<f32>')
    assert not has_mhlo('module @m attributes {mhlo.num_partitions = 1 : i32} {\n'
                        '  func.func @main(%a: tensor<f32> {mhlo.sharding = ""}) -> tensor<f32> {\n')


def test_mhlo_program_runs():
    src = ("func.func @main(%x: tensor<5xf32>, %y: tensor<5xf32>) -> tensor<5xf32> {\n"
           "  %0 = mhlo.add %x, %y : tensor<5xf32>\n"
           "  %1 = \"mhlo.maximum\"(%0, %x) : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>\n"
           "  return %1 : tensor<5xf32>\n}")
    x = np.array([1, -2, np.inf, np.nan, -0.0], np.float32)
    y = np.array([0.5, 1, -np.inf, 1, 0.0], np.float32)
    (got,) = kiln.compile(src)(x, y)
    with np.errstate(invalid="ignore"):  # inf + -inf is NaN, as intended
        want = np.maximum(x + y, x)
    np.testing.assert_array_equal(got, want)


def test_mhlo_and_chlo_together():
    src = ("func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {\n"
           "  %0 = chlo.erf %x : tensor<3xf32> -> tensor<3xf32>\n"
           "  %1 = mhlo.negate %0 : tensor<3xf32>\n"
           "  return %1 : tensor<3xf32>\n}")
    x = np.array([0.0, 0.5, -3.0], np.float32)
    (got,) = kiln.compile(src)(x)
    from scipy import special
    np.testing.assert_allclose(got, -special.erf(x), rtol=1e-6, atol=1e-7)
