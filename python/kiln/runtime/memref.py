"""The memref ABI between numpy arrays and compiled code.

Compiled entry points take every argument and every result as a pointer to an MLIR memref
descriptor {allocated, aligned, offset, sizes[rank], strides[rank]}; results are out-parameters
that the caller allocates (after `buffer-results-to-out-params`), so numpy owns all memory and
nothing compiled code returns needs freeing.
"""
from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import dtypes


@dataclass(frozen=True)
class TensorSpec:
    """Shape (None for a dynamic dimension) and element type of one argument or result."""
    shape: tuple[int | None, ...]
    element: str  # MLIR spelling, e.g. "f32", "ui8", "complex<f64>"

    @functools.cached_property
    def dtype(self) -> np.dtype:
        return dtypes.numpy_dtype(self.element)

    @property
    def is_static(self) -> bool:
        return all(d is not None for d in self.shape)

    def mlir_type(self, shape: tuple[int, ...] | None = None) -> str:
        dims = shape if shape is not None else self.shape
        text = "x".join("?" if d is None else str(d) for d in dims)
        return f"tensor<{text + 'x' if dims else ''}{self.element}>"

    def __str__(self) -> str:
        return self.mlir_type()


@lru_cache(maxsize=None)
def descriptor_class(rank: int) -> type[ctypes.Structure]:
    fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p), ("offset", ctypes.c_int64)]
    if rank:
        fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
    return type(f"MemRefDescriptor{rank}", (ctypes.Structure,), {"_fields_": fields})


def descriptor(array: np.ndarray) -> ctypes.Structure:
    """A descriptor viewing `array` (which must be C-contiguous and stay alive during the call)."""
    desc = descriptor_class(array.ndim)()
    desc.allocated = desc.aligned = array.ctypes.data
    desc.offset = 0
    if array.ndim:
        desc.sizes[:] = array.shape
        desc.strides[:] = [s // array.itemsize for s in array.strides] if array.itemsize else [0] * array.ndim
    return desc


def pack_arguments(arrays: list[np.ndarray]) -> tuple[ctypes.Array, list]:
    """The packed `void**` argument list of a `_mlir_ciface_` entry; the second value keeps the
    descriptors alive for as long as the caller holds it."""
    descs = [descriptor(a) for a in arrays]
    # The C interface takes each memref as a pointer to its descriptor; the packed wrapper
    # takes a pointer to each argument, hence two levels of indirection.
    pointers = [ctypes.pointer(d) for d in descs]
    packed = (ctypes.c_void_p * len(arrays))()
    for i, p in enumerate(pointers):
        packed[i] = ctypes.cast(ctypes.pointer(p), ctypes.c_void_p)
    return packed, [descs, pointers]


class CallFrame:
    """The packed arguments of one compiled entry, built once and refilled per call: the
    descriptors' sizes and strides are fixed by the compiled shapes, so a call only writes
    each array's data pointer. One frame per thread (the caller keeps them thread-local)."""

    def __init__(self, arrays: list[np.ndarray]):
        self.shapes = [a.shape for a in arrays]
        self.packed, (self.descriptors, self._pointers) = pack_arguments(arrays)

    def fill(self, arrays: list[np.ndarray]) -> bool:
        """Point the frame at `arrays` (C-contiguous, alive during the call); False if their
        shapes are not the frame's."""
        if len(arrays) != len(self.shapes):
            return False
        for desc, array, shape in zip(self.descriptors, arrays, self.shapes):
            if array.shape != shape:
                return False
            desc.allocated = desc.aligned = _address(array)
        return True


def _address(array: np.ndarray) -> int:
    """The array's data address: through the buffer protocol when it is writable (a fifth of
    the cost of __array_interface__, which builds a dictionary), else the interface."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError):  # read-only, or empty
        return array.__array_interface__["data"][0]
