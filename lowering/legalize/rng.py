"""`stablehlo.rng`: UNIFORM on integers and floats, NORMAL on floats (registered by
control_flow.py, before the upstream pass, which lowers `rng_bit_generator`).

The spec leaves the generator implementation-defined, but upstream's float UNIFORM is one linear
congruential step of the element index (consecutive values differ by a constant, and it has no
NORMAL). Kiln instead hashes the element index with a 32-bit integer finalizer
(x ^= x >> 16; x *= 0x7feb352d; x ^= x >> 15; x *= 0x846ca68b; x ^= x >> 16, a bijection
with good avalanche), keeps the top 24 bits as u = bits * 2^-24, uniform in [0, 1):

* UNIFORM(a, b) = a + (b - a) * u, in [a, b) (computed in f32, or f64 for f64; a value that
  rounds up to b in the result type becomes a);
* NORMAL(mu, sigma) = mu + sigma * sqrt(-2 log(1 - u1)) * cos(2 pi u2) (Box-Muller), u1 and u2
  hashed from indices 2i and 2i+1; 1 - u1 is in (0, 1], so the log is finite;
* integer UNIFORM(a, b) = a + (bits mod (b - a)), bits the 64 bits hashed from 2i and 2i+1.

The sequence is the same on every call (`stablehlo.rng` has no state operand).

`rng_bit_generator` (THREE_FRY, PHILOX) is upstream's and matches XLA/jax bit for bit
(tests/py/test_rng.py) except PHILOX when the 64-bit counter wraps within one call (XLA carries
into a 128-bit counter).
"""
from __future__ import annotations

import math

import numpy as np

from torch_mlir import ir

from ...errors import KilnError
from ..patterns import pattern_pass
from .hlo_builder import HloBuilder, element, enum_value, replace_op, static_shape


def _hash(h: HloBuilder, shape, stride: int, offset: int) -> ir.Value:
    """32 hashed bits (ui32) for each element, from its index*stride + offset."""
    n = int(np.prod(shape)) if len(shape) else 1
    index = h.reshape(h.iota((n,), 0, "ui32"), tuple(shape))
    x = h.add(h.mul(index, h.splat(stride, shape, "ui32")), h.splat(offset, shape, "ui32"))

    def shr_xor(v, k):
        return h.binary("xor", v, h.binary("shift_right_logical", v, h.splat(k, shape, "ui32")))

    x = shr_xor(x, 16)
    x = h.mul(x, h.splat(0x7FEB352D, shape, "ui32"))
    x = shr_xor(x, 15)
    x = h.mul(x, h.splat(0x846CA68B, shape, "ui32"))
    return shr_xor(x, 16)


def _uniform01(h: HloBuilder, shape, stride: int, offset: int, compute: ir.Type) -> ir.Value:
    """u in [0, 1) for each element, from the hash of index*stride + offset."""
    top = h.binary("shift_right_logical", _hash(h, shape, stride, offset), h.splat(8, shape, "ui32"))
    return h.mul(h.convert(top, compute), h.splat(2.0 ** -24, shape, compute))


def _lower_integer_uniform(op: ir.Operation) -> None:
    """Integer UNIFORM(a, b): a + (64 hashed bits mod (b - a)), in [a, b); the modulo's bias
    is below (b - a) / 2^64. The range is computed in 64 bits, where b - a cannot overflow
    when read as unsigned; b <= a (implementation-defined) gives a."""
    shape = static_shape(op.results[0], op)
    static_shape(op.operands[2], op)
    etype = element(op.results[0])
    signed = not ir.IntegerType(etype).is_unsigned
    wide = "i64" if signed else "ui64"
    with ir.InsertionPoint(op), op.location:
        h = HloBuilder()
        a = h.broadcast(h.convert(op.operands[0], wide), shape, [])
        b = h.broadcast(h.convert(op.operands[1], wide), shape, [])

        def unsigned(v):
            return v if not signed else h.op("stablehlo.bitcast_convert", [v], shape, "ui64")

        high = h.binary("shift_left", h.convert(_hash(h, shape, 2, 0), "ui64"), h.splat(32, shape, "ui64"))
        bits = h.binary("or", high, h.convert(_hash(h, shape, 2, 1), "ui64"))
        span = unsigned(h.sub(b, a))
        span = h.select(h.compare("GT", b, a), span, h.splat(1, shape, "ui64"))
        step = h.binary("remainder", bits, span)
        if signed:
            step = h.op("stablehlo.bitcast_convert", [step], shape, "i64")
        out = h.convert(h.add(a, step), etype)
    replace_op(op, [out])


def _lower_rng(op: ir.Operation, normal: bool) -> None:
    shape = static_shape(op.results[0], op)
    static_shape(op.operands[2], op)  # the shape operand: a located error if it is dynamic
    etype = element(op.results[0])
    compute = ir.F64Type.get() if str(etype) == "f64" else ir.F32Type.get()
    with ir.InsertionPoint(op), op.location:
        h = HloBuilder()
        a = h.broadcast(h.convert(op.operands[0], compute), shape, [])
        b = h.broadcast(h.convert(op.operands[1], compute), shape, [])
        if normal:
            u1 = _uniform01(h, shape, 2, 0, compute)
            u2 = _uniform01(h, shape, 2, 1, compute)
            one = h.splat(1.0, shape, compute)
            radius = h.unary("sqrt", h.mul(h.splat(-2.0, shape, compute),
                                           h.unary("log", h.sub(one, u1))))
            z = h.mul(radius, h.unary("cosine", h.mul(h.splat(2.0 * math.pi, shape, compute), u2)))
            out = h.add(a, h.mul(b, z))
            out = h.convert(out, etype)
        else:
            out = h.add(a, h.mul(h.sub(b, a), _uniform01(h, shape, 1, 0, compute)))
            out = _below(h, h.convert(out, etype), h.convert(a, etype), h.convert(b, etype))
    replace_op(op, [out])


def _below(h: HloBuilder, out: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
    """UNIFORM's values lie in [a, b), but a + (b - a) * u for u just under 1 can round up to b
    (in f32 rarely; in f16/bf16, whose spacing near b is coarse, for ~1% of the values): those
    become a, the one value every such draw is sure to be in range for."""
    return h.select(h.compare("LT", out, b), out, a)


def _lower_float_rng(op: ir.Operation) -> bool | None:
    """Float UNIFORM and NORMAL; integer UNIFORM (upstream's lowering rejects it)."""
    etype = element(op.results[0])
    normal = enum_value(op.attributes["rng_distribution"]) == "NORMAL"
    if not isinstance(etype, ir.FloatType):
        if normal:
            raise KilnError(f"stablehlo.rng NORMAL of {etype} is not supported",
                            location=str(op.location), hint="NORMAL draws floating-point numbers")
        if not isinstance(etype, ir.IntegerType):
            raise KilnError(f"stablehlo.rng of {etype} is not supported", location=str(op.location),
                            hint="UNIFORM draws integers or floating-point numbers")
        _lower_integer_uniform(op)
        return None
    _lower_rng(op, normal)


lower_rng = pattern_pass({"stablehlo.rng": _lower_float_rng})
