"""Kiln's shardings (python/kiln/distributed/sharding.py) as XLA's `OpSharding` protos: what a
PJRT executable reports for its parameters and outputs, so that JAX knows how the shards it
gets back make up each global array (XLA's `xla_data.proto` defines the message; Kiln declares
the fields it writes in compile_options.proto)."""
from __future__ import annotations

from ..distributed.sharding import Sharding
from .protos import messages

# OpSharding.Type (also the kinds of `last_tile_dims`)
REPLICATED = 0
OTHER = 3
UNREDUCED = 6


def op_sharding(sharding: Sharding | None) -> bytes:
    """The serialized OpSharding of a value split as `sharding` (None: whole on every
    device). A grid's last dimension (devices holding the same shard) is
    XLA's `replicate_on_last_tile_dim`."""
    message = messages("compile_options.proto")["kiln.pjrt.OpSharding"]()
    if sharding is None or sharding.is_replicated:
        message.type = REPLICATED
        return message.SerializeToString()
    copies = sharding.replication
    if sharding.partials > 1 and copies == 1 and all(t == 1 for t in sharding.tiles):
        message.type = UNREDUCED  # partial values on every device
        return message.SerializeToString()
    message.type = OTHER
    message.tile_assignment_dimensions.extend(sharding.tiles)
    message.tile_assignment_devices.extend(sharding.devices)
    if sharding.partials > 1:
        # the grid's trailing dimensions, as XLA names them: partial values, then copies
        message.tile_assignment_dimensions.append(sharding.partials)
        message.last_tile_dims.append(UNREDUCED)
        if copies > 1:
            message.tile_assignment_dimensions.append(copies)
            message.last_tile_dims.append(REPLICATED)
    elif copies > 1:
        message.tile_assignment_dimensions.append(copies)
        message.replicate_on_last_tile_dim = True
    return message.SerializeToString()
