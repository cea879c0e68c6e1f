"""stablehlo.fft against numpy.fft: every transform type, lengths that take each path of the
matrix-product route (direct DFT, four-step split, Bluestein for large primes),
multi-dimensional, empty."""
import numpy as np
import pytest

import kiln
from conftest import INTERPRET, assert_checks_pass, shared_file


@pytest.fixture(autouse=True, params=["library", "products"])
def route(request):
    """Each test twice: as compiled by default (transforms past a small size call the
    built-in `kiln.fft` target), and with that target unregistered, so every transform is
    lowered to matrix products (tests/py/test_fft_library.py covers the library route)."""
    from kiln.runtime import fft as library
    from kiln.runtime.custom_call import REGISTRY
    if request.param == "library":
        yield request.param
        return
    REGISTRY.unregister(library.TARGET, "cpu")
    try:
        yield request.param
    finally:
        library.register_fft_targets(REGISTRY)


def _t(shape, e):
    return "tensor<" + "".join(f"{d}x" for d in shape) + e + ">"


def fft(kind, x, lengths, out_shape, out_elem):
    in_elem = {np.complex64: "complex<f32>", np.complex128: "complex<f64>",
               np.float32: "f32", np.float64: "f64"}[x.dtype.type]
    a, r = _t(x.shape, in_elem), _t(out_shape, out_elem)
    src = (f"func.func @main(%x: {a}) -> {r} {{\n"
           f"  %0 = stablehlo.fft %x, type = {kind}, length = {list(lengths)} : ({a}) -> {r}\n"
           f"  return %0 : {r}\n}}")
    return kiln.compile(src)(x)[0]


def _relerr(got, want):
    return np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300)


def _complex(rng, shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


# 8 and 64: direct; 100 = 10*10 and 256: four-step; 131 and 97: primes (Bluestein / direct).
@pytest.mark.parametrize("n", [1, 2, 5, 8, 64, 97, 100, 131, 256])
def test_fft_1d_lengths(rng, n):
    x = _complex(rng, (3, n), np.complex128)
    got = fft("FFT", x, [n], x.shape, "complex<f64>")
    assert got.dtype == np.complex128
    assert _relerr(got, np.fft.fft(x)) < 1e-13


@pytest.mark.parametrize("dtype,elem,tol", [(np.complex64, "complex<f32>", 2e-6),
                                            (np.complex128, "complex<f64>", 1e-13)])
def test_fft_and_ifft_multi_dimensional(rng, dtype, elem, tol):
    x = _complex(rng, (2, 6, 10), dtype)
    got = fft("FFT", x, [6, 10], x.shape, elem)
    assert _relerr(got, np.fft.fftn(x.astype(np.complex128), axes=(1, 2))) < tol
    got = fft("IFFT", x, [2, 6, 10], x.shape, elem)
    assert _relerr(got, np.fft.ifftn(x.astype(np.complex128))) < tol


@pytest.mark.parametrize("n", [4, 17, 33])
def test_rfft(rng, n):
    x = rng.standard_normal((3, n))
    got = fft("RFFT", x, [n], (3, n // 2 + 1), "complex<f64>")
    assert _relerr(got, np.fft.rfft(x)) < 1e-13
    x2 = rng.standard_normal((4, 6, n)).astype(np.float32)
    got = fft("RFFT", x2, [6, n], (4, 6, n // 2 + 1), "complex<f32>")
    assert _relerr(got, np.fft.rfftn(x2.astype(np.float64), axes=(1, 2))) < 2e-6


@pytest.mark.parametrize("n", [1, 2, 8, 33])
def test_irfft_ignores_imaginary_dc_and_nyquist(rng, n):
    m = n // 2 + 1
    x = _complex(rng, (3, m), np.complex128)  # DC (and Nyquist for even n) not real: dropped
    got = fft("IRFFT", x, [n], (3, n), "f64")
    assert got.dtype == np.float64
    assert _relerr(got, np.fft.irfft(x, n)) < 1e-13
    x2 = _complex(rng, (2, 5, m), np.complex64)
    got = fft("IRFFT", x2, [5, n], (2, 5, n), "f32")
    assert _relerr(got, np.fft.irfftn(x2.astype(np.complex128), s=(5, n), axes=(1, 2))) < 2e-6


def test_empty_batch_and_nan_propagation(rng):
    empty = np.zeros((0, 8), np.complex64)
    assert fft("FFT", empty, [8], (0, 8), "complex<f32>").shape == (0, 8)
    x = _complex(rng, (2, 8), np.complex128)
    x[0, 3] = np.nan
    got = fft("FFT", x, [8], x.shape, "complex<f64>")
    assert np.isnan(got[0]).all() and np.isfinite(got[1]).all()



@pytest.mark.parametrize("name", ["fft_complex64_14_15_0_17.mlir", "fft_float64_14_15_0_17.mlir"])
def test_conformance_files(name):
    assert_checks_pass(name)


def test_interpret_suite_fft():
    from kiln.conformance import run_file
    result = run_file(str(shared_file("fft.mlir", INTERPRET)))
    assert result.passed and len(result.cases) == 12, result.detail
