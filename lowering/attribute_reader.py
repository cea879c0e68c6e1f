"""An input op's attributes as MLIR's C API sees them: which are discardable, what kind each
value is, and whether its strings are UTF-8, without handing any value to the Python bindings.

The input allowlist (input_allowlist.py) needs three things the bindings cannot give safely:

* which attributes are discardable. `op.attributes` lists an op's own (inherent) attributes
  and its discardable ones together; MLIR's C API tells them apart
  (`mlirOperationGetDiscardableAttribute`). For ops that keep their attributes in properties
  (every ODS op of StableHLO, CHLO, func and builtin) the discardable ones are exactly those
  that are not the op's own; ops of Python-defined (IRDL) dialects (`check`) have no
  properties, so all of theirs are discardable and the allowlist checks them against the op's
  declaration. (`mlirOperationHasInherentAttributeByName` is not used: it aborts the process
  on IRDL ops.)
* what kind an unknown value is. The bindings turn a value into a Python object by its kind,
  and for some (a complex-typed dense elements attribute) that aborts the process; a program
  may put such a value in any attribute. The C API's `mlirAttributeIsA...` predicates read
  nothing.
* whether names and strings are UTF-8: the bindings fail on other bytes (a `"\\FF"` escape or
  a bytecode file can hold any), and every later reader of a name would too.

The library is the one the bindings are linked against (already loaded: the same MLIR).
"""
from __future__ import annotations

import ctypes
import functools
from pathlib import Path

from torch_mlir import ir

from ..errors import KilnError


class _StringRef(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("length", ctypes.c_size_t)]


class _NamedAttribute(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("attribute", ctypes.c_void_p)]


# Value kinds the allowlist asks about, by the C API predicate that tells each.
KINDS = ("String", "Array", "Dictionary", "Integer", "Bool", "Unit", "DenseI32Array",
         "DenseIntElements", "Float", "DenseBoolArray", "DenseI8Array", "DenseI16Array",
         "DenseI64Array", "DenseF32Array", "DenseF64Array", "DenseFPElements", "FlatSymbolRef")
# Values the bindings read without fail: scalars, strings, dense arrays, and integer or real
# elements (a complex-typed elements attribute aborts the process when read).
PLAIN_LEAVES = ("String", "Integer", "Float", "Unit", "DenseBoolArray", "DenseI8Array",
                "DenseI16Array", "DenseI32Array", "DenseI64Array", "DenseF32Array",
                "DenseF64Array", "DenseIntElements", "DenseFPElements", "FlatSymbolRef")


def _declare(lib, name: str, argtypes, restype):
    function = getattr(lib, name)
    function.argtypes, function.restype = argtypes, restype
    return function


@functools.lru_cache(maxsize=None)
def _capi():
    from torch_mlir import _mlir_libs
    path = Path(_mlir_libs.__file__).parent / "libTorchMLIRAggregateCAPI.so"
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        raise KilnError(f"cannot load MLIR's C API ({path}): {exc}",
                        hint="Kiln's trust check needs it; reinstall torch-mlir") from None
    p, n = ctypes.c_void_p, ctypes.c_ssize_t
    api = {
        "discardable_count": _declare(lib, "mlirOperationGetNumDiscardableAttributes", [p], n),
        "discardable": _declare(lib, "mlirOperationGetDiscardableAttribute", [p, n],
                                _NamedAttribute),
        "count": _declare(lib, "mlirOperationGetNumAttributes", [p], n),
        "attribute": _declare(lib, "mlirOperationGetAttribute", [p, n], _NamedAttribute),
        "identifier": _declare(lib, "mlirIdentifierStr", [p], _StringRef),
        "op_name": _declare(lib, "mlirOperationGetName", [p], p),
        "string_value": _declare(lib, "mlirStringAttrGetValue", [p], _StringRef),
        "array_size": _declare(lib, "mlirArrayAttrGetNumElements", [p], n),
        "array_element": _declare(lib, "mlirArrayAttrGetElement", [p, n], p),
        "dict_size": _declare(lib, "mlirDictionaryAttrGetNumElements", [p], n),
        "dict_element": _declare(lib, "mlirDictionaryAttrGetElement", [p, n], _NamedAttribute),
        "type_of": _declare(lib, "mlirAttributeGetType", [p], p),
        "has_rank": _declare(lib, "mlirShapedTypeHasRank", [p], ctypes.c_bool),
        "rank": _declare(lib, "mlirShapedTypeGetRank", [p], ctypes.c_int64),
        "is_channel_handle": _declare(lib, "stablehloAttributeIsChannelHandle", [p], ctypes.c_bool),
        "is_rng_algorithm": _declare(lib, "stablehloAttributeIsARngAlgorithmAttr", [p],
                                     ctypes.c_bool),
        "type_id": _declare(lib, "mlirAttributeGetTypeID", [p], p),
    }
    # The kinds that may hold a string, by TypeID (one call per value tells them apart).
    api["string_id"] = _declare(lib, "mlirStringAttrGetTypeID", [], p)()
    api["array_id"] = _declare(lib, "mlirArrayAttrGetTypeID", [], p)()
    api["dict_id"] = _declare(lib, "mlirDictionaryAttrGetTypeID", [], p)()
    for kind in KINDS:
        api[kind] = _declare(lib, f"mlirAttributeIsA{kind}", [p], ctypes.c_bool)
    pythonapi = ctypes.pythonapi
    api["capsule_pointer"] = _declare(pythonapi, "PyCapsule_GetPointer",
                                      [ctypes.py_object, ctypes.c_char_p], p)
    api["capsule_name"] = _declare(pythonapi, "PyCapsule_GetName", [ctypes.py_object],
                                   ctypes.c_char_p)
    return api


_capsule_names: dict[type, bytes] = {}


def _capsule_name(op: ir.Operation, capsule) -> bytes:
    """The name the bindings give an Operation's capsule (fixed per binding package)."""
    name = _capsule_names.get(type(op))
    if name is None:
        name = _capsule_names[type(op)] = _capi()["capsule_name"](capsule)
    return name


def _pointer(op: ir.Operation) -> int:
    api = _capi()
    capsule = op._CAPIPtr
    name = _capsule_name(op, capsule)
    pointer = api["capsule_pointer"](capsule, name)
    if not pointer:
        raise KilnError("cannot read an operation through MLIR's C API",
                        hint="internal error: Kiln's trust check cannot run; please report it")
    return pointer


def _bytes(ref: _StringRef) -> bytes:
    return ctypes.string_at(ref.data, ref.length) if ref.length else b""


def _name(identifier: int, names: dict[int, str | None] | None = None) -> str | None:
    """An attribute name; None when it is not UTF-8. `names`: the names read so far in one
    module, by identifier (identifiers are unique in a context, and live as long as it)."""
    if names is not None and identifier in names:
        return names[identifier]
    try:
        name = _bytes(_capi()["identifier"](identifier)).decode("utf-8")
    except UnicodeDecodeError:
        name = None
    if names is not None:
        names[identifier] = name
    return name


class Attributes:
    """One op's attributes, read through the C API: `names` (None for a name that is not
    UTF-8), the handle of each value by position, and which names are discardable."""

    def __init__(self, op: ir.Operation, names: dict[int, str | None] | None = None):
        api = _capi()
        self.pointer = _pointer(op)
        self._names = names
        entries = [api["attribute"](self.pointer, i) for i in range(api["count"](self.pointer))]
        self.names = [_name(e.name, names) for e in entries]
        self.values = [e.attribute for e in entries]

    def discardable(self) -> list[str | None]:
        api = _capi()
        return [_name(api["discardable"](self.pointer, i).name, self._names)
                for i in range(api["discardable_count"](self.pointer))]

    def value(self, name: str) -> int:
        return self.values[self.names.index(name)]


def is_kind(value: int, kind: str) -> bool:
    """Whether the attribute handle `value` is of `kind` (one of KINDS)."""
    return bool(_capi()[kind](value))


def string(value: int) -> str:
    """A string attribute's value (one first_bad_string passed: UTF-8)."""
    return _bytes(_capi()["string_value"](value)).decode("utf-8")


def is_channel_handle(value: int) -> bool:
    return bool(_capi()["is_channel_handle"](value))


def is_rng_algorithm(value: int) -> bool:
    return bool(_capi()["is_rng_algorithm"](value))


def rank(value: int) -> int | None:
    """The rank of an elements attribute's type, None when unranked."""
    api = _capi()
    shaped = api["type_of"](value)
    return api["rank"](shaped) if api["has_rank"](shaped) else None


def array_elements(value: int) -> list[int]:
    """The element handles of an array attribute."""
    api = _capi()
    if not api["Array"](value):
        raise KilnError("expected an array attribute")
    return [api["array_element"](value, i) for i in range(api["array_size"](value))]


def dictionary_entries(value: int) -> list[tuple[str | None, int]]:
    """(name, value handle) of a dictionary attribute's entries."""
    api = _capi()
    if not api["Dictionary"](value):
        raise KilnError("expected a dictionary attribute")
    entries = [api["dict_element"](value, i) for i in range(api["dict_size"](value))]
    return [(_name(e.name), e.attribute) for e in entries]


def is_plain(value: int) -> bool:
    """Whether `value` and everything inside it (arrays, dictionaries) is a PLAIN_LEAVES value:
    what Kiln may hand to a custom call's Python target or read itself."""
    api = _capi()
    if api["Array"](value):
        return all(is_plain(api["array_element"](value, i))
                   for i in range(api["array_size"](value)))
    if api["Dictionary"](value):
        return all(is_plain(api["dict_element"](value, i).attribute)
                   for i in range(api["dict_size"](value)))
    return any(api[kind](value) for kind in PLAIN_LEAVES)


def first_bad_string(value: int) -> bytes | None:
    """The first string inside `value` (arrays and dictionaries included, their keys too)
    that is not UTF-8, else None."""
    api = _capi()
    kind = api["type_id"](value)
    if kind == api["string_id"]:
        raw = _bytes(api["string_value"](value))
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
    elif kind == api["array_id"]:
        for i in range(api["array_size"](value)):
            bad = first_bad_string(api["array_element"](value, i))
            if bad is not None:
                return bad
    elif kind == api["dict_id"]:
        for i in range(api["dict_size"](value)):
            entry = api["dict_element"](value, i)
            key = _bytes(api["identifier"](entry.name))
            try:
                key.decode("utf-8")
            except UnicodeDecodeError:
                return key
            bad = first_bad_string(entry.attribute)
            if bad is not None:
                return bad
    return None


def self_test(op: ir.Operation) -> None:
    """The C API sees the op the bindings see: its name read both ways must agree (a second,
    different MLIR library loaded by mistake would answer for other objects)."""
    if _name(_capi()["op_name"](_pointer(op))) != op.name:
        raise KilnError("MLIR's C API and its Python bindings disagree on an operation",
                        hint="internal error: Kiln's trust check cannot run; please report it")
