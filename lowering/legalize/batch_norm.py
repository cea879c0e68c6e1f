"""`stablehlo.batch_norm_inference`, `batch_norm_training` and `batch_norm_grad` as
reductions, broadcasts and elementwise StableHLO, the way XLA's BatchNormExpander rewrites them
before fusion: the per-element work then fuses into the loops around it (a convolution's
epilogue, the next activation) instead of staying one opaque op.

With `f` the feature dimension (`feature_index`), C its size, N the number of elements of one
feature (the product of the other dimensions), and the 1-D per-feature values broadcast along
`f` where they meet the operand:

* inference: y = (x - mean) * (scale * rsqrt(variance + eps)) + offset; the per-feature
  factor is computed once on the C-vector, so each element costs a subtract, a multiply and an
  add.
* training: mean = sum(x) / N; var = sum((x - mean)^2) / N (biased, as the spec defines it);
  y as above with these. The variance is taken of the centered values (two passes) rather than
  XLA's E[x^2] - E[x]^2: that one cancels catastrophically when |mean| >> stddev, and a
  negative variance would make rsqrt NaN.
* grad: with c = x - mean and r = rsqrt(variance + eps):
  grad_offset = sum(g); grad_scale = sum(g * c) * r;
  grad_operand = scale * r * (g - grad_offset / N - c * (grad_scale * r / N)).

Elements narrower than f32 (f16, bf16, 8-bit floats) are computed in f32 and rounded once at
the end (sums of many f16 values would lose most of their digits); f32 and f64 compute in
their own type. The epsilon attribute (an f32) is used at that precision.
"""
from __future__ import annotations

import numpy as np
from torch_mlir import ir

from ...errors import KilnError
from ..patterns import pattern_pass
from .hlo_builder import (HloBuilder, element, replace_op, shape, static_shape, tensor_of)


def _compute_type(etype: ir.Type) -> ir.Type:
    if not isinstance(etype, ir.FloatType):
        raise TypeError(etype)  # the verifier admits only floats here
    return etype if ir.FloatType(etype).width >= 32 else ir.F32Type.get()


class _PerFeature:
    """Reductions to and broadcasts from the feature dimension of one operand shape."""

    def __init__(self, h: HloBuilder, op: ir.Operation, operand: ir.Value):
        self.h = h
        self.shape = static_shape(operand, op)
        self.feature = ir.IntegerAttr(op.attributes["feature_index"]).value
        self.etype = element(operand)
        self.compute = _compute_type(self.etype)
        self.reduced = [d for d in range(len(self.shape)) if d != self.feature]
        # elements per feature
        self.count = int(np.prod([self.shape[d] for d in self.reduced], dtype=np.int64))
        self.epsilon = ir.FloatAttr(op.attributes["epsilon"]).value

    def widen(self, v: ir.Value) -> ir.Value:
        return self.h.convert(v, self.compute)

    def narrow(self, v: ir.Value) -> ir.Value:
        return self.h.convert(v, self.etype)

    def scalar(self, value: float, like: ir.Value) -> ir.Value:
        return self.h.splat(value, shape(like), self.compute)

    def spread(self, v: ir.Value) -> ir.Value:
        """A per-feature C-vector broadcast to the operand's shape."""
        return self.h.broadcast(v, self.shape, [self.feature])

    def sum(self, x: ir.Value) -> ir.Value:
        """The sum over every dimension but the feature one: a C-vector."""
        if not self.reduced:
            return x
        if self.count == 0:  # an empty batch: nothing to add (and no empty loop nest to build)
            return self.h.splat(0.0, [self.shape[self.feature]], element(x))
        return _reduce_sum(self.h, x, self.reduced)

    def mean(self, x: ir.Value) -> ir.Value:
        total = self.sum(x)
        return self.h.div(total, self.scalar(float(self.count), total))

    def rsqrt_variance(self, variance: ir.Value) -> ir.Value:
        """rsqrt(variance + epsilon), per feature."""
        return self.h.unary("rsqrt", self.h.add(variance, self.scalar(self.epsilon, variance)))


def _reduce_sum(h: HloBuilder, x: ir.Value, dims: list[int]) -> ir.Value:
    etype = element(x)
    result_shape = [n for d, n in enumerate(shape(x)) if d not in dims]
    zero = h.constant(np.asarray(0.0), etype)
    reduce = ir.Operation.create(
        "stablehlo.reduce", results=[tensor_of(result_shape, etype)], operands=[x, zero],
        attributes={"dimensions": ir.DenseI64ArrayAttr.get(dims)}, regions=1)
    scalar = tensor_of([], etype)
    location = ir.Location.current
    block = reduce.regions[0].blocks.append(scalar, scalar, arg_locs=[location, location])
    with ir.InsertionPoint(block):
        total = ir.Operation.create("stablehlo.add", results=[scalar],
                                    operands=list(block.arguments)).result
        ir.Operation.create("stablehlo.return", results=[], operands=[total])
    return reduce.result


def _normalize(f: _PerFeature, centered: ir.Value, factor: ir.Value, offset: ir.Value) -> ir.Value:
    """centered * factor + offset, factor and offset per feature."""
    h = f.h
    return h.add(h.mul(centered, f.spread(factor)), f.spread(f.widen(offset)))


def _inference(op: ir.Operation) -> None:
    x, scale, offset, mean, variance = op.operands
    with ir.InsertionPoint(op), op.location:
        h = HloBuilder()
        f = _PerFeature(h, op, x)
        factor = h.mul(f.widen(scale), f.rsqrt_variance(f.widen(variance)))
        centered = h.sub(f.widen(x), f.spread(f.widen(mean)))
        out = f.narrow(_normalize(f, centered, factor, offset))
    replace_op(op, [out])


def _training(op: ir.Operation) -> None:
    x, scale, offset = op.operands
    with ir.InsertionPoint(op), op.location:
        h = HloBuilder()
        f = _PerFeature(h, op, x)
        wide = f.widen(x)
        mean = f.mean(wide)
        centered = h.sub(wide, f.spread(mean))
        variance = f.mean(h.mul(centered, centered))
        factor = h.mul(f.widen(scale), f.rsqrt_variance(variance))
        out = _normalize(f, centered, factor, offset)
        results = [f.narrow(out), f.narrow(mean), f.narrow(variance)]
    replace_op(op, results)


def _grad(op: ir.Operation) -> None:
    x, scale, mean, variance, grad_output = op.operands
    with ir.InsertionPoint(op), op.location:
        h = HloBuilder()
        f = _PerFeature(h, op, x)
        g = f.widen(grad_output)
        centered = h.sub(f.widen(x), f.spread(f.widen(mean)))
        r = f.rsqrt_variance(f.widen(variance))
        grad_offset = f.sum(g)
        grad_scale = h.mul(f.sum(h.mul(g, centered)), r)
        n = f.scalar(float(f.count), r)
        mean_g = h.div(grad_offset, n)
        slope = h.div(h.mul(grad_scale, r), n)
        inner = h.sub(h.sub(g, f.spread(mean_g)), h.mul(centered, f.spread(slope)))
        grad_operand = h.mul(f.spread(h.mul(f.widen(scale), r)), inner)
        results = [f.narrow(grad_operand), f.narrow(grad_scale), f.narrow(grad_offset)]
    replace_op(op, results)


def _checked(lower):
    def run(op: ir.Operation) -> None:
        for value in op.operands:
            etype = element(value) if isinstance(value.type, ir.RankedTensorType) else None
            if not isinstance(etype, ir.FloatType):
                raise KilnError(f"'{op.name}' takes floating-point tensors, got {value.type}",
                                location=str(op.location),
                                hint="batch normalization is defined on floats only")
        lower(op)
    run.__name__ = lower.__name__
    return run


lower_batch_norm = pattern_pass({
    "stablehlo.batch_norm_inference": _checked(_inference),
    "stablehlo.batch_norm_training": _checked(_training),
    "stablehlo.batch_norm_grad": _checked(_grad),
})
