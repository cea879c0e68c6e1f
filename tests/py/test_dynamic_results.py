"""Results whose shapes the program computes (JAX's `stablehlo.dynamic_top_k` with a symbolic
k; dynamic result types of inlined callees): static per call shapes, with JAX's values."""
from __future__ import annotations

import jax
import numpy as np
from jax import export, lax
from jax._src.internal_test_util.export_back_compat_test_data import stablehlo_dynamic_top_k

import kiln


def test_jax_compatibility_data_for_dynamic_top_k():
    for data in (stablehlo_dynamic_top_k.data_2023_07_16, stablehlo_dynamic_top_k.data_2023_08_11):
        exe = kiln.compile(data["mlir_module_text"])
        for got, expected in zip(exe(*data["inputs"]), data["expected_outputs"]):
            np.testing.assert_array_equal(got, expected)
        # The serialized form of the same module, too.
        exe = kiln.compile(data["mlir_module_serialized"])
        for got, expected in zip(exe(*data["inputs"]), data["expected_outputs"]):
            np.testing.assert_array_equal(got, expected)


def test_top_k_with_a_symbolic_k_runs_for_each_shape():
    spec = jax.ShapeDtypeStruct(export.symbolic_shape("4, b"), np.float32)
    fn = jax.jit(lambda x: lax.top_k(x, x.shape[1] - 1))
    exe = kiln.compile(bytes(export.export(fn)(spec).serialize()))
    rng = np.random.default_rng(3)
    for b in (3, 6):
        x = rng.standard_normal((4, b)).astype(np.float32)
        values, indices = exe(x)
        expected_values, expected_indices = fn(x)
        assert values.shape == (4, b - 1)
        np.testing.assert_array_equal(values, expected_values)
        np.testing.assert_array_equal(indices, expected_indices)


def test_dynamic_reduce_window_with_constant_windows():
    from jax._src.internal_test_util.export_back_compat_test_data import \
        tpu_stablehlo_dynamic_reduce_window as recorded
    # Recorded on TPU, but a sum whose init value is its identity has one answer everywhere.
    data = recorded.data_unary_2023_06_17
    exe = kiln.compile(data["mlir_module_text"])
    for got, expected in zip(exe(*data["inputs"]), data["expected_outputs"]):
        np.testing.assert_allclose(got, expected)
    x = np.arange(20, dtype=np.float32).reshape(5, 4)  # another size of the symbolic dimension
    np.testing.assert_allclose(exe(x)[0], np.cumsum(x, axis=0))
