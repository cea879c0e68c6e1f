"""What JAX's own export compatibility data uses on CPU: the serialized modules of
jax/_src/internal_test_util/export_back_compat_test_data (LAPACK targets, dynamic top-k and
RNG, shape assertions) run under Kiln with JAX's recorded results; plus shape_assertion,
approx_max_k, dynamic RNG and device-placement annotations from programs exported here."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import kiln

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import export, lax  # noqa: E402

pytestmark = pytest.mark.usefixtures("jax_x64")

_DATA = "jax._src.internal_test_util.export_back_compat_test_data."
# Modules whose recorded results any correct LAPACK reproduces; eig, eigh and schur of the
# singular test matrices have other valid eigen-/Schur vectors, checked by their identities.
EXACT = ["cpu_cholesky_lapack_potrf", "cpu_hessenberg_lapack_gehrd", "cpu_lu_lapack_getrf",
         "cpu_qr_lapack_geqrf", "cpu_svd_lapack_gesdd", "cpu_triangular_solve_blas_trsm",
         "cpu_tridiagonal_lapack_sytrd_hetrd", "cpu_tridiagonal_solve_lapack_gtsv",
         "stablehlo_dynamic_approx_top_k", "stablehlo_dynamic_rng_bit_generator"]


def _entries(module_name):
    module = importlib.import_module(_DATA + module_name)
    for name, value in sorted(vars(module).items()):
        if not isinstance(value, dict) or not name.startswith("data_"):
            continue
        items = [(name, value)] if "mlir_module_serialized" in value else \
            [(f"{name}[{k}]", v) for k, v in sorted(value.items())]
        for label, data in items:
            if data.get("platform", "cpu") == "cpu":
                yield label, data


def _tolerance(array):
    return 1e-4 if np.asarray(array).dtype in (np.float32, np.complex64) else 1e-10


def _run(data):
    outputs = kiln.compile(data["mlir_module_serialized"])(*data["inputs"])
    expected = data["expected_outputs"]
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        assert got.shape == np.shape(want) and got.dtype == np.asarray(want).dtype
    return outputs, expected


@pytest.mark.parametrize("module_name", EXACT)
def test_compatibility_data_runs_with_jax_results(module_name):
    entries = list(_entries(module_name))
    assert entries
    for label, data in entries:
        outputs, expected = _run(data)
        for got, want in zip(outputs, expected):
            tol = _tolerance(want)
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 10,
                                       err_msg=f"{module_name} {label}")


def test_compatibility_data_of_eig_eigh_and_schur():
    """Recorded eigen-/Schur vectors are one valid choice: check the decompositions."""
    for label, data in _entries("cpu_eig_lapack_geev"):
        (w, vl, vr), _ = _run(data)
        a = np.arange(16, dtype=vr.dtype).reshape(4, 4)
        tol = _tolerance(vr) * 100
        np.testing.assert_allclose(a @ vr, vr * w, atol=tol * 40, err_msg=label)
        np.testing.assert_allclose(np.sort_complex(w), np.sort_complex(data["expected_outputs"][0]),
                                   atol=tol * 40, err_msg=label)
    for label, data in _entries("cpu_eigh_lapack_syev"):
        (v, w), (_, want_w) = _run(data)
        np.testing.assert_allclose(w, want_w, atol=_tolerance(w) * 1e3, err_msg=label)
    for label, data in _entries("cpu_schur_lapack_gees"):
        (t, vs), _ = _run(data)
        a = np.arange(16, dtype=t.dtype).reshape(4, 4)
        np.testing.assert_allclose(vs @ t @ np.conj(vs.T), a, atol=_tolerance(t) * 1e3,
                                   err_msg=label)


def test_shape_assertion_passes_and_fails_with_jax_message():
    spec = jax.ShapeDtypeStruct(export.symbolic_shape("b, 4"), np.float32)
    exp = export.export(jax.jit(lambda x: jnp.sum(x, axis=0) * x.shape[0]))(spec)
    exe = kiln.compile(exp.mlir_module_serialized)  # the raw module: the assertion decides
    (out,) = exe(np.ones((3, 4), np.float32))
    np.testing.assert_array_equal(out, np.full(4, 9, np.float32))
    with pytest.raises(kiln.KilnError) as failure:
        exe(np.ones((0, 4), np.float32))
    message = str(failure.value)
    assert "Expected value >= 1 for dimension variable 'b'" in message
    assert "'b' = 0 from specification 'b'" in message  # {0} formatted with the argument


def test_shape_assertion_target_decides_at_run_time():
    from kiln.runtime import jax_checks
    jax_checks.shape_assertion([], [np.bool_(True), np.int32(3)], backend_config="b = {0}")
    with pytest.raises(kiln.KilnError, match=r"^b = 0 must be >= 1"):
        jax_checks.shape_assertion([], [np.bool_(False), np.int32(0)],
                                   backend_config="b = {0} must be >= 1")
    from kiln.runtime.custom_call import REGISTRY
    assert REGISTRY.lookup("shape_assertion").function is jax_checks.shape_assertion


def test_approx_max_k_and_min_k_match_jax(rng):
    x = rng.standard_normal((3, 50)).astype(np.float32)

    def f(x):
        return lax.approx_max_k(x, 5), lax.approx_min_k(x, 2, reduction_dimension=0)
    for got, want in zip(jax.tree_util.tree_leaves(kiln.jit(f)(x)),
                         jax.tree_util.tree_leaves(jax.jit(f)(x))):
        np.testing.assert_array_equal(got, np.asarray(want))


def test_device_placement_annotations_are_no_ops(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)

    def f(x):
        y = jax.device_put(x * 2, jax.memory.Space.Host)
        return jax.device_put(y + 1, jax.memory.Space.Device) * 3
    text = jax.jit(f).lower(x).as_text()
    np.testing.assert_allclose(kiln.jit(f)(x), (x * 2 + 1) * 3, rtol=1e-6)
    for target in ("annotate_device_placement", "Sharding"):
        module = f"""
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {{
  %0 = stablehlo.custom_call @{target}(%x) {{has_side_effect = true,
         mhlo.frontend_attributes = {{_xla_buffer_placement = "pinned_host"}}}}
       : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}}"""
        np.testing.assert_array_equal(kiln.compile(module)(x)[0], x)
    assert "memory_kind" in text or "annotate_device_placement" in text
