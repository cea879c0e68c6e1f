"""Evaluating conformance checks with the StableHLO reference semantics.

expect_eq / eq: exact for integers and booleans; for floats value equality where NaN equals NaN
(and -0.0 equals 0.0). expect_almost_eq: |actual - expected| <= tolerance (default 1e-4, per
the check dialect), NaN equal to NaN, infinities equal when their signs are. expect_close:
within `max_ulp_difference` units in the last place (default 3) or, for transcendental results
that legitimately differ between math libraries, within the dtype's relative tolerance.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import dtypes

DEFAULT_TOLERANCE = 1e-4
DEFAULT_MAX_ULP = 3
# Relative tolerance by storage width for expect_close, as JAX's own tests grade these files.
_RTOL = {2: 1e-2, 4: 1e-5, 8: 1e-12, 1: 1.25e-1}
_ATOL = {2: 1e-3, 4: 1e-6, 8: 1e-14, 1: 1.25e-1}


@dataclass
class CheckOutcome:
    kind: str
    loc: str
    passed: bool
    detail: str = ""

    def __str__(self) -> str:
        status = "passed" if self.passed else "FAILED"
        return f"check.{self.kind} at {self.loc}: {status}{': ' + self.detail if self.detail else ''}"


def _as_comparable(a: np.ndarray) -> np.ndarray:
    """Floats narrower than numpy's own (bf16, f8...) compare as float32; complex as pairs."""
    if dtypes.is_float(a.dtype) and a.dtype.kind != "f":
        return a.astype(np.float32)
    return a


def _ulp_distance(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    bits = {2: np.int16, 4: np.int32, 8: np.int64}.get(actual.dtype.itemsize)
    if bits is None or actual.dtype.kind != "f":
        return np.full(actual.shape, np.iinfo(np.int64).max)

    def ordered(x):
        i = x.view(bits).astype(np.int64)
        # Map sign-magnitude float bits onto a monotonic integer line.
        return np.where(i < 0, np.iinfo(bits).min - i, i)

    return np.abs(ordered(actual) - ordered(expected))


def _float_mask(actual, expected, close):
    """Elementwise verdict for real floats: `close(a, e)` plus the NaN/inf rules."""
    a, e = _as_comparable(actual), _as_comparable(expected)
    with np.errstate(invalid="ignore", over="ignore"):
        both_nan = np.isnan(a) & np.isnan(e)
        same_inf = np.isinf(a) & np.isinf(e) & (np.sign(a) == np.sign(e))
        finite = np.isfinite(a) & np.isfinite(e)
        ok = both_nan | same_inf | (finite & close(a, e))
    return ok


def _mask(kind: str, actual: np.ndarray, expected: np.ndarray, check: dict) -> np.ndarray:
    if dtypes.is_complex(actual.dtype):
        return _mask(kind, actual.real.copy(), expected.real.copy(), check) & \
            _mask(kind, actual.imag.copy(), expected.imag.copy(), check)
    if not dtypes.is_float(actual.dtype):
        return actual == expected
    if kind in ("expect_eq", "eq", "expect_eq_const"):
        return _float_mask(actual, expected, lambda a, e: a == e)
    if kind in ("expect_almost_eq", "expect_almost_eq_const"):
        tol = check.get("tolerance", DEFAULT_TOLERANCE)
        return _float_mask(actual, expected, lambda a, e: np.abs(a - e) <= tol)
    # expect_close
    max_ulp = check.get("max_ulp_difference", DEFAULT_MAX_ULP)
    width = actual.dtype.itemsize
    rtol, atol = _RTOL.get(width, 1e-5), _ATOL.get(width, 1e-6)
    ulps = _ulp_distance(actual, expected)
    return _float_mask(actual, expected,
                       lambda a, e: (ulps <= max_ulp) | (np.abs(a - e) <= atol + rtol * np.abs(e)))


def evaluate(check: dict, operands: list[np.ndarray]) -> CheckOutcome:
    kind, loc = check["kind"], check.get("loc", "?")
    if kind in ("expect_true", "expect_false"):
        want = kind == "expect_true"
        ok = bool(np.all(operands[0].astype(bool) == want))
        return CheckOutcome(kind, loc, ok, "" if ok else f"value is {operands[0]!r}")
    actual, expected = operands
    if actual.shape != expected.shape:
        return CheckOutcome(kind, loc, False, f"shape {actual.shape} != expected {expected.shape}")
    ok = _mask(kind, actual, expected, check)
    if bool(np.all(ok)):
        return CheckOutcome(kind, loc, True)
    a = _as_comparable(actual).astype(np.complex128 if dtypes.is_complex(actual.dtype) else np.float64)
    e = _as_comparable(expected).astype(a.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.nan_to_num(np.abs(a - e), nan=np.inf, posinf=np.inf)
    worst = np.unravel_index(np.argmax(np.where(ok, -1.0, diff)), ok.shape)
    detail = f"{int((~ok).sum())} of {ok.size} elements differ; worst at index " \
             f"{[int(i) for i in worst]}: actual {actual[worst]!r}, expected {expected[worst]!r}"
    return CheckOutcome(kind, loc, False, detail)
