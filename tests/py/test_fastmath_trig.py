"""f32 sin/cos/tan evaluated in f64 with table-driven range reduction
(kiln.lowering.codegen.widened): ulp error against float64 numpy over every binade (huge
arguments included), near multiples of pi/2 (where a poor reduction loses every digit), exact
IEEE special cases, no libm call left in the loop, and f64 left to libm.

Measured over EVERY f32 input (a throwaway exhaustive run against float64 numpy; too slow for
CI): sin 0.500116 ulp, cos 0.500116, tan 0.500172 at most; no special value or sign wrong."""
import numpy as np
import pytest

import kiln
from conftest import unary

OPS = [("stablehlo.sine", np.sin), ("stablehlo.cosine", np.cos), ("stablehlo.tan", np.tan)]
F32 = np.finfo(np.float32)


def ulps(got, want64):
    want32 = want64.astype(np.float32)
    spacing = np.spacing(np.abs(want32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want64) / spacing


def compiled(op, n):
    return kiln.compile(unary(op, f"tensor<{n}xf32>"))


def inputs(rng):
    """Every 4099th positive finite bit pattern (all binades, subnormals too), values near
    multiples of pi/2 up to 2^60, ordinary and large random values, all with both signs."""
    grid = np.arange(0, 0x7F800000, 4099, dtype=np.uint32).view(np.float32)
    k = np.concatenate([np.arange(1, 20000), np.unique(np.geomspace(1, 2.0 ** 60, 20000).round())])
    near = (k * (np.pi / 2)).astype(np.float32)
    near = np.concatenate([near, np.nextafter(near, np.float32(np.inf)),
                           np.nextafter(near, np.float32(0))])
    ordinary = (rng.standard_normal(100_000) * np.float32(10.0)).astype(np.float32)
    large = (rng.standard_normal(50_000) * np.float32(1e6)).astype(np.float32)
    x = np.concatenate([grid, near, ordinary, large]).astype(np.float32)
    return np.concatenate([x, -x])


@pytest.mark.parametrize("op,ref", OPS)
def test_within_half_an_ulp_everywhere(op, ref, rng):
    x = inputs(rng)
    exe = compiled(op, x.size)
    name = ref.__name__
    # no math op or libm call is left: the loop vectorizes
    assert f"math.{name}" not in exe.ir("codegen")
    assert f"@{name}f" not in exe.ir("lower")
    (got,) = exe(x)
    want = ref(x.astype(np.float64))
    finite = np.isfinite(want.astype(np.float32))
    assert finite.sum() > x.size - 10
    err = ulps(got[finite], want[finite])
    # correctly rounded but for the rare results within 2^-20 ulp of a rounding tie
    assert err.max() < 0.5005, (err.max(), x[finite][err.argmax()])


@pytest.mark.parametrize("op,ref", OPS)
def test_special_values(op, ref):
    tiny = np.array([F32.smallest_subnormal, 1e-40, F32.tiny, 1e-30, 1e-10, 3e-5], np.float32)
    x = np.concatenate([[np.nan, np.inf, -np.inf, 0.0, -0.0, F32.max, -F32.max], tiny, -tiny])
    x = x.astype(np.float32)
    (got,) = compiled(op, x.size)(x)
    # NaN and +-inf -> NaN
    assert np.isnan(got[:3]).all()
    with np.errstate(invalid="ignore"):
        want = ref(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(got[3:], want[3:])
    # the sign of zero: sin(-0) = tan(-0) = -0, cos(+-0) = 1
    np.testing.assert_array_equal(np.signbit(got[3:]), np.signbit(want[3:]))
    if op != "stablehlo.cosine":      # sin(x) = tan(x) = x for tiny x, subnormals included
        np.testing.assert_array_equal(got[7:], x[7:])


CLAMPED = """
func.func @main(%x: tensor<Nxf32>) -> tensor<Nxf32> {
  %lo = stablehlo.constant dense<-1048576.0> : tensor<f32>
  %hi = stablehlo.constant dense<1048576.0> : tensor<f32>
  %c = stablehlo.clamp %lo, %x, %hi : (tensor<f32>, tensor<Nxf32>, tensor<f32>) -> tensor<Nxf32>
  %0 = OP %c : tensor<Nxf32>
  return %0 : tensor<Nxf32>
}"""


@pytest.mark.parametrize("op,ref", OPS)
def test_bounded_argument_needs_no_table(op, ref, rng):
    """An argument known to stay within 2^20 (here clamped) takes the table-free reduction:
    just as accurate, near multiples of pi/2 included, and NaN still gives NaN."""
    x = inputs(rng)
    x = np.concatenate([x[np.abs(x) <= 2.0 ** 20], [np.nan, -0.0, 2.0 ** 20, -(2.0 ** 20)]])
    x = x.astype(np.float32)
    exe = kiln.compile(CLAMPED.replace("N", str(x.size)).replace("OP", op))
    codegen = exe.ir("codegen")
    assert f"math.{ref.__name__}" not in codegen
    assert "__kiln_trig_reduction" not in codegen
    (got,) = exe(x)
    assert np.isnan(got[-4])
    want = ref(x[:-4].astype(np.float64))
    err = ulps(got[:-4], want)
    assert err.max() < 0.5005, (err.max(), x[:-4][err.argmax()])
    assert np.signbit(got[-3]) == (op != "stablehlo.cosine")
    np.testing.assert_array_equal(got[-2:], ref(x[-2:].astype(np.float64)).astype(np.float32))


def test_lgamma_reflection_sine_is_bounded(rng):
    """lgamma's reflection formula takes sin(pi * frac(|x|)): kiln-approximate-math sees that
    argument stay within [0, 2 pi] and drops the table's gathers (the erf_lgamma workload)."""
    n = 20000
    src = f"""
func.func @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %0 = chlo.lgamma %x : tensor<{n}xf32> -> tensor<{n}xf32>
  return %0 : tensor<{n}xf32>
}}"""
    exe = kiln.compile(src)
    assert "__kiln_trig_reduction" not in exe.ir("codegen")
    x = np.concatenate([rng.uniform(-30, 30, n // 2), rng.uniform(0.01, 1e4, n // 2)])
    x = x.astype(np.float32)
    x[np.abs(x - np.round(x)) < 1e-3] += np.float32(0.01)       # away from lgamma's poles
    (got,) = exe(x)
    from scipy.special import gammaln
    want = gammaln(x.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_f64_keeps_libm():
    x = np.linspace(-1e4, 1e4, 10001)
    exe = kiln.compile(unary("stablehlo.sine", f"tensor<{x.size}xf64>"))
    assert "math.sin" in exe.ir("codegen")
    np.testing.assert_allclose(exe(x)[0], np.sin(x), rtol=1e-15, atol=1e-15)


def test_half_precision_rounds_from_the_f32_kernel():
    # f16/bf16 compute in f32, so they reach the same kernel; results within f16 rounding
    x = np.linspace(-100, 100, 4001).astype(np.float16)
    (got,) = kiln.compile(unary("stablehlo.cosine", f"tensor<{x.size}xf16>"))(x)
    np.testing.assert_array_equal(got, np.cos(x.astype(np.float64)).astype(np.float16))


ERF = """func.func @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %0 = stablehlo.custom_call @mhlo.erf(%x) {{mhlo.attributes = {{}}, mhlo.version = 1 : i64}} : (tensor<{n}xf32>) -> tensor<{n}xf32>
  return %0 : tensor<{n}xf32>
}}"""


def test_erf_is_within_0_52_ulp_without_libm(rng):
    """torch_xla's GELU: `mhlo.erf` as arithmetic in f64 (widened.erf), not a call of erff per
    element. Every binade, a dense sweep of [-4.5, 4.5] (both polynomials and their seams),
    and IEEE special cases."""
    from scipy.special import erf
    grid = np.arange(0, 0x7F800000, 4099, dtype=np.uint32).view(np.float32)
    dense = np.linspace(0, 4.5, 400_001, dtype=np.float32)
    seams = np.float32([2.0, 4.0])
    seams = np.concatenate([seams, np.nextafter(seams, np.float32(0)),
                            np.nextafter(seams, np.float32(np.inf))])
    x = np.concatenate([grid, dense, seams, rng.standard_normal(50_000).astype(np.float32)])
    x = np.concatenate([x, -x])
    exe = kiln.compile(ERF.format(n=x.size))
    assert "erff" not in exe.ir("lower")
    (got,) = exe(x)
    assert ulps(got, erf(x.astype(np.float64))).max() <= 0.52
    special = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45])
    (got,) = kiln.compile(ERF.format(n=special.size))(special)
    np.testing.assert_array_equal(got[:4], [0.0, -0.0, 1.0, -1.0])
    assert np.signbit(got[1]) and np.isnan(got[4])
    np.testing.assert_array_equal(got[5:], erf(special[5:].astype(np.float64)).astype(np.float32))
