"""XLA's typed FFI (custom calls with api_version 4) for C handlers: what Kiln's Python side
adds to the C runtime's implementation (runtime/kiln_ffi.c).

* Handlers arrive as PyCapsules (`jax.ffi.pycapsule(fn)`), ctypes functions, addresses, or a
  dictionary of them by execution stage (`{"instantiate": ..., "execute": ...}`, the form
  `jax.ffi.register_ffi_target` also accepts): `handler_addresses` reads them.
* Attributes keep their exact MLIR types, because the headers decode by type (an `int32_t`
  attribute is an S32 scalar, `Span<const float>` an F32 array). The lowering records them as
  `FfiAttr` trees (JSON in the call-site spec); `encode_attributes` packs them, names sorted,
  into the blob `KilnFfiSiteCreate` decodes:
      u32 count, then per entry: u32 name length, name, u8 kind, then
        SCALAR u8 dtype + value | ARRAY u8 dtype + u64 count + values |
        STRING u32 length + bytes | DICTIONARY a nested blob.
* Token leaves (element type TOKEN) go in the frame as XLA passes them: rank 0, dtype TOKEN
  (code 17), and a null data pointer (compiled code stores 0 in the leaf array).
"""
from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from ..errors import KilnError

# XLA_FFI_DataType (xla::PrimitiveType) by MLIR element type.
DTYPE_CODES = {
    "i1": 1, "i8": 2, "si8": 2, "i16": 3, "si16": 3, "i32": 4, "si32": 4, "i64": 5, "si64": 5,
    "ui8": 6, "ui16": 7, "ui32": 8, "ui64": 9, "f16": 10, "f32": 11, "f64": 12,
    "complex<f32>": 15, "bf16": 16, "!stablehlo.token": 17, "complex<f64>": 18,
    "f8E5M2": 19, "f8E4M3FN": 20, "i4": 21, "si4": 21, "ui4": 22, "f8E4M3B11FNUZ": 23,
    "f8E5M2FNUZ": 24, "f8E4M3FNUZ": 25, "i2": 26, "si2": 26, "ui2": 27, "f8E4M3": 28,
    "f8E3M4": 29, "f4E2M1FN": 32, "f8E8M0FNU": 33,
}
TOKEN = "!stablehlo.token"

# Attribute value types (the dtype names FfiAttr uses) -> (XLA_FFI_DataType, numpy dtype).
_ATTR_DTYPES = {
    "pred": (1, np.dtype(np.bool_)), "s8": (2, np.dtype(np.int8)), "s16": (3, np.dtype(np.int16)),
    "s32": (4, np.dtype(np.int32)), "s64": (5, np.dtype(np.int64)), "u8": (6, np.dtype(np.uint8)),
    "u16": (7, np.dtype(np.uint16)), "u32": (8, np.dtype(np.uint32)),
    "u64": (9, np.dtype(np.uint64)), "f16": (10, np.dtype(np.float16)),
    "f32": (11, np.dtype(np.float32)), "f64": (12, np.dtype(np.float64)),
    "bf16": (16, np.dtype(ml_dtypes.bfloat16)),
}
# XLA_FFI_AttrType
_KINDS = {"array": 1, "dict": 2, "scalar": 3, "string": 4}
STAGES = ("instantiate", "prepare", "initialize", "execute")


def dtype_code(element: str) -> int:
    try:
        return DTYPE_CODES[element]
    except KeyError:
        raise KilnError(f"element type '{element}' has no XLA FFI data type",
                        hint="supported: " + ", ".join(DTYPE_CODES)) from None


def attribute_dtype(mlir_type: str) -> str | None:
    """The FfiAttr dtype of a scalar MLIR type ('i32' -> 's32', 'ui8' -> 'u8'), or None."""
    if mlir_type == "i1":
        return "pred"
    if mlir_type == "index":
        return "s64"
    for prefix, kind in (("ui", "u"), ("si", "s"), ("i", "s")):
        if mlir_type.startswith(prefix) and mlir_type[len(prefix):].isdigit():
            name = kind + mlir_type[len(prefix):]
            return name if name in _ATTR_DTYPES else None
    return mlir_type if mlir_type in ("f16", "bf16", "f32", "f64") else None


@dataclass
class FfiAttr:
    """One typed attribute: kind 'scalar' | 'array' (value a list) | 'string' | 'dict' (value a
    list of FfiAttr); dtype names a value type of _ATTR_DTYPES (None for strings and dicts)."""
    name: str
    kind: str
    dtype: str | None
    value: Any

    def to_json(self) -> list:
        value = [a.to_json() for a in self.value] if self.kind == "dict" else self.value
        return [self.name, self.kind, self.dtype, value]

    @classmethod
    def from_json(cls, data: list) -> FfiAttr:
        name, kind, dtype, value = data
        if kind == "dict":
            value = [cls.from_json(v) for v in value]
        return cls(name, kind, dtype, value)


def encode_attributes(attrs: list[FfiAttr]) -> bytes:
    out = [struct.pack("<I", len(attrs))]
    for attr in sorted(attrs, key=lambda a: a.name.encode()):  # the headers binary-search
        name = attr.name.encode()
        out.append(struct.pack("<I", len(name)) + name + bytes([_KINDS[attr.kind]]))
        if attr.kind == "string":
            data = attr.value.encode()
            out.append(struct.pack("<I", len(data)) + data)
        elif attr.kind == "dict":
            out.append(encode_attributes(attr.value))
        else:
            code, dtype = _ATTR_DTYPES[attr.dtype]
            if attr.kind == "scalar":
                out.append(bytes([code]) + np.asarray(attr.value).astype(dtype).tobytes())
            else:
                values = np.asarray(attr.value).astype(dtype).reshape(-1)
                out.append(bytes([code]) + struct.pack("<Q", values.size) + values.tobytes())
    return b"".join(out)


# ---- handlers -------------------------------------------------------------------------------

_capsule_api = ctypes.pythonapi
_capsule_api.PyCapsule_GetName.restype = ctypes.c_char_p
_capsule_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_capsule_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_capsule_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_api.PyCapsule_IsValid.restype = ctypes.c_int
_capsule_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def is_capsule(value) -> bool:
    return type(value).__name__ == "PyCapsule"


def address_of(handler, name: str) -> int | None:
    """The function address of a PyCapsule, ctypes function or integer; None for anything
    else."""
    if is_capsule(handler):
        capsule_name = _capsule_api.PyCapsule_GetName(handler)
        if not _capsule_api.PyCapsule_IsValid(handler, capsule_name):
            raise KilnError(f"custom-call target {name!r} is an invalid PyCapsule")
        return _capsule_api.PyCapsule_GetPointer(handler, capsule_name) or 0
    if isinstance(handler, ctypes._CFuncPtr):
        return ctypes.cast(handler, ctypes.c_void_p).value or 0
    if isinstance(handler, int) and not isinstance(handler, bool):
        return handler
    return None


def handler_addresses(bundle: dict, name: str) -> dict[str, int]:
    """{stage: address} for a dictionary of handlers by execution stage."""
    unknown = set(bundle) - set(STAGES)
    if unknown:
        raise KilnError(f"custom-call target {name!r} names unknown FFI execution stage(s) "
                        f"{sorted(unknown)}", hint="stages: " + ", ".join(STAGES))
    if "execute" not in bundle:
        raise KilnError(f"custom-call target {name!r} has no 'execute' handler",
                        hint="the execute stage is required; the others are optional")
    out = {}
    for stage, handler in bundle.items():
        address = address_of(handler, name)
        if address is None:
            raise KilnError(f"the {stage} handler of custom-call target {name!r} must be a "
                            f"PyCapsule, a ctypes function or an address, got "
                            f"{type(handler).__name__}")
        if not address:
            raise KilnError(f"the {stage} handler of custom-call target {name!r} is null")
        out[stage] = address
    return out


def create_site(lib: ctypes.CDLL, name: str, stages: dict[str, int], operands, results,
                attributes: list[FfiAttr]) -> int:
    """The C FFI site (KilnFfiSiteCreate) with its instantiate stage run; its address."""
    leaves = list(operands) + list(results)
    codes = [dtype_code(leaf.element or "") for leaf in leaves]
    ranks = [len(leaf.logical_shape) for leaf in leaves]
    dims = [d for leaf in leaves for d in leaf.logical_shape]
    blob = encode_attributes(attributes)
    n = max(len(leaves), 1)
    address = lib.KilnFfiSiteCreate(
        name.encode(), *(stages.get(s) or None for s in STAGES), len(operands), len(results),
        (ctypes.c_int32 * n)(*codes), (ctypes.c_int64 * n)(*ranks),
        (ctypes.c_int64 * max(len(dims), 1))(*dims), blob, len(blob))
    if not address:
        raise KilnError(f"cannot create the FFI call site of custom call '{name}'")
    failure = lib.KilnFfiSiteInstantiate(address)
    if failure:
        from ..errors import CustomCallError
        raise CustomCallError(failure.decode(errors="replace"),
                              hint="the handler's instantiate stage refused the call site")
    return address


def declare(lib: ctypes.CDLL) -> None:
    """ctypes signatures of the runtime's FFI entry points."""
    lib.KilnFfiSiteCreate.restype = ctypes.c_void_p
    lib.KilnFfiSiteCreate.argtypes = [
        ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
        ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_int32),
        ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64), ctypes.c_char_p,
        ctypes.c_size_t]
    lib.KilnFfiSiteInstantiate.restype = ctypes.c_char_p
    lib.KilnFfiSiteInstantiate.argtypes = [ctypes.c_void_p]
    lib.KilnCallSiteSetFfi.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    # The GPU plan calls a site itself (runtime/gpu_plan.py), with its stream.
    lib.kiln_ffi_call.restype = None
    lib.kiln_ffi_call.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                  ctypes.c_void_p, ctypes.c_void_p]
    # ... and, on a GPU, with the driver's allocator for handlers' scratch memory
    lib.kiln_ffi_call_on_device.restype = None
    lib.kiln_ffi_call_on_device.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                            ctypes.c_void_p]
    lib.KilnFfiRegistrations.restype = ctypes.POINTER(Registration)


class Registration(ctypes.Structure):
    """KilnFfiRegistration (kiln/ffi.h): a handler a library registered itself."""


Registration._fields_ = [("name", ctypes.c_char_p), ("platform", ctypes.c_char_p),
                         ("instantiate", ctypes.c_void_p), ("prepare", ctypes.c_void_p),
                         ("initialize", ctypes.c_void_p), ("execute", ctypes.c_void_p),
                         ("traits", ctypes.c_uint32), ("next", ctypes.POINTER(Registration))]
