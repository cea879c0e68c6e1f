"""The scalar arithmetic a GPU execution plan runs on the host (lowering/gpu/host.py).

Host control flow needs scalars: a loop counter, a predicate read back from the device, a
switch index. Their arithmetic (`arith` ops of the host function) is evaluated here, per
call, with the MLIR semantics of each op: integers wrap at their width (`index` is i64),
floats round to their type. Integers are held as Python ints (signed; i1 as 0 or 1), floats
as numpy scalars of their type.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..errors import KilnError

FLOATS = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64}


def runtime_type(t: str) -> str | None:
    """The plan's name for a scalar type the host computes with (None: it cannot)."""
    if t == "index":
        return "i64"
    if t in FLOATS or (t.startswith("i") and t[1:].isdigit() and 0 < int(t[1:]) <= 64):
        return t
    return None


def _width(t: str) -> int:
    return int(t[1:])


def wrap(value: int, t: str) -> int:
    """`value` as an integer of type `t`: two's complement, signed (i1: 0 or 1)."""
    width = _width(t)
    value &= (1 << width) - 1
    if width > 1 and value >> (width - 1):
        value -= 1 << width
    return value


def unsigned(value: int, t: str) -> int:
    return value & ((1 << _width(t)) - 1)


def from_bytes(raw: bytes, t: str):
    """A scalar of type `t` read from device memory (integers little-endian)."""
    if t in FLOATS:
        return np.frombuffer(raw, FLOATS[t])[0]
    return wrap(int.from_bytes(raw, "little"), runtime_type(t))


def _trunc_div(a: int, b: int) -> int:
    if b == 0:
        raise KilnError("the host divided by zero in the GPU plan's scalar arithmetic",
                        hint="the program's loop or branch arithmetic divides by zero")
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


_INT_BINARY = {
    "arith.addi": lambda a, b, t: a + b,
    "arith.subi": lambda a, b, t: a - b,
    "arith.muli": lambda a, b, t: a * b,
    "arith.andi": lambda a, b, t: a & b,
    "arith.ori": lambda a, b, t: a | b,
    "arith.xori": lambda a, b, t: a ^ b,
    "arith.divsi": lambda a, b, t: _trunc_div(a, b),
    "arith.remsi": lambda a, b, t: a - b * _trunc_div(a, b),
    "arith.divui": lambda a, b, t: _trunc_div(unsigned(a, t), unsigned(b, t)),
    "arith.remui": lambda a, b, t: unsigned(a, t) % unsigned(b, t) if unsigned(b, t) else
    _trunc_div(1, 0),
    "arith.floordivsi": lambda a, b, t: a // b if b else _trunc_div(1, 0),
    "arith.ceildivsi": lambda a, b, t: -(-a // b) if b else _trunc_div(1, 0),
    "arith.maxsi": lambda a, b, t: max(a, b),
    "arith.minsi": lambda a, b, t: min(a, b),
    "arith.maxui": lambda a, b, t: max(unsigned(a, t), unsigned(b, t)),
    "arith.minui": lambda a, b, t: min(unsigned(a, t), unsigned(b, t)),
    "arith.shli": lambda a, b, t: a << b if 0 <= b < _width(t) else 0,
    "arith.shrsi": lambda a, b, t: a >> min(b, _width(t) - 1) if b >= 0 else 0,
    "arith.shrui": lambda a, b, t: unsigned(a, t) >> b if 0 <= b < _width(t) else 0,
}
_FLOAT_BINARY = {
    "arith.addf": lambda a, b: a + b,
    "arith.subf": lambda a, b: a - b,
    "arith.mulf": lambda a, b: a * b,
    "arith.divf": lambda a, b: a / b,
    "arith.remf": lambda a, b: np.fmod(a, b),
    "arith.maximumf": lambda a, b: np.maximum(a, b),
    "arith.minimumf": lambda a, b: np.minimum(a, b),
    "arith.maxnumf": lambda a, b: np.fmax(a, b),
    "arith.minnumf": lambda a, b: np.fmin(a, b),
}
_FLOAT_UNARY = {
    "arith.negf": np.negative, "math.absf": np.abs, "math.exp": np.exp, "math.exp2": np.exp2,
    "math.expm1": np.expm1, "math.log": np.log, "math.log2": np.log2, "math.log10": np.log10,
    "math.log1p": np.log1p, "math.sqrt": np.sqrt, "math.rsqrt": lambda x: 1 / np.sqrt(x),
    "math.sin": np.sin, "math.cos": np.cos, "math.tan": np.tan, "math.tanh": np.tanh,
    "math.atan": np.arctan, "math.floor": np.floor, "math.ceil": np.ceil,
    "math.roundeven": np.rint, "math.trunc": np.trunc,
}
# arith.cmpi's predicates, by number: eq ne slt sle sgt sge ult ule ugt uge
_CMPI = ["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"]
# arith.cmpf's: false oeq ogt oge olt ole one ord ueq ugt uge ult ule une uno true
_CMPF = ["false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult",
         "ule", "une", "uno", "true"]
_CASTS = {"arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast",
          "arith.index_castui", "arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui",
          "arith.extf", "arith.truncf", "arith.bitcast"}
SUPPORTED = frozenset({*_INT_BINARY, *_FLOAT_BINARY, *_FLOAT_UNARY, *_CASTS, "arith.cmpi",
                       "arith.cmpf", "arith.select"})


def evaluate(step: dict, args: list):
    """The result of one scalar step ({"name", "type", "operand_type", ...}) on `args`."""
    name, t, source = step["name"], step["type"], step.get("operand_type")
    if name in _INT_BINARY:
        return wrap(_INT_BINARY[name](args[0], args[1], t), t)
    if name in _FLOAT_BINARY:
        with np.errstate(all="ignore"):
            return FLOATS[t](_FLOAT_BINARY[name](args[0], args[1]))
    if name in _FLOAT_UNARY:
        with np.errstate(all="ignore"):
            return FLOATS[t](_FLOAT_UNARY[name](args[0]))
    if name == "arith.select":
        return args[1] if args[0] else args[2]
    if name == "arith.cmpi":
        a, b = args
        predicate = _CMPI[step["predicate"]]
        if predicate.startswith("u"):
            a, b = unsigned(a, source), unsigned(b, source)
        return int(_order(predicate if predicate in ("eq", "ne") else predicate[1:], a, b))
    if name == "arith.cmpf":
        return int(_compare_floats(_CMPF[step["predicate"]], args[0], args[1]))
    return _cast(name, args[0], source, t)


def _order(relation: str, a, b) -> bool:
    return {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b,
            "ge": a >= b}[relation]


def _compare_floats(predicate: str, a, b) -> bool:
    if predicate in ("false", "true"):
        return predicate == "true"
    unordered = bool(np.isnan(a) or np.isnan(b))
    if predicate == "ord":
        return not unordered
    if predicate == "uno":
        return unordered
    if unordered:
        return predicate[0] == "u"
    return bool(_order(predicate[1:], a, b))


def _cast(name: str, value, source: str, t: str):
    if name in ("arith.extsi", "arith.trunci", "arith.index_cast"):
        return wrap(value, t)
    if name in ("arith.extui", "arith.index_castui"):
        return wrap(unsigned(value, source), t)
    if name == "arith.sitofp":
        return FLOATS[t](value)
    if name == "arith.uitofp":
        return FLOATS[t](unsigned(value, source))
    if name in ("arith.fptosi", "arith.fptoui"):
        return wrap(int(value), t)   # out of range is poison in MLIR
    if name in ("arith.extf", "arith.truncf"):
        return FLOATS[t](value)
    # bitcast: the same bits as the other kind
    if t in FLOATS:
        bits = np.array(unsigned(value, source), f"u{_width(source) // 8}")
        return bits.view(FLOATS[t])[()]
    return wrap(int(np.array(value).view(f"u{np.dtype(FLOATS[source]).itemsize}")), t)
