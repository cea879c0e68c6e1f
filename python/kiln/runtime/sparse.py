"""jaxlib's CPU sparse target, built in: `cpu_csr_sparse_dense_ffi`, the product of a CSR
matrix and a dense matrix or vector that `jax.experimental.sparse` (BCSR @ x) emits on CPU.

Operands, as JAX lowers them: the CSR values, row pointers (indptr), column indices and the
dense right-hand side; the one result is the dense product, whose leading dimension is the
matrix's row count. Computed with scipy.sparse, like Kiln's LAPACK targets use scipy's LAPACK.

The operands are program values, and scipy's product trusts them (a column index past the
end read outside the right-hand side's buffer): `validate` checks them first, as jaxlib's
kernel expects them, and a violation is a CustomCallError naming the target.
"""
from __future__ import annotations

import numpy as np

from ..errors import CustomCallError

TARGET = "cpu_csr_sparse_dense_ffi"


def _fail(message: str) -> CustomCallError:
    return CustomCallError(f"{TARGET}: {message}",
                           hint="the CSR operands (values, row pointers, column indices) do not "
                                "describe a matrix of the product's shape")


def validate(data: np.ndarray, indptr: np.ndarray, indices: np.ndarray, rhs: np.ndarray,
             out: np.ndarray) -> None:
    """The operands describe a rows x cols CSR matrix (rows from the result, cols from the
    right-hand side): 1-D integer index arrays, as many column indices as values, rows + 1
    row pointers that start at 0, never decrease and end within the values, and every column
    index used within [0, cols); the result is (rows,) or (rows, k) for a (cols,) or (cols, k)
    right-hand side."""
    if data.ndim != 1 or indptr.ndim != 1 or indices.ndim != 1:
        raise _fail(f"values, row pointers and column indices must be 1-D, got shapes "
                    f"{data.shape}, {indptr.shape}, {indices.shape}")
    if indptr.dtype.kind not in "iu" or indices.dtype.kind not in "iu":
        raise _fail(f"row pointers and column indices must be integers, got {indptr.dtype} "
                    f"and {indices.dtype}")
    if indices.shape[0] != data.shape[0]:
        raise _fail(f"{indices.shape[0]} column indices for {data.shape[0]} values")
    if rhs.ndim not in (1, 2) or out.ndim != rhs.ndim or out.shape[1:] != rhs.shape[1:]:
        raise _fail(f"a right-hand side of shape {rhs.shape} cannot give a result of shape "
                    f"{out.shape}")
    rows, cols, nnz = out.shape[0], rhs.shape[0], data.shape[0]
    if indptr.shape[0] != rows + 1:
        raise _fail(f"{indptr.shape[0]} row pointers for {rows} rows (need {rows + 1})")
    pointers = indptr.astype(np.int64)
    # Range first: np.diff of pointers near -2**63 wraps around (fuzz finding, seed 2027:
    # [0, 2, 3, -2**63 + 1] passed a diff-only check and scipy read outside the values).
    if (pointers[0] != 0 or (pointers < 0).any() or (pointers > nnz).any()
            or (np.diff(pointers) < 0).any()):
        raise _fail(f"row pointers must start at 0, never decrease and end at most at the "
                    f"{nnz} values, got {indptr.tolist() if rows < 16 else 'others'}")
    used = indices[:pointers[-1]].astype(np.int64) if indices.dtype != np.uint64 else \
        indices[:pointers[-1]]
    if used.size and (used.min() < 0 or used.max() >= cols):
        bad = int(np.flatnonzero((used < 0) | (used >= cols))[0])
        raise _fail(f"column index {int(indices[bad])} (entry {bad}) is outside [0, {cols})")


def csr_sparse_dense(results, operands, *, attributes, backend_config):
    import scipy.sparse
    if len(operands) != 4 or len(results) != 1:
        raise _fail(f"takes 4 operands and 1 result, got {len(operands)} and {len(results)}")
    data, indptr, indices, rhs = operands
    out = results[0]
    validate(data, indptr, indices, rhs, out)
    nnz = int(indptr[-1])
    matrix = scipy.sparse.csr_matrix((data[:nnz], indices[:nnz], indptr),
                                     shape=(out.shape[0], rhs.shape[0]))
    out[...] = np.asarray(matrix @ rhs).reshape(out.shape).astype(out.dtype, copy=False)


def register_sparse_targets(registry) -> list[str]:
    """Register the target with `registry.register(name, fn, platform="cpu", api_version=4)`."""
    registry.register(TARGET, csr_sparse_dense, platform="cpu", api_version=4)
    return [TARGET]
