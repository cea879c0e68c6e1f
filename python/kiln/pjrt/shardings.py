"""Kiln's shardings (python/kiln/distributed/sharding.py) as XLA's `OpSharding` protos: what a
PJRT executable reports for its parameters and outputs, so that JAX knows how the shards it
gets back make up each global array (XLA's `xla_data.proto` defines the message; Kiln declares
the fields it writes in compile_options.proto)."""
from __future__ import annotations

from ..distributed.sharding import Sharding
from .protos import messages

# OpSharding.Type
REPLICATED = 0
OTHER = 3


def op_sharding(sharding: Sharding | None, num_devices: int) -> bytes:
    """The serialized OpSharding of a value split as `sharding` (None: whole on every one of
    the `num_devices` devices). A grid's last dimension (devices holding the same shard) is
    XLA's `replicate_on_last_tile_dim`."""
    message = messages("compile_options.proto")["kiln.pjrt.OpSharding"]()
    if sharding is None or sharding.is_replicated:
        message.type = REPLICATED
        return message.SerializeToString()
    copies = len(sharding.devices) // max(1, _product(sharding.tiles))
    message.type = OTHER
    message.tile_assignment_dimensions.extend(list(sharding.tiles) + ([copies] if copies > 1
                                                                       else []))
    message.tile_assignment_devices.extend(sharding.devices)
    message.replicate_on_last_tile_dim = copies > 1
    return message.SerializeToString()


def _product(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out
