"""Write a serialized jax.export.Exported for a lit test: export.py CASE OUT."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import export

F32 = np.float32


def case(name):
    if name == "multi":  # two platforms, an unused argument, a dict result
        f = lambda x, unused, y: {"sum": x + y, "sin": jnp.sin(x)}  # noqa: E731
        return export.export(jax.jit(f), platforms=("cuda", "cpu"))(
            np.ones((2, 3), F32), np.ones(5, np.int32), np.ones((2, 3), F32))
    if name == "poly":  # a symbolic batch dimension
        spec = jax.ShapeDtypeStruct(export.symbolic_shape("b, 4"), F32)
        return export.export(jax.jit(lambda x: jnp.sum(x, axis=0) * x.shape[0]))(spec)
    raise SystemExit(f"unknown case {name}")


open(sys.argv[2], "wb").write(bytes(case(sys.argv[1]).serialize()))
