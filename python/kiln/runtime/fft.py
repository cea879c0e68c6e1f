"""`kiln.fft`, Kiln's built-in FFT target: `stablehlo.fft` as a call of an FFT library, O(n log n)
for every length, batches on every core.

The library is DUCC (the `ducc0` wheel: the FFT library XLA:CPU itself calls; it writes into
the result buffer, no copy), else scipy.fft (pocketfft, DUCC's predecessor, which numpy's and
scipy's transforms share) when ducc0 is not installed. Measured on a 2-core Xeon: a 64k-point
complex<f32> FFT takes 0.27 ms in ducc0 and 0.50 ms in scipy.fft.

The lowering (lowering/legalize/fft.py) turns `stablehlo.fft` into

    stablehlo.custom_call @kiln.fft(%x) {mhlo.backend_config = {fft_type = "RFFT",
                                         fft_length = array<i64: 512, 512>}}

a typed-FFI call of this Python target (api_version 4, the attributes as a dictionary). Its
call site is a `kiln.call_sites` spec that names the target, so saved `.kx` files and the
compile cache re-create it by name when they are loaded (kiln/__init__.py registers it).

Semantics are StableHLO's, which are numpy's: the transform runs over the trailing
len(fft_length) axes; IFFT and IRFFT scale by 1/n; RFFT keeps the n//2+1 non-negative
frequencies of the last axis; IRFFT inverts the other axes first and reads the last axis as a
Hermitian half-spectrum of length fft_length[-1], ignoring the imaginary parts of its DC and
Nyquist bins. Single precision stays single precision (both libraries compute
f32/complex<f32> in f32), as XLA does.
"""
from __future__ import annotations

import functools
import os

import numpy as np

from ..errors import CustomCallError

TARGET = "kiln.fft"
KINDS = ("FFT", "IFFT", "RFFT", "IRFFT")

# Operands with at least this many elements are transformed on every core (the library's
# threads): below it, waking threads costs about what it saves (measured on 2 cores: 512^2
# real and 64x4096 complex transforms no faster on two threads, 1024^2 real 1.3x faster).
PARALLEL_MIN_ELEMENTS = 1 << 19


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _text(value) -> str:
    if isinstance(value, (bytes, bytearray)):
        return value.decode("ascii")
    return str(value)


@functools.lru_cache(maxsize=None)
def ducc_fft():
    """ducc0.fft, or None where the wheel is not installed."""
    try:
        import ducc0
    except ImportError:
        return None
    return ducc0.fft


def transform_ducc(kind: str, x: np.ndarray, lengths: tuple[int, ...], out: np.ndarray,
                   workers: int = 1) -> None:
    """stablehlo.fft of `x` written into `out` by DUCC (inorm=2: divide by the lengths'
    product, the inverse transforms' 1/n)."""
    fft = ducc_fft()
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    inverse = kind in ("IFFT", "IRFFT")
    if kind in ("FFT", "IFFT"):
        fft.c2c(x, axes=axes, forward=not inverse, inorm=2 if inverse else 0, out=out,
                nthreads=workers)
    elif kind == "RFFT":
        fft.r2c(x, axes=axes, forward=True, out=out, nthreads=workers)
    else:
        fft.c2r(x, axes=axes, lastsize=lengths[-1], forward=False, inorm=2, out=out,
                nthreads=workers)


def transform_scipy(kind: str, x: np.ndarray, lengths: tuple[int, ...],
                    workers: int = 1) -> np.ndarray:
    """stablehlo.fft of `x` by scipy.fft, as a new array in x's precision."""
    import scipy.fft
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    if len(lengths) == 1:  # the 1-D functions skip the n-D ones' argument handling (~5 us)
        one_axis = {"FFT": scipy.fft.fft, "IFFT": scipy.fft.ifft, "RFFT": scipy.fft.rfft}
        if kind == "IRFFT":
            return scipy.fft.irfft(x, n=lengths[0], workers=workers)
        return one_axis[kind](x, workers=workers)
    if kind == "FFT":
        return scipy.fft.fftn(x, axes=axes, workers=workers)
    if kind == "IFFT":
        return scipy.fft.ifftn(x, axes=axes, workers=workers)
    if kind == "RFFT":
        return scipy.fft.rfftn(x, axes=axes, workers=workers)
    return scipy.fft.irfftn(x, s=lengths, axes=axes, workers=workers)


def _ducc_takes(kind: str, x: np.ndarray, lengths: tuple[int, ...], out: np.ndarray) -> bool:
    """Whether DUCC can write this transform into `out` as it is (its half-spectrum must be
    exactly lengths[-1]//2+1 long for IRFFT; `out` a writable array of the library's type)."""
    if ducc_fft() is None or not out.flags.writeable:
        return False
    if kind == "IRFFT" and x.shape[-1] != lengths[-1] // 2 + 1:
        return False
    return out.dtype == (np.result_type(x.dtype, np.complex64) if kind != "IRFFT"
                         else np.finfo(x.dtype).dtype)


def fft_target(results, operands, *, attributes, backend_config=None) -> None:
    """The `kiln.fft` Python target: results[0] = fft(operands[0]) in place."""
    if len(operands) != 1 or len(results) != 1:
        raise CustomCallError(f"{TARGET} takes one operand and one result, got "
                              f"{len(operands)} and {len(results)}")
    kind = _text(attributes.get("fft_type", ""))
    if kind not in KINDS:
        raise CustomCallError(f"{TARGET}: unknown fft_type {kind!r}",
                              hint="fft_type is one of " + ", ".join(KINDS))
    lengths = tuple(int(n) for n in np.atleast_1d(attributes.get("fft_length", ())))
    (x,), (out,) = operands, results
    if out.size == 0:
        return
    if x.size == 0:  # e.g. IRFFT of an empty half-spectrum: no frequency contributes
        out[...] = 0
        return
    workers = _cores() if x.size >= PARALLEL_MIN_ELEMENTS else 1
    if _ducc_takes(kind, x, lengths, out):
        transform_ducc(kind, x, lengths, out, workers)
    else:
        out[...] = transform_scipy(kind, x, lengths, workers)


def register_fft_targets(registry) -> list[str]:
    """Register `kiln.fft` with `registry.register(name, fn, platform="cpu", api_version=4)`."""
    registry.register(TARGET, fft_target, platform="cpu", api_version=4)
    return [TARGET]
