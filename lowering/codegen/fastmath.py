"""Vectorizable f32 exp/tanh/log/log1p/sin/cos/tan/erf and reassociable reductions (what XLA:CPU
does).

LLVM lowers `math.exp`/`math.tanh` to libm calls, one element at a time, which also keeps
the loop vectorizer away from the whole loop (gelu over 4M elements: ~70 ms, XLA ~4 ms).
XLA:CPU instead emits polynomial approximations as plain arithmetic; so does this pass, for
f32 scalars in linalg bodies (and f64 exp/log: f64math.py). exp is the well-known Cephes expf
kernel, keeping IEEE special cases exact: NaN in -> NaN out, exp(+inf) = inf, exp(-inf) = 0,
overflow to inf and gradual underflow to subnormals; measured within 1 ulp over [-110, 95].

log (Cephes logf, subnormal inputs scaled first) keeps log(+-0) = -inf, log(x < 0) = NaN,
log(+inf) = inf. Measured ulp errors: tests/py/test_fastmath_log.py.

tanh is f32 arithmetic in one form for every |x|: tanh|x| = u / (u + 2) with
u = expm1(2|x|), |x| clamped to 9.125 where tanh rounds to 1 (u from Cody-Waite reduction and a
degree-7 polynomial, 2^k from the bits of k + 1.5 * 2^23). Measured over every f32: 2.42 ulp
at most (below |x| = 0.35, where u + 2 and the quotient round on top of u's error; 1.50
above). It was 1.50 everywhere with an odd polynomial for |x| < 0.5625 chosen by a select,
but computing both forms for every element cost 9 of 31 vector ops: without it gelu over 4M
f32 takes ~20% less (tests/py/test_codegen_fastmath.py checks a grid of all binades and a
dense sweep). An f32 rational x P/Q (XLA's form) is shorter still but 5-6 ulp (its two
Horner sums round at every step, undamped) and fails the StableHLO testdata's 3-ULP check
(tanh_float32_20_20); evaluating the rational in f64 kept 0.5 ulp but took ~20% longer in
gelu, f64 vectors holding half the lanes.
tanh keeps tanh(+-inf) = +-1, tanh(-0.0) = -0.0, NaN -> NaN.

sin/cos/tan, erf and log1p (the libm `log1pf` calls kiln-accurate-libm-calls makes) are
evaluated in f64 (widened.py), erf within 0.52 ulp; sin/cos/tan with exact table-driven
range reduction, log1p by atanh's series; each within 0.503 ulp over every f32 input (measured; tests/py/test_fastmath_trig.py,
test_fastmath_log.py). f64 exp and log: f64math.py.

Reductions: StableHLO leaves the order of a reduce's combinations to the implementation, so
the accumulating `arith.addf`/`mulf`/`maximumf`/`minimumf` of a linalg reduction gets the
`reassoc` fast-math flag, which is what lets LLVM vectorize the loop (XLA reassociates too).
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, math

from . import f64math, value_ranges, widened
from .builders import fastmath

# Cephes expf: exp(x) = 2^m * exp(r), r = x - m ln2 in [-ln2/2, ln2/2], ln2 = C1 + C2.
_EXP_POLY = [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
             1.6666665459e-1, 5.0000001201e-1]
# Cephes logf: log(1 + m) = m - m^2/2 + m^3 P(m) for m in [sqrt(1/2) - 1, sqrt(2) - 1].
_LOG_POLY = [7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
             1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
             3.3333331174e-1]
_SQRT_HALF = 0.707106781186547524
# tanh(x) rounds to +-1 in f32 beyond |x| = 9.011 (1 - tanh < 2^-25); the clamp keeps 2^k finite
_TANH_CLAMP = 9.125
# (e^r - 1 - r) / r^2 on |r| <= ln2/2 (Chebyshev fit, error 2^-29.4), highest degree first
_EXPM1_Q = [0.00019891080463998843, 0.0013933730715792083, 0.008333310844647862,
            0.04166646419740569, 0.16666666681704215, 0.500000001353873]
# ln2 = _LN2_HI + _LN2_LO, _LN2_HI with 16 significant bits: k * _LN2_HI is exact for k < 2^8
_LN2_HI = 0.693145751953125
_LN2_LO = 1.4286068203094173e-06
# 1.5 * 2^23: adding it rounds a float in [-2^22, 2^22] to an integer k, left in the low
# mantissa bits (so 2^k needs no float -> int conversion, and NaN stays NaN, not poison)
_ROUNDING_SHIFTER = 12582912.0


class _Builder:
    """Scalar f32 arithmetic at the current insertion point, with the current location."""

    def __init__(self):
        self.f32 = ir.F32Type.get()
        self.i32 = ir.IntegerType.get_signless(32)

    def c(self, v: float):
        return arith.ConstantOp(self.f32, ir.FloatAttr.get(self.f32, v)).result

    def ci(self, v: int):
        return arith.ConstantOp(self.i32, ir.IntegerAttr.get(self.i32, v)).result

    def add(self, a, b): return arith.addf(a, b)
    def sub(self, a, b): return arith.subf(a, b)
    def mul(self, a, b): return arith.mulf(a, b)
    def div(self, a, b): return arith.divf(a, b)
    def fma(self, a, b, c): return math.fma(a, b, c)
    def max(self, a, b): return arith.maximumf(a, b)
    def min(self, a, b): return arith.minimumf(a, b)
    def cmp(self, pred: arith.CmpFPredicate, a, b): return arith.cmpf(pred, a, b)
    def select(self, c, a, b): return arith.select(c, a, b)

    def horner(self, x, coeffs):
        acc = self.c(coeffs[0])
        for k in coeffs[1:]:
            acc = self.fma(acc, x, self.c(k))
        return acc

    def pow2(self, m_int):
        """2^m as f32 for m in [-126, 127], built from the exponent bits."""
        biased = arith.addi(m_int, self.ci(127))
        bits = arith.shli(biased, self.ci(23))
        return arith.bitcast(self.f32, bits)


# arith.cmpf predicates: ordered <, unordered (NaN)
_OLT, _UNO = arith.CmpFPredicate.OLT, arith.CmpFPredicate.UNO
_OEQ, _ULT = arith.CmpFPredicate.OEQ, arith.CmpFPredicate.ULT


def _exp(b: _Builder, x):
    # x in [-104, 88.8] covers every finite result (and its rounding to 0 or inf)
    xc = b.min(b.max(x, b.c(-104.0)), b.c(88.8))
    m = math.floor(b.fma(xc, b.c(1.44269504088896341), b.c(0.5)))
    r = b.fma(m, b.c(-0.693359375), xc)
    r = b.fma(m, b.c(2.12194440e-4), r)
    p = b.horner(r, _EXP_POLY)
    y = b.add(b.fma(b.mul(p, r), r, r), b.c(1.0))
    # 2^m in two halves so that m in [-150, 128] neither overflows the exponent field
    # early nor skips gradual underflow.
    mi = arith.fptosi(b.i32, m)
    m1 = arith.shrsi(mi, b.ci(1))
    m2 = arith.subi(mi, m1)
    result = b.mul(b.mul(y, b.pow2(m1)), b.pow2(m2))
    return b.select(b.cmp(_UNO, x, x), x, result)


def _log(b: _Builder, x):
    # x = 2^e * (1 + m), 1 + m in [sqrt(1/2), sqrt(2)), from the bits; subnormals are
    # scaled by 2^23 first so that their exponent field is not zero.
    tiny = b.cmp(_OLT, x, b.c(1.17549435e-38))
    xs = b.select(tiny, b.mul(x, b.c(8388608.0)), x)
    bits = arith.bitcast(b.i32, xs)
    e = arith.subi(arith.shrui(bits, b.ci(23)), b.ci(126))
    e = arith.subi(e, arith.select(tiny, b.ci(23), b.ci(0)))
    # mantissa with exponent -1: a value in [0.5, 1)
    half = arith.bitcast(b.f32, arith.ori(arith.andi(bits, b.ci(0x007FFFFF)), b.ci(0x3F000000)))
    low = b.cmp(_OLT, half, b.c(_SQRT_HALF))
    e = arith.subi(e, arith.select(low, b.ci(1), b.ci(0)))
    m = b.sub(b.select(low, b.add(half, half), half), b.c(1.0))
    ef = arith.sitofp(b.f32, e)
    z = b.mul(m, m)
    y = b.mul(b.mul(m, z), b.horner(m, _LOG_POLY))
    y = b.fma(ef, b.c(-2.12194440e-4), y)
    y = b.fma(z, b.c(-0.5), y)
    r = b.fma(ef, b.c(0.693359375), b.add(m, y))
    # Exact special cases: log(+-0) = -inf, log(x < 0) = NaN, log(+inf) = +inf, NaN -> NaN.
    inf = b.c(float("inf"))
    r = b.select(b.cmp(_OEQ, x, inf), inf, r)
    r = b.select(b.cmp(_OEQ, x, b.c(0.0)), b.c(float("-inf")), r)
    return b.select(b.cmp(_ULT, x, b.c(0.0)), b.c(float("nan")), r)


def _tanh(b: _Builder, x):
    # tanh a = u / (u + 2), u = e^(2a) - 1 = 2^k (1 + p) - 1, p = expm1(r), a = |x| (the sign
    # goes on last, so tanh(-0.0) = -0.0); one form for every a, no select between two
    a = b.min(math.absf(x), b.c(_TANH_CLAMP))          # NaN stays NaN
    t = b.add(a, a)
    shifted = b.fma(t, b.c(1.44269504088896341), b.c(_ROUNDING_SHIFTER))
    k = b.sub(shifted, b.c(_ROUNDING_SHIFTER))
    r = b.fma(k, b.c(-_LN2_HI), t)                     # exact
    r = b.fma(k, b.c(-_LN2_LO), r)
    p = b.fma(b.mul(r, r), b.horner(r, _EXPM1_Q), r)
    k_int = arith.subi(arith.bitcast(b.i32, shifted), arith.bitcast(b.i32, b.c(_ROUNDING_SHIFTER)))
    scale = b.pow2(k_int)                               # k in [0, 27]
    u = b.fma(scale, p, b.sub(scale, b.c(1.0)))         # 2^k - 1 exact for k <= 24
    return math.copysign(b.div(u, b.add(u, b.c(2.0))), x)


def _widened(kernel):
    """A kernel of widened.py (evaluated in f64; sin/cos/tan declare a table in `b.symbols`)."""
    return lambda b, x: kernel(b.symbols, x)


def _trig(kernel):
    """sin/cos/tan of widened.py, told how large their argument can be (value_ranges.py):
    a small one needs no reduction table."""
    return lambda b, x: kernel(b.symbols, x, value_ranges.magnitude_bound(x))


# sin/cos/tan and log1p are evaluated in f64 (widened.py): within 0.5 ulp + a hair, which
# complex log1p needs (the StableHLO testdata allow it 3 ULPs, and an f32 log1p at 1.4 ulp put
# it at 4: log1p_complex64_20_20).
_APPROX = {"math.exp": _exp, "math.tanh": _tanh, "math.log": _log,
           "math.sin": _trig(widened.sin), "math.cos": _trig(widened.cos),
           "math.tan": _trig(widened.tan), "math.log1p": _widened(widened.log1p),
           "math.erf": _widened(widened.erf)}
# libm calls kiln-accurate-libm-calls made of math ops (f32 only here)
_CALLS = {"log1pf": _widened(widened.log1p)}
# f64 exp/log (f64math.py): within 1 ulp, the rest of f64 math stays with libm
_APPROX_F64 = {"math.exp": f64math.exp, "math.log": f64math.log}


def approximate_math(module: ir.Module) -> None:
    """Replace f32 scalar math.exp/tanh/log/sin/cos/tan and log1pf calls, and f64 math.exp/log,
    with the approximations above."""
    todo = []
    f32, f64 = ir.F32Type.get(), ir.F64Type.get()

    def visit(op):
        op = op.operation
        if len(op.results) == 1 and op.results[0].type == f32 and _approximation(op):
            todo.append((op, _f32_kernel))
        elif len(op.results) == 1 and op.results[0].type == f64 and op.name in _APPROX_F64:
            todo.append((op, _f64_kernel))
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    for op, kernel in todo:
        _prefer_wide_vectors(op)
        with ir.InsertionPoint(op), op.location:
            value = kernel(op)
        op.results[0].replace_all_uses_with(value)
        op.erase()


# LLVM's tuning for this CPU family vectorizes 8 f32 lanes wide (prefer-vector-width=256);
# polynomial math is bound by arithmetic, not memory, so it runs on 16 lanes: gelu over 4M
# f32 2.0 -> 1.4 ms. kiln-parallelize copies the attribute to the bodies it outlines.
_PASSTHROUGH = "llvm.passthrough"   # becomes llvm.func's `passthrough` (LLVM function attributes)


def _prefer_wide_vectors(op: ir.Operation) -> None:
    """Mark the function around `op` to be vectorized with 512-bit vectors."""
    fn = op.parent
    while fn is not None and fn.name != "func.func":
        fn = fn.parent
    if fn is None or _PASSTHROUGH in fn.attributes:
        return
    width = ir.ArrayAttr.get([ir.StringAttr.get("prefer-vector-width"), ir.StringAttr.get("512")])
    fn.attributes[_PASSTHROUGH] = ir.ArrayAttr.get([width])


def _f32_kernel(op: ir.Operation):
    builder = _Builder()
    builder.symbols = _enclosing_module(op)
    return _approximation(op)(builder, op.operands[0])


def _f64_kernel(op: ir.Operation):
    return _APPROX_F64[op.name](op.operands[0])


def _enclosing_module(op: ir.Operation) -> ir.Block:
    """The body of the module around `op`: the symbol table its functions' globals go in."""
    parent = op.parent
    while parent.name != "builtin.module":
        parent = parent.parent
    return parent.regions[0].blocks[0]


def _approximation(op: ir.Operation):
    if op.name == "func.call":
        return _CALLS.get(ir.FlatSymbolRefAttr(op.attributes["callee"]).value)
    return _APPROX.get(op.name)


_REASSOCIABLE = ("arith.addf", "arith.mulf", "arith.maximumf", "arith.minimumf")


def reassociate_reductions(module: ir.Module) -> None:
    """Give the accumulating op of each float linalg reduction the `reassoc` flag."""
    todo = []

    def visit(op):
        op = op.operation
        if op.name == "linalg.generic" and "reduction" in str(op.attributes["iterator_types"]):
            block = op.regions[0].blocks[0]
            outs = _output_args(op, block)
            yld = list(block.operations)[-1]
            for v in yld.operands:
                owner = v.owner
                if isinstance(owner, ir.OpView):
                    owner = owner.operation
                if isinstance(owner, ir.Operation) and owner.name in _REASSOCIABLE \
                        and any(o == a for o in owner.operands for a in outs):
                    todo.append(owner)
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    for op in todo:
        op.attributes["fastmath"] = fastmath("reassoc")


def _output_args(op: ir.Operation, block: ir.Block) -> list:
    sizes = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    n_outs = sizes[1]
    args = list(block.arguments)
    return args[len(args) - n_outs:]
