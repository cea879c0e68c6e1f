"""`stablehlo.fft` as a library call, or as StableHLO matrix products (registered by
numerics.py).

The library route (the default): the op becomes a call of Kiln's built-in target `kiln.fft`
(python/kiln/runtime/fft.py: DUCC, the library XLA:CPU calls, else scipy.fft; O(n log n) for
every length, large batches on every core), a typed-FFI custom call that
`kiln-lower-custom-calls` turns into a call site named by the target, so AOT files and the
compile cache re-create it where they are loaded:

    %y = stablehlo.custom_call @kiln.fft(%x) {api_version = 4 : i32,
           mhlo.backend_config = {fft_type = "FFT", fft_length = array<i64: 1000>}}

The matrix-product route below stays for what the library route does not take: transforms so
small that a product beats the call's fixed cost (about 15 microseconds through Python),
empty tensors, and programs compiled while `kiln.fft` is unregistered
(`kiln.runtime.custom_call.REGISTRY.unregister("kiln.fft")` forces this route; the registry
is part of the compile cache's key). Both routes need static shapes when this pass runs
(Kiln specialises a dynamic signature to each call's shapes before it); a shape still dynamic
here is a located KilnError.

Complex values travel as (real, imaginary) pairs of real tensors so every product is a real
`dot_general` that upstream lowers to `linalg`. A 1-D transform of length n along one axis is:

* n <= 64, or a prime n <= 128: one DFT matrix product, W[j, k] = exp(s*2*pi*i*j*k/n), the
  angle taken from (j*k mod n) so twiddles are exact to the last bit in float64;
* composite n: the four-step Cooley-Tukey split n = n1*n2 (n1 the divisor nearest sqrt(n)):
  n1-point DFTs, twiddle by exp(s*2*pi*i*j2*k1/n), n2-point DFTs, recursively;
* other primes: Bluestein's chirp-z, a cyclic convolution of power-of-two length M >= 2n-1
  done by two transforms of length M (the chirp's spectrum is a compile-time constant).

Multi-dimensional transforms apply the 1-D one per axis; IFFT scales by 1/n per axis. RFFT
is the complex FFT of the real input along the last axis, cut to n//2+1 bins, then complex
FFTs along the other axes (numpy's rfftn). IRFFT inverts the other axes first, then rebuilds
the Hermitian spectrum X[n-k] = conj(X[k]) along the last axis and keeps the real part of its
inverse, which ignores the imaginary parts of the DC and Nyquist bins as XLA and numpy do.
"""
from __future__ import annotations

import numpy as np
from torch_mlir import ir

from ...errors import KilnError
from ...runtime import custom_call as cc
from ...runtime.fft import TARGET as LIBRARY_TARGET
from ..patterns import pattern_pass
from .hlo_builder import (HloBuilder, element, enum_value, part_type, replace_op, shape,
                          static_shape)

DIRECT_MAX = 64
DIRECT_PRIME_MAX = 128
# Below this many multiply-adds (the product route's count, `_product_work`) a transform stays
# matrix products: cheaper than the library call's fixed cost, and fused into the code around it.
LIBRARY_MIN_WORK = 1 << 15


def _divisor_near_sqrt(n: int) -> int:
    best = 1
    for d in range(2, int(np.sqrt(n)) + 1):
        if n % d == 0:
            best = d
    return best


def _twiddles(rows: int, cols: int, n: int, sign: int) -> np.ndarray:
    """exp(sign*2*pi*i*j*k/n) for j < rows, k < cols, reduced mod n before the angle."""
    jk = (np.arange(rows, dtype=np.int64)[:, None] * np.arange(cols, dtype=np.int64)[None, :]) % n
    return np.exp(sign * 2j * np.pi * jk / n)


class _Fft:
    """Transforms on Z, a real tensor holding a complex one with an extra "part" axis of
    size 2 (real, imaginary) placed just before the axis being transformed, so a DFT is
    one real product: [re | im] @ [[Wr, Wi], [-Wi, Wr]]."""

    def __init__(self, h: HloBuilder, real: ir.Type):
        self.h, self.real = h, real

    def cmul_const(self, z: ir.Value, w: np.ndarray, part: int, dims: list[int]) -> ir.Value:
        """z * w for a complex constant w whose axes are z's axes `dims` (around `part`):
        re' = re*wr - im*wi, im' = im*wr + re*wi, i.e. z*[wr, wr] + swap(z)*[-wi, wi]."""
        h = self.h
        ins = sum(1 for d in dims if d < part)
        direct = np.stack([w.real, w.real], axis=ins)
        crossed = np.stack([-w.imag, w.imag], axis=ins)
        bdims = sorted(dims + [part])
        a = h.broadcast(h.constant(direct, self.real), shape(z), bdims)
        b = h.broadcast(h.constant(crossed, self.real), shape(z), bdims)
        return h.add(h.mul(z, a), h.mul(h.reverse(z, [part]), b))

    def scale(self, z: ir.Value, factor: float) -> ir.Value:
        return self.h.mul(z, self.h.splat(factor, shape(z), self.real))

    # 1-D transforms along the last axis of z (..., 2, n); unnormalized, sign s in the exponent.
    def dft_last(self, z: ir.Value, sign: int) -> ir.Value:
        n = shape(z)[-1]
        if n == 1:
            return z
        if n <= DIRECT_MAX or (n <= DIRECT_PRIME_MAX and _divisor_near_sqrt(n) == 1):
            return self.direct(z, sign)
        n1 = _divisor_near_sqrt(n)
        if n1 > 1:
            return self.four_step(z, n1, n // n1, sign)
        return self.bluestein(z, sign)

    def direct(self, z: ir.Value, sign: int) -> ir.Value:
        h = self.h
        n = shape(z)[-1]
        w = _twiddles(n, n, n, sign)
        block = np.block([[w.real, w.imag], [-w.imag, w.real]])
        rows = int(np.prod(shape(z)[:-2]))
        out = h.dot(h.reshape(z, (rows, 2 * n)), h.constant(block, self.real))
        return h.reshape(out, shape(z))

    def four_step(self, z: ir.Value, n1: int, n2: int, sign: int) -> ir.Value:
        h = self.h
        batch = list(shape(z)[:-2])
        b = len(batch)
        # x[j1*n2 + j2]: (..., 2, j1, j2) -> (..., j2, 2, j1); n1-point DFTs give (..., j2, 2, k1).
        z = h.reshape(z, batch + [2, n1, n2])
        z = h.transpose(z, list(range(b)) + [b + 2, b, b + 1])
        z = self.dft_last(z, sign)
        z = self.cmul_const(z, _twiddles(n2, n1, n1 * n2, sign), b + 1, [b, b + 2])
        # (..., k1, 2, j2); n2-point DFTs give (..., k1, 2, k2); X[k1 + n1*k2] = (..., 2, k2, k1).
        z = h.transpose(z, list(range(b)) + [b + 2, b + 1, b])
        z = self.dft_last(z, sign)
        z = h.transpose(z, list(range(b)) + [b + 1, b + 2, b])
        return h.reshape(z, batch + [2, n1 * n2])

    def bluestein(self, z: ir.Value, sign: int) -> ir.Value:
        h = self.h
        n = shape(z)[-1]
        r = len(shape(z))
        m = 1 << (2 * n - 2).bit_length()
        j = np.arange(n, dtype=np.int64)
        chirp = np.exp(sign * 1j * np.pi * ((j * j) % (2 * n)) / n)
        # X[k] = c[k] * sum_j (x[j] c[j]) conj(c[k-j]): a cyclic convolution of length m.
        b = np.zeros(m, np.complex128)
        b[:n] = np.conj(chirp)
        b[m - n + 1:] = np.conj(chirp[1:])[::-1]
        spectrum = np.fft.fft(b) / m  # the inverse transform's 1/m folded in
        a = self.cmul_const(z, chirp, r - 2, [r - 1])
        a = h.pad(a, h.splat(0.0, (), self.real), [0] * r, [0] * (r - 1) + [m - n])
        a = self.dft_last(a, -1)
        a = self.cmul_const(a, spectrum, r - 2, [r - 1])
        a = self.dft_last(a, +1)
        a = h.slice(a, [0] * r, list(shape(z)))
        return self.cmul_const(a, chirp, r - 2, [r - 1])

    def dft_axis(self, z: ir.Value, axis: int, sign: int, inverse_scale: bool) -> ir.Value:
        """Transform axis `axis` of the complex tensor z (part axis first: (2, *shape))."""
        r = len(shape(z))
        perm = [d for d in range(1, r) if d != axis + 1] + [0, axis + 1]
        back = list(np.argsort(perm))
        t = self.dft_last(self.h.transpose(z, perm), sign)
        if inverse_scale:
            t = self.scale(t, 1.0 / shape(z)[axis + 1])
        return self.h.transpose(t, back)


def _lower_fft(op: ir.Operation) -> None:
    kind = enum_value(op.attributes["fft_type"])
    if kind not in ("FFT", "IFFT", "RFFT", "IRFFT"):
        raise KilnError(f"unknown fft_type {kind}", location=str(op.location),
                        hint="fft_type is one of FFT, IFFT, RFFT, IRFFT")
    lengths = list(ir.DenseI64ArrayAttr(op.attributes["fft_length"]))
    in_shape = static_shape(op.operands[0], op)
    out_shape = static_shape(op.results[0], op)
    in_elem, out_elem = element(op.operands[0]), element(op.results[0])
    real = out_elem if kind == "IRFFT" else (in_elem if kind == "RFFT" else part_type(in_elem))
    if str(real) not in ("f32", "f64") or (kind in ("FFT", "IFFT") and real == in_elem):
        raise KilnError(f"stablehlo.fft on {in_elem} is not supported", location=str(op.location),
                        hint="FFT operands are f32/f64 or complex<f32>/complex<f64>")
    with ir.InsertionPoint(op), op.location:
        if _library_route(kind, lengths, in_shape, out_shape):
            out = _library_call(op.operands[0], op.results[0].type, kind, lengths)
        else:
            out = _build_fft(HloBuilder(), op.operands[0], kind, lengths, out_shape, real)
    replace_op(op, [out])


def _product_work(kind: str, lengths: list[int], in_shape: tuple, out_shape: tuple) -> int:
    """About how many real multiply-adds the matrix-product route spends: per transformed
    axis, each element meets one row of a DFT matrix of size min(n, DIRECT_MAX) (the
    four-step split keeps factors near sqrt(n))."""
    complex_shape = out_shape if kind == "RFFT" else in_shape
    elements = int(np.prod(complex_shape, dtype=np.int64))
    return 4 * elements * sum(min(n, DIRECT_MAX) for n in lengths)


def _library_route(kind: str, lengths: list[int], in_shape: tuple, out_shape: tuple) -> bool:
    if 0 in in_shape or 0 in out_shape or 0 in lengths:
        return False
    if cc.REGISTRY.lookup(LIBRARY_TARGET, "cpu") is None:
        return False
    return _product_work(kind, lengths, in_shape, out_shape) >= LIBRARY_MIN_WORK


def _library_call(x: ir.Value, result_type: ir.Type, kind: str, lengths: list[int]) -> ir.Value:
    """`kiln.fft(x)`: a typed-FFI custom call whose attributes name the transform."""
    config = ir.DictAttr.get({"fft_type": ir.StringAttr.get(kind),
                              "fft_length": ir.DenseI64ArrayAttr.get(lengths)})
    call = ir.Operation.create(
        "stablehlo.custom_call", results=[result_type], operands=[x],
        attributes={"call_target_name": ir.StringAttr.get(LIBRARY_TARGET),
                    "api_version": ir.IntegerAttr.get(ir.IntegerType.get_signless(32),
                                                      cc.API_TYPED_FFI),
                    "mhlo.backend_config": config})
    return call.result


def _build_fft(h: HloBuilder, x: ir.Value, kind: str, lengths: list[int], out_shape: tuple,
               real: ir.Type) -> ir.Value:
    in_shape = shape(x)
    r, k = len(in_shape), len(lengths)
    axes = list(range(r - k, r))
    f = _Fft(h, real)

    def stack(re: ir.Value, im: ir.Value) -> ir.Value:  # (2, *shape): the part axis first
        return h.concatenate([h.reshape(p, (1,) + shape(p)) for p in (re, im)], 0)

    def part(z: ir.Value, i: int) -> ir.Value:
        z_shape = shape(z)
        return h.reshape(h.slice(z, [i] + [0] * (len(z_shape) - 1), [i + 1] + list(z_shape[1:])),
                         z_shape[1:])

    if 0 in in_shape or 0 in out_shape:
        zero = h.splat(0, out_shape, real)
        return zero if kind == "IRFFT" else h.complex(zero, zero)
    if kind in ("FFT", "IFFT"):
        z = stack(h.real(x), h.imag(x))
        for axis in axes:
            z = f.dft_axis(z, axis, -1 if kind == "FFT" else 1, kind == "IFFT")
        return h.complex(part(z, 0), part(z, 1))
    if kind == "RFFT":
        z = f.dft_axis(stack(x, h.splat(0.0, in_shape, real)), r - 1, -1, False)
        z = h.slice(z, [0] * (r + 1), [2] + list(out_shape))
        for axis in axes[:-1]:
            z = f.dft_axis(z, axis, -1, False)
        return h.complex(part(z, 0), part(z, 1))
    # IRFFT
    z = stack(h.real(x), h.imag(x))
    for axis in axes[:-1]:
        z = f.dft_axis(z, axis, 1, True)
    n, m = lengths[-1], in_shape[-1]
    if n > m:  # X[n-k] = conj(X[k]) for k in [1, n-m]
        tail = h.reverse(h.slice(z, [0] * r + [1], [2] + list(in_shape[:-1]) + [n - m + 1]), [r])
        conj = h.broadcast(h.constant(np.array([1.0, -1.0]), real), shape(tail), [0])
        z = h.concatenate([z, h.mul(tail, conj)], r)
    return part(f.dft_axis(z, r - 1, 1, True), 0)


lower_fft = pattern_pass({"stablehlo.fft": _lower_fft})
