"""PJRT element types (PJRT_Buffer_Type in runtime/pjrt/kiln_pjrt_c_api.h) and numpy dtypes.

Host buffers hold one element per byte for sub-byte types, as numpy (ml_dtypes) does; the
C side (kiln_pjrt_element_size) agrees with the item sizes here.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..errors import KilnError

# code -> dtype, for every type the plugin holds (an allowlist: others are refused).
DTYPES: dict[int, np.dtype] = {code: np.dtype(dtype) for code, dtype in {
    1: np.bool_, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64,
    6: np.uint8, 7: np.uint16, 8: np.uint32, 9: np.uint64,
    10: np.float16, 11: np.float32, 12: np.float64, 13: ml_dtypes.bfloat16,
    14: np.complex64, 15: np.complex128,
    16: ml_dtypes.float8_e5m2, 17: ml_dtypes.float8_e4m3fn, 18: ml_dtypes.float8_e4m3b11fnuz,
    19: ml_dtypes.float8_e5m2fnuz, 20: ml_dtypes.float8_e4m3fnuz,
    21: ml_dtypes.int4, 22: ml_dtypes.uint4, 24: ml_dtypes.int2, 25: ml_dtypes.uint2,
    26: ml_dtypes.float8_e4m3, 27: ml_dtypes.float8_e3m4, 28: ml_dtypes.float8_e8m0fnu,
    29: ml_dtypes.float4_e2m1fn,
}.items()}
CODES: dict[np.dtype, int] = {dtype: code for code, dtype in DTYPES.items()}
TOKEN = 23  # PJRT_Buffer_Type_TOKEN: a token, which holds no data


def dtype_of(code: int) -> np.dtype:
    try:
        return DTYPES[code]
    except KeyError:
        raise KilnError(f"PJRT element type {code} has no Kiln array type") from None


def code_of(dtype, what: str) -> int:
    try:
        return CODES[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise KilnError(f"{what}: element type {dtype} cannot be returned through PJRT",
                        hint="the plugin holds bool, integer, floating and complex arrays") from None
