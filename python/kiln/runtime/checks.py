"""Evaluating conformance checks with exactly the StableHLO reference semantics.

Two spellings reach here (passes/checks.py records which as `custom_call`), and StableHLO gives
them different defaults (stablehlo/tests/CheckOps.td and the interpreter's custom-call fallback
in stablehlo-translate):

  check dialect ops (`check.expect_*`, the interpret suite):
    expect_eq / expect_eq_const            exact; floats compare as IEEE values
    expect_almost_eq / _const              |actual - expected| <= tolerance, default 1e-4
    expect_close                           min_ulp_difference <= ULP distance <= max_ulp_difference,
                                           defaults 0 and 1
  custom calls (`stablehlo.custom_call @check.*`, the JAX-generated testdata), attributes ignored:
    @check.expect_eq                       as expect_eq
    @check.expect_almost_eq                tolerance 1e-3
    @check.expect_close                    ULP distance in [0, 3]
    @check.eq                              integers exact, anything else almost-equal at 1e-4

Element rules (reference/Element.cpp): IEEE equality means NaN != NaN and -0.0 == 0.0. Almost
equal holds when the values are IEEE-equal, or both NaN, or both finite and their difference,
computed in double precision, is within the tolerance (so an infinity only matches itself). The
ULP distance is 0 for bitwise-equal values and for two NaNs, the distance between the magnitudes'
bit patterns for finite values (summed across a sign change), and "infinite" otherwise. Complex
values compare part by part; their ULP distance is the larger of the parts'.

Kiln extras: `expect_true` / `expect_false`, and `reference`, which the conformance runner uses
to compare against the reference interpreter (no check in the program fixes a tolerance there,
and math libraries legitimately differ by more than a few ULPs on transcendental functions).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import dtypes

OP_ALMOST_EQ_TOLERANCE = 1e-4      # CheckOps.td: DefaultValuedOptionalAttr<F64Attr, "1e-4">
OP_MAX_ULP = 1                     # CheckOps.td: DefaultValuedAttr<UI64Attr, "1">
CUSTOM_CALL_ALMOST_EQ_TOLERANCE = 1e-3
CUSTOM_CALL_MAX_ULP = 3
CHECK_EQ_TOLERANCE = 1e-4
_INFINITE_ULPS = np.iinfo(np.uint64).max

# Kiln's own grading against the reference interpreter: a few ULPs, or a relative tolerance by
# storage width (what JAX's tests allow per dtype).
_REFERENCE_MAX_ULP = 3
_RTOL = {1: 1.25e-1, 2: 1e-2, 4: 1e-5, 8: 1e-12}
_ATOL = {1: 1.25e-1, 2: 1e-3, 4: 1e-6, 8: 1e-14}


@dataclass
class CheckOutcome:
    kind: str
    loc: str
    passed: bool
    detail: str = ""

    def __str__(self) -> str:
        status = "passed" if self.passed else "FAILED"
        return f"check.{self.kind} at {self.loc}: {status}{': ' + self.detail if self.detail else ''}"


def _as_f64(a: np.ndarray) -> np.ndarray:
    """Every real float format Kiln supports converts to double exactly."""
    return a.astype(np.float64)


def ieee_equal(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    if dtypes.is_complex(actual.dtype):
        return ieee_equal(actual.real, expected.real) & ieee_equal(actual.imag, expected.imag)
    if not dtypes.is_float(actual.dtype):
        return actual == expected
    with np.errstate(invalid="ignore"):
        return _as_f64(actual) == _as_f64(expected)


def almost_equal(actual: np.ndarray, expected: np.ndarray, tolerance: float) -> np.ndarray:
    if dtypes.is_complex(actual.dtype):
        return almost_equal(actual.real, expected.real, tolerance) & \
            almost_equal(actual.imag, expected.imag, tolerance)
    if not dtypes.is_float(actual.dtype):
        # The reference rejects non-float operands; exact equality is the only sound reading.
        return actual == expected
    a, e = _as_f64(actual), _as_f64(expected)
    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.isfinite(a) & np.isfinite(e)
        near = np.abs(np.where(finite, a - e, 0.0)) <= tolerance
        return (a == e) | (np.isnan(a) & np.isnan(e)) | (finite & near)


def _magnitude_bits(x: np.ndarray) -> np.ndarray:
    """The bit pattern of |x| as an unsigned integer (for every width, incl. bf16 and f8)."""
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize]
    return np.abs(x).view(width).astype(np.uint64)


def ulp_distance(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Elementwise ULP distance (uint64), per the reference's ULPDifference."""
    if dtypes.is_complex(actual.dtype):
        return np.maximum(ulp_distance(actual.real.copy(), expected.real.copy()),
                          ulp_distance(actual.imag.copy(), expected.imag.copy()))
    a64, e64 = _as_f64(actual), _as_f64(expected)
    bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[actual.dtype.itemsize]
    identical = actual.view(bits) == expected.view(bits)
    ma, me = _magnitude_bits(actual), _magnitude_bits(expected)
    opposite = np.signbit(a64) != np.signbit(e64)
    with np.errstate(over="ignore"):
        finite_distance = np.where(opposite, ma + me, np.where(ma > me, ma - me, me - ma))
    finite = np.isfinite(a64) & np.isfinite(e64)
    both_nan = np.isnan(a64) & np.isnan(e64)
    out = np.where(finite, finite_distance, np.uint64(_INFINITE_ULPS))
    out = np.where(identical | both_nan, np.uint64(0), out)
    return out.astype(np.uint64)


def _reference_close(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    if dtypes.is_complex(actual.dtype):
        return _reference_close(actual.real.copy(), expected.real.copy()) & \
            _reference_close(actual.imag.copy(), expected.imag.copy())
    if not dtypes.is_float(actual.dtype):
        return actual == expected
    width = actual.dtype.itemsize
    a, e = _as_f64(actual), _as_f64(expected)
    with np.errstate(invalid="ignore", over="ignore"):
        rel = np.abs(a - e) <= _ATOL.get(width, 1e-6) + _RTOL.get(width, 1e-5) * np.abs(e)
    return (ulp_distance(actual, expected) <= _REFERENCE_MAX_ULP) | (np.isfinite(a) & np.isfinite(e) & rel)


def _mask(check: dict, actual: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, str]:
    """Elementwise verdict, and a description of the rule applied (for failure messages)."""
    kind, custom = check["kind"], bool(check.get("custom_call", False))
    if kind in ("expect_eq", "expect_eq_const"):
        return ieee_equal(actual, expected), "exact"
    if kind == "eq":
        if dtypes.is_float(actual.dtype) or dtypes.is_complex(actual.dtype):
            return almost_equal(actual, expected, CHECK_EQ_TOLERANCE), f"tolerance {CHECK_EQ_TOLERANCE:g}"
        return actual == expected, "exact"
    if kind in ("expect_almost_eq", "expect_almost_eq_const"):
        tol = CUSTOM_CALL_ALMOST_EQ_TOLERANCE if custom else \
            float(check.get("tolerance", OP_ALMOST_EQ_TOLERANCE))
        return almost_equal(actual, expected, tol), f"tolerance {tol:g}"
    if kind == "expect_close":
        if not (dtypes.is_float(actual.dtype) or dtypes.is_complex(actual.dtype)):
            raise _Unsupported(f"expect_close needs float or complex operands, not {actual.dtype}")
        if custom:
            lo, hi = 0, CUSTOM_CALL_MAX_ULP
        else:
            lo = int(check.get("min_ulp_difference", 0))
            hi = int(check.get("max_ulp_difference", OP_MAX_ULP))
            if not (0 <= lo <= _INFINITE_ULPS and 0 <= hi <= _INFINITE_ULPS):
                raise _Unsupported(f"ULP bounds [{lo}, {hi}] are not unsigned 64-bit integers")
        ulps = ulp_distance(actual, expected)
        return (ulps >= np.uint64(lo)) & (ulps <= np.uint64(hi)), f"ULP distance in [{lo}, {hi}]"
    if kind == "reference":
        return _reference_close(actual, expected), "close to the reference interpreter"
    raise _Unsupported(f"unknown check kind '{kind}'")


class _Unsupported(Exception):
    pass


def evaluate(check: dict, operands: list[np.ndarray]) -> CheckOutcome:
    kind, loc = check["kind"], check.get("loc", "?")
    if kind == "expect_serialized_eq":  # [value, what interpreter.probe recorded or None]
        if operands[1] is None:
            return CheckOutcome(kind, loc, False, f"probe {check['probe_id']!r} recorded no "
                                                  f"value for iteration {check['iter']}")
        return evaluate({**check, "kind": "expect_eq"}, operands)
    if kind in ("expect_true", "expect_false"):
        want = kind == "expect_true"
        ok = bool(np.all(operands[0].astype(bool) == want))
        return CheckOutcome(kind, loc, ok, "" if ok else f"value is {operands[0]!r}")
    actual, expected = (np.asarray(x) for x in operands)
    if actual.shape != expected.shape:
        return CheckOutcome(kind, loc, False, f"shape {actual.shape} != expected {expected.shape}")
    if actual.dtype != expected.dtype:
        return CheckOutcome(kind, loc, False, f"element type {actual.dtype} != expected {expected.dtype}")
    try:
        ok, rule = _mask(check, actual, expected)
    except _Unsupported as exc:
        return CheckOutcome(kind, loc, False, str(exc))
    if bool(np.all(ok)):
        return CheckOutcome(kind, loc, True)
    return CheckOutcome(kind, loc, False, _describe(ok, actual, expected, rule))


def _describe(ok: np.ndarray, actual: np.ndarray, expected: np.ndarray, rule: str) -> str:
    """Count the mismatches and show the worst one (largest difference; NaN/inf worst)."""
    complex_ = dtypes.is_complex(actual.dtype)
    a = actual.astype(np.complex128) if complex_ else \
        (_as_f64(actual) if dtypes.is_float(actual.dtype) else actual.astype(np.float64))
    e = expected.astype(a.dtype) if complex_ else \
        (_as_f64(expected) if dtypes.is_float(expected.dtype) else expected.astype(np.float64))
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.nan_to_num(np.abs(a - e), nan=np.inf, posinf=np.inf)
    worst = np.unravel_index(np.argmax(np.where(ok, -1.0, diff)), ok.shape)
    text = f"{int((~ok).sum())} of {ok.size} elements differ ({rule}); worst at index " \
           f"{[int(i) for i in worst]}: actual {actual[worst]!r}, expected {expected[worst]!r}"
    if dtypes.is_float(actual.dtype) or complex_:
        ulps = int(ulp_distance(np.asarray(actual[worst]), np.asarray(expected[worst])))
        if ulps != _INFINITE_ULPS:
            text += f", {ulps} ULPs apart"
    return text
