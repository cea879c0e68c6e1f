"""A small typed builder of StableHLO ops, shared by the lowerings that rewrite an op into
other StableHLO for upstream to lower (fft.py, linalg_ops.py, rng.py; floats.py and
semantics.py use its attribute helpers).

A lowering builds in place of the op it lowers:

    with ir.InsertionPoint(op), op.location:
        h = HloBuilder()
        out = h.add(op.operands[0], h.splat(1.0, shape, "f32"))
    replace_op(op, [out])

so every built op sits just before `op` and carries its location (later diagnostics point at
the user's program). Values are plain `ir.Value`s of static ranked tensor types; `shape(v)`
and `element(v)` read them back. Element types are given as `ir.Type`s or by their MLIR
names ("f32", "ui32", "complex<f64>", ...). Result types are computed here, the way the
StableHLO op defines them, so a mistake is a Python error at the line that made it.
"""
from __future__ import annotations

from ..patterns import replace_op  # noqa: F401 - the lowerings' way to finish

from typing import Callable, Sequence, Union

import numpy as np
from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo
from torch_mlir.dialects import arith, scf, tensor

from ...errors import KilnError

Element = Union[ir.Type, str]

# Constants are written from numpy arrays of these (little-endian) layouts.
_NUMPY = {"f16": "<f2", "f32": "<f4", "f64": "<f8", "i1": "?", "i8": "<i1", "i16": "<i2",
          "i32": "<i4", "i64": "<i8", "ui8": "<u1", "ui16": "<u2", "ui32": "<u4", "ui64": "<u8"}


def element_type(e: Element) -> ir.Type:
    """The element type named `e` ("f32", "i1", "ui32", "complex<f64>", ...), or `e` itself."""
    if isinstance(e, ir.Type):
        return e
    if e.startswith("complex<") and e.endswith(">"):
        return ir.ComplexType.get(element_type(e[len("complex<"):-1]))
    floats = {"bf16": ir.BF16Type, "f16": ir.F16Type, "f32": ir.F32Type, "f64": ir.F64Type}
    if e in floats:
        return floats[e].get()
    if e.startswith("ui") and e[2:].isdigit():
        return ir.IntegerType.get_unsigned(int(e[2:]))
    if e.startswith("i") and e[1:].isdigit():
        return ir.IntegerType.get_signless(int(e[1:]))
    raise ValueError(f"no element type named {e!r}")


def tensor_of(shape: Sequence[int], e: Element) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(list(shape), element_type(e))


def shape(v: ir.Value) -> tuple:
    return tuple(ir.RankedTensorType(v.type).shape)


def element(v: ir.Value) -> ir.Type:
    return ir.RankedTensorType(v.type).element_type


def is_complex(e: Element) -> bool:
    return isinstance(element_type(e), ir.ComplexType)


def part_type(e: Element) -> ir.Type:
    """The real type of a complex element type's parts (a real type is its own)."""
    t = element_type(e)
    return ir.ComplexType(t).element_type if isinstance(t, ir.ComplexType) else t


def static_shape(value: ir.Value, op: ir.Operation) -> tuple:
    """`value`'s shape, or a located error if it is not static (these lowerings unroll shapes
    into constants and loop bounds)."""
    t = value.type
    if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
        raise KilnError(f"'{op.name}' needs statically shaped operands here, got {t}",
                        location=str(op.location),
                        hint="pass concrete input shapes so shape refinement can make them static")
    return tuple(t.shape)


# StableHLO's enum attributes, built through the StableHLO bindings (no text to parse).
def comparison_direction(direction: str) -> ir.Attribute:
    return _stablehlo.ComparisonDirectionAttr.get(direction)


def comparison_type(kind: str) -> ir.Attribute:
    return _stablehlo.ComparisonTypeAttr.get(kind)


def enum_value(attr: ir.Attribute) -> str:
    """The case of a StableHLO enum attribute (#stablehlo<fft_type RFFT> -> "RFFT")."""
    for kind in (_stablehlo.FftTypeAttr, _stablehlo.TransposeAttr, _stablehlo.RngDistributionAttr,
                 _stablehlo.ComparisonDirectionAttr, _stablehlo.ComparisonTypeAttr):
        if kind.isinstance(attr):
            return kind(attr).value
    raise ValueError(f"not a StableHLO enum attribute: {attr}")


def _i64(value: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(value))


def _i64s(values) -> ir.Attribute:
    return ir.DenseI64ArrayAttr.get([int(v) for v in values])


class HloBuilder:
    """Creates StableHLO ops (and the scf loops around them) at the current insertion point,
    with the current location."""

    def op(self, name: str, operands: Sequence[ir.Value], result_shape, etype: Element,
           **attributes: ir.Attribute) -> ir.Value:
        return ir.Operation.create(name, results=[tensor_of(result_shape, etype)],
                                   operands=list(operands), attributes=attributes).result

    # Constants.
    def constant(self, array, etype: Element) -> ir.Value:
        """A constant holding `array` exactly, stored as `etype`."""
        t = element_type(etype)
        layout = _NUMPY.get(str(t))
        if layout is None:
            raise ValueError(f"no constant of {t}")
        # astype, not ascontiguousarray: that one turns a 0-d array into a 1-d one.
        data = np.asarray(array).astype(layout, order="C")
        value = ir.DenseElementsAttr.get(data, type=t, shape=list(data.shape))
        return self.op("stablehlo.constant", [], data.shape, t, value=value)

    def splat(self, value, result_shape, etype: Element) -> ir.Value:
        """`value` everywhere: a 0-d constant, broadcast (so no large constant is stored)."""
        scalar = self.constant(np.asarray(value), etype)
        return scalar if len(result_shape) == 0 else self.broadcast(scalar, result_shape, [])

    def iota(self, result_shape, dim: int, etype: Element = "i64") -> ir.Value:
        return self.op("stablehlo.iota", [], result_shape, etype, iota_dimension=_i64(dim))

    # Elementwise.
    def unary(self, name: str, x: ir.Value, etype: Element | None = None) -> ir.Value:
        return self.op(f"stablehlo.{name}", [x], shape(x), etype or element(x))

    def binary(self, name: str, a: ir.Value, b: ir.Value, etype: Element | None = None) -> ir.Value:
        return self.op(f"stablehlo.{name}", [a, b], shape(a), etype or element(a))

    def add(self, a, b): return self.binary("add", a, b)
    def sub(self, a, b): return self.binary("subtract", a, b)
    def mul(self, a, b): return self.binary("multiply", a, b)
    def div(self, a, b): return self.binary("divide", a, b)
    def neg(self, a): return self.unary("negate", a)

    def convert(self, x: ir.Value, etype: Element) -> ir.Value:
        t = element_type(etype)
        return x if element(x) == t else self.unary("convert", x, t)

    def compare(self, direction: str, a: ir.Value, b: ir.Value, kind: str | None = None) -> ir.Value:
        attributes = {"comparison_direction": comparison_direction(direction)}
        if kind:
            attributes["compare_type"] = comparison_type(kind)
        return self.op("stablehlo.compare", [a, b], shape(a), "i1", **attributes)

    def select(self, pred: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.op("stablehlo.select", [pred, a, b], shape(a), element(a))

    # Complex numbers as (real, imaginary) pairs of real tensors.
    def real(self, z: ir.Value) -> ir.Value:
        return self.unary("real", z, part_type(element(z)))

    def imag(self, z: ir.Value) -> ir.Value:
        return self.unary("imag", z, part_type(element(z)))

    def complex(self, re: ir.Value, im: ir.Value) -> ir.Value:
        return self.op("stablehlo.complex", [re, im], shape(re), ir.ComplexType.get(element(re)))

    # Shapes.
    def reshape(self, x: ir.Value, result_shape) -> ir.Value:
        if tuple(result_shape) == shape(x):
            return x
        return self.op("stablehlo.reshape", [x], result_shape, element(x))

    def transpose(self, x: ir.Value, perm) -> ir.Value:
        if list(perm) == list(range(len(perm))):
            return x
        return self.op("stablehlo.transpose", [x], [shape(x)[p] for p in perm], element(x),
                       permutation=_i64s(perm))

    def broadcast(self, x: ir.Value, result_shape, dims) -> ir.Value:
        return self.op("stablehlo.broadcast_in_dim", [x], result_shape, element(x),
                       broadcast_dimensions=_i64s(dims))

    def slice(self, x: ir.Value, start, limit, strides=None) -> ir.Value:
        strides = strides or [1] * len(start)
        sizes = [(hi - lo + s - 1) // s for lo, hi, s in zip(start, limit, strides)]
        return self.op("stablehlo.slice", [x], sizes, element(x), start_indices=_i64s(start),
                       limit_indices=_i64s(limit), strides=_i64s(strides))

    def dynamic_slice(self, x: ir.Value, starts: Sequence[ir.Value], sizes) -> ir.Value:
        return self.op("stablehlo.dynamic_slice", [x, *starts], sizes, element(x),
                       slice_sizes=_i64s(sizes))

    def dynamic_update_slice(self, x: ir.Value, update: ir.Value,
                             starts: Sequence[ir.Value]) -> ir.Value:
        return self.op("stablehlo.dynamic_update_slice", [x, update, *starts], shape(x), element(x))

    def concatenate(self, xs: Sequence[ir.Value], dim: int) -> ir.Value:
        result_shape = list(shape(xs[0]))
        result_shape[dim] = sum(shape(x)[dim] for x in xs)
        return self.op("stablehlo.concatenate", xs, result_shape, element(xs[0]), dimension=_i64(dim))

    def reverse(self, x: ir.Value, dims) -> ir.Value:
        return self.op("stablehlo.reverse", [x], shape(x), element(x), dimensions=_i64s(dims))

    def pad(self, x: ir.Value, value: ir.Value, low, high) -> ir.Value:
        sizes = [d + lo + hi for d, lo, hi in zip(shape(x), low, high)]
        return self.op("stablehlo.pad", [x, value], sizes, element(x),
                       edge_padding_low=_i64s(low), edge_padding_high=_i64s(high),
                       interior_padding=_i64s([0] * len(low)))

    def dot(self, a: ir.Value, b: ir.Value, batch: int = 0) -> ir.Value:
        """Batched matrix product contracting a's last dimension with b's second-to-last; the
        first `batch` dimensions of both are batch dimensions. HIGHEST precision: these are
        the lowering's own products, whose accuracy the numerics above rely on."""
        a_shape, b_shape = shape(a), shape(b)
        batch_dims = list(range(batch))
        numbers = _stablehlo.DotDimensionNumbers.get(
            lhs_batching_dimensions=batch_dims, rhs_batching_dimensions=batch_dims,
            lhs_contracting_dimensions=[len(a_shape) - 1],
            rhs_contracting_dimensions=[len(b_shape) - 2])
        highest = _stablehlo.PrecisionAttr.get("HIGHEST")
        return self.op("stablehlo.dot_general", [a, b], list(a_shape[:-1]) + [b_shape[-1]],
                       element(a), dot_dimension_numbers=numbers,
                       precision_config=ir.ArrayAttr.get([highest, highest]))

    # Loops.
    def for_loop(self, count: int, carried: Sequence[ir.Value],
                 body: Callable[[ir.Value, list[ir.Value]], Sequence[ir.Value]]) -> list[ir.Value]:
        """An scf.for over [0, count) carrying `carried`; `body(i, values)` builds one
        iteration (i is the index as a tensor<i64>, as StableHLO's dynamic slices take it) and
        returns the values carried to the next. Returns the loop's results."""
        index = ir.IndexType.get()
        zero = arith.ConstantOp(index, 0).result
        upper = arith.ConstantOp(index, count).result
        one = arith.ConstantOp(index, 1).result
        loop = scf.ForOp(zero, upper, one, list(carried))
        with ir.InsertionPoint(loop.body):
            i64 = ir.IntegerType.get_signless(64)
            i = arith.index_cast(i64, loop.induction_variable)
            i_tensor = tensor.from_elements(ir.RankedTensorType.get([], i64), [i])
            scf.YieldOp(list(body(i_tensor, list(loop.inner_iter_args))))
        return list(loop.results)
