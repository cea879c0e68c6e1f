"""Conservative ranges of scalar float values in a loop body, from the arithmetic that made them.

kiln-approximate-math asks this before choosing a kernel: sin(pi * frac), as lgamma's and
digamma's reflection formulas compute it (frac = |x| - floor(|x|), folded into [0, 1/2]), never
needs the table-driven reduction that any f32 argument up to 2^128 does.

The ranges ignore NaN (a NaN operand gives a NaN result whatever its range says; the kernels
that use a range must still pass NaN through) and are widened by rounding only where it could
matter: callers compare them against limits far from the bounds computed here.
"""
from __future__ import annotations

import math as pymath

from torch_mlir import ir

_UNBOUNDED = (-pymath.inf, pymath.inf)
_DEPTH = 12   # how far up the def chain to look (lgamma's sin argument: 5 ops)


def magnitude_bound(value: ir.Value) -> float:
    """An upper bound on |value| (inf when nothing is known)."""
    lo, hi = _range(value, _DEPTH)
    return max(abs(lo), abs(hi))


def _range(value: ir.Value, depth: int) -> tuple[float, float]:
    owner = value.owner
    if depth == 0 or not isinstance(owner, (ir.Operation, ir.OpView)):
        return _UNBOUNDED                    # a block argument: a loaded element, unknown
    op = owner.operation if isinstance(owner, ir.OpView) else owner
    rule = _RULES.get(op.name)
    if rule is None:
        return _UNBOUNDED
    lo, hi = rule(op, lambda v: _range(v, depth - 1))
    if pymath.isnan(lo) or pymath.isnan(hi):
        return _UNBOUNDED
    return lo, hi


def _constant(op, _):
    attr = op.attributes["value"]
    if not isinstance(attr, ir.FloatAttr):
        try:
            attr = ir.FloatAttr(attr)
        except ValueError:
            return _UNBOUNDED
    return attr.value, attr.value


def _abs(op, of):
    lo, hi = of(op.operands[0])
    if lo >= 0:
        return lo, hi
    if hi <= 0:
        return -hi, -lo
    return 0.0, max(-lo, hi)


def _neg(op, of):
    lo, hi = of(op.operands[0])
    return -hi, -lo


def _add(op, of):
    (a, b), (c, d) = of(op.operands[0]), of(op.operands[1])
    return a + c, b + d


def _sub(op, of):
    x, y = op.operands
    if _is_floor_of(y, x):                   # x - floor(x): the fractional part, in [0, 1)
        return 0.0, 1.0
    (a, b), (c, d) = of(x), of(y)
    return a - d, b - c


def _mul(op, of):
    (a, b), (c, d) = of(op.operands[0]), of(op.operands[1])
    products = [p for p in (a * c, a * d, b * c, b * d) if not pymath.isnan(p)]
    if len(products) < 4:                    # 0 * inf: no bound
        return _UNBOUNDED
    return min(products), max(products)


def _select(op, of):
    (a, b), (c, d) = of(op.operands[1]), of(op.operands[2])
    return min(a, c), max(b, d)


def _maximum(op, of):
    (a, b), (c, d) = of(op.operands[0]), of(op.operands[1])
    return max(a, c), max(b, d)


def _minimum(op, of):
    (a, b), (c, d) = of(op.operands[0]), of(op.operands[1])
    return min(a, c), min(b, d)


def _same(op, of):
    return of(op.operands[0])


def _is_floor_of(candidate: ir.Value, x: ir.Value) -> bool:
    owner = candidate.owner
    if not isinstance(owner, (ir.Operation, ir.OpView)):
        return False
    op = owner.operation if isinstance(owner, ir.OpView) else owner
    return op.name == "math.floor" and op.operands[0] == x


_RULES = {"arith.constant": _constant, "math.absf": _abs, "arith.negf": _neg,
          "arith.addf": _add, "arith.subf": _sub, "arith.mulf": _mul, "arith.select": _select,
          "arith.maximumf": _maximum, "arith.minimumf": _minimum, "arith.extf": _same}
