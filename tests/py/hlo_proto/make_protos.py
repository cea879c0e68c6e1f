"""Writes XLA's serialized HLO for test_hlo_proto.py: a JAX program's HloModuleProto
(compiler_ir('hlo')), the HloProto dumps XLA writes around compilation
(--xla_dump_hlo_as_proto) and the HloSnapshot of one run (--xla_dump_hlo_snapshots), with
the inputs and JAX's results. Run in a process of its own: XLA reads XLA_FLAGS once.

    python make_protos.py OUT_DIR
"""
import os
import sys
from pathlib import Path

out = Path(sys.argv[1])
dump = out / "dump"
os.environ["XLA_FLAGS"] = (f"--xla_dump_to={dump} --xla_dump_hlo_as_proto "
                           "--xla_dump_hlo_snapshots")
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402


def program(x, w, idx, scale, image, kernel):
    """Control flow, gather/scatter, sort, reductions, convolution and pooling, mixed dtypes
    and a tuple result."""
    y = jnp.tanh(x @ w) + jnp.sum(w, axis=0)
    conv = lax.conv_general_dilated(image, kernel, (1, 2), ((1, 1), (0, 1)),
                                    rhs_dilation=(1, 2), dimension_numbers=("NHWC", "HWIO", "NHWC"))
    pooled = lax.reduce_window(conv, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 1, 1, 1), "VALID")
    y = lax.fori_loop(0, 3, lambda i, v: v * scale + i.astype(v.dtype), y)
    picked = y[idx]                                   # gather
    z = jnp.zeros((6, 3), jnp.float32).at[idx].add(picked)  # scatter-add
    z = lax.cond(scale > 0, lambda t: jnp.sort(t, axis=0), lambda t: -t, z)
    as_bf16 = (z * 0.5).astype(jnp.bfloat16).astype(jnp.float32)
    counts = jnp.array([1, -2, 3], jnp.int8).astype(jnp.int32) * idx[:3]
    return as_bf16, jnp.max(y), counts, pooled


rng = np.random.default_rng(7)
inputs = [rng.standard_normal((6, 4)).astype(np.float32),
          rng.standard_normal((4, 3)).astype(np.float32),
          np.array([5, 0, 2, 2], np.int32), np.float32(0.75),
          rng.standard_normal((2, 5, 7, 3)).astype(np.float32),
          rng.standard_normal((3, 2, 3, 4)).astype(np.float32)]
lowered = jax.jit(program).lower(*inputs)
(out / "module.pb").write_bytes(lowered.compiler_ir("hlo").as_serialized_hlo_module_proto())
(out / "module.hlo").write_text(lowered.compiler_ir("hlo").as_hlo_text())
results = jax.jit(program)(*inputs)
np.savez(out / "inputs.npz", *inputs)
np.savez(out / "results.npz", *[np.asarray(r) for r in results])
names = sorted(p.name for p in dump.iterdir())
for suffix, target in (("before_optimizations.hlo.pb", "before.pb"),
                       ("after_optimizations.hlo.pb", "after.pb")):
    found = [n for n in names if "jit_program" in n and n.endswith(suffix)]
    assert found, (suffix, names)
    (out / target).write_bytes((dump / found[0]).read_bytes())
snapshots = [n for n in names if "jit_program" in n and ".snapshot." in n]
assert snapshots, names
(out / "snapshot.pb").write_bytes((dump / snapshots[0]).read_bytes())
