"""triangular_solve and cholesky against numpy/scipy: every variant, batches, complex, garbage
in the ignored triangle, non-positive-definite input (NaN, as XLA), empty."""
import itertools

import numpy as np
import pytest
import scipy.linalg

import kiln
from conftest import INTERPRET, assert_checks_pass, shared_file

ELEM = {np.float32: "f32", np.float64: "f64", np.complex64: "complex<f32>", np.complex128: "complex<f64>"}


def _t(shape, e):
    return "tensor<" + "".join(f"{d}x" for d in shape) + e + ">"


def solve(a, b, left, lower, unit, transpose):
    e = ELEM[a.dtype.type]
    ta, tb = _t(a.shape, e), _t(b.shape, e)
    src = (f"func.func @main(%a: {ta}, %b: {tb}) -> {tb} {{\n"
           f'  %0 = "stablehlo.triangular_solve"(%a, %b) {{left_side = {str(left).lower()}, '
           f"lower = {str(lower).lower()}, unit_diagonal = {str(unit).lower()}, "
           f"transpose_a = #stablehlo<transpose {transpose}>}} : ({ta}, {tb}) -> {tb}\n"
           f"  return %0 : {tb}\n}}")
    return kiln.compile(src)(a, b)[0]


def reference_solve(a, b, left, lower, unit, transpose):
    tri = np.tril(a) if lower else np.triu(a)
    if unit:
        tri = tri - np.diag(np.diag(tri)) + np.eye(a.shape[-1])
    op = {"NO_TRANSPOSE": tri, "TRANSPOSE": tri.T, "ADJOINT": np.conj(tri.T)}[transpose]
    return np.linalg.solve(op, b) if left else np.linalg.solve(op.T, b.T).T


def _matrix(rng, n, dtype):
    a = rng.standard_normal((n, n)) + 4 * np.eye(n)  # well conditioned
    if np.iscomplexobj(np.zeros(1, dtype)):
        a = a + 1j * rng.standard_normal((n, n))
    return a.astype(dtype)


@pytest.mark.parametrize("left,lower,unit,transpose", list(itertools.product(
    [True, False], [True, False], [True, False], ["NO_TRANSPOSE", "TRANSPOSE"])))
def test_triangular_solve_variants(rng, left, lower, unit, transpose):
    a = _matrix(rng, 5, np.float64)
    a[np.triu_indices(5, 1) if lower else np.tril_indices(5, -1)] = np.nan  # never read
    if unit:
        np.fill_diagonal(a, np.nan)  # never read either
    b = rng.standard_normal((5, 3) if left else (3, 5))
    got = solve(a, b, left, lower, unit, transpose)
    want = reference_solve(np.nan_to_num(a), b, left, lower, unit, transpose)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("transpose", ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"])
def test_triangular_solve_complex_batched(rng, transpose):
    a = np.stack([_matrix(rng, 4, np.complex64) for _ in range(3)])
    b = (rng.standard_normal((3, 4, 2)) + 1j * rng.standard_normal((3, 4, 2))).astype(np.complex64)
    got = solve(a, b, True, True, False, transpose)
    want = np.stack([reference_solve(a[i].astype(np.complex128), b[i], True, True, False, transpose)
                     for i in range(3)])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_triangular_solve_matches_scipy_f32_batched_right(rng):
    a = np.stack([_matrix(rng, 8, np.float32) for _ in range(2)])
    b = rng.standard_normal((2, 10, 8)).astype(np.float32)
    got = solve(a, b, False, False, False, "NO_TRANSPOSE")
    want = np.stack([scipy.linalg.solve_triangular(a[i].T.astype(np.float64), b[i].T.astype(np.float64),
                                                   lower=True).T for i in range(2)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_triangular_solve_empty(rng):
    a = np.zeros((0, 3, 3), np.float32)
    b = np.zeros((0, 3, 2), np.float32)
    assert solve(a, b, True, True, False, "NO_TRANSPOSE").shape == (0, 3, 2)


def cholesky(a, lower):
    t = _t(a.shape, ELEM[a.dtype.type])
    src = (f"func.func @main(%a: {t}) -> {t} {{\n"
           f'  %0 = "stablehlo.cholesky"(%a) {{lower = {str(lower).lower()}}} : ({t}) -> {t}\n'
           f"  return %0 : {t}\n}}")
    return kiln.compile(src)(a)[0]


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-6), (np.float64, 1e-14),
                                       (np.complex64, 2e-6), (np.complex128, 1e-14)])
@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_batched(rng, dtype, tol, lower):
    x = rng.standard_normal((2, 3, 5, 5))
    if np.iscomplexobj(np.zeros(1, dtype)):
        x = x + 1j * rng.standard_normal(x.shape)
    a = x @ np.conj(np.swapaxes(x, -1, -2)) + 5 * np.eye(5)
    want = np.linalg.cholesky(a)
    if not lower:
        want = np.conj(np.swapaxes(want, -1, -2))
    garbage = a.copy()
    idx = np.triu_indices(5, 1) if lower else np.tril_indices(5, -1)
    garbage[..., idx[0], idx[1]] = 1e6  # the other triangle is never read
    got = cholesky(garbage.astype(dtype), lower)
    assert np.max(np.abs(got - want)) / np.max(np.abs(want)) < tol
    other = np.triu_indices(5, 1) if lower else np.tril_indices(5, -1)
    assert np.all(got[..., other[0], other[1]] == 0)


def test_cholesky_not_positive_definite_is_nan_per_matrix():
    a = np.stack([np.array([[1.0, 2.0], [2.0, 1.0]]), np.array([[4.0, 2.0], [2.0, 5.0]])]).astype(np.float32)
    got = cholesky(a, True)
    assert np.isnan(got[0]).all()
    np.testing.assert_allclose(got[1], [[2.0, 0.0], [1.0, 2.0]])
    assert np.isnan(cholesky(np.array([[-1.0]]), True)).all()


@pytest.mark.parametrize("name", ["triangular_solve_bfloat16_4_4_bfloat16_4_1.mlir"])
def test_conformance_files(name):
    assert_checks_pass(name)


def test_interpret_suite_triangular_solve():
    from kiln.conformance import run_file
    result = run_file(str(shared_file("triangular_solve.mlir", INTERPRET)))
    assert result.passed and len(result.cases) == 27, result.detail
