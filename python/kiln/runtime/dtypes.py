"""The one table between MLIR element types and numpy / ml_dtypes dtypes.

Sub-byte integers (i2, i4) and 8-bit floats are stored one element per byte by both LLVM and
ml_dtypes, so every type here has a byte-addressable storage that numpy can view directly.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..errors import KilnError

# MLIR spelling -> numpy dtype. Unsigned integers keep their own dtype even though the compiled
# code works on signless integers: the signature is read before `stablehlo-convert-to-signless`.
_MLIR_TO_NUMPY: dict[str, np.dtype] = {
    "i1": np.dtype(np.bool_),
    "i2": np.dtype(ml_dtypes.int2), "si2": np.dtype(ml_dtypes.int2), "ui2": np.dtype(ml_dtypes.uint2),
    "i4": np.dtype(ml_dtypes.int4), "si4": np.dtype(ml_dtypes.int4), "ui4": np.dtype(ml_dtypes.uint4),
    "i8": np.dtype(np.int8), "si8": np.dtype(np.int8), "ui8": np.dtype(np.uint8),
    "i16": np.dtype(np.int16), "si16": np.dtype(np.int16), "ui16": np.dtype(np.uint16),
    "i32": np.dtype(np.int32), "si32": np.dtype(np.int32), "ui32": np.dtype(np.uint32),
    "i64": np.dtype(np.int64), "si64": np.dtype(np.int64), "ui64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
    "f8E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn), "f8E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "f8E4M3FNUZ": np.dtype(ml_dtypes.float8_e4m3fnuz), "f8E5M2FNUZ": np.dtype(ml_dtypes.float8_e5m2fnuz),
    "f8E4M3B11FNUZ": np.dtype(ml_dtypes.float8_e4m3b11fnuz),
    "f8E4M3": np.dtype(ml_dtypes.float8_e4m3), "f8E3M4": np.dtype(ml_dtypes.float8_e3m4),
    "f8E8M0FNU": np.dtype(ml_dtypes.float8_e8m0fnu),
    "f4E2M1FN": np.dtype(ml_dtypes.float4_e2m1fn),
    "f6E2M3FN": np.dtype(ml_dtypes.float6_e2m3fn), "f6E3M2FN": np.dtype(ml_dtypes.float6_e3m2fn),
    "complex<f32>": np.dtype(np.complex64), "complex<f64>": np.dtype(np.complex128),
}

# Integer types narrower than their storage byte: LLVM leaves the unused high bits unspecified
# when it stores them, while ml_dtypes keeps them zero, so results are masked after a call.
SUB_BYTE_BITS = {"i2": 2, "si2": 2, "ui2": 2, "i4": 4, "si4": 4, "ui4": 4}


def numpy_dtype(mlir_element: str) -> np.dtype:
    try:
        return _MLIR_TO_NUMPY[mlir_element]
    except KeyError:
        raise KilnError(f"element type '{mlir_element}' has no numpy equivalent",
                        hint="supported: " + ", ".join(_MLIR_TO_NUMPY)) from None


def mlir_element(dtype: np.dtype) -> str:
    dtype = np.dtype(dtype)
    for name, candidate in _MLIR_TO_NUMPY.items():
        if candidate == dtype and not name.startswith("si"):
            return name
    raise KilnError(f"numpy dtype {dtype} has no StableHLO element type")


def is_float(dtype: np.dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype in {np.dtype(t) for t in _ML_FLOATS}


def is_complex(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "c"


_ML_FLOATS = [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
              ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2fnuz, ml_dtypes.float8_e4m3b11fnuz,
              ml_dtypes.float8_e4m3, ml_dtypes.float8_e3m4, ml_dtypes.float8_e8m0fnu,
              ml_dtypes.float4_e2m1fn, ml_dtypes.float6_e2m3fn, ml_dtypes.float6_e3m2fn]


def normalize_sub_byte(array: np.ndarray, mlir_elem: str) -> np.ndarray:
    """Clear the storage bits above a sub-byte integer's width, in place (ml_dtypes' form)."""
    bits = SUB_BYTE_BITS.get(mlir_elem)
    if bits is not None and array.size:
        array.view(np.uint8)[...] &= (1 << bits) - 1
    return array


def numpy_dtype_named(name: str) -> np.dtype:
    """A dtype from its numpy name or its ml_dtypes name ('float32', '<f4', 'bfloat16')."""
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes
        try:
            return np.dtype(getattr(ml_dtypes, name))
        except AttributeError:
            raise KilnError(f"unknown dtype {name!r}") from None
