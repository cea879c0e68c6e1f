"""The GPU target on a real device, over the CUDA driver (runtime/cuda.py). The tests that
need a device skip with "no CUDA device" where there is none (the only skip); the rest check
that a machine without one compiles GPU programs and fails calls with a one-line error."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

import kiln
from kiln.errors import KilnError
from kiln.runtime.cuda import no_device_reason

NO_DEVICE = no_device_reason()
needs_device = pytest.mark.skipif(NO_DEVICE is not None, reason=str(NO_DEVICE))


def program(f, *args) -> bytes:
    return export.export(jax.jit(f))(*[jax.ShapeDtypeStruct(a.shape, a.dtype)
                                       for a in args]).serialize()


def softmax_and_sum(x, w):
    h = x @ w
    return jax.nn.softmax(h, axis=-1), jnp.tanh(h).sum()


@needs_device
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_real_gpu_matches_emulator_and_numpy(arch):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((32, 64), np.float32)
    w = rng.standard_normal((64, 48), np.float32)
    source = program(softmax_and_sum, x, w)
    on_gpu = kiln.compile(source, target="gpu", gpu_arch=arch)(x, w)
    emulated = kiln.compile(source, target="gpu-emulator")(x, w)
    want = softmax_and_sum(x, w)
    for g, e, w_ in zip(on_gpu, emulated, want):
        np.testing.assert_allclose(g, np.asarray(w_), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)


def test_without_a_device_compiles_and_calls_fail_in_one_line():
    if NO_DEVICE is None:
        pytest.skip("a CUDA device is present: the no-device path cannot be observed")
    x = np.ones((4, 4), np.float32)
    exe = kiln.compile(program(lambda x: x * 2, x), target="gpu")  # no device needed yet
    with pytest.raises(KilnError) as info:
        exe(x)
    assert info.value.message.startswith("no CUDA device")
    assert "gpu-emulator" in info.value.hint and "\n" not in str(info.value)
