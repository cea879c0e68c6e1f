"""JAX's CPU LAPACK custom-call targets (kiln/runtime/lapack.py), called directly the way the
custom-call machinery calls them: operands and results as numpy arrays shaped like the op's
types (batch dimensions leading, column-major buffers as JAX's layouts ask), attributes as
JAX's ui8 character codes. Results are compared with jax.lax.linalg, which runs the same
LAPACK routines through jaxlib, and with the defining identities."""
from __future__ import annotations

import numpy as np
import pytest

from kiln.errors import CustomCallError, KilnError
from kiln.runtime import lapack

jax = pytest.importorskip("jax")
from jax import lax  # noqa: E402

pytestmark = pytest.mark.usefixtures("jax_x64")  # float64 references


# geqrf is not re-exported by jax.lax.linalg; it is the primitive JAX's qr lowers through.
_linalg = __import__("jax._src.lax.linalg", fromlist=["x"])  # geqrf, geqp3: not re-exported
_geqrf = getattr(lax.linalg, "geqrf", None) or _linalg.geqrf

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
# Each comparison with jax compiles a program: the other routines sweep a real and a complex type.
SOME = [np.float32, np.complex128]
TOL = {np.float32: 2e-4, np.float64: 1e-10, np.complex64: 2e-4, np.complex128: 1e-10}
L, U, N, T, C, V, A, S, R = (ord(c) for c in "LUNTCVASR")


def rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def spd(rng, n, dtype, batch=()):
    x = rand(rng, batch + (n, n), dtype)
    return (x @ np.conj(np.swapaxes(x, -1, -2)) + n * np.eye(n)).astype(dtype)


def fortran(a):
    """The logical array with column-major matrices: what JAX's [0, 1] layouts hand over."""
    out = np.empty(a.shape[:-2] + a.shape[:-3:-1], a.dtype).swapaxes(-1, -2)
    out[...] = a
    return out


def empty_like(a, shape=None, dtype=None):
    return fortran(np.zeros(shape or a.shape, dtype or a.dtype)) if len(shape or a.shape) >= 2 \
        else np.zeros(shape or a.shape, dtype or a.dtype)


def close(x, y, dtype):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=TOL[dtype], atol=TOL[dtype] * 10)


def test_every_jax_target_name_is_registered():
    names = lapack.targets()
    for t in "sdcz":
        for r in ("potrf", "getrf", "trsm", "geqrf", "syevd" if t in "sd" else "heevd",
                  "orgqr" if t in "sd" else "ungqr", "gesdd", "gesvd"):
            assert f"lapack_{t}{r}_ffi" in names

    calls = []

    class Registry:
        def register_custom_call(self, name, fn, platform, api_version):
            calls.append((name, fn, platform, api_version))
    assert sorted(lapack.register_lapack_targets(Registry())) == sorted(names)
    assert {(p, v) for _, _, p, v in calls} == {("cpu", 4)}
    assert all(names[n] is f for n, f, _, _ in calls)
    # Built in: importing kiln registers them with the default registry.
    from kiln.runtime.custom_call import REGISTRY
    assert REGISTRY.lookup("lapack_spotrf_ffi").function.__wrapped__ is lapack.potrf
    with pytest.raises(KilnError, match="register_custom_call"):
        lapack.register_lapack_targets(object())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uplo", [L, U])
def test_potrf_matches_jax_cholesky(rng, dtype, uplo):
    a = fortran(spd(rng, 4, dtype, (2,)))
    out, info = empty_like(a), np.zeros((2,), np.int32)
    lapack.potrf([out, info], [a], attributes={"uplo": np.uint8(uplo)})
    assert (info == 0).all()
    want = np.asarray(lax.linalg.cholesky(a, symmetrize_input=False))
    if uplo == L:
        close(np.tril(out), want, dtype)
        np.testing.assert_array_equal(np.triu(out, 1), np.triu(a, 1))  # other triangle untouched
    else:
        close(np.triu(out), np.conj(np.swapaxes(want, -1, -2)), dtype)


def test_potrf_reports_not_positive_definite():
    a = fortran(np.array([[1.0, 2.0], [2.0, 1.0]], np.float64))
    out, info = empty_like(a), np.zeros((), np.int32)
    lapack.potrf([out, info], [a], attributes={"uplo": "L"})
    assert info == 2  # the leading minor of order 2 is not positive definite


@pytest.mark.parametrize("dtype", SOME)
@pytest.mark.parametrize("shape", [(2, 4, 4), (5, 3), (3, 5)])
def test_getrf_matches_jax_lu(rng, dtype, shape):
    a = fortran(rand(rng, shape, dtype))
    k = min(shape[-2:])
    lu, ipiv, info = empty_like(a), np.zeros(shape[:-2] + (k,), np.int32), np.zeros(shape[:-2], np.int32)
    lapack.getrf([lu, ipiv, info], [a], attributes={})
    want_lu, want_piv, _ = lax.linalg.lu(a)
    close(lu, want_lu, dtype)
    np.testing.assert_array_equal(ipiv - 1, want_piv)  # LAPACK's 1-based pivots
    assert (info == 0).all()


def test_getrf_singular_sets_info():
    a = fortran(np.array([[1.0, 2.0], [2.0, 4.0]]))
    lu, ipiv, info = empty_like(a), np.zeros(2, np.int32), np.zeros((), np.int32)
    lapack.getrf([lu, ipiv, info], [a], attributes={})
    assert info == 2 and lu[1, 1] == 0.0


@pytest.mark.parametrize("dtype", SOME)
@pytest.mark.parametrize("side,uplo,trans,diag", [
    (L, L, N, N), (L, U, T, U), (R, L, C, N), (R, U, N, U)])
def test_trsm_matches_jax_triangular_solve(rng, dtype, side, uplo, trans, diag):
    m, n = (4, 3) if side == L else (3, 4)
    k = 4
    a = fortran(rand(rng, (2, k, k), dtype) + 3 * np.eye(k, dtype=dtype))
    b = fortran(rand(rng, (2, m, n), dtype))
    x = empty_like(b)
    lapack.trsm([x], [a, b], attributes={"side": side, "uplo": uplo, "trans_x": trans, "diag": diag})
    want = lax.linalg.triangular_solve(a, b, left_side=side == L, lower=uplo == L,
                                       transpose_a=trans != N, conjugate_a=trans == C,
                                       unit_diagonal=diag == U)
    close(x, want, dtype)


@pytest.mark.parametrize("dtype", SOME)
@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 3), (3, 5)])
def test_geqrf_and_orgqr_match_jax(rng, dtype, shape):
    a = fortran(rand(rng, shape, dtype))
    k = min(shape[-2:])
    qr, tau = empty_like(a), np.zeros(shape[:-2] + (k,), dtype)
    lapack.geqrf([qr, tau], [a], attributes={})
    want_qr, want_tau = _geqrf(a)
    close(qr, want_qr, dtype)
    close(tau, want_tau, dtype)
    # JAX passes orgqr the first min(m, n) columns (its reduced-mode Q).
    panel = fortran(np.ascontiguousarray(qr[..., :k]))
    q = empty_like(panel)
    lapack.orgqr([q], [panel, tau], attributes={})
    close(q, lax.linalg.householder_product(panel, tau), dtype)
    r = np.triu(qr)[..., :k, :]
    close(q @ r, a, dtype)


@pytest.mark.parametrize("dtype", SOME)
@pytest.mark.parametrize("uplo", [L, U])
def test_syevd_matches_jax_eigh(rng, dtype, uplo):
    x = rand(rng, (2, 4, 4), dtype)
    a = fortran(x + np.conj(np.swapaxes(x, -1, -2)))
    real = np.float32 if dtype in (np.float32, np.complex64) else np.float64
    v, w, info = empty_like(a), np.zeros((2, 4), real), np.zeros((2,), np.int32)
    lapack.syevd([v, w, info], [a], attributes={"mode": V, "uplo": uplo})
    want_v, want_w = lax.linalg.eigh(a, lower=uplo == L, symmetrize_input=False)
    close(w, want_w, dtype)
    assert (info == 0).all()
    close(a @ v, v * w[..., None, :], dtype)  # eigenvectors, whatever their phase
    lapack.syevd([v, w, info], [a], attributes={"mode": N, "uplo": uplo})
    close(w, want_w, dtype)


@pytest.mark.parametrize("routine", ["gesdd", "gesvd"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,mode", [((4, 4), A), ((2, 5, 3), A), ((3, 5), S), ((5, 3), S),
                                        ((3, 4), N)])
def test_svd_targets_match_jax_svd(rng, routine, dtype, shape, mode):
    a = fortran(rand(rng, shape, dtype))
    m, n = shape[-2:]
    k = min(m, n)
    batch = shape[:-2]
    real = np.float32 if dtype in (np.float32, np.complex64) else np.float64
    um, vn = (m, n) if mode == A else (k, k)
    a_out, s = empty_like(a), np.zeros(batch + (k,), real)
    u, vt = empty_like(a, batch + (m, um)), empty_like(a, batch + (vn, n))
    info = np.zeros(batch, np.int32)
    getattr(lapack, routine)([a_out, s, u, vt, info], [a], attributes={"mode": mode})
    close(s, np.linalg.svd(a, compute_uv=False), dtype)
    assert (info == 0).all()
    if mode != N:
        close((u[..., :, :k] * s[..., None, :]) @ vt[..., :k, :], a, dtype)
        close(np.conj(np.swapaxes(u, -1, -2)) @ u, np.broadcast_to(np.eye(um), u.shape[:-2] + (um, um)), dtype)


def test_targets_accept_c_ordered_views_too(rng):
    a = spd(rng, 3, np.float64)
    out_f, out_c, info = empty_like(a), np.zeros_like(a), np.zeros((), np.int32)
    lapack.potrf([out_f, info], [fortran(a)], attributes={"uplo": L})
    lapack.potrf([out_c, info], [a], attributes={"uplo": L})
    np.testing.assert_array_equal(out_f, out_c)


def test_empty_matrices():
    a = np.zeros((0, 0), np.float32)
    v, w, info = np.zeros((0, 0), np.float32), np.zeros((0,), np.float32), np.zeros((), np.int32)
    lapack.syevd([v, w, info], [a], attributes={"mode": V, "uplo": L})
    b = np.zeros((3, 0), np.float32)
    x = np.zeros((3, 0), np.float32)
    lapack.trsm([x], [np.eye(3, dtype=np.float32), b], attributes={"side": L, "uplo": L,
                                                                    "trans_x": N, "diag": N})
    assert x.shape == (3, 0)


def test_bad_calls_are_clear_errors():
    a = np.eye(2, dtype=np.float32)
    with pytest.raises(CustomCallError, match="potrf takes 1 operand"):
        lapack.potrf([a], [a], attributes={"uplo": L})
    with pytest.raises(CustomCallError, match="no int32 routines"):
        lapack.potrf([a.astype(np.int32), np.zeros((), np.int32)], [a.astype(np.int32)],
                     attributes={"uplo": L})
    with pytest.raises(CustomCallError, match="mode 'O'"):
        lapack.gesdd([a, a[0], a, a, np.zeros((), np.int32)], [a], attributes={"mode": ord("O")})


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_batched_linear_algebra_end_to_end(rng, dtype):
    """JAX's own lowering of batched solve / eigvalsh / cholesky runs on these targets."""
    import kiln
    import jax.numpy as jnp

    def f(a, b):
        return jnp.linalg.solve(a, b), jnp.linalg.eigvalsh(a), jnp.linalg.cholesky(a)
    a, b = spd(rng, 3, dtype, (2,)), rand(rng, (2, 3, 2), dtype)
    got = kiln.jit(f)(a, b)
    for g, w in zip(got, jax.jit(f)(a, b)):
        assert g.dtype == w.dtype
        close(g, w, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_operands_of_one_shape_reach_the_target_apart(rng, dtype):
    """Two column-major operands of the same shape (a square right-hand side) each reach the
    target as their own buffer: both once landed in the result's buffer, so trsm read B for A
    (JAX's linalg_test testQr, the jvp of a QR, found it)."""
    import kiln
    import jax.numpy as jnp

    def qr_and_mul(a):
        q, r = jnp.linalg.qr(a, mode="complete")
        return q @ r
    programs = [  # each on its own: the solve's result is the program's
        lambda r, b: lax.linalg.triangular_solve(r, b, left_side=True, lower=False),
        lambda r, b: lax.linalg.triangular_solve(r.T, b, left_side=False, lower=True,
                                                 transpose_a=True, conjugate_a=True),
        lambda r, b: jax.jvp(qr_and_mul, (b,), (r,))[1],
    ]
    r = np.triu(rand(rng, (3, 3), dtype)) + 3 * np.eye(3, dtype=dtype)
    b = rand(rng, (3, 3), dtype)
    for f in programs:
        close(kiln.jit(f)(r, b), jax.jit(f)(r, b), dtype)


# -- the rest of jaxlib's CPU targets: eig, Schur, Hessenberg, tridiagonal, gtsv, geqp3, ormqr ----
def test_every_jaxlib_cpu_lapack_target_is_built_in():
    """Kiln's table covers jaxlib's own registrations (the names XLA:CPU links)."""
    from jaxlib.cpu import _lapack
    assert set(_lapack.registrations()) <= set(lapack.targets())


@pytest.mark.parametrize("dtype", DTYPES)
def test_geev_matches_jax_eig(rng, dtype):
    a = fortran(rand(rng, (2, 4, 4), dtype))
    cplx = np.result_type(dtype, np.complex64)
    real = np.dtype(dtype).kind == "f"
    w_parts = [np.zeros((2, 4), dtype) for _ in range(2 if real else 1)]
    vl, vr, info = empty_like(a, dtype=cplx), empty_like(a, dtype=cplx), np.zeros(2, np.int32)
    lapack.geev([*w_parts, vl, vr, info], [a], attributes={"compute_left": V, "compute_right": V})
    w = w_parts[0] + 1j * w_parts[1] if real else w_parts[0]
    want_w, want_vl, want_vr = lax.linalg.eig(a, compute_left_eigenvectors=True)
    assert (info == 0).all()
    close(w, want_w, dtype)
    close(vr, want_vr, dtype)  # the same LAPACK routine: the same normalization and phase
    close(vl, want_vl, dtype)
    close(a @ vr, vr * w[..., None, :], dtype)


@pytest.mark.parametrize("dtype", SOME)
def test_gees_matches_jax_schur(rng, dtype):
    a = fortran(rand(rng, (3, 3), dtype))
    real = np.dtype(dtype).kind == "f"
    t, vs = empty_like(a), empty_like(a)
    w_parts = [np.zeros(3, dtype) for _ in range(2 if real else 1)]
    sdim, info = np.zeros((), np.int32), np.zeros((), np.int32)
    lapack.gees([t, vs, *w_parts, sdim, info], [a], attributes={"mode": V, "sort": N})
    want_t, want_vs = lax.linalg.schur(a)
    assert info == 0
    close(t, want_t, dtype)
    close(vs, want_vs, dtype)
    close(vs @ t @ np.conj(vs.T), a, dtype)
    with pytest.raises(CustomCallError, match="sorting"):
        lapack.gees([t, vs, *w_parts, sdim, info], [a], attributes={"mode": V, "sort": ord("S")})


@pytest.mark.parametrize("dtype", SOME)
def test_gehrd_matches_jax_hessenberg(rng, dtype):
    a = fortran(rand(rng, (2, 4, 4), dtype))
    h, tau, info = empty_like(a), np.zeros((2, 3), dtype), np.zeros(2, np.int32)
    lapack.gehrd([h, tau, info], [a], attributes={"low": np.int32(1), "high": np.int32(4)})
    want_h, want_tau = lax.linalg.hessenberg(a)
    close(h, want_h, dtype)
    close(tau, want_tau, dtype)
    assert (info == 0).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uplo", [L, U])
def test_sytrd_matches_jax_tridiagonal(rng, dtype, uplo):
    x = rand(rng, (4, 4), dtype)
    a = fortran(x + np.conj(x.T))
    real = np.finfo(dtype).dtype
    out, d, e = empty_like(a), np.zeros(4, real), np.zeros(3, real)
    tau, info = np.zeros(3, dtype), np.zeros((), np.int32)
    lapack.sytrd([out, d, e, tau, info], [a], attributes={"uplo": uplo})
    for got, want in zip((out, d, e, tau), lax.linalg.tridiagonal(a, lower=uplo == L)):
        close(got, want, dtype)
    assert info == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_gtsv_matches_jax_tridiagonal_solve(rng, dtype):
    m = 5
    dl, d, du = rand(rng, (3, m), dtype), rand(rng, (3, m), dtype) + 4, rand(rng, (3, m), dtype)
    dl[:, 0], du[:, -1] = 0, 0
    b = fortran(rand(rng, (3, m, 2), dtype))
    outs = [np.zeros_like(dl), np.zeros_like(d), np.zeros_like(du), empty_like(b),
            np.zeros(3, np.int32)]
    lapack.gtsv(outs, [dl, d, du, b], attributes={})
    close(outs[3], lax.linalg.tridiagonal_solve(dl, d, du, b), dtype)
    assert (outs[4] == 0).all()
    singular = [np.zeros(m, dtype), np.zeros(m, dtype), np.zeros(m, dtype), fortran(b[0])]
    outs = [np.zeros(m, dtype)] * 3 + [empty_like(b[0]), np.zeros((), np.int32)]
    lapack.gtsv(outs, singular, attributes={})
    assert outs[4] == 1  # U(1, 1) is exactly zero: JAX turns the result into NaNs


@pytest.mark.parametrize("dtype", SOME)
def test_tridiagonal_solve_perturbed_matches_jax(rng, dtype):
    m = 6
    dl, d, du = rand(rng, (2, m), dtype), rand(rng, (2, m), dtype), rand(rng, (2, m), dtype)
    dl[:, 0], du[:, -1] = 0, 0
    d[1, :] = 0  # a singular matrix too: its tiny pivots are perturbed, not divided by
    du[1, :-1], dl[1, 1:] = 1, 1
    b = fortran(rand(rng, (2, m, 3), dtype))
    x = empty_like(b)
    lapack.tridiagonal_solve_perturbed([x], [dl, d, du, b], attributes={})
    want = lax.linalg.tridiagonal_solve(dl, d, du, b, perturb_singular=True)
    close(x[0], want[0], dtype)
    assert np.isfinite(x[1]).all()
    np.testing.assert_allclose(np.asarray(x[1]), np.asarray(want[1]), rtol=1e-3)


@pytest.mark.parametrize("dtype", SOME)
@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3)])
def test_geqp3_matches_jax_pivoted_qr(rng, dtype, shape):
    a = fortran(rand(rng, shape, dtype))
    k = min(shape)
    out, jpvt, tau = empty_like(a), np.zeros(shape[1], np.int32), np.zeros(k, dtype)
    lapack.geqp3([out, jpvt, tau], [a, np.zeros(shape[1], np.int32)], attributes={})
    want_a, want_p, want_tau = _linalg.geqp3(a, np.zeros(shape[1], np.int32))
    np.testing.assert_array_equal(jpvt, want_p)  # both 1-based
    close(out, want_a, dtype)
    close(tau, want_tau, dtype)
    with pytest.raises(CustomCallError, match="jpvt"):
        lapack.geqp3([out, jpvt, tau], [a, np.ones(shape[1], np.int32)], attributes={})


@pytest.mark.parametrize("dtype", SOME)
@pytest.mark.parametrize("left,transpose", [(True, False), (True, True), (False, False),
                                            (False, True)])
def test_ormqr_matches_jax(rng, dtype, left, transpose):
    a = fortran(rand(rng, (4, 3), dtype))
    qr, tau = empty_like(a), np.zeros(3, dtype)
    lapack.geqrf([qr, tau], [a], attributes={})
    c = fortran(rand(rng, (4, 2) if left else (2, 4), dtype))
    out = empty_like(c)
    lapack.ormqr([out], [qr, tau, c], attributes={"left": left, "transpose": transpose})
    close(out, lax.linalg.ormqr(qr, tau, c, left=left, transpose=transpose), dtype)


def test_csr_sparse_dense_products_from_jax_experimental_sparse():
    import kiln
    from jax.experimental import sparse
    rng = np.random.default_rng(5)
    dense = rng.standard_normal((5, 7)).astype(np.float32)
    dense[rng.random((5, 7)) < 0.6] = 0
    m = sparse.BCSR.fromdense(dense)
    for rhs in (rng.standard_normal((7, 3)).astype(np.float32),
                rng.standard_normal(7).astype(np.float32)):
        fn = jax.jit(lambda d, i, p, x: sparse.BCSR((d, i, p), shape=(5, 7)) @ x)
        args = (np.asarray(m.data), np.asarray(m.indices), np.asarray(m.indptr), rhs)
        text = fn.lower(*args).as_text()
        assert "cpu_csr_sparse_dense_ffi" in text
        np.testing.assert_allclose(kiln.compile(text)(*args)[0], np.asarray(fn(*args)),
                                   rtol=1e-5, atol=1e-5)
