"""Export JAX programs for several devices and record JAX's own results on them.

Run as a separate process (`python make_programs.py OUTDIR`): JAX must see several CPU
devices (--xla_force_host_platform_device_count), which a process fixes when it first
imports jax. Writes OUTDIR/NAME.jax (exp.serialize()), NAME.in.npz and NAME.out.npz.
"""
from __future__ import annotations

import os
import sys

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402


def shard_map_program(n, body, in_specs, out_specs, shapes, mesh_shape=None, names=("x",),
                      check_vma=True):
    mesh = jax.make_mesh(mesh_shape or (n,), names)
    ins = in_specs if isinstance(in_specs, tuple) else (in_specs,)
    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                              check_vma=check_vma),
                in_shardings=tuple(NamedSharding(mesh, s) for s in ins))
    structs = [jax.ShapeDtypeStruct(s, np.float32, sharding=NamedSharding(mesh, spec))
               for s, spec in zip(shapes, ins)]
    return mesh, f, structs


def programs():
    rng = np.random.default_rng(0)
    out = {}
    for n in (2, 4):
        out[f"psum_{n}"] = shard_map_program(
            n, lambda a: jax.lax.psum(a * 2.0, "x"), P("x"), P(), [(4 * n, 3)])
        out[f"all_gather_{n}"] = shard_map_program(
            n, lambda a: jax.lax.all_gather(jnp.sin(a), "x", tiled=True), P("x"), P(), [(2 * n, 5)],
            check_vma=False)
        out[f"ppermute_{n}"] = shard_map_program(
            n, lambda a, n=n: jax.lax.ppermute(a + 1.0, "x", [(i, (i + 1) % n) for i in range(n)]),
            P("x"), P("x"), [(2 * n, 4)])
        out[f"psum_scatter_{n}"] = shard_map_program(
            n, lambda a: jax.lax.psum_scatter(a, "x", scatter_dimension=0, tiled=True),
            P(None, "x"), P("x"), [(4 * n, 2 * n)])
        out[f"all_to_all_{n}"] = shard_map_program(
            n, lambda a: jax.lax.all_to_all(a, "x", 0, 1, tiled=True), P("x"), P("x"),
            [(n * n, 2 * n)])
        out[f"pmax_index_{n}"] = shard_map_program(
            n, lambda a: jax.lax.pmax(a, "x") + jax.lax.axis_index("x").astype(np.float32),
            P("x"), P("x"), [(2 * n, 3)])
    # A 2x2 mesh: a reduction over one axis only.
    out["mesh2x2_psum_y"] = shard_map_program(
        4, lambda a: jax.lax.psum(a, "y"), P("x", "y"), P("x"), [(4, 6)], (2, 2), ("x", "y"))
    # jit with shardings (no shard_map): GSPMD-style automatic partitioning.
    mesh = jax.make_mesh((2,), ("x",))
    f = jax.jit(lambda a, b: jnp.tanh(a @ b) + a.sum(),
                in_shardings=(NamedSharding(mesh, P("x")), NamedSharding(mesh, P())),
                out_shardings=NamedSharding(mesh, P("x")))
    out["jit_shardings_2"] = (mesh, f, [jax.ShapeDtypeStruct((8, 6), np.float32),
                                        jax.ShapeDtypeStruct((6, 6), np.float32)])
    return out, rng


def gspmd_programs():
    """The same kind of programs as JAX exported them before Shardy: mhlo.sharding strings
    and @SPMDFullToShardShape / @SPMDShardToFullShape custom calls."""
    jax.config.update("jax_use_shardy_partitioner", False)
    try:
        return {"gspmd_psum_2": shard_map_program(2, lambda a: jax.lax.psum(a * 3.0, "x"), P("x"),
                                                  P(), [(6, 4)]),
                "gspmd_jit_2": programs()[0]["jit_shardings_2"]}
    finally:
        jax.config.update("jax_use_shardy_partitioner", True)


def main(outdir: str) -> None:
    found, rng = programs()
    found = {**found, **{k: v + (False,) for k, v in gspmd_programs().items()}}
    for name, (mesh, f, structs, *shardy) in found.items():
        if shardy:
            jax.config.update("jax_use_shardy_partitioner", False)
        exp = jax.export.export(f)(*structs)
        jax.config.update("jax_use_shardy_partitioner", True)
        inputs = [rng.standard_normal(s.shape).astype(np.float32) for s in structs]
        placed = [jax.device_put(x, s.sharding) if s.sharding is not None else x
                  for x, s in zip(inputs, structs)]
        expected = f(*placed)
        expected = jax.tree_util.tree_leaves(expected)
        with open(os.path.join(outdir, f"{name}.jax"), "wb") as fh:
            fh.write(exp.serialize())
        np.savez(os.path.join(outdir, f"{name}.in.npz"), *inputs)
        np.savez(os.path.join(outdir, f"{name}.out.npz"), *[np.asarray(e) for e in expected])
        print(name, exp.nr_devices)


if __name__ == "__main__":
    main(sys.argv[1])
