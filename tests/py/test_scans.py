"""Cumulative reductions (jnp.cumsum & co) run as linear scans (lowering/legalize/scans.py)
and agree with JAX."""
from __future__ import annotations

import numpy as np
import pytest

import kiln

jax = pytest.importorskip("jax")
jnp = jax.numpy
lax = jax.lax

R = np.random.default_rng(5)
CASES = {
    "cumsum 1-D": (lambda x: jnp.cumsum(x), R.standard_normal(4096).astype(np.float32)),
    "cumsum rows": (lambda x: jnp.cumsum(x, axis=1), R.standard_normal((16, 64)).astype(np.float32)),
    "reverse cumsum": (lambda x: lax.cumsum(x, axis=0, reverse=True),
                       R.standard_normal((33, 5)).astype(np.float32)),
    "cummax": (lambda x: lax.cummax(x, axis=1), R.standard_normal((8, 50)).astype(np.float32)),
    "reverse cummin": (lambda x: lax.cummin(x, axis=1, reverse=True),
                       R.standard_normal((8, 50)).astype(np.float32)),
    "cumprod": (lambda x: jnp.cumprod(x, axis=0), R.uniform(0.9, 1.1, (40, 3)).astype(np.float32)),
    "int cumsum": (lambda x: jnp.cumsum(x), np.arange(-500, 500, dtype=np.int32)),
    "3-D middle axis": (lambda x: jnp.cumsum(x, axis=1), R.standard_normal((2, 9, 4)).astype(np.float32)),
}


@pytest.mark.parametrize("name", CASES)
def test_cumulative_reductions_are_scans_and_match_jax(name):
    f, x = CASES[name]
    exe = kiln.compile(bytes(jax.export.export(jax.jit(f))(x).serialize()))
    assert "stablehlo.reduce_window" not in exe.ir("legalize")
    (got,) = exe(x) if isinstance(exe(x), tuple) else (exe(x),)
    want = np.asarray(jax.jit(f)(x))
    if x.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-4 * np.sqrt(x.size))
    else:
        np.testing.assert_array_equal(got, want)


def test_a_million_element_cumsum():
    # The window lowering did O(n^2) work here (49 s); the scan is one pass. (Timing decides
    # no test: `kiln bench` measures it.)
    x = np.ones(1 << 20, np.float32)
    exe = kiln.compile(bytes(jax.export.export(jax.jit(jnp.cumsum))(x).serialize()))
    got = exe(x)
    got = got[0] if isinstance(got, tuple) else got
    np.testing.assert_array_equal(got[[0, 1, 1023, (1 << 20) - 1]], [1, 2, 1024, 1 << 20])
