"""Cumulative reductions (jnp.cumsum & co) run as linear scans (lowering/legalize/scans.py)
and agree with JAX."""
from __future__ import annotations

import re

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
    "4-D reverse cumprod": (lambda x: lax.cumprod(x, axis=1, reverse=True),
                            R.uniform(0.8, 1.2, (2, 7, 3, 5)).astype(np.float32)),
    "unit dims around": (lambda x: jnp.cumsum(x, axis=1), R.standard_normal((1, 37, 1)).astype(np.float32)),
    "unsigned wraps": (lambda x: jnp.cumsum(x, dtype=np.uint32),
                       np.full(9, 2**31 - 5, np.uint32)),
    "int8 cummax": (lambda x: lax.cummax(x, axis=0), R.integers(-100, 100, (40, 6)).astype(np.int8)),
    "bf16 cumsum": (lambda x: jnp.cumsum(x, axis=-1), R.standard_normal((3, 20)).astype(jnp.bfloat16)),
    "NaN propagates through cummax": (lambda x: lax.cummax(x), np.array([1, np.nan, 3, 2], np.float32)),
}


@pytest.mark.parametrize("name", CASES)
def test_cumulative_reductions_are_scans_and_match_jax(name):
    f, x = CASES[name]
    exe = kiln.compile(bytes(jax.export.export(jax.jit(f))(x).serialize()))
    assert "stablehlo.reduce_window" not in exe.ir("legalize")
    (got,) = exe(x) if isinstance(exe(x), tuple) else (exe(x),)
    want = np.asarray(jax.jit(f)(x))
    if x.dtype == jnp.bfloat16:
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-2,
                                   atol=5e-2)
    elif x.dtype.kind == "f":
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


def _codegen(f, x):
    return kiln.compile(bytes(jax.export.export(jax.jit(f))(x).serialize())).ir("codegen")


def test_a_scan_along_the_last_axis_keeps_its_running_value_in_a_register():
    # One loop per row (the rows are independent), the running sum carried as an f32: no
    # buffer per step (before: a 0-d buffer allocated and a 1-element copy per step, 230 ns).
    ir = _codegen(lambda x: jnp.cumsum(x, axis=1), np.zeros((64, 128), np.float32))
    assert re.search(r"scf\.for %\w+ = %c0 to %c128 step %c1 iter_args\(%\w+ = %cst\) -> \(f32\)", ir)
    assert "memref<f32>" not in ir and "memref<1xf32>" not in ir


def test_a_scan_along_a_leading_axis_reads_the_previous_output_row():
    # Dimensions after the scanned one: each output row is the previous output row combined
    # with the next input row, in an innermost loop over the row (LLVM vectorizes it).
    ir = _codegen(lambda x: jnp.cumsum(x, axis=0), np.zeros((64, 128), np.float32))
    step = re.search(r"scf\.for (%\w+) = %c1 to %c64 step %c1 \{\n(?:.*kiln_check_interrupt.*\n)?"
                     r"\s*(%\w+) = arith\.subi \1, %c1 : index\n"
                     r"\s*scf\.for (%\w+) = %c0 to %c128 step %c1 \{\n"
                     r"\s*%\w+ = memref\.load (%\w+)\[\2, \3\]", ir)
    assert step and step.group(4) != "%arg0", ir
    assert "memref<f32>" not in ir
