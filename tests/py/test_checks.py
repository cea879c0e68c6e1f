"""check.* semantics, exactly StableHLO's (stablehlo/tests/CheckOps.cpp and the interpreter's
custom-call fallback in stablehlo-translate): the check dialect and the JAX testdata's custom
calls differ in tolerances and defaults."""
import ml_dtypes
import numpy as np
import pytest

import kiln
from kiln.runtime.checks import evaluate, ulp_distance


def outcome(kind, actual, expected, dtype=None, **attrs):
    a, e = np.asarray(actual, dtype), np.asarray(expected, dtype)
    return evaluate({"kind": kind, "loc": "t", **attrs}, [a, e])


def test_eq_exact_for_integers_and_names_the_mismatch():
    assert outcome("expect_eq", [1, 2], [1, 2]).passed
    bad = outcome("expect_eq", [1, 2, 3], [1, 5, 3])
    assert not bad.passed and "index [1]" in bad.detail and "1 of 3" in bad.detail


def test_eq_on_floats_is_ieee_equality():
    # APFloat ==: -0.0 equals 0.0, NaN equals nothing (not even NaN).
    assert outcome("expect_eq", [0.0, 1.5], [-0.0, 1.5], np.float32).passed
    assert not outcome("expect_eq", [np.nan], [np.nan], np.float32).passed
    assert not outcome("expect_eq", [1.0], [np.nextafter(np.float32(1), 2)], np.float32).passed


def test_almost_eq_tolerance_depends_on_the_spelling():
    near = ([1.0], [1.0005])  # 5e-4 apart
    assert not outcome("expect_almost_eq", *near).passed                    # op default 1e-4
    assert outcome("expect_almost_eq", *near, custom_call=True).passed      # custom call: 1e-3
    assert outcome("expect_almost_eq", *near, tolerance=1e-3).passed
    # The custom call ignores attributes: always 1e-3.
    assert not outcome("expect_almost_eq", [1.0], [1.01], custom_call=True, tolerance=0.1).passed


def test_almost_eq_is_absolute_so_large_values_need_exact_ulps():
    big = np.float32(2374.0542)
    two_ulps = np.nextafter(np.nextafter(big, np.float32(1e9)), np.float32(1e9))
    assert outcome("expect_almost_eq", [big], [two_ulps], np.float32, custom_call=True).passed
    far = np.float32(2.18e13)
    assert not outcome("expect_almost_eq", [far], [np.nextafter(far, np.float32(1e30))],
                       np.float32, custom_call=True).passed


def test_almost_eq_special_values():
    assert outcome("expect_almost_eq", [np.nan, np.inf, -np.inf, 0.0], [np.nan, np.inf, -np.inf, -0.0]).passed
    assert not outcome("expect_almost_eq", [np.inf], [-np.inf]).passed
    assert not outcome("expect_almost_eq", [np.inf], [1e300]).passed
    assert not outcome("expect_almost_eq", [np.nan], [0.0]).passed


def test_almost_eq_complex_compares_both_parts():
    assert outcome("expect_almost_eq", [1 + 1j], [1 + 1.00005j], np.complex64).passed
    assert not outcome("expect_almost_eq", [1 + 1j], [1 + 1.1j], np.complex64).passed


def test_close_ulp_bounds_and_defaults():
    one = np.float32(1.0)
    ulps = [one]
    for _ in range(4):
        ulps.append(np.nextafter(ulps[-1], np.float32(2)))
    assert outcome("expect_close", [one], [ulps[1]], np.float32).passed          # op: max 1
    assert not outcome("expect_close", [one], [ulps[2]], np.float32).passed
    assert outcome("expect_close", [one], [ulps[3]], np.float32, custom_call=True).passed  # 3
    assert not outcome("expect_close", [one], [ulps[4]], np.float32, custom_call=True).passed
    assert outcome("expect_close", [one], [ulps[4]], np.float32, max_ulp_difference=4).passed
    assert not outcome("expect_close", [one], [one], np.float32, min_ulp_difference=1).passed


def test_ulp_distance_matches_the_reference_definition():
    f = np.float32
    assert ulp_distance(np.array([0.0], f), np.array([-0.0], f))[0] == 0
    assert ulp_distance(np.array([np.nan], f), np.array([np.nan], f))[0] == 0
    assert ulp_distance(np.array([np.inf], f), np.array([np.inf], f))[0] == 0
    assert ulp_distance(np.array([np.inf], f), np.array([3.0], f))[0] == np.iinfo(np.uint64).max
    tiny = np.array([1e-45], f)  # the smallest subnormal: one ULP either side of zero
    assert ulp_distance(tiny, -tiny)[0] == 2
    b = np.array([1.0, 2.0], ml_dtypes.bfloat16)
    assert list(ulp_distance(b, np.array([1.0078125, 2.0], ml_dtypes.bfloat16))) == [1, 0]


def test_close_on_bf16_and_f8():
    a = np.array([0.265625], ml_dtypes.bfloat16)
    e = np.array([0.269531], ml_dtypes.bfloat16)   # two bf16 ULPs apart
    assert outcome("expect_close", a, e, custom_call=True).passed
    assert not outcome("expect_close", a, e).passed
    f8 = np.array([1.0, 448.0], ml_dtypes.float8_e4m3fn)
    assert outcome("expect_close", f8, f8).passed


def test_close_complex_takes_the_worse_part():
    assert outcome("expect_close", [1 + 1j], [1 + 1j], np.complex64).passed
    assert not outcome("expect_close", [1 + 1j], [1 + 2j], np.complex64).passed


def test_close_rejects_integers():
    bad = outcome("expect_close", [1], [1], np.int32)
    assert not bad.passed and "float or complex" in bad.detail


def test_check_eq_custom_call():
    assert outcome("eq", [1, 2], [1, 2], np.int8).passed
    assert outcome("eq", [1.0], [1.00005], np.float32).passed   # 1e-4 for floats
    assert not outcome("eq", [1.0], [1.001], np.float32).passed


def test_reference_grading_allows_library_differences():
    assert outcome("reference", [1.0], [1.0 + 5e-6], np.float32).passed
    assert not outcome("reference", [1.0], [1.001], np.float32).passed


def test_worst_mismatch_reported():
    bad = outcome("expect_close", [1.0, 2.0, 3.0], [1.5, 2.0, 9.0])
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


def test_dialect_almost_eq_in_a_program_uses_its_tolerance():
    src = """func.func @main() {
      %a = stablehlo.constant dense<1.0> : tensor<f64>
      %b = stablehlo.constant dense<1.05> : tensor<f64>
      "check.expect_almost_eq"(%a, %b) {tolerance = TOL : f64} : (tensor<f64>, tensor<f64>) -> ()
      return
    }"""
    assert kiln.compile(src.replace("TOL", "0.1")).run_checks()[1][0].passed
    assert not kiln.compile(src.replace("TOL", "0.01")).run_checks()[1][0].passed


def test_generic_const_check_with_complex_value():
    # The bindings cannot hand complex elements attributes to Python: the front end turns the
    # expected value into a constant in the text.
    exe = kiln.compile("""func.func @main() {
      %c = stablehlo.constant dense<[(1.5,2.5)]> : tensor<1xcomplex<f32>>
      %0 = stablehlo.add %c, %c : tensor<1xcomplex<f32>>
      "check.expect_almost_eq_const"(%0) <{value = dense<[(3.0,5.0)]> : tensor<1xcomplex<f32>>}> : (tensor<1xcomplex<f32>>) -> ()
      return
    }""")
    assert [o.passed for o in exe.run_checks()[1]] == [True]


def test_unused_check_eq_verdict_is_still_checked():
    exe = kiln.compile("""func.func @main() -> tensor<2xi32> {
      %a = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
      %e = stablehlo.constant dense<[1, 3]> : tensor<2xi32>
      %0 = stablehlo.custom_call @check.eq(%a, %e) : (tensor<2xi32>, tensor<2xi32>) -> tensor<i1>
      return %a : tensor<2xi32>
    }""")
    assert [o.passed for o in exe.run_checks()[1]] == [False]
