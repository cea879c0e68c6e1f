"""jaxlib's CPU sparse target, built in: `cpu_csr_sparse_dense_ffi`, the product of a CSR
matrix and a dense matrix or vector that `jax.experimental.sparse` (BCSR @ x) emits on CPU.

Operands, as JAX lowers them: the CSR values, row pointers (indptr), column indices and the
dense right-hand side; the one result is the dense product, whose leading dimension is the
matrix's row count. Computed with scipy.sparse, like Kiln's LAPACK targets use scipy's LAPACK.
"""
from __future__ import annotations

import numpy as np

TARGET = "cpu_csr_sparse_dense_ffi"


def csr_sparse_dense(results, operands, *, attributes, backend_config):
    import scipy.sparse
    data, indptr, indices, rhs = operands
    out = results[0]
    matrix = scipy.sparse.csr_matrix((data, indices, indptr),
                                     shape=(out.shape[0], rhs.shape[0]))
    out[...] = np.asarray(matrix @ rhs).reshape(out.shape).astype(out.dtype, copy=False)


def register_sparse_targets(registry) -> list[str]:
    """Register the target with `registry.register(name, fn, platform="cpu", api_version=4)`."""
    registry.register(TARGET, csr_sparse_dense, platform="cpu", api_version=4)
    return [TARGET]
