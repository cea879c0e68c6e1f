"""JAX's CPU linear-algebra custom calls (typed FFI, `lapack_<t><routine>_ffi`) over scipy's
LAPACK and BLAS.

JAX lowers cholesky, lu, triangular_solve, qr, eigh and svd on CPU to these targets (see
`jax.jit(jnp.linalg.cholesky).lower(x).as_text()`); XLA links them from jaxlib. Kiln runs the
same LAPACK routines through scipy.linalg.lapack / scipy.linalg.blas: nothing here factorizes
by hand.

ABI, as JAX emits it (jaxlib/cpu/lapack_kernels.cc):
  * every target is `fn(results, operands, *, attributes, backend_config)`; operands and
    results are numpy arrays indexed by the op's logical shape; results are filled in place;
  * matrices are the two minor dimensions, any leading dimensions are batch dimensions
    (`num_batch_dims`); JAX asks for column-major buffers (`operand_layouts = [0, 1]`), which
    is how LAPACK stores them. The logical values are what count here: scipy hands LAPACK a
    Fortran-ordered copy when the view is not one already, so a C- or F-strided view of the
    same logical matrix gives the same answer;
  * attributes are characters as `ui8` (`uplo = 76` is 'L'); they may arrive as int, numpy
    integer, str or bytes;
  * `info` results are LAPACK's INFO per batch element (JAX turns info != 0 into NaNs), pivots
    are LAPACK's 1-based `ipiv`.

Targets (t in s, d, c, z):
  potrf(a) -> (factor, info)                  attrs: uplo
  getrf(a) -> (lu, ipiv:i32, info)
  trsm(a, b) -> x                             attrs: side, uplo, trans_x, diag
  geqrf(a) -> (qr, tau)
  orgqr / ungqr(a, tau) -> q
  syevd / heevd(a) -> (v, w, info)            attrs: mode ('V' vectors / 'N'), uplo
  gesdd / gesvd(a) -> (a_out, s, u, vt, info) attrs: mode ('A' full, 'S' reduced, 'N' none)
  geev(a) -> (wr, wi, vl, vr, info) real,     attrs: compute_left, compute_right ('V' / 'N')
          -> (w, vl, vr, info) complex        (vl, vr complex: conjugate pairs unpacked)
  gees(a) -> (t, vs, wr, wi, sdim, info) real attrs: mode ('V' Schur vectors / 'N'),
          -> (t, vs, w, sdim, info) complex          sort ('N' only: JAX has no select callback)
  gehrd(a) -> (h, tau, info)                  attrs: low, high (LAPACK's 1-based ILO, IHI)
  sytrd / hetrd(a) -> (a, d, e, tau, info)    attrs: uplo
  gtsv(dl, d, du, b) -> (dl, d, du, x, info)  dl[0] and du[-1] are padding (JAX's convention)
  geqp3(a, jpvt) -> (a, jpvt, tau)            jpvt 1-based in and out, 0 = a free column
  ormqr / unmqr(a, tau, c) -> c               attrs: left, transpose (bools; Q^H for complex)
and one target without a LAPACK routine behind it:
  tridiagonal_solve_perturbed_ffi(dl, d, du, b) -> x   pivoted elimination whose tiny pivots
      are nudged instead of failing (jax.scipy.linalg.eigh_tridiagonal's inverse iteration)
"""
from __future__ import annotations

import functools

import numpy as np

from ..errors import CustomCallError

_PREFIX = {np.dtype(np.float32): "s", np.dtype(np.float64): "d",
           np.dtype(np.complex64): "c", np.dtype(np.complex128): "z"}


def _char(attributes: dict, name: str, default: str | None = None) -> str:
    value = attributes.get(name, default)
    if value is None:
        raise CustomCallError(f"missing attribute '{name}'", hint="JAX passes it in mhlo.backend_config")
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("ascii")
    if isinstance(value, str):
        return value[:1].upper()
    return chr(int(np.asarray(value).item())).upper()


def _lapack(t: str, routine: str):
    import scipy.linalg.blas
    import scipy.linalg.lapack
    module = scipy.linalg.blas if routine == "trsm" else scipy.linalg.lapack
    return getattr(module, t + routine)


def _batches(shape: tuple[int, ...], core: int):
    """Index tuples over the leading (batch) dimensions of an array whose last `core` are one item."""
    return np.ndindex(*shape[:len(shape) - core]) if len(shape) > core else [()]


def _check(results: list, n: int, operands: list, m: int, name: str) -> None:
    if len(results) != n or len(operands) != m:
        raise CustomCallError(f"{name} takes {m} operand(s) and {n} result(s), got "
                              f"{len(operands)} and {len(results)}")


def _t(a: np.ndarray, name: str) -> str:
    try:
        return _PREFIX[np.dtype(a.dtype)]
    except KeyError:
        raise CustomCallError(f"{name}: LAPACK has no {a.dtype} routines",
                              hint="float32, float64, complex64 and complex128 only") from None


def potrf(results, operands, *, attributes, backend_config=None):
    _check(results, 2, operands, 1, "potrf")
    (a,), (out, info) = operands, results
    lower = _char(attributes, "uplo", "L") == "L"
    fn = _lapack(_t(a, "potrf"), "potrf")
    for b in _batches(a.shape, 2):
        # clean=0: the other triangle keeps the input, as LAPACK leaves it (JAX masks it).
        c, i = fn(a[b], lower=lower, clean=0)
        out[b], info[b] = c, i


def getrf(results, operands, *, attributes=None, backend_config=None):
    _check(results, 3, operands, 1, "getrf")
    (a,), (lu_out, ipiv, info) = operands, results
    fn = _lapack(_t(a, "getrf"), "getrf")
    for b in _batches(a.shape, 2):
        lu, piv, i = fn(a[b])
        # scipy's wrapper returns 0-based pivots; the FFI returns LAPACK's 1-based ones.
        lu_out[b], ipiv[b], info[b] = lu, piv + 1, i


def trsm(results, operands, *, attributes, backend_config=None):
    _check(results, 1, operands, 2, "trsm")
    (a, rhs), (x,) = operands, results
    side = _char(attributes, "side", "L")
    lower = _char(attributes, "uplo", "L") == "L"
    trans = {"N": 0, "T": 1, "C": 2}[_char(attributes, "trans_x", "N")]
    unit = _char(attributes, "diag", "N") == "U"
    fn = _lapack(_t(rhs, "trsm"), "trsm")
    a_batched = a.ndim > 2
    for b in _batches(rhs.shape, 2):
        if rhs.shape[-2] == 0 or rhs.shape[-1] == 0:
            continue
        x[b] = fn(1.0, a[b] if a_batched else a, rhs[b], side=int(side == "R"), lower=int(lower),
                  trans_a=trans, diag=int(unit))


def geqrf(results, operands, *, attributes=None, backend_config=None):
    _check(results, 2, operands, 1, "geqrf")
    (a,), (qr_out, tau_out) = operands, results
    fn = _lapack(_t(a, "geqrf"), "geqrf")
    for b in _batches(a.shape, 2):
        qr, tau, _, info = fn(a[b])
        if info < 0:
            raise CustomCallError(f"geqrf: illegal argument {-info}")
        qr_out[b], tau_out[b] = qr, tau


def orgqr(results, operands, *, attributes=None, backend_config=None):
    _check(results, 1, operands, 2, "orgqr")
    (a, tau), (q_out,) = operands, results
    t = _t(a, "orgqr")
    fn = _lapack(t, "orgqr" if t in "sd" else "ungqr")
    for b in _batches(a.shape, 2):
        if 0 in a.shape[-2:]:
            continue
        q, _, info = fn(a[b], tau[b])
        if info < 0:
            raise CustomCallError(f"orgqr: illegal argument {-info}")
        q_out[b] = q


def syevd(results, operands, *, attributes, backend_config=None):
    _check(results, 3, operands, 1, "syevd")
    (a,), (v_out, w_out, info) = operands, results
    vectors = _char(attributes, "mode", "V") == "V"
    lower = _char(attributes, "uplo", "L") == "L"
    t = _t(a, "syevd")
    fn = _lapack(t, "syevd" if t in "sd" else "heevd")
    for b in _batches(a.shape, 2):
        if a.shape[-1] == 0:
            continue
        w, v, i = fn(a[b], compute_v=int(vectors), lower=int(lower))
        w_out[b], info[b] = w, i
        v_out[b] = v if vectors else 0


def _svd(routine: str):
    def target(results, operands, *, attributes, backend_config=None):
        _check(results, 5, operands, 1, routine)
        (a,), (a_out, s_out, u_out, vt_out, info) = operands, results
        mode = _char(attributes, "mode", "A")
        if mode not in "ASN":
            raise CustomCallError(f"{routine}: mode '{mode}' is not supported",
                                  hint="JAX emits 'A' (full), 'S' (reduced) and 'N' (values only)")
        fn = _lapack(_t(a, routine), routine)
        for b in _batches(a.shape, 2):
            if 0 in a.shape[-2:]:
                info[b] = 0
                continue
            u, s, vt, i = fn(a[b], compute_uv=int(mode != "N"), full_matrices=int(mode == "A"))
            s_out[b], info[b] = s, i
            # LAPACK overwrites A with scratch for these modes; JAX never reads it.
            a_out[b] = a[b]
            if mode == "N":
                u_out[b], vt_out[b] = 0, 0
            else:
                u_out[b], vt_out[b] = u, vt
    target.__name__ = routine
    return target


gesdd = _svd("gesdd")
gesvd = _svd("gesvd")

def _flag(attributes: dict, name: str) -> bool:
    value = attributes.get(name)
    if value is None:
        raise CustomCallError(f"missing attribute '{name}'", hint="JAX passes it in mhlo.backend_config")
    return bool(np.asarray(value).item())


def _real_dtype(dtype) -> np.dtype:
    return np.finfo(dtype).dtype


def _unpack_pairs(w: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Real LAPACK stores the eigenvectors of a conjugate pair (w[j], w[j+1]) as two real
    columns: v[:, j] +/- i v[:, j+1]. Returns them as complex columns."""
    out = v.astype(np.result_type(v.dtype, np.complex64))
    j = 0
    while j < len(w):
        if w[j].imag != 0 and j + 1 < len(w):
            re, im = v[:, j], v[:, j + 1]
            out[:, j], out[:, j + 1] = re + 1j * im, re - 1j * im
            j += 2
        else:
            j += 1
    return out


def geev(results, operands, *, attributes, backend_config=None):
    (a,) = operands
    t = _t(a, "geev")
    real = t in "sd"
    _check(results, 5 if real else 4, operands, 1, "geev")
    left = _char(attributes, "compute_left", "N") == "V"
    right = _char(attributes, "compute_right", "V") == "V"
    fn = _lapack(t, "geev")
    for b in _batches(a.shape, 2):
        if a.shape[-1] == 0:
            results[-1][b] = 0
            continue
        if real:
            wr, wi, vl, vr, info = fn(a[b], compute_vl=int(left), compute_vr=int(right))
            w = wr + 1j * wi
            results[0][b], results[1][b] = wr, wi
            vl = _unpack_pairs(w, vl) if left else 0
            vr = _unpack_pairs(w, vr) if right else 0
        else:
            w, vl, vr, info = fn(a[b], compute_vl=int(left), compute_vr=int(right))
            results[0][b] = w
        # Vectors not asked for: JAX never reads them.
        results[-3][b] = vl if left else 0
        results[-2][b] = vr if right else 0
        results[-1][b] = info


def _no_select(*_):
    return 0


def gees(results, operands, *, attributes, backend_config=None):
    (a,) = operands
    t = _t(a, "gees")
    real = t in "sd"
    _check(results, 6 if real else 5, operands, 1, "gees")
    vectors = _char(attributes, "mode", "V") == "V"
    if _char(attributes, "sort", "N") != "N":
        raise CustomCallError("gees: sorting eigenvalues is not supported",
                              hint="JAX has no select callback to sort by either (sort='N')")
    fn = _lapack(t, "gees")
    for b in _batches(a.shape, 2):
        if a.shape[-1] == 0:
            results[-2][b], results[-1][b] = 0, 0
            continue
        if real:
            schur, sdim, wr, wi, vs, _, info = fn(_no_select, a[b], compute_v=int(vectors))
            results[2][b], results[3][b] = wr, wi
        else:
            schur, sdim, w, vs, _, info = fn(_no_select, a[b], compute_v=int(vectors))
            results[2][b] = w
        results[0][b] = schur
        results[1][b] = vs if vectors else 0
        results[-2][b], results[-1][b] = sdim, info


def gehrd(results, operands, *, attributes, backend_config=None):
    _check(results, 3, operands, 1, "gehrd")
    (a,), (h_out, tau_out, info) = operands, results
    n = a.shape[-1]
    low = int(np.asarray(attributes.get("low", 1)).item())
    high = int(np.asarray(attributes.get("high", n)).item())
    fn = _lapack(_t(a, "gehrd"), "gehrd")
    for b in _batches(a.shape, 2):
        if n == 0:
            info[b] = 0
            continue
        # scipy's lo/hi are 0-based; the FFI's are LAPACK's 1-based ILO/IHI.
        h, tau, i = fn(a[b], lo=low - 1, hi=high - 1)
        h_out[b], info[b] = h, i
        tau_out[b] = tau[:tau_out.shape[-1]]


def sytrd(results, operands, *, attributes, backend_config=None):
    _check(results, 5, operands, 1, "sytrd")
    (a,), (a_out, d_out, e_out, tau_out, info) = operands, results
    lower = _char(attributes, "uplo", "L") == "L"
    t = _t(a, "sytrd")
    fn = _lapack(t, "sytrd" if t in "sd" else "hetrd")
    for b in _batches(a.shape, 2):
        if a.shape[-1] == 0:
            info[b] = 0
            continue
        c, d, e, tau, i = fn(a[b], lower=int(lower))
        a_out[b], d_out[b], e_out[b], tau_out[b], info[b] = c, d, e, tau, i


def gtsv(results, operands, *, attributes=None, backend_config=None):
    _check(results, 5, operands, 4, "gtsv")
    (dl, d, du, rhs), (dl_out, d_out, du_out, x_out, info) = operands, results
    fn = _lapack(_t(rhs, "gtsv"), "gtsv")
    m = d.shape[-1]
    for b in _batches(d.shape, 1):
        # JAX pads both off-diagonals to length m (dl[0] = du[m-1] = 0): LAPACK's DL is
        # dl[1:], its DU is du[:-1]. The padding entries are returned as they came.
        dl_out[b], d_out[b], du_out[b] = dl[b], d[b], du[b]
        if m == 0 or rhs.shape[-1] == 0:
            x_out[b], info[b] = rhs[b], 0
            continue
        du2, d2, du1, x, i = fn(dl[b][1:], d[b], du[b][:-1], rhs[b])
        dl_out[b][1:], d_out[b], du_out[b][:-1] = du2, d2, du1
        x_out[b], info[b] = x, i


def geqp3(results, operands, *, attributes=None, backend_config=None):
    _check(results, 3, operands, 2, "geqp3")
    (a, jpvt), (a_out, jpvt_out, tau_out) = operands, results
    fn = _lapack(_t(a, "geqp3"), "geqp3")
    for b in _batches(a.shape, 2):
        if np.any(jpvt[b] != 0):
            # scipy's wrapper always starts from free columns (JPVT = 0), as JAX's qr does.
            raise CustomCallError("geqp3: fixed leading columns (jpvt != 0) are not supported",
                                  hint="pass jpvt = 0 (every column free), as jnp's qr does")
        if 0 in a.shape[-2:]:
            a_out[b], jpvt_out[b] = a[b], np.arange(1, a.shape[-1] + 1)
            continue
        qr, piv, tau, _, info = fn(a[b])
        if info < 0:
            raise CustomCallError(f"geqp3: illegal argument {-info}")
        a_out[b], jpvt_out[b], tau_out[b] = qr, piv, tau  # LAPACK's 1-based pivots


def ormqr(results, operands, *, attributes, backend_config=None):
    _check(results, 1, operands, 3, "ormqr")
    (a, tau, c), (c_out,) = operands, results
    t = _t(a, "ormqr")
    side = "L" if _flag(attributes, "left") else "R"
    trans = ("T" if t in "sd" else "C") if _flag(attributes, "transpose") else "N"
    fn = _lapack(t, "ormqr" if t in "sd" else "unmqr")
    a_batched, tau_batched = a.ndim > 2, tau.ndim > 1
    for b in _batches(c.shape, 2):
        if 0 in c.shape[-2:] or tau.shape[-1] == 0:
            c_out[b] = c[b]
            continue
        cb = c[b]
        lwork = max(1, cb.shape[1] if side == "L" else cb.shape[0]) * 64
        q, _, info = fn(side, trans, a[b] if a_batched else a, tau[b] if tau_batched else tau,
                        cb, lwork)
        if info < 0:
            raise CustomCallError(f"ormqr: illegal argument {-info}")
        c_out[b] = q


# -- tridiagonal solve with perturbed pivots ------------------------------------------------------
def _safe_pivot(pivot, row: np.ndarray, perturb: float, real: type):
    """A pivot that neither `row / pivot` nor `1 / pivot` overflows with. A pivot of magnitude
    below one is pushed away from zero by `perturb` (doubled at each try, same sign as the
    pivot's real part), unless scaling pivot and row up together is enough."""
    finfo = np.finfo(real)
    safemin = max(finfo.tiny, (1 / finfo.max) * (1 + finfo.eps))
    bignum = 1 / safemin
    size = abs(pivot)
    if size >= 1:
        return pivot, row
    step = np.copysign(max(abs(perturb), safemin), np.real(pivot))
    largest = float(np.max(np.abs(row))) if row.size else 0.0
    while size < 1:
        if size < safemin and (size == 0 or largest * safemin > size):
            pivot, step = pivot + step, step * 2
        elif size < safemin:
            return pivot * bignum, row * bignum
        elif largest > size * bignum:
            pivot, step = pivot + step, step * 2
        else:
            break
        size = abs(pivot)
    return pivot, row


def _solve_tridiagonal_perturbed(dl, d, du, rhs, real):
    """Solve T x = rhs (T with sub-, main and super-diagonals dl[1:], d, du[:-1]) by
    Gaussian elimination with row interchanges, scaled by each row's size (LAPACK's xLAGTF
    criterion); U then has two super-diagonals. Back-substitution perturbs tiny pivots by a
    multiple of eps * max|U| instead of dividing by them (as xLAGTS does)."""
    n = d.shape[0]
    x = np.array(rhs, dtype=rhs.dtype)
    if n == 0:
        return x
    eps = np.finfo(real).eps
    if n == 1:
        p, row = _safe_pivot(d[0], x[0].copy(), eps * abs(d[0]), real)
        x[0] = row / p
        return x
    u = np.zeros((n, 3), rhs.dtype)  # U's diagonal and two super-diagonals, by row
    u[0, 0], u[0, 1] = d[0], du[0]
    scale = abs(u[0, 0]) + abs(u[0, 1])
    for k in range(n - 1):
        u[k + 1, 0] = d[k + 1]
        next_scale = abs(dl[k + 1]) + abs(u[k + 1, 0]) + (abs(du[k + 1]) if k < n - 2 else 0)
        if dl[k + 1] == 0:
            u[k + 1, 1] = du[k + 1] if k < n - 2 else 0
            u[k, 2] = 0
            scale = next_scale
            continue
        keep = 0.0 if u[k, 0] == 0 else abs(u[k, 0]) / scale
        swap = abs(dl[k + 1]) / next_scale
        if swap <= keep:  # row k stays the pivot row
            factor = dl[k + 1] / u[k, 0]
            u[k + 1, 0] -= factor * u[k, 1]
            u[k + 1, 1] = du[k + 1] if k < n - 2 else 0
            u[k, 2] = 0
            x[k + 1] -= factor * x[k]
            scale = next_scale
        else:  # row k + 1 becomes the pivot row
            factor = u[k, 0] / dl[k + 1]
            above = u[k, 1]
            u[k, 0], u[k, 1] = dl[k + 1], d[k + 1]
            u[k + 1, 0] = above - factor * d[k + 1]
            if k < n - 2:
                u[k, 2] = du[k + 1]
                u[k + 1, 1] = -factor * du[k + 1]
            x[k], x[k + 1] = x[k + 1].copy(), x[k] - factor * x[k + 1]
            scale = abs(u[k + 1, 0]) + abs(u[k + 1, 1])
    largest = max(float(np.max(np.abs(u[:n - 2]))) if n > 2 else 0.0,
                  abs(u[0, 0]), abs(u[0, 1]), abs(u[n - 1, 0]))
    perturb = eps * largest
    for k in range(n - 1, -1, -1):
        row = x[k].copy()
        if k + 1 < n:
            row -= u[k, 1] * x[k + 1]
        if k + 2 < n:
            row -= u[k, 2] * x[k + 2]
        p, row = _safe_pivot(u[k, 0], row, perturb, real)
        x[k] = row * (1 / p)
    return x


def tridiagonal_solve_perturbed(results, operands, *, attributes=None, backend_config=None):
    _check(results, 1, operands, 4, "tridiagonal_solve_perturbed")
    (dl, d, du, rhs), (x_out,) = operands, results
    real = _real_dtype(_t(rhs, "tridiagonal_solve_perturbed") and rhs.dtype).type
    for b in _batches(d.shape, 1):
        x_out[b] = _solve_tridiagonal_perturbed(dl[b], d[b], du[b], rhs[b], real)


# JAX's target names per routine: lapack_{t}{name}_ffi for t in s, d (real) and c, z (complex).
_ROUTINES = {
    "potrf": (potrf, "potrf", "potrf"),
    "getrf": (getrf, "getrf", "getrf"),
    "trsm": (trsm, "trsm", "trsm"),
    "geqrf": (geqrf, "geqrf", "geqrf"),
    "orgqr": (orgqr, "orgqr", "ungqr"),
    "syevd": (syevd, "syevd", "heevd"),
    "gesdd": (gesdd, "gesdd", "gesdd"),
    "gesvd": (gesvd, "gesvd", "gesvd"),
    "geev": (geev, "geev", "geev"),
    "gees": (gees, "gees", "gees"),
    "gehrd": (gehrd, "gehrd", "gehrd"),
    "sytrd": (sytrd, "sytrd", "hetrd"),
    "gtsv": (gtsv, "gtsv", "gtsv"),
    "geqp3": (geqp3, "geqp3", "geqp3"),
    "ormqr": (ormqr, "ormqr", "unmqr"),
}
# Targets with one name for every dtype.
_UNTYPED = {"tridiagonal_solve_perturbed_ffi": tridiagonal_solve_perturbed}


def _is_shape_error(exc: BaseException) -> bool:
    """What numpy and scipy's wrappers raise when arrays do not fit a routine: f2py checks
    every dimension it passes to LAPACK against the arrays (so no routine is handed a size
    larger than its buffer) and raises its modules' own `error` class; numpy checks every
    index and assignment here."""
    kind = type(exc)
    return isinstance(exc, (ValueError, IndexError, TypeError)) or \
        (kind.__name__ == "error" and kind.__module__ in ("_flapack", "_fblas"))


def _validated(name: str, fn):
    """`fn` whose operands or results do not fit it (a program's custom call declares any
    shapes it likes: a 3x3 result for a 4x4 factor, an `info` without the batch dimensions)
    fails as a CustomCallError naming the target, not as an internal error."""
    def target(results, operands, *, attributes=None, backend_config=None):
        try:
            return fn(results, operands, attributes=attributes if attributes is not None else {},
                      backend_config=backend_config)
        except Exception as exc:  # noqa: BLE001 - only shape errors are turned, others re-raised
            if isinstance(exc, CustomCallError) or not _is_shape_error(exc):
                raise
            raise CustomCallError(
                f"{name}: the operand and result shapes {[tuple(np.shape(o)) for o in operands]}"
                f" -> {[tuple(np.shape(r)) for r in results]} do not fit the routine ({exc})",
                hint="declare the shapes JAX gives this call: batch dimensions first, the "
                     "matrix in the two minor ones") from None
    target.__name__ = target.__qualname__ = fn.__name__
    target.__doc__ = fn.__doc__
    target.__wrapped__ = fn
    return target


@functools.lru_cache(maxsize=None)
def _table() -> dict[str, object]:
    table = {}
    for fn, real, cplx in _ROUTINES.values():
        for t in "sd":
            table[f"lapack_{t}{real}_ffi"] = _validated(f"lapack_{t}{real}_ffi", fn)
        for t in "cz":
            table[f"lapack_{t}{cplx}_ffi"] = _validated(f"lapack_{t}{cplx}_ffi", fn)
    table.update({name: _validated(name, fn) for name, fn in _UNTYPED.items()})
    return table


def targets() -> dict[str, object]:
    """Every JAX CPU linear-algebra target name (jaxlib's lapack registrations) -> its
    Python callable (which reports operands and results that do not fit as a
    CustomCallError; each name's callable is the same on every call, `__wrapped__` the
    routine)."""
    return dict(_table())


def register_lapack_targets(registry_or_kiln) -> list[str]:
    """Register every target with `registry_or_kiln.register_custom_call(name, fn,
    platform="cpu", api_version=4)` (the kiln module) or `.register(...)` with the same
    arguments (a CustomCallRegistry). Returns the names registered. JAX writes these typed-FFI
    calls with api_version 1 and a dictionary `mhlo.backend_config`, which Kiln (like XLA)
    counts as api_version 4."""
    register = getattr(registry_or_kiln, "register_custom_call", None) or \
        getattr(registry_or_kiln, "register", None)
    if register is None:
        raise CustomCallError(f"{registry_or_kiln!r} has no register_custom_call",
                              hint="pass the kiln module or a custom-call registry")
    names = []
    for name, fn in targets().items():
        register(name, fn, platform="cpu", api_version=4)
        names.append(name)
    return names
