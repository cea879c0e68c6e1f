"""f32 sin/cos/tan/log1p/erf evaluated in f64, as plain vectorizable arithmetic (no libm call).

Why f64: a float's 24-bit result needs ~30 correct bits to round right almost always, and f64
arithmetic gives ~50 with simple formulas, so these kernels are within 0.5 ulp plus a hair
(every f32 input checked; see tests/py/test_fastmath_trig.py) where an f32-only evaluation
would need careful error compensation to stay under 1 ulp. Converting f32 <-> f64 is exact
(the final truncf rounds once) and costs one instruction per vector.

(f32 tanh used to be here too, as an f64 rational; fastmath.py now evaluates it in f32 within
1.5 ulp, which made the gelu loop ~17% faster: an f64 vector holds half the lanes.)

sin/cos/tan: x = M * 2^(E-150) exactly (M the 24-bit integer mantissa, E the exponent field),
so x * 2/pi = M * C(E) with C(E) = 2^(E-150) * 2/pi, and since M is an integer only
C(E) mod 4 matters for the quadrant and the reduced argument. A 256-entry table (per E, as a
hi + lo f64 pair: ~106 bits) holds these residues, computed at import from 2/pi to 500 bits
by Machin's formula, so the reduction is exact enough for EVERY f32 (Payne-Hanek in table
form, branch-free: two gathered loads per lane, hi and lo, instead of a loop over the bits of
2/pi).
E = 255 (inf, NaN) holds NaN, which makes sin/cos/tan(inf or NaN) NaN without a select.

sin/cos/tan of an argument known to stay within 2^20 (value_ranges.py: lgamma's and digamma's
sin(pi * frac)) skip the table: k = round(|x| 2/pi) and |x| - k pi/2 by two fmas with pi/2 in
two f64 parts, as accurate there and without the two gathered loads per lane, which are slow
(erf + lgamma on one core: 11.3 -> 7.0 ns an element, measured).

log1p: u = 1 + x in f64 (exact for every f32 x but the tiniest, |x| < 2^-29, where the
rounding error c is kept and added back: log(1 + x) = log(u) + c/u, and u ~ 1 there; and
x >= 2^53, where c/u is negligible),
u = 2^e (1 + m) with 1 + m in [sqrt(1/2), sqrt(2)), and log(1 + m) = 2 atanh(m / (2 + m)) by its
series; the one division is an f32 reciprocal refined in f64 (an f64 divide costs ~4x).

erf (torch_xla's and TensorFlow's GELU call `mhlo.erf`; libm's erff kept the loop scalar:
ConvNeXt-Tiny spent a third of its time in it): x P(x^2) for |x| < 2, a polynomial in |x| - 3
for 2 <= |x| < 4, and +-1 beyond (erf(4) rounds to 1 in f32). The coefficients are least-squares
fits of scipy's erf on 4,000 Chebyshev nodes of each interval (degree 10 in x^2: 1e-9
relative; degree 12: 2e-10 absolute); every f32 result within 0.52 ulp (measured on a dense
sweep, tests/py/test_fastmath_trig.py). erf(-0.0) = -0.0, +-inf -> +-1, NaN -> NaN.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import arith, math, memref

from .f64math import F64Arith


def _two_over_pi_scaled(bits: int) -> int:
    """floor(2/pi * 2^bits), from pi = 16 atan(1/5) - 4 atan(1/239) (Machin) in integers."""
    guard = bits + 20
    one = 1 << guard

    def arctan_inv(n: int) -> int:   # atan(1/n) * 2^guard
        total, term, k, sign = 0, one // n, 1, 1
        while term:
            total += sign * (term // k)
            term //= n * n
            k += 2
            sign = -sign
        return total
    pi_scaled = 16 * arctan_inv(5) - 4 * arctan_inv(239)   # pi * 2^guard, to ~guard bits
    return (2 << (guard + bits)) // pi_scaled


def _reduction_table() -> list[float]:
    """[hi(E), lo(E) for E in 0..255]: C(E) mod 4 (E = 0, subnormals, scales like E = 1)."""
    scale = 500
    two_over_pi = _two_over_pi_scaled(scale)
    table = []
    for e in range(256):
        if e == 255:
            table += [float("nan"), 0.0]
            continue
        shift = scale + 150 - max(e, 1)            # C(E) = two_over_pi / 2^shift
        residue = Fraction(two_over_pi % (4 << shift), 1 << shift)
        hi = float(residue)
        table += [hi, float(residue - Fraction(hi))]
    return table


_TABLE = _reduction_table()
_TABLE_SYMBOL = "__kiln_trig_reduction"
_HALF_PI = 1.5707963267948966
_HALF_PI_LO = 6.123233995736766e-17        # pi/2 - _HALF_PI
_TWO_OVER_PI = 0.6366197723675814
_F64_SHIFTER = 6755399441055744.0           # 1.5 * 2^52: adding it rounds to an integer
# arguments known (value_ranges.py) to stay within this take the table-free reduction
_BOUNDED_LIMIT = 2.0 ** 20
_LN2 = 0.6931471805599453
_SQRT2 = 1.4142135623730951
# Taylor series in z = y^2, |y| <= pi/4, coefficients highest first (truncation below 2^-36
# relative): sin(y) = y + y z S(z), S = -1/3! + z/5! - ...; cos(y) = 1 + z C(z), C = -1/2! + ...
_SIN_POLY = [-1 / 39916800, 1 / 362880, -1 / 5040, 1 / 120, -1 / 6]
_COS_POLY = [1 / 479001600, -1 / 3628800, 1 / 40320, -1 / 720, 1 / 24, -1 / 2]
# log(1 + m) = 2 atanh(s) = s (2 + 2s^2/3 + 2s^4/5 + ...), |s| <= 3 - 2 sqrt(2) ~ 0.172:
# coefficients 2 / (2k + 1) through s^15 (the next term is below 2^-44 relative).
_ATANH_POLY = [2 / (2 * k + 1) for k in range(7, -1, -1)]


def _table(symbols: ir.Block):
    """The reduction table's memref, declared once per symbol table (the block of the module
    that holds the function being rewritten) as a private constant."""
    f64 = ir.F64Type.get()
    ty = ir.MemRefType.get([len(_TABLE)], f64)
    names = {ir.StringAttr(op.attributes["sym_name"]).value for op in symbols.operations
             if "sym_name" in op.operation.attributes}
    if _TABLE_SYMBOL not in names:
        with ir.InsertionPoint.at_block_begin(symbols), ir.Location.unknown():
            init = ir.DenseFPElementsAttr.get(np.array(_TABLE, dtype=np.float64),
                                              type=ir.RankedTensorType.get([len(_TABLE)], f64))
            memref.GlobalOp(_TABLE_SYMBOL, ir.TypeAttr.get(ty), sym_visibility="private",
                            initial_value=init, constant=True, alignment=64)
    return memref.GetGlobalOp(ty, _TABLE_SYMBOL).result


def _reduce(b: F64Arith, symbols: ir.Block, x):
    """(|x| * 2/pi - k) * pi/2 in f64 (|y| <= pi/4 + tiny), the quadrant k mod 4 as i32, and
    whether x is negative (its sign bit)."""
    bits = arith.bitcast(b.i32, x)
    negative = arith.cmpi(arith.CmpIPredicate.slt, bits, b.ci(0, b.i32))
    exponent = arith.andi(arith.shrui(bits, b.ci(23, b.i32)), b.ci(0xFF, b.i32))
    mantissa = arith.andi(bits, b.ci(0x7FFFFF, b.i32))
    # the implicit leading bit, for normal numbers only
    normal = arith.cmpi(arith.CmpIPredicate.ne, exponent, b.ci(0, b.i32))
    mantissa = arith.ori(mantissa, arith.select(normal, b.ci(0x800000, b.i32), b.ci(0, b.i32)))
    m = arith.sitofp(b.f64, mantissa)                            # exact: < 2^24
    table = _table(symbols)
    at = arith.shli(exponent, b.ci(1, b.i32))
    hi = memref.load(table, [arith.index_cast(ir.IndexType.get(), at)])
    at1 = arith.addi(at, b.ci(1, b.i32))
    lo = memref.load(table, [arith.index_cast(ir.IndexType.get(), at1)])
    # M * hi = p + p_err exactly (fma); k = p rounded to an integer; p - k is exact.
    p = arith.mulf(m, hi)
    p_err = math.fma(m, hi, arith.negf(p))
    k = math.roundeven(p)
    t = arith.addf(arith.subf(p, k), math.fma(m, lo, p_err))
    y = arith.mulf(t, b.c(_HALF_PI))
    quadrant = arith.andi(arith.fptosi(b.i32, k), b.ci(3, b.i32))
    return y, quadrant, negative


def _reduce_bounded(b: F64Arith, x):
    """_reduce for |x| <= _BOUNDED_LIMIT, without the table: k = round(|x| 2/pi) and
    y = |x| - k pi/2 with pi/2 as two f64 (106 bits), each step one fma. For such |x| that
    keeps y to ~2^-52 relative even at the f32 closest to a multiple of pi/2 (of all f32
    below 2^20, 252.8982, at 2^-27.8: checked in extended precision), like the table.
    k comes from a rounding shifter, not a float -> int conversion, so that NaN gives NaN
    rather than a poison quadrant."""
    bits = arith.bitcast(b.i32, x)
    negative = arith.cmpi(arith.CmpIPredicate.slt, bits, b.ci(0, b.i32))
    xd = math.absf(arith.extf(b.f64, x))
    shifted = math.fma(xd, b.c(_TWO_OVER_PI), b.c(_F64_SHIFTER))
    k = arith.subf(shifted, b.c(_F64_SHIFTER))
    y = math.fma(k, b.c(-_HALF_PI), xd)
    y = math.fma(k, b.c(-_HALF_PI_LO), y)
    # k's low bits are the low mantissa bits of the shifted sum
    quadrant = arith.andi(arith.trunci(b.i32, arith.bitcast(b.i64, shifted)), b.ci(3, b.i32))
    return y, quadrant, negative


def _reduce_any(b: F64Arith, symbols: ir.Block, x, bound: float):
    if bound <= _BOUNDED_LIMIT:
        return _reduce_bounded(b, x)
    return _reduce(b, symbols, x)


def _sin_cos_of_reduced(b: F64Arith, y):
    z = arith.mulf(y, y)
    s = math.fma(arith.mulf(y, z), b.horner(z, _SIN_POLY), y)
    c = math.fma(z, b.horner(z, _COS_POLY), b.c(1.0))
    return s, c


def _odd(b: F64Arith, q):
    return arith.cmpi(arith.CmpIPredicate.ne, arith.andi(q, b.ci(1, b.i32)), b.ci(0, b.i32))


def _negate_if(cond, v):
    return arith.select(cond, arith.negf(v), v)


def _sin_quadrant(b: F64Arith, y, q):
    """sin(q pi/2 + y) from the reduced argument."""
    s, c = _sin_cos_of_reduced(b, y)
    r = arith.select(_odd(b, q), c, s)
    upper = arith.cmpi(arith.CmpIPredicate.ne, arith.andi(q, b.ci(2, b.i32)), b.ci(0, b.i32))
    return _negate_if(upper, r)


def sin(symbols: ir.Block, x, bound: float = float("inf")):
    b = F64Arith()
    y, q, negative = _reduce_any(b, symbols, x, bound)
    # sin is odd: the sign of x flips the result (also sin(-0.0) = -0.0)
    return arith.truncf(b.f32, _negate_if(negative, _sin_quadrant(b, y, q)))


def cos(symbols: ir.Block, x, bound: float = float("inf")):
    b = F64Arith()
    y, q, _ = _reduce_any(b, symbols, x, bound)
    # cos(x) = sin(x + pi/2); cos is even, so the sign of x does not matter
    return arith.truncf(b.f32, _sin_quadrant(b, y, arith.addi(q, b.ci(1, b.i32))))


def tan(symbols: ir.Block, x, bound: float = float("inf")):
    b = F64Arith()
    y, q, negative = _reduce_any(b, symbols, x, bound)
    s, c = _sin_cos_of_reduced(b, y)
    # tan(y + pi/2) = -cos(y) / sin(y); the quotient in f64 rounds once more, harmlessly
    odd = _odd(b, q)
    r = arith.divf(arith.select(odd, arith.negf(c), s), arith.select(odd, s, c))
    return arith.truncf(b.f32, _negate_if(negative, r))


def _reciprocal(b: F64Arith, d):
    """1/d to ~2^-46 relative for d in f32's normal range: an f32 quotient (a fraction of an f64
    divide's cost per lane) refined by one Newton step in f64, which squares its 2^-23 error."""
    r = arith.extf(b.f64, arith.divf(arith.ConstantOp(b.f32, ir.FloatAttr.get(b.f32, 1.0)).result,
                                     arith.truncf(b.f32, d)))
    return math.fma(r, math.fma(arith.negf(d), r, b.c(1.0)), r)


def log1p(symbols: ir.Block, x):
    b = F64Arith()
    xd = arith.extf(b.f64, x)
    one = b.c(1.0)
    u = arith.addf(xd, one)
    # what 1 + x lost to rounding: exact for |x| < 1 (Fast2Sum, |1| >= |x|), and nonzero
    # there only for |x| < 2^-29; also nonzero for x >= 2^53, where it is dropped (lost/u is
    # below 2^-52 there, against a log above 36).
    lost = arith.subf(xd, arith.subf(u, one))
    lost = arith.select(b.cmp(arith.CmpFPredicate.OLT, math.absf(xd), one), lost, b.c(0.0))
    bits = arith.bitcast(b.i64, u)
    e = arith.subi(arith.shrui(bits, b.ci(52)), b.ci(1023))
    frac = arith.bitcast(b.f64, arith.ori(arith.andi(bits, b.ci(0x000FFFFFFFFFFFFF)),
                                          b.ci(0x3FF0000000000000)))         # in [1, 2)
    high = b.cmp(arith.CmpFPredicate.OGT, frac, b.c(_SQRT2))
    frac = arith.select(high, arith.mulf(frac, b.c(0.5)), frac)          # exact
    e = arith.addi(e, arith.select(high, b.ci(1), b.ci(0)))
    m = arith.subf(frac, one)                                            # exact (Sterbenz)
    s = arith.mulf(m, _reciprocal(b, arith.addf(m, b.c(2.0))))
    log_frac = arith.mulf(s, b.horner(arith.mulf(s, s), _ATANH_POLY))
    r = math.fma(arith.sitofp(b.f64, e), b.c(_LN2), log_frac)
    # log(1 + x) = log(u) + lost/u + O(lost^2); lost != 0 only where |x| < 2^-29, u = 1 +- 2^-29,
    # so lost alone is lost/u to 2^-29 relative, itself below 2^-53 of the result.
    r = arith.addf(r, lost)
    # IEEE special cases: x = +-0 -> x (keeps -0.0), -1 -> -inf, < -1 -> NaN, +inf -> +inf,
    # NaN -> NaN (the unordered compare below passes it through).
    r = arith.select(b.cmp(arith.CmpFPredicate.OEQ, xd, b.c(0.0)), xd, r)
    r = arith.select(b.cmp(arith.CmpFPredicate.OEQ, u, b.c(0.0)), b.c(float("-inf")), r)
    r = arith.select(b.cmp(arith.CmpFPredicate.OLT, u, b.c(0.0)), b.c(float("nan")), r)
    r = arith.select(b.cmp(arith.CmpFPredicate.OEQ, xd, b.c(float("inf"))), xd, r)
    r = arith.select(b.cmp(arith.CmpFPredicate.UNO, xd, xd), xd, r)
    return arith.truncf(b.f32, r)


# erf(x) / x as a polynomial in x^2 on [0, 2), and erf(x) in x - 3 on [2, 4): highest power first
_ERF_SMALL = [2.6475636683009895e-09, -8.247002222794286e-08, 1.2871011529809462e-06,
              -1.3868567892240391e-05, 0.000118486406182015, -0.0008521953932095249,
              0.005221869090599664, -0.02686519204772907, 0.11283768850530607,
              -0.3761263695758352, 1.1283791669291077]
_ERF_LARGE = [1.4443014258318536e-06, -9.467147864808735e-06, 1.7784385389353152e-05,
              1.189712695245628e-05, -0.00013624808427098212, 0.0003918769024816785,
              -0.0007375282143692484, 0.0010161499000331602, -0.0010444831436733034,
              0.0007891516480001505, -0.0004177538390830741, 0.00013925119621472607,
              0.9999779094488443]


def erf(symbols: ir.Block, x):
    b = F64Arith()
    xd = arith.extf(b.f64, x)
    a = math.absf(xd)
    small = arith.mulf(xd, b.horner(arith.mulf(a, a), _ERF_SMALL))   # odd: keeps -0.0
    large = arith.minimumf(b.horner(arith.subf(a, b.c(3.0)), _ERF_LARGE), b.c(1.0))
    large = arith.select(b.cmp(arith.CmpFPredicate.OLT, a, b.c(4.0)), large, b.c(1.0))
    r = arith.select(b.cmp(arith.CmpFPredicate.OLT, a, b.c(2.0)), small,
                     math.copysign(large, xd))
    r = arith.select(b.cmp(arith.CmpFPredicate.UNO, xd, xd), xd, r)
    return arith.truncf(b.f32, r)
