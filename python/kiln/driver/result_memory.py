"""Memory for large results, reused once the arrays made on it are gone.

A result numpy allocates itself (`np.empty`) is, past glibc's 32 MB ceiling for reusing freed
blocks, a fresh mapping on every call, which the kernel zeroes page by page before the
compiled code writes it: for a 32 MB int32 elementwise program that was half of each call.
XLA's allocator keeps such blocks; so does this module. A large result is made on a block from
here; the block goes back to the free list when the last array viewing it is collected (a
finalizer on the buffer object every view holds through its `.base` chain, never on one
array, so a slice the caller kept keeps the block out of the list). The free list is bounded:
what would exceed it goes back to the C library.

Only results are made here: the caller owns them like any numpy array, and compiled code
writes every element of a result, so a reused block's old contents never show.
"""
from __future__ import annotations

import ctypes
import threading
import weakref

import numpy as np

MIN_BYTES = 4 << 20       # below this, np.empty is as fast (malloc reuses small blocks)
KEPT_BYTES = 256 << 20    # at most this much free memory is held for reuse
_ALIGN = 64               # as the compiled code's own buffers

_libc = ctypes.CDLL(None)
_libc.posix_memalign.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_size_t]
_libc.posix_memalign.restype = ctypes.c_int
_libc.free.argtypes = [ctypes.c_void_p]
_libc.free.restype = None

_lock = threading.Lock()
_free: dict[int, list[int]] = {}   # block size in bytes -> addresses of free blocks
_kept = 0                          # bytes in _free


def _take(nbytes: int) -> int:
    global _kept
    with _lock:
        blocks = _free.get(nbytes)
        if blocks:
            _kept -= nbytes
            return blocks.pop()
    address = ctypes.c_void_p()
    if _libc.posix_memalign(ctypes.byref(address), _ALIGN, nbytes) != 0:
        raise MemoryError(f"cannot allocate {nbytes:,} bytes")
    return address.value


def _give_back(address: int, nbytes: int) -> None:
    global _kept
    with _lock:
        if _kept + nbytes <= KEPT_BYTES:
            _free.setdefault(nbytes, []).append(address)
            _kept += nbytes
            return
    _libc.free(address)


def empty(shape: tuple, dtype: np.dtype) -> np.ndarray:
    """An uninitialised C-contiguous array, like np.empty, on a reusable block when large."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    nbytes = count * dtype.itemsize
    if nbytes < MIN_BYTES:
        return np.empty(shape, dtype)
    address = _take(nbytes)
    block = (ctypes.c_char * nbytes).from_address(address)
    weakref.finalize(block, _give_back, address, nbytes)
    return np.frombuffer(block, dtype, count).reshape(shape)


def kept_bytes() -> int:
    """Bytes of free blocks held for reuse now."""
    return _kept
