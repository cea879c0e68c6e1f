"""`stablehlo.triangular_solve` and `stablehlo.cholesky` as StableHLO loops (registered by
numerics.py). Each becomes an `scf.for` over rows/columns whose body is batched StableHLO
(dynamic slices, one matrix-vector `dot_general`, a dynamic update), which upstream lowers in
place; the loop-carried result is updated in place by bufferization.

triangular_solve: only the `lower` (or upper) triangle of `a` is read; `unit_diagonal` replaces
the diagonal by ones without reading it. Every variant reduces to forward substitution
T X = B with T lower triangular: op(a) is a, a^T or a^H; solving X op(a) = B is solving
op(a)^T X^T = B^T; and an upper-triangular T becomes lower by reversing both its dimensions
(and the rows of B and X). Row i of X is (B[i] - T[i, :] X) / T[i, i], rows >= i of X still
being zero.

cholesky: XLA's algorithm (xla/hlo/transforms/expanders/cholesky_expander.cc, unblocked form,
which is what XLA runs for matrices up to its 128 block size): column j of L is
(A - L L^H)[j:, j] / sqrt((A - L L^H)[j, j]), reading only A's lower triangle (the real part
of a complex diagonal). `lower = false` factors the transpose and transposes back. The other
triangle is zero. A batch element whose factorization meets a NaN square root (not positive
definite) becomes all NaN, as in XLA.

bf16/f16 compute in f32 and round once at the end.
"""
from __future__ import annotations

from torch_mlir import ir

from ...errors import KilnError
from ..patterns import pattern_pass
from .hlo_builder import (HloBuilder, element, enum_value, is_complex, part_type, replace_op,
                          shape, static_shape)

_WIDENED = {"bf16": "f32", "f16": "f32"}


def _bool_attr(op: ir.Operation, name: str, default: bool = False) -> bool:
    return ir.BoolAttr(op.attributes[name]).value if name in op.attributes else default


class _Mat:
    """Batched matrix helpers over (..., rows, cols) tensors of one element type."""

    def __init__(self, h: HloBuilder, etype: ir.Type):
        self.h, self.etype = h, etype
        self.complex = is_complex(etype)
        self.part = part_type(etype)

    def fill(self, value: float, fill_shape) -> ir.Value:
        h = self.h
        if self.complex:
            return h.complex(h.splat(value, fill_shape, self.part), h.splat(0.0, fill_shape, self.part))
        return h.splat(value, fill_shape, self.etype)

    def conj(self, x: ir.Value) -> ir.Value:
        if not self.complex:
            return x
        return self.h.complex(self.h.real(x), self.h.neg(self.h.imag(x)))

    def swap(self, x: ir.Value) -> ir.Value:
        r = len(shape(x))
        return self.h.transpose(x, list(range(r - 2)) + [r - 1, r - 2])

    def mask(self, mask_shape, predicate: str) -> ir.Value:
        """i1 tensor: row `predicate` col (GE: lower triangle, LE: upper, EQ: diagonal)."""
        r = len(mask_shape)
        rows = self.h.iota(mask_shape, r - 2)
        cols = self.h.iota(mask_shape, r - 1)
        return self.h.compare(predicate, rows, cols, "SIGNED")

    def zeros_like(self, x: ir.Value) -> ir.Value:
        return self.fill(0.0, shape(x))


def _triangular_solve(h: HloBuilder, a: ir.Value, b: ir.Value, left: bool, lower: bool,
                      unit: bool, transpose: str) -> ir.Value:
    m = _Mat(h, element(a))
    a_shape = shape(a)
    r = len(a_shape)
    batch = list(a_shape[:-2])
    nb = len(batch)
    t = h.select(m.mask(a_shape, "GE" if lower else "LE"), a, m.zeros_like(a))
    if unit:
        t = h.select(m.mask(a_shape, "EQ"), m.fill(1.0, a_shape), t)
    t_lower = lower
    if transpose != "NO_TRANSPOSE":
        t = m.swap(t)
        t_lower = not t_lower
        if transpose == "ADJOINT":
            t = m.conj(t)
    rhs = b
    if not left:
        t, rhs, t_lower = m.swap(t), m.swap(b), not t_lower
    reversed_ = not t_lower
    if reversed_:
        t = h.reverse(t, [r - 2, r - 1])
        rhs = h.reverse(rhs, [r - 2])
    size, cols = shape(rhs)[-2:]
    zero_index = h.splat(0, (), "i64")

    def row_step(i: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
        (x,) = carried
        row = h.dynamic_slice(t, [zero_index] * nb + [i, zero_index], batch + [1, size])
        done = h.dot(row, x, batch=nb)
        bi = h.dynamic_slice(rhs, [zero_index] * nb + [i, zero_index], batch + [1, cols])
        tii = h.dynamic_slice(t, [zero_index] * nb + [i, i], batch + [1, 1])
        tii = h.broadcast(tii, batch + [1, cols], list(range(nb + 2)))
        xi = h.div(h.sub(bi, done), tii)
        return [h.dynamic_update_slice(x, xi, [zero_index] * nb + [i, zero_index])]

    (x,) = h.for_loop(size, [m.zeros_like(rhs)], row_step)
    if reversed_:
        x = h.reverse(x, [r - 2])
    if not left:
        x = m.swap(x)
    return x


def _cholesky(h: HloBuilder, a: ir.Value, lower: bool) -> ir.Value:
    m = _Mat(h, element(a))
    a_shape = shape(a)
    r = len(a_shape)
    batch = list(a_shape[:-2])
    nb = len(batch)
    n = a_shape[-1]
    if not lower:
        a = m.swap(a)
    zero_index = h.splat(0, (), "i64")
    error_shape = batch + [1, 1]

    def sqrt_diag(d: ir.Value) -> ir.Value:
        """sqrt of the (real part of the) pivot, as the element type."""
        s = h.unary("sqrt", h.real(d) if m.complex else d)
        return h.complex(s, h.splat(0.0, shape(s), m.part)) if m.complex else s

    def is_nan(x: ir.Value) -> ir.Value:
        return h.compare("NE", x, x)

    def column_step(j: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
        l, error = carried
        # (A - L L^H)[:, j] with rows < j of it unused.
        l_row = h.dynamic_slice(l, [zero_index] * nb + [j, zero_index], batch + [1, n])
        l_col = m.conj(m.swap(l_row))
        a_col = h.dynamic_slice(a, [zero_index] * nb + [zero_index, j], batch + [n, 1])
        rest = h.sub(a_col, h.dot(l, l_col, batch=nb))
        pivot = h.dynamic_slice(rest, [zero_index] * nb + [j, zero_index], batch + [1, 1])
        root = sqrt_diag(pivot)
        error = h.binary("or", error, is_nan(h.real(root) if m.complex else root))
        column = h.div(rest, h.broadcast(root, batch + [n, 1], list(range(nb + 2))))
        # Keep rows >= j of the new column (the lower triangle of column j).
        j_full = h.broadcast(j, a_shape[:-1] + (1,), [])
        rows = h.iota(batch + [n, 1], r - 2)
        column = h.select(h.compare("GE", rows, j_full, "SIGNED"), column, m.fill(0.0, shape(column)))
        return [h.dynamic_update_slice(l, column, [zero_index] * nb + [zero_index, j]), error]

    if n == 1:
        l_out = sqrt_diag(a)
        error = is_nan(h.real(l_out) if m.complex else l_out)
    else:
        l_out, error = h.for_loop(n, [m.zeros_like(a), h.splat(False, error_shape, "i1")],
                                  column_step)
    nan = m.fill(float("nan"), a_shape)
    l_out = h.select(h.broadcast(h.reshape(error, error_shape), a_shape, list(range(r))), nan, l_out)
    if not lower:
        l_out = m.swap(l_out)
    return l_out


def _widen(h: HloBuilder, x: ir.Value) -> ir.Value:
    wide = _WIDENED.get(str(element(x)))
    return h.convert(x, wide) if wide else x


def _lower_triangular_solve(op: ir.Operation) -> None:
    a, b = op.operands
    static_shape(a, op), static_shape(b, op)  # located errors for dynamic shapes
    out_shape = static_shape(op.results[0], op)
    transpose = enum_value(op.attributes["transpose_a"])
    if transpose not in ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"):
        raise KilnError(f"unknown transpose_a {transpose}", location=str(op.location),
                        hint="transpose_a is NO_TRANSPOSE, TRANSPOSE or ADJOINT")
    etype = element(a)
    with ir.InsertionPoint(op), op.location:
        h = HloBuilder()
        if 0 in shape(a) or 0 in shape(b):
            out = _Mat(h, etype).fill(0.0, out_shape)
        else:
            out = _triangular_solve(h, _widen(h, a), _widen(h, b), _bool_attr(op, "left_side"),
                                    _bool_attr(op, "lower"), _bool_attr(op, "unit_diagonal"),
                                    transpose)
            out = h.convert(out, etype)
    replace_op(op, [out])


def _lower_cholesky(op: ir.Operation) -> None:
    a = op.operands[0]
    a_shape = static_shape(a, op)
    etype = element(a)
    with ir.InsertionPoint(op), op.location:
        h = HloBuilder()
        if 0 in a_shape:
            out = _Mat(h, etype).fill(0.0, a_shape)
        else:
            out = h.convert(_cholesky(h, _widen(h, a), _bool_attr(op, "lower")), etype)
    replace_op(op, [out])


lower_linalg_ops = pattern_pass({"stablehlo.triangular_solve": _lower_triangular_solve,
                                 "stablehlo.cholesky": _lower_cholesky})
