"""JSON for the values Kiln saves with compiled code (custom-call attributes, checks): plain
JSON plus numpy arrays, tagged so that they come back as arrays of the same dtype and shape."""
from __future__ import annotations

import base64

import numpy as np

_TAG = "__ndarray__"


def encode(value):
    """`value` with every numpy array (and numpy scalar) replaced by a JSON-able form."""
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        return {_TAG: {"dtype": data.dtype.str if data.dtype.kind != "V" else data.dtype.name,
                       "shape": list(data.shape),
                       "data": base64.b64encode(data.tobytes()).decode("ascii")}}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    return value


def decode(value):
    """The inverse of `encode`."""
    if isinstance(value, dict):
        if set(value) == {_TAG}:
            from .dtypes import numpy_dtype_named
            spec = value[_TAG]
            raw = base64.b64decode(spec["data"])
            return np.frombuffer(raw, numpy_dtype_named(spec["dtype"])).reshape(spec["shape"]).copy()
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value
