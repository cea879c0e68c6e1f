"""f32 log/log1p approximations (kiln.lowering.codegen.fastmath): ulp error over every binade
(a dense grid of bit patterns, subnormals included) against float64 numpy, exact IEEE special
cases, and no libm call left in the code."""
import numpy as np
import pytest

import kiln
from conftest import unary

F32 = np.finfo(np.float32)
SPECIALS = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0, 0.5,
                     F32.smallest_subnormal, -F32.smallest_subnormal, F32.tiny, F32.max,
                     -F32.max, 1e-30, -1e-30, 1e-8, -1e-8, 6e-8, -0.999999, -1.000001,
                     np.nextafter(np.float32(1), 2), np.nextafter(np.float32(1), 0),
                     2.0 ** 53, 2.0 ** 53 + 2.0 ** 30, 2.0 ** 53 - 2.0 ** 29, 3e20],
                    np.float32)


def ulps(got, want64):
    want32 = want64.astype(np.float32)
    spacing = np.spacing(np.abs(want32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want64) / spacing


def bit_grid(step=101):
    """Every `step`-th positive finite f32 bit pattern (all binades, subnormals too) and the
    negatives of a sparser subset."""
    positive = np.arange(0, 0x7F800000, step, dtype=np.uint32).view(np.float32)
    return np.concatenate([positive, -positive[::13]])


def run(op, x):
    exe = kiln.compile(unary(op, f"tensor<{x.size}xf32>"))
    return exe, exe(x)[0]


# Measured maxima on this grid: log 0.78 ulp (Kiln's f32 polynomial); log1p 0.50 (evaluated
# in f64, widened.py: complex log1p needs it within ~1 ulp, fastmath.py).
@pytest.mark.parametrize("op,ref,max_ulp,libm,vectorized", [
    ("stablehlo.log", np.log, 1.0, "logf", True),
    ("stablehlo.log_plus_one", np.log1p, 0.5005, "log1pf", True)])
def test_accuracy_over_every_binade(op, ref, max_ulp, libm, vectorized):
    x = bit_grid()
    exe, got = run(op, x)
    # with no math op or libm call left the loop vectorizes
    assert ("math.log" not in exe.ir("codegen") and f"call @{libm}" not in exe.ir("lower")) \
        == vectorized
    with np.errstate(invalid="ignore", divide="ignore"):
        want = ref(x.astype(np.float64))
    finite = np.isfinite(want)
    err = ulps(got[finite], want[finite])
    assert err.max() <= max_ulp, (err.max(), x[finite][err.argmax()])
    # log1p near zero: the result is x to within rounding (no cancellation)
    small = finite & (np.abs(x) < 1e-3)
    assert small.sum() > 1000
    # domain errors and poles exactly as IEEE: NaN for x below the domain, -inf at the pole
    np.testing.assert_array_equal(got[~finite], want[~finite].astype(np.float32))


@pytest.mark.parametrize("op,ref", [("stablehlo.log", np.log), ("stablehlo.log_plus_one", np.log1p)])
def test_special_values(op, ref):
    _, got = run(op, SPECIALS)
    with np.errstate(invalid="ignore", divide="ignore"):
        want = ref(SPECIALS.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    exact = np.isinf(want) | (want == 0)
    np.testing.assert_array_equal(got[exact], want[exact])                      # inf, 0
    np.testing.assert_array_equal(np.signbit(got[exact]), np.signbit(want[exact]))  # -0.0
    np.testing.assert_allclose(got, want, rtol=2e-7)
    if op == "stablehlo.log_plus_one":   # tiny and subnormal x: log1p(x) == x exactly
        tiny = np.abs(SPECIALS) < 1e-20
        np.testing.assert_array_equal(got[tiny], SPECIALS[tiny])
