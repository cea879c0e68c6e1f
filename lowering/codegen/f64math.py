"""Vectorizable f64 exp and log: plain arithmetic in place of libm's scalar calls.

LLVM turns f64 `math.exp`/`math.log` into a libm call per element, which also keeps the loop
vectorizer away from the whole loop (log(x) * exp(-x) over 2M f64: ~4 ns an element). These
kernels are branch-free f64 arithmetic, within 1 ulp of the exact result (measured against
mpmath-checked numpy on random and special inputs over the whole exponent range;
tests/py/test_fastmath_f64.py), with IEEE special cases exact.

exp(x) = 2^k e^r: k = round(x / ln2), r = x - k ln2 with ln2 = LN2_HI + LN2_LO, LN2_HI short
enough (42 bits) that k LN2_HI is exact, so the first step of the reduction is exact and
the second loses only what LN2_LO k's rounding does. e^r = 1 + r + r^2 Q(r) on
|r| <= ln2/2, Q a degree-9 near-minimax polynomial (Chebyshev fit of (e^r - 1 - r)/r^2, error
below 2^-53; its term is at most 0.12 of the result, so it costs ~0.01 ulp). 2^k is applied as
two halves, 2^(k - k/2) * 2^(k/2), so that k in [-1077, 1024] neither overflows the exponent
field nor skips gradual underflow: overflow gives inf, results below 2^-1022 round to
subnormals (one extra rounding there: within 1 ulp of the subnormal spacing), and x is
clamped to [-746, 710] first, beyond which the result is 0 or inf anyway.

log(x) = e ln2 + log(1 + f), x = 2^e (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)) (subnormal x
scaled by 2^52 first). With s = f / (2 + f): log(1 + f) = 2 atanh(s) = 2s + s T(s^2), and since
2s = f - s f, log(1 + f) = f - (h - s (h + T)) with h = f^2 / 2: the leading term f is exact
and s only enters a correction below 6% of the result, so s's own rounding is damped. T(z) =
z G(z), G a degree-6 near-minimax polynomial (error below 2^-51, times z s <= 0.005). e LN2_HI
is exact; the final add rounds once.
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, math

_LN2_HI = 0.6931471805598903        # 0x1.62e42fefa38p-1: 42 significant bits
_LN2_LO = 5.497923018708371e-14     # ln2 - _LN2_HI
_INV_LN2 = 1.4426950408889634
_SQRT2 = 1.4142135623730951
# (e^r - 1 - r) / r^2 on |r| <= ln2/2 (widened by 1e-4), highest degree first.
_EXP_Q = [2.510038549551032e-08, 2.7620088445409746e-07, 2.7557268459997064e-06,
          2.4801521295954376e-05, 0.00019841269863053618, 0.0013888888917213717,
          0.008333333333330062, 0.04166666666662413, 0.16666666666666669, 0.5000000000000001]
# (2 atanh(s) - 2s) / s^3 as a polynomial in z = s^2 <= (3 - 2 sqrt 2)^2, highest first.
_LOG_G = [0.14616585424888623, 0.15331710618210773, 0.18182889455674947, 0.22222211130259878,
          0.2857142862600327, 0.39999999999899444, 0.666666666666667]
_EXP_CLAMP = (-746.0, 710.0)
_F64_MIN_NORMAL = 2.2250738585072014e-308
_MANTISSA = 0x000FFFFFFFFFFFFF
_ONE_BITS = 0x3FF0000000000000


class F64Arith:
    """Scalar f64 arithmetic at the current insertion point: constants (integers i64 unless
    told), Horner's rule, 2^k; also the f32/i32 types of the f32 functions evaluated in f64
    (widened.py)."""

    def __init__(self):
        self.f32 = ir.F32Type.get()
        self.f64 = ir.F64Type.get()
        self.i32 = ir.IntegerType.get_signless(32)
        self.i64 = ir.IntegerType.get_signless(64)

    def c(self, v: float):
        return arith.ConstantOp(self.f64, ir.FloatAttr.get(self.f64, v)).result

    def ci(self, v: int, t=None):
        t = t or self.i64
        return arith.ConstantOp(t, ir.IntegerAttr.get(t, v)).result

    def horner(self, x, coeffs):
        acc = self.c(coeffs[0])
        for k in coeffs[1:]:
            acc = math.fma(acc, x, self.c(k))
        return acc

    def cmp(self, pred, a, b):
        return arith.cmpf(pred, a, b)

    def pow2(self, k):
        """2^k for an i64 k in [-1022, 1023], from the exponent bits."""
        return arith.bitcast(self.f64, arith.shli(arith.addi(k, self.ci(1023)), self.ci(52)))


def exp(x):
    a = F64Arith()
    xc = arith.minimumf(arith.maximumf(x, a.c(_EXP_CLAMP[0])), a.c(_EXP_CLAMP[1]))
    k = math.roundeven(arith.mulf(xc, a.c(_INV_LN2)))
    r1 = math.fma(k, a.c(-_LN2_HI), xc)                # exact: k LN2_HI has <= 53 bits
    t = arith.mulf(k, a.c(_LN2_LO))
    r = arith.subf(r1, t)
    r_lost = arith.subf(arith.subf(r1, r), t)            # what r's rounding lost (Fast2Sum)
    # 1 + r + r^2 Q(r), with 1 + r's rounding error carried (Fast2Sum: |r| < 1) so that the
    # final add is the only full-size rounding.
    one = a.c(1.0)
    head = arith.addf(one, r)
    tail = arith.addf(arith.addf(arith.subf(one, head), r), r_lost)
    y = arith.addf(head, math.fma(arith.mulf(r, r), a.horner(r, _EXP_Q), tail))
    ki = arith.fptosi(a.i64, k)
    half = arith.shrsi(ki, a.ci(1))
    result = arith.mulf(arith.mulf(y, a.pow2(half)), a.pow2(arith.subi(ki, half)))
    # NaN in, NaN out (min/max kept it, but k's conversion to an integer did not)
    return arith.select(arith.cmpf(arith.CmpFPredicate.UNO, x, x), x, result)


def log(x):
    a = F64Arith()
    tiny = arith.cmpf(arith.CmpFPredicate.OLT, x, a.c(_F64_MIN_NORMAL))
    xs = arith.select(tiny, arith.mulf(x, a.c(2.0 ** 52)), x)
    bits = arith.bitcast(a.i64, xs)
    e = arith.subi(arith.shrui(bits, a.ci(52)), arith.select(tiny, a.ci(1023 + 52), a.ci(1023)))
    m = arith.bitcast(a.f64, arith.ori(arith.andi(bits, a.ci(_MANTISSA)), a.ci(_ONE_BITS)))
    high = arith.cmpf(arith.CmpFPredicate.OGT, m, a.c(_SQRT2))
    m = arith.select(high, arith.mulf(m, a.c(0.5)), m)                    # exact
    e = arith.addi(e, arith.select(high, a.ci(1), a.ci(0)))
    f = arith.subf(m, a.c(1.0))                                           # exact
    s = arith.divf(f, arith.addf(f, a.c(2.0)))
    z = arith.mulf(s, s)
    t = arith.mulf(z, a.horner(z, _LOG_G))
    ff = arith.mulf(f, f)
    h = arith.mulf(ff, a.c(0.5))
    # h's own rounding, f^2 - ff (exact by fma), halved, joins the small terms
    h_lost = arith.mulf(math.fma(f, f, arith.negf(ff)), a.c(0.5))
    ef = arith.sitofp(a.f64, e)
    small = math.fma(s, arith.addf(h, t), arith.subf(arith.mulf(ef, a.c(_LN2_LO)), h_lost))
    # e LN2_HI + f exactly as head + tail (Fast2Sum: |e LN2_HI| >= |f| unless e = 0, where
    # the sum is f itself), so that the last add is the only full-size rounding.
    big = arith.mulf(ef, a.c(_LN2_HI))                                 # exact
    head = arith.addf(big, f)
    tail = arith.addf(arith.subf(big, head), f)
    r = arith.addf(head, arith.subf(tail, arith.subf(h, small)))
    # IEEE special cases: log(+-0) = -inf, log(+inf) = +inf, x < 0 or NaN -> NaN
    # (OGT is false for NaN).
    r = arith.select(arith.cmpf(arith.CmpFPredicate.OGT, x, a.c(0.0)), r, a.c(float("nan")))
    r = arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, x, a.c(0.0)), a.c(float("-inf")), r)
    inf = a.c(float("inf"))
    return arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, x, inf), inf, r)
