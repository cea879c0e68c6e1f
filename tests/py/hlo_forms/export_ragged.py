"""Exports lax.ragged_all_to_all under shard_map on 2 devices with jax.export (its custom
call has no compatibility guarantee, so that check is disabled): what current JAX writes.

    python export_ragged.py OUT.jax
"""
import os
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import Mesh, PartitionSpec as P  # noqa: E402

mesh = Mesh(np.array(jax.devices()), ("x",))


def body(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes):
    return lax.ragged_all_to_all(operand[0], output[0], input_offsets[0], send_sizes[0],
                                 output_offsets[0], recv_sizes[0], axis_name="x")[None]


f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P("x"),) * 6, out_specs=P("x")))
shapes = [jax.ShapeDtypeStruct(s, d) for s, d in
          [((2, 3), np.float32), ((2, 4), np.float32)] + [((2, 2), np.int32)] * 4]
exported = jax.export.export(f, disabled_checks=[
    jax.export.DisabledSafetyCheck.custom_call("ragged_all_to_all")])(*shapes)
with open(sys.argv[1], "wb") as out:
    out.write(exported.serialize())
