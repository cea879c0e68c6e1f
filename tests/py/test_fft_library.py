"""stablehlo.fft through the library route (the built-in `kiln.fft` target, python/kiln/runtime/
fft.py) against numpy.fft: every transform type and precision, lengths 1 to 65536 (powers of
two, primes, composites), 2-D and 3-D, batched, inside a scan, from several threads at once,
saved and loaded again, and with scipy.fft standing in for DUCC."""
import subprocess
import sys
import threading

import numpy as np
import pytest

import kiln
from kiln.errors import CustomCallError
from kiln.lowering.legalize.fft import LIBRARY_MIN_WORK
from kiln.runtime import fft as library

ELEMENTS = {np.complex64: "complex<f32>", np.complex128: "complex<f64>",
            np.float32: "f32", np.float64: "f64"}
# (kind, operand dtype, result dtype, relative tolerance against numpy in float64)
CASES = [("FFT", np.complex64, np.complex64, 1e-5), ("FFT", np.complex128, np.complex128, 1e-12),
         ("IFFT", np.complex64, np.complex64, 1e-5), ("IFFT", np.complex128, np.complex128, 1e-12),
         ("RFFT", np.float32, np.complex64, 1e-5), ("RFFT", np.float64, np.complex128, 1e-12),
         ("IRFFT", np.complex64, np.float32, 1e-5), ("IRFFT", np.complex128, np.float64, 1e-12)]
LENGTHS = [1, 2, 7, 1000, 4096, 65536]


def _t(shape, dtype) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + ELEMENTS[np.dtype(dtype).type] + ">"


def fft_program(kind, in_shape, in_dtype, lengths, out_shape, out_dtype) -> str:
    a, r = _t(in_shape, in_dtype), _t(out_shape, out_dtype)
    return (f"func.func @main(%x: {a}) -> {r} {{\n"
            f"  %0 = stablehlo.fft %x, type = {kind}, length = {list(lengths)} : ({a}) -> {r}\n"
            f"  return %0 : {r}\n}}")


def shapes(kind, batch, lengths):
    """(operand shape, result shape) of a transform over the trailing `lengths`."""
    full = tuple(batch) + tuple(lengths)
    half = full[:-1] + (lengths[-1] // 2 + 1,)
    return {"RFFT": (full, half), "IRFFT": (half, full)}.get(kind, (full, full))


def numpy_fft(kind, x, lengths):
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    wide = x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)
    return {"FFT": lambda: np.fft.fftn(wide, axes=axes),
            "IFFT": lambda: np.fft.ifftn(wide, axes=axes),
            "RFFT": lambda: np.fft.rfftn(wide, axes=axes),
            "IRFFT": lambda: np.fft.irfftn(wide, s=lengths, axes=axes)}[kind]()


def sample(rng, shape, dtype):
    if np.issubdtype(dtype, np.complexfloating):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def relative_error(got, want) -> float:
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300))


def uses_library(exe) -> bool:
    return 'kiln.custom_call_target = "kiln.fft"' in exe.ir("legalize")


def check(rng, kind, in_dtype, out_dtype, tol, batch, lengths):
    in_shape, out_shape = shapes(kind, batch, lengths)
    exe = kiln.compile(fft_program(kind, in_shape, in_dtype, lengths, out_shape, out_dtype))
    x = sample(rng, in_shape, in_dtype)
    got = exe(x)[0]
    assert got.dtype == out_dtype and got.shape == out_shape
    assert relative_error(got, numpy_fft(kind, x, lengths)) < tol
    return exe


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("kind,in_dtype,out_dtype,tol", CASES)
def test_every_kind_precision_and_length(rng, kind, in_dtype, out_dtype, tol, n):
    # Enough rows that even the shortest transforms take the library route. IRFFT's random
    # half-spectra have imaginary DC and Nyquist bins, which numpy (and XLA) ignore.
    row = n // 2 + 1 if kind in ("RFFT", "IRFFT") else n
    rows = max(2, -(-LIBRARY_MIN_WORK // (4 * row * min(n, 64))))
    exe = check(rng, kind, in_dtype, out_dtype, tol, (rows,), [n])
    assert uses_library(exe)


@pytest.mark.parametrize("lengths", [[48, 50], [12, 10, 9]])
@pytest.mark.parametrize("kind,in_dtype,out_dtype,tol", CASES)
def test_two_and_three_dimensional_batched(rng, kind, in_dtype, out_dtype, tol, lengths):
    exe = check(rng, kind, in_dtype, out_dtype, tol, (3, 2), lengths)
    assert uses_library(exe)


def test_small_transforms_stay_matrix_products(rng):
    exe = check(rng, "FFT", np.complex64, np.complex64, 1e-5, (3,), [8])
    assert not uses_library(exe)


def test_products_route_when_the_target_is_unregistered(rng):
    from kiln.runtime.custom_call import REGISTRY
    REGISTRY.unregister(library.TARGET, "cpu")
    try:
        exe = check(rng, "FFT", np.complex128, np.complex128, 1e-12, (4,), [1000])
        assert not uses_library(exe)
    finally:
        library.register_fft_targets(REGISTRY)
    assert uses_library(check(rng, "FFT", np.complex128, np.complex128, 1e-12, (4,), [1000]))


def test_dynamic_batch_is_specialised_to_the_library_call(rng):
    exe = kiln.compile(fft_program("FFT", ("?", 1000), np.complex64, [1000], ("?", 1000),
                                   np.complex64))
    for rows in (3, 17):
        x = sample(rng, (rows, 1000), np.complex64)
        assert relative_error(exe(x)[0], np.fft.fft(x.astype(np.complex128))) < 1e-5


def test_scipy_fft_stands_in_without_ducc(rng, monkeypatch):
    calls = []
    by_scipy = library.transform_scipy
    monkeypatch.setattr(library, "ducc_fft", lambda: None)
    monkeypatch.setattr(library, "transform_scipy",
                        lambda *args: calls.append(args[0]) or by_scipy(*args))
    for kind, in_dtype, out_dtype, tol in CASES:
        check(rng, kind, in_dtype, out_dtype, tol, (5,), [1000])
        check(rng, kind, in_dtype, out_dtype, tol, (2,), [30, 21])
    assert calls == [kind for kind, *_ in CASES for _ in range(2)]


def test_thunks_show_a_library_call():
    in_shape, out_shape = shapes("RFFT", (), [512, 512])
    exe = kiln.compile(fft_program("RFFT", in_shape, np.float32, [512, 512], out_shape,
                                   np.complex64))
    calls = [t for t in exe.thunks() if t.kind == "custom-call"]
    assert [t.target for t in calls] == ["kiln.fft"]
    assert "target=kiln.fft" in str(exe.thunks())


def test_calls_from_several_threads_at_once(rng):
    exe = kiln.compile(fft_program("FFT", (16, 1000), np.complex64, [1000], (16, 1000),
                                   np.complex64))
    inputs = [sample(rng, (16, 1000), np.complex64) for _ in range(6)]
    errors, failures = [0.0] * len(inputs), []

    def work(i):
        try:
            for _ in range(25):
                errors[i] = max(errors[i], relative_error(
                    exe(inputs[i])[0], np.fft.fft(inputs[i].astype(np.complex128))))
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures and max(errors) < 1e-5


def test_inside_a_scan_body(rng):
    import jax
    import jax.numpy as jnp

    def f(c, xs):
        def body(c, x):
            y = jnp.fft.fft(x * c)
            back = jnp.fft.irfft(jnp.fft.rfft(x.real), n=x.shape[-1])
            return c * 0.5 + jnp.abs(y).mean(), (y, back)
        return jax.lax.scan(body, c, xs)

    c = np.float32(1.0) + np.complex64(0)
    xs = sample(rng, (5, 32, 256), np.complex64)
    exe = kiln.compile(bytes(jax.export.export(jax.jit(f))(c, xs).serialize()))
    assert uses_library(exe)
    got = jax.tree_util.tree_leaves(exe(c, xs))
    want = jax.tree_util.tree_leaves(jax.jit(f)(c, xs))
    assert len(got) == len(want) == 3
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-4, atol=1e-4)


def test_saved_executable_recreates_the_fft_site_by_name(rng, tmp_path):
    program = fft_program("FFT", (8, 4096), np.complex128, [4096], (8, 4096), np.complex128)
    kiln.compile(program).save(tmp_path / "fft.kx")
    x = sample(rng, (8, 4096), np.complex128)
    loaded = kiln.load_executable(tmp_path / "fft.kx")
    assert relative_error(loaded(x)[0], np.fft.fft(x)) < 1e-12
    assert [t.target for t in loaded.thunks() if t.kind == "custom-call"] == ["kiln.fft"]
    # A fresh process knows kiln.fft by name once kiln is imported: no registration needed.
    np.save(tmp_path / "x.npy", x)
    script = ("import numpy as np, kiln\n"
              f"x = np.load({str(tmp_path / 'x.npy')!r})\n"
              f"y = kiln.load_executable({str(tmp_path / 'fft.kx')!r})(x)[0]\n"
              "print(np.max(np.abs(y - np.fft.fft(x))) / np.max(np.abs(np.fft.fft(x))))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout.split()[-1]) < 1e-12


def test_the_target_checks_its_call():
    x = np.ones((2, 8), np.complex64)
    out = np.empty_like(x)
    with pytest.raises(CustomCallError, match="unknown fft_type 'DCT'"):
        library.fft_target([out], [x], attributes={"fft_type": "DCT", "fft_length": [8]})
    with pytest.raises(CustomCallError, match="one operand and one result"):
        library.fft_target([out], [x, x], attributes={"fft_type": "FFT", "fft_length": [8]})
    library.fft_target([out], [x], attributes={"fft_type": b"FFT", "fft_length": np.array([8])})
    np.testing.assert_allclose(out, np.fft.fft(x), atol=1e-5)
