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
"""
from __future__ import annotations

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
}


def targets() -> dict[str, object]:
    """Every JAX CPU LAPACK target name -> its Python callable."""
    table = {}
    for fn, real, cplx in _ROUTINES.values():
        for t in "sd":
            table[f"lapack_{t}{real}_ffi"] = fn
        for t in "cz":
            table[f"lapack_{t}{cplx}_ffi"] = fn
    return table


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
