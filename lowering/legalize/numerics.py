"""Lowerings: numerics (see passes/legalize/__init__.py).

The numerical-library ops upstream `stablehlo-legalize-to-linalg` lacks, each in its own
module, written as StableHLO that upstream then lowers:

* fft.py         `stablehlo.fft` (FFT, IFFT, RFFT, IRFFT; any length)
* linalg_ops.py  `stablehlo.cholesky`, `stablehlo.triangular_solve`
* floats.py      8-, 6- and 4-bit floats; `stablehlo.reduce_precision` with no mantissa bits

This module holds what they share: `HloText`, a writer for one private helper function in
StableHLO's generic syntax (every value's type is tracked, so each line is spelled out), and
`replace_with_helper`, which splices the helper's body in place of the op it lowers.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from torch_mlir import ir

from ...errors import KilnError
from ...pipeline import Step


@dataclass(frozen=True)
class V:
    """A value in the helper being written: its SSA name, static shape and element type."""
    name: str
    shape: tuple
    etype: str

    @property
    def type(self) -> str:
        return tensor_type(self.shape, self.etype)


def tensor_type(shape, etype: str) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + etype + ">"


def _i64s(values) -> str:
    return "array<i64" + (": " + ", ".join(str(int(v)) for v in values) if len(values) else "") + ">"


_NUMPY = {"f16": "<f2", "f32": "<f4", "f64": "<f8", "i1": "?", "i8": "<i1", "i16": "<i2",
          "i32": "<i4", "i64": "<i8", "ui8": "<u1", "ui16": "<u2", "ui32": "<u4", "ui64": "<u8"}


class HloText:
    """Writes the body of `func.func private @name(args) -> results` one op per line."""

    def __init__(self):
        self.lines: list[str] = []
        self.args: list[V] = []
        self.count = 0

    def _fresh(self) -> str:
        self.count += 1
        return f"%v{self.count}"

    def raw(self, line: str) -> None:
        """A line written as is (structure such as `scf.for ... {` and `}`), without location."""
        self.lines.append((line,))

    # Loops: `for_begin` opens an scf.for over [0, count) carrying `carried`; inside it the
    # returned index tensor (tensor<i64>) and loop values are usable; `for_end` closes it.
    def for_begin(self, count: int, carried: list[V]) -> tuple[V, list[V]]:
        self.count += 1
        k = self.count
        names = [V(f"%it{k}_{i}", c.shape, c.etype) for i, c in enumerate(carried)]
        self.lines.append(f"%c0_{k} = arith.constant 0 : index")
        self.lines.append(f"%cn_{k} = arith.constant {count} : index")
        self.lines.append(f"%c1_{k} = arith.constant 1 : index")
        inits = ", ".join(f"{n.name} = {c.name}" for n, c in zip(names, carried))
        types = ", ".join(c.type for c in carried)
        self.raw(f"%loop{k}:{len(carried)} = scf.for %i{k} = %c0_{k} to %cn_{k} step %c1_{k} "
                 f"iter_args({inits}) -> ({types}) {{")
        self.lines.append(f"%i64_{k} = arith.index_cast %i{k} : index to i64")
        self.lines.append(f"%idx{k} = tensor.from_elements %i64_{k} : tensor<i64>")
        self._loops = getattr(self, "_loops", []) + [(k, carried)]
        return V(f"%idx{k}", (), "i64"), names

    def for_end(self, results: list[V]) -> list[V]:
        k, carried = self._loops.pop()
        self.lines.append("scf.yield " + ", ".join(r.name for r in results) + " : "
                          + ", ".join(r.type for r in results))
        self.lines.append("}")  # the location after `}` is the loop's
        return [V(f"%loop{k}#{i}", c.shape, c.etype) for i, c in enumerate(carried)]

    def dynamic_slice(self, x: V, starts: list[V], sizes) -> V:
        return self.op("stablehlo.dynamic_slice", [x, *starts], sizes, x.etype,
                       f"slice_sizes = {_i64s(sizes)}")

    def dynamic_update_slice(self, x: V, update: V, starts: list[V]) -> V:
        return self.op("stablehlo.dynamic_update_slice", [x, update, *starts], x.shape, x.etype)

    def iota(self, shape, dim: int, etype: str = "i64") -> V:
        return self.op("stablehlo.iota", [], shape, etype, f"iota_dimension = {dim} : i64")

    def arg(self, shape, etype: str) -> V:
        v = V(f"%arg{len(self.args)}", tuple(shape), etype)
        self.args.append(v)
        return v

    def op(self, name: str, operands: list[V], shape, etype: str, attrs: str = "") -> V:
        out = V(self._fresh(), tuple(shape), etype)
        ins = ", ".join(o.name for o in operands)
        types = ", ".join(o.type for o in operands)
        attr_text = f" {{{attrs}}}" if attrs else ""
        self.lines.append(f'{out.name} = "{name}"({ins}){attr_text} : ({types}) -> {out.type}')
        return out

    # Constants.
    def constant(self, array, etype: str) -> V:
        """A constant holding `array` exactly (written as raw little-endian bytes)."""
        array = np.asarray(array)
        if etype not in _NUMPY:
            raise ValueError(etype)
        data = np.ascontiguousarray(array.astype(_NUMPY[etype]))
        hexdata = "0x" + data.tobytes().hex().upper()
        out = V(self._fresh(), tuple(array.shape), etype)
        self.lines.append(f'{out.name} = "stablehlo.constant"() {{value = dense<"{hexdata}"> : '
                          f'{out.type}}} : () -> {out.type}')
        return out

    def splat(self, value, shape, etype: str) -> V:
        """`value` everywhere: a 0-d constant, broadcast (so no large constant is written)."""
        scalar = self.constant(np.asarray(value), etype)
        return scalar if len(shape) == 0 else self.broadcast(scalar, shape, [])

    # Elementwise.
    def unary(self, name: str, x: V, etype: str | None = None) -> V:
        return self.op(f"stablehlo.{name}", [x], x.shape, etype or x.etype)

    def binary(self, name: str, a: V, b: V, etype: str | None = None) -> V:
        return self.op(f"stablehlo.{name}", [a, b], a.shape, etype or a.etype)

    def add(self, a, b): return self.binary("add", a, b)
    def sub(self, a, b): return self.binary("subtract", a, b)
    def mul(self, a, b): return self.binary("multiply", a, b)
    def div(self, a, b): return self.binary("divide", a, b)
    def neg(self, a): return self.unary("negate", a)

    def convert(self, x: V, etype: str) -> V:
        return x if x.etype == etype else self.unary("convert", x, etype)

    def compare(self, direction: str, a: V, b: V, kind: str | None = None) -> V:
        attrs = f"comparison_direction = #stablehlo<comparison_direction {direction}>"
        if kind:
            attrs += f", compare_type = #stablehlo<comparison_type {kind}>"
        return self.op("stablehlo.compare", [a, b], a.shape, "i1", attrs)

    def select(self, pred: V, a: V, b: V) -> V:
        return self.op("stablehlo.select", [pred, a, b], a.shape, a.etype)

    # Complex numbers as (real, imaginary) pairs of real tensors.
    def real(self, z: V) -> V:
        return self.unary("real", z, _part_type(z.etype))

    def imag(self, z: V) -> V:
        return self.unary("imag", z, _part_type(z.etype))

    def complex(self, re: V, im: V) -> V:
        return self.op("stablehlo.complex", [re, im], re.shape, f"complex<{re.etype}>")

    # Shapes.
    def reshape(self, x: V, shape) -> V:
        return x if tuple(shape) == x.shape else self.op("stablehlo.reshape", [x], shape, x.etype)

    def transpose(self, x: V, perm) -> V:
        if list(perm) == list(range(len(perm))):
            return x
        return self.op("stablehlo.transpose", [x], [x.shape[p] for p in perm], x.etype,
                       f"permutation = {_i64s(perm)}")

    def broadcast(self, x: V, shape, dims) -> V:
        return self.op("stablehlo.broadcast_in_dim", [x], shape, x.etype,
                       f"broadcast_dimensions = {_i64s(dims)}")

    def slice(self, x: V, start, limit, strides=None) -> V:
        strides = strides or [1] * len(start)
        shape = [(hi - lo + s - 1) // s for lo, hi, s in zip(start, limit, strides)]
        return self.op("stablehlo.slice", [x], shape, x.etype,
                       f"start_indices = {_i64s(start)}, limit_indices = {_i64s(limit)}, "
                       f"strides = {_i64s(strides)}")

    def concatenate(self, xs: list[V], dim: int) -> V:
        shape = list(xs[0].shape)
        shape[dim] = sum(x.shape[dim] for x in xs)
        return self.op("stablehlo.concatenate", xs, shape, xs[0].etype, f"dimension = {dim} : i64")

    def reverse(self, x: V, dims) -> V:
        return self.op("stablehlo.reverse", [x], x.shape, x.etype, f"dimensions = {_i64s(dims)}")

    def pad(self, x: V, value: V, low, high) -> V:
        shape = [d + lo + hi for d, lo, hi in zip(x.shape, low, high)]
        return self.op("stablehlo.pad", [x, value], shape, x.etype,
                       f"edge_padding_low = {_i64s(low)}, edge_padding_high = {_i64s(high)}, "
                       f"interior_padding = {_i64s([0] * len(low))}")

    def dot(self, a: V, b: V, batch: int = 0) -> V:
        """Batched matrix product contracting a's last dimension with b's second-to-last; the
        first `batch` dimensions of both are batch dimensions."""
        shape = list(a.shape[:-1]) + [b.shape[-1]]
        bd = list(range(batch))
        return self.op("stablehlo.dot_general", [a, b], shape, a.etype,
                       f"dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = {bd}, "
                       f"rhs_batching_dimensions = {bd}, lhs_contracting_dimensions = [{len(a.shape) - 1}], "
                       f"rhs_contracting_dimensions = [{len(b.shape) - 2}]>, "
                       "precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]")

    def text(self, name: str, results: list[V], loc: str = "loc(unknown)") -> str:
        """The helper function; every op in it gets `loc` (the lowered op's location), so
        later diagnostics point at the user's program."""
        args = ", ".join(f"{a.name}: {a.type}" for a in self.args)
        res = ", ".join(r.type for r in results)
        body = "\n    ".join(line[0] if isinstance(line, tuple) else f"{line} {loc}"
                               for line in self.lines)
        ret = ", ".join(r.name for r in results)
        return (f"func.func private @{name}({args}) -> ({res}) {{\n    {body}\n"
                f"    \"func.return\"({ret}) : ({res}) -> ()\n}}")


def _part_type(etype: str) -> str:
    return etype[len("complex<"):-1] if etype.startswith("complex<") else etype


def static_shape(value: ir.Value, op: ir.Operation) -> tuple:
    t = value.type
    if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
        raise KilnError(f"'{op.name}' needs statically shaped operands here, got {t}",
                        location=str(op.location),
                        hint="pass concrete input shapes so shape refinement can make them static")
    return tuple(t.shape)


# The splice itself is shared with the data-movement lowerings.
from .data_movement import replace_with_helper  # noqa: E402,F401

# Imported last: the op modules use the helpers above.
from . import fft, floats, linalg_ops  # noqa: E402

before: list[Step] = [*floats.before, *fft.before, *linalg_ops.before]
after: list[Step] = [*floats.after]
