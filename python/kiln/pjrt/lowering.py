"""JAX lowering rules for platform "kiln": XLA:CPU's, for the primitives where JAX picks a
lowering by platform.

For an unknown platform JAX falls back to generic rules, which for linear algebra are wrong
for Kiln: eigh, svd and eig have none at all, qr emits XLA-internal custom calls, and lu,
cholesky and triangular_solve become loops instead of the LAPACK calls Kiln implements. Kiln
runs on the CPU and implements XLA:CPU's custom calls, so it registers XLA:CPU's rules through
JAX's public hook `mlir.register_lowering(prim, rule, platform="kiln")`, for an allowlist of
primitives (host callbacks, which need XLA's Python callback machinery, are left out).
"""
from __future__ import annotations

# Primitives whose CPU-specific rule Kiln takes; the rest keep JAX's generic rule.
CPU_RULES = (
    # linear algebra: LAPACK/BLAS custom calls
    "cholesky", "eig", "eigh", "geqp3", "geqrf", "hessenberg", "householder_product", "lu",
    "ormqr", "schur", "svd", "triangular_solve", "tridiagonal", "tridiagonal_solve",
    # the same numerics as XLA:CPU
    "threefry2x32", "random_gamma", "select_and_scatter_add", "conv_general_dilated",
    "dot_general",
)


def register_cpu_lowerings(platform: str) -> list[str]:
    """Registers XLA:CPU's rules of CPU_RULES for `platform`; returns the primitives done.
    Call after the platform is registered with JAX (register_lowering checks it is known)."""
    import jax._src.lax.linalg  # noqa: F401  (registers the CPU rules of linear algebra)
    from jax._src.interpreters import mlir

    cpu = mlir._platform_specific_lowerings["cpu"]
    done = []
    for primitive, entry in list(cpu.items()):
        if primitive.name in CPU_RULES:
            mlir.register_lowering(primitive, entry.rule, platform=platform, inline=entry.inline)
            done.append(primitive.name)
    return sorted(done)


def enable_donation(platform: str) -> None:
    """Lets JAX donate arguments on `platform`: JAX emits tf.aliasing_output only for the
    platforms in its (private) list; the plugin then consumes donated buffers after a run, as
    XLA does (bridge._read_module, runtime/pjrt/kiln_pjrt_python.c)."""
    from jax._src.interpreters import mlir

    if platform not in mlir._platforms_with_donation:
        mlir._platforms_with_donation.append(platform)
