"""Programs over several devices run through Kiln's PJRT plugin (KILN_DEVICES=8, run by
test_pjrt_sharding.py in a subprocess: JAX picks its platform once per process): jit with
shardings, shard_map with collectives, pmap, a data-parallel training step. Writes each
case's global results, the shards' shapes and the shardings JAX reports to an .npz file."""
from __future__ import annotations

import sys
import traceback

import numpy as np


def cases(jax, jnp):
    from jax import shard_map
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    devices = jax.devices()
    mesh2x2 = Mesh(np.array(devices[:4]).reshape(2, 2), ("x", "y"))
    mesh8 = Mesh(np.array(devices), ("d",))
    x = np.arange(64.0, dtype=np.float32).reshape(8, 8) / 10
    w = np.linspace(-1, 1, 8 * 16, dtype=np.float32).reshape(8, 16)

    def put(a, mesh, spec):
        return jax.device_put(a, NamedSharding(mesh, spec))

    out = {}

    def case(name):
        def register(fn):
            out[name] = fn
            return fn
        return register

    @case("jit_elementwise_and_matmul")
    def _():
        f = jax.jit(lambda a: jnp.sin(a) @ a.T + 1)
        return f(put(x, mesh2x2, P("x", "y")))

    @case("jit_out_shardings")
    def _():
        f = jax.jit(lambda a, b: jnp.tanh(a @ b), out_shardings=NamedSharding(mesh2x2, P("x", "y")))
        return f(put(x, mesh2x2, P("x", None)), put(w, mesh2x2, P(None, "y")))

    @case("jit_partly_replicated")
    def _():
        f = jax.jit(lambda a: a * 2 + a.sum(axis=0), out_shardings=NamedSharding(mesh2x2, P("y")))
        return f(put(x, mesh2x2, P("x")))

    @case("shard_map_psum")
    def _():
        g = jax.jit(shard_map(lambda a: jax.lax.psum(a, "x"), mesh=mesh2x2,
                              in_specs=P("x", "y"), out_specs=P(None, "y")))
        return g(put(x, mesh2x2, P("x", "y")))

    @case("shard_map_all_gather_ppermute")
    def _():
        def body(a):
            whole = jax.lax.all_gather(a, "d", tiled=True)
            shifted = jax.lax.ppermute(a, "d", [(i, (i + 1) % 8) for i in range(8)])
            return whole.sum(axis=0, keepdims=True) + shifted
        g = jax.jit(shard_map(body, mesh=mesh8, in_specs=P("d"), out_specs=P("d")))
        return g(put(x, mesh8, P("d")))

    @case("shard_map_unreduced")
    def _():
        # partial sums left unreduced by a shard_map, then summed by a reshard
        from jax.sharding import AxisType
        mesh = jax.make_mesh((2,), ("u",), axis_types=(AxisType.Explicit,),
                             devices=devices[:2])
        with jax.set_mesh(mesh):
            arr = jax.device_put(np.arange(8.0, dtype=np.float32), P("u"))
            f = shard_map(lambda v: jax.lax.pcast(v * 2, "u", to="unreduced"),
                          out_specs=P(unreduced={"u"}))
            out = jax.jit(f)(arr)
            assert out.sharding.spec.unreduced == {"u"}, out.sharding
            return jax.reshard(out, P())

    @case("pmap")
    def _():
        return jax.pmap(lambda a: a * 3 + jax.lax.psum(a, "i"), axis_name="i")(x)

    @case("data_parallel_step")
    def _():
        def loss(params, batch):
            h = jnp.tanh(batch @ params["w"] + params["b"])
            return jnp.mean(h ** 2)

        @jax.jit
        def step(params, batch):
            grads = jax.grad(loss)(params, batch)
            return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

        params = {"w": put(w, mesh8, P()), "b": put(np.zeros(16, np.float32), mesh8, P())}
        return step(params, put(x, mesh8, P("d")))

    return out


def main(path: str) -> None:
    import jax
    import jax.numpy as jnp

    results = {"count": len(jax.devices())}
    for name, fn in cases(jax, jnp).items():
        try:
            value = fn()
            leaves = jax.tree.leaves(value)
            results[f"{name}/count"] = len(leaves)
            for i, leaf in enumerate(leaves):
                results[f"{name}/{i}"] = np.asarray(leaf)
                results[f"{name}/{i}/shards"] = np.array(
                    [s.data.shape for s in leaf.addressable_shards])
                results[f"{name}/{i}/sharding"] = str(leaf.sharding.spec) \
                    if hasattr(leaf.sharding, "spec") else type(leaf.sharding).__name__
        except Exception:
            results[f"{name}/error"] = traceback.format_exc()[-3000:]
    np.savez(path, **results)


if __name__ == "__main__":
    main(sys.argv[1])
