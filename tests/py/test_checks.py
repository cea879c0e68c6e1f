"""check.* semantics: exact, almost-equal and ULP-close comparisons, NaN equal to NaN."""
import ml_dtypes
import numpy as np
import pytest

import kiln
from kiln.runtime.checks import evaluate


def outcome(kind, actual, expected, **attrs):
    return evaluate({"kind": kind, "loc": "t", **attrs}, [np.asarray(actual), np.asarray(expected)])


def test_eq_exact_for_integers():
    assert outcome("expect_eq", [1, 2], [1, 2]).passed
    bad = outcome("expect_eq", np.array([1, 2, 3]), np.array([1, 5, 3]))
    assert not bad.passed and "index [1]" in bad.detail and "1 of 3" in bad.detail


def test_nan_equals_nan_and_signed_zero():
    assert outcome("expect_eq", [np.nan, 0.0], [np.nan, -0.0]).passed
    assert not outcome("expect_eq", [np.nan], [1.0]).passed


def test_infinities_must_match_sign():
    assert outcome("expect_close", [np.inf], [np.inf]).passed
    assert not outcome("expect_close", [np.inf], [-np.inf]).passed


def test_almost_eq_uses_tolerance():
    assert outcome("expect_almost_eq", [1.0], [1.00005]).passed
    assert not outcome("expect_almost_eq", [1.0], [1.001]).passed
    assert outcome("expect_almost_eq", [1.0], [1.001], tolerance=1e-2).passed


def test_close_within_ulps_for_f32():
    one = np.float32(1.0)
    three_ulps = np.nextafter(np.nextafter(np.nextafter(one, 2), 2), 2)
    assert outcome("expect_close", [one], [three_ulps]).passed
    assert not outcome("expect_close", [one], [np.float32(1.01)]).passed


def test_close_bf16():
    a = np.array([1.0, 2.0], ml_dtypes.bfloat16)
    assert outcome("expect_close", a, a).passed
    assert not outcome("expect_close", a, np.array([1.0, 3.0], ml_dtypes.bfloat16)).passed


def test_complex_compares_parts():
    assert outcome("expect_close", [1 + 1j], [1 + 1j]).passed
    assert not outcome("expect_close", [1 + 1j], [1 + 2j]).passed


def test_worst_mismatch_reported():
    bad = outcome("expect_close", np.array([1.0, 2.0, 3.0]), np.array([1.5, 2.0, 9.0]))
    assert "worst at index [2]" in bad.detail


PROGRAM = """func.func @main() -> tensor<2xf32> {
  %a = stablehlo.constant dense<[1.0, 4.0]> : tensor<2xf32>
  %0 = stablehlo.sqrt %a : tensor<2xf32>
  %e = stablehlo.constant dense<[1.0, EXPECTED]> : tensor<2xf32>
  stablehlo.custom_call @check.expect_close(%0, %e) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
  return %0 : tensor<2xf32>
}"""


def test_program_checks_pass_and_fail():
    exe = kiln.compile(PROGRAM.replace("EXPECTED", "2.0"))
    np.testing.assert_array_equal(exe()[0], [1.0, 2.0])
    bad = kiln.compile(PROGRAM.replace("EXPECTED", "3.0"), filename="prog.mlir")
    with pytest.raises(kiln.CheckFailure, match=r"check.expect_close at prog.mlir:5:3: FAILED.*index \[1\]"):
        bad()


def test_generic_const_check():
    exe = kiln.compile("""func.func @main() {
      %c = stablehlo.constant dense<[3, 4]> : tensor<2xui8>
      %0 = stablehlo.add %c, %c : tensor<2xui8>
      "check.expect_eq_const"(%0) <{value = dense<[6, 8]> : tensor<2xui8>}> : (tensor<2xui8>) -> ()
      return
    }""")
    results, outcomes = exe.run_checks()
    assert results == () and [o.passed for o in outcomes] == [True]
