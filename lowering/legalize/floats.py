"""Narrow floats and float-format ops (registered by numerics.py).

8-, 6- and 4-bit floats (f8E4M3FN, f8E5M2, the FNUZ variants, f8E4M3, f8E3M4, f8E8M0FNU,
f4E2M1FN, f6E2M3FN, f6E3M2FN) have no LLVM arithmetic. Kiln computes on them in f32, as XLA
does, and converts exactly:

* before upstream: every elementwise/contraction op on a narrow float gets f32 operands (an exact
  widening) and rounds its result back; `convert` to or from a narrow float goes through f32 (or
  f64, for f64 and wide-integer sources, so no value is rounded twice). Upstream then only emits
  `arith.extf` narrow -> f32 and `arith.truncf` f32/f64 -> narrow.
* after upstream: those two become integer code LLVM can compile. extf reads a table of the
  format's 2^bits values (built with ml_dtypes). truncf rounds to nearest even: with e the
  exponent of |x| (at least the format's minimum normal exponent), q = 2^(e - mantissa bits) is
  the spacing of the format's values there, so r = roundeven(|x| / q) * q is the correctly
  rounded magnitude (both steps are exact in f32/f64); r's bits are then re-biased into the
  format (or scaled into a subnormal), the sign attached, and overflow, NaN and infinity mapped as
  each format defines them (infinity, NaN, or saturation for the finite-only f4/f6 and the
  exponent-only f8E8M0FNU), matching ml_dtypes / LLVM APFloat bit for bit.

`reduce_precision` with zero mantissa bits turns NaN into +inf (the reference interpreter and
XLA); upstream keeps the NaN, so Kiln selects.
"""
from __future__ import annotations

from functools import lru_cache

import ml_dtypes
import numpy as np
from torch_mlir import ir

from ..ir_util import walk
from .hlo_builder import comparison_direction

NARROW = {"f8E4M3FN": ml_dtypes.float8_e4m3fn, "f8E5M2": ml_dtypes.float8_e5m2,
          "f8E4M3FNUZ": ml_dtypes.float8_e4m3fnuz, "f8E5M2FNUZ": ml_dtypes.float8_e5m2fnuz,
          "f8E4M3B11FNUZ": ml_dtypes.float8_e4m3b11fnuz, "f8E4M3": ml_dtypes.float8_e4m3,
          "f8E3M4": ml_dtypes.float8_e3m4, "f8E8M0FNU": ml_dtypes.float8_e8m0fnu,
          "f4E2M1FN": ml_dtypes.float4_e2m1fn, "f6E2M3FN": ml_dtypes.float6_e2m3fn,
          "f6E3M2FN": ml_dtypes.float6_e3m2fn}
_BITS = {"f4E2M1FN": 4, "f6E2M3FN": 6, "f6E3M2FN": 6}

# Ops computed in f32 when they touch a narrow float (no regions: reduce bodies are handled
# op by op, being made of these).
_COMPUTE = {f"stablehlo.{n}" for n in (
    "add subtract multiply divide remainder power atan2 maximum minimum negate abs sign "
    "exponential exponential_minus_one log log_plus_one logistic sqrt rsqrt cbrt sine cosine "
    "tan tanh floor ceil round_nearest_afz round_nearest_even is_finite compare clamp "
    "dot_general dot convolution reduce_precision").split()}


def _element(t: ir.Type) -> ir.Type:
    return ir.ShapedType(t).element_type if isinstance(t, ir.ShapedType) else t


def _is_narrow(t: ir.Type) -> bool:
    return str(_element(t)) in NARROW


def _with_element(t: ir.Type, element: ir.Type) -> ir.Type:
    return ir.RankedTensorType.get(ir.RankedTensorType(t).shape, element) \
        if isinstance(t, ir.RankedTensorType) else element


def _convert(value: ir.Value, element: ir.Type) -> ir.Value:
    return ir.Operation.create("stablehlo.convert", results=[_with_element(value.type, element)],
                               operands=[value]).result


def _widen_compute(op: ir.Operation) -> None:
    f32 = ir.F32Type.get()
    with ir.InsertionPoint(op), op.location:
        operands = [_convert(v, f32) if _is_narrow(v.type) else v for v in op.operands]
        results = [_with_element(r.type, f32) if _is_narrow(r.type) else r.type for r in op.results]
        attrs = {name: op.attributes[name] for name in op.attributes}
        new = ir.Operation.create(op.name, results=results, operands=operands, attributes=attrs)
        outs = [_convert(n, _element(r.type)) if _is_narrow(r.type) else n
                for n, r in zip(new.results, op.results)]
    for old, value in zip(op.results, outs):
        old.replace_all_uses_with(value)
    op.erase()


def _split_convert(op: ir.Operation) -> None:
    """convert A -> B with a narrow float on either side, as A -> f32/f64 -> B."""
    src, dst = _element(op.operands[0].type), _element(op.results[0].type)
    wide_source = str(src) == "f64" or (isinstance(src, ir.IntegerType) and ir.IntegerType(src).width > 24)
    if isinstance(src, ir.ComplexType):
        return  # complex -> narrow: leave to upstream's error
    middle = ir.F64Type.get() if wide_source else ir.F32Type.get()
    if str(src) == str(middle) or str(dst) == str(middle):
        return  # already a single extf/truncf
    if _is_narrow(src) and not _is_narrow(dst):
        middle = ir.F32Type.get()  # narrow -> f32 is exact; f32 -> dst rounds once
    with ir.InsertionPoint(op), op.location:
        out = _convert(_convert(op.operands[0], middle), dst)
    op.results[0].replace_all_uses_with(out)
    op.erase()


def _fix_reduce_precision(op: ir.Operation) -> None:
    if ir.IntegerAttr(op.attributes["mantissa_bits"]).value != 0:
        return
    x = op.operands[0]
    t = x.type
    with ir.InsertionPoint.after(op), op.location:
        i1 = _with_element(t, ir.IntegerType.get_signless(1))
        is_nan = ir.Operation.create(
            "stablehlo.compare", results=[i1], operands=[x, x],
            attributes={"comparison_direction": comparison_direction("NE")}).result
        inf = ir.Operation.create("stablehlo.constant", results=[t], attributes={
            "value": ir.DenseElementsAttr.get_splat(t, ir.FloatAttr.get(_element(t), float("inf")))}).result
        out = ir.Operation.create("stablehlo.select", results=[t], operands=[is_nan, inf, op.results[0]])
    op.results[0].replace_all_uses_except(out.result, out)


def widen_narrow_floats(module: ir.Module) -> None:
    for op in list(walk(module.operation)):
        if op.name == "stablehlo.reduce_precision" and \
                not _is_narrow(op.operands[0].type):
            _fix_reduce_precision(op)
        if op.name == "stablehlo.convert":
            if _is_narrow(op.operands[0].type) or _is_narrow(op.results[0].type):
                _split_convert(op)
        elif op.name in _COMPUTE and any(_is_narrow(v.type) for v in [*op.operands, *op.results]):
            _widen_compute(op)


# ---- after upstream: arith.extf / arith.truncf on narrow floats -> integer code ----

@lru_cache(maxsize=None)
def _format(name: str) -> dict:
    dt = NARROW[name]
    fi = ml_dtypes.finfo(dt)
    bits = _BITS.get(name, 8)
    special = np.array([np.inf, np.nan, -np.nan, -0.0, np.inf, -np.inf], np.float32).astype(dt).view(np.uint8)
    return {"bits": bits, "mant": int(fi.nmant), "emin": int(fi.minexp), "max": float(fi.max),
            "inf": int(special[0]), "nan": int(special[1]), "neg_nan": int(special[2]),
            "neg_zero": int(special[3]), "overflow": int(special[4]), "neg_overflow": int(special[5]),
            "table": np.arange(1 << bits, dtype=np.uint8).view(dt).astype(np.float32)}


class _Arith:
    """Scalar arith ops at an insertion point."""

    def __init__(self, loc):
        self.loc = loc

    def c(self, t: ir.Type, v) -> ir.Value:
        attr = ir.IntegerAttr.get(t, int(v)) if isinstance(t, ir.IntegerType) else ir.FloatAttr.get(t, float(v))
        return ir.Operation.create("arith.constant", results=[t], attributes={"value": attr}).result

    def op(self, name: str, t: ir.Type, *operands, **attrs) -> ir.Value:
        return ir.Operation.create(name, results=[t], operands=list(operands), attributes=attrs).result

    def cmpf(self, pred: int, a, b):
        return self.op("arith.cmpf", ir.IntegerType.get_signless(1), a, b,
                       predicate=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), pred))

    def cmpi(self, pred: int, a, b):
        return self.op("arith.cmpi", ir.IntegerType.get_signless(1), a, b,
                       predicate=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), pred))

    def select(self, c, a, b):
        return self.op("arith.select", a.type, c, a, b)


# arith.cmpf / cmpi predicate numbers
_OLT, _UGT, _ULE, _UNO = 4, 9, 12, 14
_EQ, _SLT, _SGT = 0, 2, 4


def _extf(op: ir.Operation, func_block: ir.Block, tables: dict) -> None:
    src = op.operands[0]
    name = str(src.type)
    fmt = _format(name)
    f32 = ir.F32Type.get()
    if name not in tables:
        with ir.InsertionPoint.at_block_begin(func_block), op.location:
            t = ir.RankedTensorType.get([1 << fmt["bits"]], f32)
            tables[name] = ir.Operation.create("arith.constant", results=[t], attributes={
                "value": ir.DenseElementsAttr.get(fmt["table"], type=t)}).result
    with ir.InsertionPoint(op), op.location:
        a = _Arith(op.location)
        ibits = ir.IntegerType.get_signless(fmt["bits"])
        code = a.op("arith.bitcast", ibits, src)
        index = a.op("arith.index_castui", ir.IndexType.get(), code)
        value = ir.Operation.create("tensor.extract", results=[f32], operands=[tables[name], index]).result
        dst = op.results[0].type
        if str(dst) != "f32":
            value = a.op("arith.extf" if ir.FloatType(dst).width > 32 else "arith.truncf", dst, value)
    op.results[0].replace_all_uses_with(value)
    op.erase()


def _truncf(op: ir.Operation) -> None:
    x = op.operands[0]
    name = str(op.results[0].type)
    fmt = _format(name)
    with ir.InsertionPoint(op), op.location:
        a = _Arith(op.location)
        ftype = x.type
        if str(ftype) not in ("f32", "f64") or (name == "f8E8M0FNU" and str(ftype) != "f64"):
            # f16/bf16 widen exactly; f8E8M0FNU needs f64 to hold 2^-127 as a normal number.
            ftype = ir.F64Type.get() if name == "f8E8M0FNU" else ir.F32Type.get()
            x = a.op("arith.extf", ftype, x)
        wide = str(ftype) == "f64"
        itype = ir.IntegerType.get_signless(64 if wide else 32)
        fmant, fbias, fwidth = (52, 1023, 64) if wide else (23, 127, 32)
        m, emin, bits = fmt["mant"], fmt["emin"], fmt["bits"]
        absx = a.op("math.absf", ftype, x)
        abits = a.op("arith.bitcast", itype, absx)
        e = a.op("arith.subi", itype, a.op("arith.shrui", itype, abits, a.c(itype, fmant)), a.c(itype, fbias))
        e = a.op("arith.maxsi", itype, e, a.c(itype, emin))
        # q = 2^(e - m) and 1/q, built from their exponent fields.
        qbits = a.op("arith.shli", itype, a.op("arith.addi", itype, e, a.c(itype, fbias - m)), a.c(itype, fmant))
        q = a.op("arith.bitcast", ftype, qbits)
        r = a.op("arith.mulf", ftype, a.op("math.roundeven", ftype, a.op("arith.divf", ftype, absx, q)), q)
        rbits = a.op("arith.bitcast", itype, r)
        if name == "f8E8M0FNU":
            code = a.op("arith.subi", itype, a.op("arith.shrui", itype, rbits, a.c(itype, fmant)),
                        a.c(itype, fbias - 127))
            code = a.op("arith.maxsi", itype, code, a.c(itype, 0))  # below 2^-127: the minimum
        else:
            bias = 1 - emin
            normal = a.op("arith.subi", itype, a.op("arith.shrui", itype, rbits, a.c(itype, fmant - m)),
                          a.c(itype, (fbias - bias) << m))
            scaled = a.op("arith.mulf", ftype, r, a.c(ftype, 2.0 ** (m - emin)))
            subnormal = a.op("arith.fptoui", itype, scaled)
            code = a.select(a.cmpf(_OLT, r, a.c(ftype, 2.0 ** emin)), subnormal, normal)
            sign = a.op("arith.shrui", itype, a.op("arith.bitcast", itype, x), a.c(itype, fwidth - 1))
            signed = a.op("arith.ori", itype, code,
                          a.op("arith.shli", itype, sign, a.c(itype, bits - 1)))
            if fmt["neg_zero"] == 0:  # no negative zero (FNUZ): -0 is +0
                signed = a.select(a.cmpi(_EQ, code, a.c(itype, 0)), code, signed)
            code = signed
        # Overflow (including infinities): what the format makes of an infinity (infinity,
        # NaN, or its largest value), with the input's sign.
        # (unordered too: |x| = inf gives q = inf and r = inf/inf = NaN in the widest binade)
        over = a.cmpf(_UGT, r, a.c(ftype, fmt["max"]))
        negative = a.cmpf(_OLT, x, a.c(ftype, 0.0))
        pos_over = fmt["overflow"]
        neg_over = fmt["neg_overflow"]
        code = a.select(over, a.select(negative, a.c(itype, neg_over), a.c(itype, pos_over)), code)
        if name == "f8E8M0FNU":  # no sign and no zero: negatives and zeros are NaN
            code = a.select(a.cmpf(_ULE, x, a.c(ftype, 0.0)), a.c(itype, fmt["nan"]), code)
        is_nan = a.cmpf(_UNO, x, x)
        nan_bits = a.select(a.cmpi(_SLT, a.op("arith.bitcast", itype, x), a.c(itype, 0)),
                            a.c(itype, fmt["neg_nan"]), a.c(itype, fmt["nan"]))
        code = a.select(is_nan, nan_bits, code)
        narrow_int = ir.IntegerType.get_signless(bits)
        result = a.op("arith.bitcast", op.results[0].type, a.op("arith.trunci", narrow_int, code))
    op.results[0].replace_all_uses_with(result)
    op.erase()


def _truncf_f32_to_bf16(op: ir.Operation) -> None:
    """f32 -> bf16 rounded to nearest even in integer code: bf16 is f32's top half, so add
    0x7FFF plus the kept half's lowest bit and shift (a carry into the exponent rounds up to
    the next binade, or to infinity, as it should); a NaN becomes the quiet NaN of its sign, as
    in Eigen and ml_dtypes. LLVM lowers this truncation to a call of `__truncsfbf2` per element on CPUs
    without AVX-512 BF16, which made bf16 outputs about 12x slower than XLA's (layernorm_bf16
    on an AVX2 machine); the integer form vectorizes on every x86-64."""
    x = op.operands[0]
    with ir.InsertionPoint(op), op.location:
        a = _Arith(op.location)
        i32 = ir.IntegerType.get_signless(32)
        bits = a.op("arith.bitcast", i32, x)
        high = a.op("arith.shrui", i32, bits, a.c(i32, 16))
        lowest_kept = a.op("arith.andi", i32, high, a.c(i32, 1))
        rounded = a.op("arith.addi", i32, bits, a.op("arith.addi", i32, lowest_kept, a.c(i32, 0x7FFF)))
        code = a.op("arith.shrui", i32, rounded, a.c(i32, 16))
        sign = a.op("arith.andi", i32, high, a.c(i32, 0x8000))
        quiet_nan = a.op("arith.ori", i32, sign, a.c(i32, 0x7FC0))
        code = a.select(a.cmpf(_UNO, x, x), quiet_nan, code)
        i16 = ir.IntegerType.get_signless(16)
        result = a.op("arith.bitcast", op.results[0].type, a.op("arith.trunci", i16, code))
    op.results[0].replace_all_uses_with(result)
    op.erase()


def lower_narrow_float_casts(module: ir.Module) -> None:
    for func in list(module.body.operations):
        func = func.operation
        if func.name != "func.func" or not len(func.regions[0].blocks):
            continue
        tables: dict = {}
        for op in list(walk(func)):
            if op.name == "arith.extf" and _is_narrow(op.operands[0].type):
                _extf(op, func.regions[0].blocks[0], tables)
            elif op.name == "arith.truncf" and _is_narrow(op.results[0].type):
                _truncf(op)
            elif op.name == "arith.truncf" and str(op.results[0].type) == "bf16" and \
                    str(op.operands[0].type) == "f32":
                _truncf_f32_to_bf16(op)
