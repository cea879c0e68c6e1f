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

import numpy as np
from torch_mlir import ir

from ...errors import KilnError
from ...pipeline import PyPass, Step
from ..ir_util import walk
from .numerics import HloText, V, replace_with_helper, static_shape

_WIDENED = {"bf16": "f32", "f16": "f32"}


def _bool_attr(op: ir.Operation, name: str, default: bool = False) -> bool:
    return ir.BoolAttr(op.attributes[name]).value if name in op.attributes else default


class _Mat:
    """Batched matrix helpers over (..., rows, cols) tensors of one element type."""

    def __init__(self, h: HloText, etype: str):
        self.h, self.etype = h, etype
        self.complex = etype.startswith("complex<")
        self.part = etype[8:-1] if self.complex else etype

    def fill(self, value: float, shape) -> V:
        h = self.h
        if self.complex:
            return h.complex(h.splat(value, shape, self.part), h.splat(0.0, shape, self.part))
        return h.splat(value, shape, self.etype)

    def conj(self, x: V) -> V:
        if not self.complex:
            return x
        return self.h.complex(self.h.real(x), self.h.neg(self.h.imag(x)))

    def swap(self, x: V) -> V:
        r = len(x.shape)
        return self.h.transpose(x, list(range(r - 2)) + [r - 1, r - 2])

    def mask(self, shape, predicate: str) -> V:
        """i1 tensor: row `predicate` col (GE: lower triangle, LE: upper, EQ: diagonal)."""
        r = len(shape)
        rows = self.h.iota(shape, r - 2)
        cols = self.h.iota(shape, r - 1)
        return self.h.compare(predicate, rows, cols, "SIGNED")

    def zeros_like(self, x: V) -> V:
        return self.fill(0.0, x.shape)


def _triangular_solve(h: HloText, a: V, b: V, left: bool, lower: bool, unit: bool,
                      transpose: str, result_shape) -> V:
    m = _Mat(h, a.etype)
    r = len(a.shape)
    batch = list(a.shape[:-2])
    nb = len(batch)
    t = h.select(m.mask(a.shape, "GE" if lower else "LE"), a, m.zeros_like(a))
    if unit:
        t = h.select(m.mask(a.shape, "EQ"), m.fill(1.0, a.shape), t)
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
    size, cols = rhs.shape[-2], rhs.shape[-1]
    zero_index = h.splat(0, (), "i64")
    i, (x,) = h.for_begin(size, [m.zeros_like(rhs)])
    row = h.dynamic_slice(t, [zero_index] * nb + [i, zero_index], batch + [1, size])
    done = h.dot(row, x, batch=nb)
    bi = h.dynamic_slice(rhs, [zero_index] * nb + [i, zero_index], batch + [1, cols])
    tii = h.dynamic_slice(t, [zero_index] * nb + [i, i], batch + [1, 1])
    tii = h.broadcast(tii, batch + [1, cols], list(range(nb + 2)))
    xi = h.div(h.sub(bi, done), tii)
    (x,) = h.for_end([h.dynamic_update_slice(x, xi, [zero_index] * nb + [i, zero_index])])
    if reversed_:
        x = h.reverse(x, [r - 2])
    if not left:
        x = m.swap(x)
    return x


def _cholesky(h: HloText, a: V, lower: bool) -> V:
    m = _Mat(h, a.etype)
    r = len(a.shape)
    batch = list(a.shape[:-2])
    nb = len(batch)
    n = a.shape[-1]
    if not lower:
        a = m.swap(a)
    zero_index = h.splat(0, (), "i64")
    part_type = m.part
    error_shape = batch + [1, 1]

    def sqrt_diag(d: V) -> V:
        """sqrt of the (real part of the) pivot, as the element type."""
        s = h.unary("sqrt", h.real(d) if m.complex else d)
        return h.complex(s, h.splat(0.0, s.shape, part_type)) if m.complex else s

    def is_nan(x: V) -> V:
        return h.compare("NE", x, x)

    if n == 1:
        l_out = sqrt_diag(a)
        error = is_nan(h.real(l_out) if m.complex else l_out)
    else:
        j, (l, error) = h.for_begin(n, [m.zeros_like(a), h.splat(False, error_shape, "i1")])
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
        j_full = h.broadcast(j, a.shape[:-1] + (1,), [])
        rows = h.iota(batch + [n, 1], r - 2)
        column = h.select(h.compare("GE", rows, j_full, "SIGNED"), column, m.fill(0.0, column.shape))
        l, error = h.for_end([h.dynamic_update_slice(l, column, [zero_index] * nb + [zero_index, j]),
                              error])
        l_out = l
    nan = m.fill(float("nan"), a.shape)
    l_out = h.select(h.broadcast(h.reshape(error, error_shape), a.shape, list(range(r))), nan, l_out)
    if not lower:
        l_out = m.swap(l_out)
    return l_out


def _widen(h: HloText, x: V) -> V:
    return h.convert(x, _WIDENED[x.etype]) if x.etype in _WIDENED else x


def _lower_triangular_solve(op: ir.Operation) -> None:
    a_shape, b_shape = static_shape(op.operands[0], op), static_shape(op.operands[1], op)
    out_shape = static_shape(op.results[0], op)
    etype = str(ir.RankedTensorType(op.operands[0].type).element_type)
    transpose = str(op.attributes["transpose_a"]).split()[-1].rstrip(">")
    if transpose not in ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"):
        raise KilnError(f"unknown transpose_a {transpose}", location=str(op.location),
                        hint="transpose_a is NO_TRANSPOSE, TRANSPOSE or ADJOINT")
    h = HloText()
    a, b = h.arg(a_shape, etype), h.arg(b_shape, etype)
    if 0 in a_shape or 0 in b_shape:
        out = _Mat(h, etype).fill(0.0, out_shape)
    else:
        wa, wb = _widen(h, a), _widen(h, b)
        out = _triangular_solve(h, wa, wb, _bool_attr(op, "left_side"), _bool_attr(op, "lower"),
                                _bool_attr(op, "unit_diagonal"), transpose, out_shape)
        out = h.convert(out, etype)
    replace_with_helper(op, h.text("kiln_triangular_solve", [out], str(op.location)),
                        list(op.operands))


def _lower_cholesky(op: ir.Operation) -> None:
    shape = static_shape(op.operands[0], op)
    etype = str(ir.RankedTensorType(op.operands[0].type).element_type)
    h = HloText()
    a = h.arg(shape, etype)
    if 0 in shape:
        out = _Mat(h, etype).fill(0.0, shape)
    else:
        out = h.convert(_cholesky(h, _widen(h, a), _bool_attr(op, "lower")), etype)
    replace_with_helper(op, h.text("kiln_cholesky", [out], str(op.location)), list(op.operands))


def lower_linalg_ops(module: ir.Module) -> None:
    for op in list(walk(module.operation)):
        if op.name == "stablehlo.triangular_solve":
            _lower_triangular_solve(op)
        elif op.name == "stablehlo.cholesky":
            _lower_cholesky(op)


before: list[Step] = [PyPass("lower-linalg-ops", lower_linalg_ops)]
after: list[Step] = []
