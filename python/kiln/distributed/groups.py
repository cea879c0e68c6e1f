"""Which devices take part in a collective together (seed 001's replica groups; StableHLO's
process groups).

A device is (replica, partition); its *device id* is `replica * num_partitions + partition`,
XLA's flattened id. A collective's attributes select one of four ways of reading its groups:

- cross_replica: the groups list replica ids; they apply within every partition.
- cross_partition: the groups list partition ids; they apply within every replica.
- cross_replica_and_partition: the groups list replica ids; each group takes in those
  replicas of every partition.
- flattened_ids: the groups list device ids.

An empty group list means one group of every replica (or partition). Groups are resolved at
compile time into lists of device ids, which is all the runtime needs.
"""
from __future__ import annotations

import math
import re

from .. import environment
from ..errors import KilnError

CROSS_REPLICA = "cross_replica"
CROSS_PARTITION = "cross_partition"
CROSS_REPLICA_AND_PARTITION = "cross_replica_and_partition"
FLATTENED_IDS = "flattened_ids"

# Ops whose channel selects partitions rather than replicas and partitions together.
_PARTITION_CHANNEL_OPS = {"all_to_all", "collective_permute", "collective_broadcast"}


# Kiln runs every device as a thread of one process (fabric.py), each with its own buffers,
# and a collective's meeting wakes every member: an all-reduce over 1,024 devices took 24 s on
# 2 cores, over 2,048 devices 88 s (Nov 2026). Past this the answer comes too late to be of use.
DEFAULT_MAX_DEVICES = 1024


def max_devices() -> int:
    """How many devices (replicas x partitions) a program may ask for: KILN_MAX_DEVICES,
    by default DEFAULT_MAX_DEVICES or the process's thread limit if that is lower."""
    raw = environment.get("KILN_MAX_DEVICES")
    if raw is not None:
        try:
            return max(1, int(raw))
        except ValueError:
            raise KilnError(f"KILN_MAX_DEVICES={raw!r} is not a number",
                            hint="set it to the most devices a program may run on") from None
    limit = DEFAULT_MAX_DEVICES
    try:
        import resource
        threads, _ = resource.getrlimit(resource.RLIMIT_NPROC)
        if threads != resource.RLIM_INFINITY:
            limit = min(limit, max(1, threads // 2))
    except (ImportError, OSError, ValueError):
        pass
    return limit


def check_device_counts(replicas: int, partitions: int, location: str | None = None) -> None:
    """Refuse device counts this machine cannot run (below 1, or more devices than
    max_devices()) before anything is made per device."""
    for name, count in (("mhlo.num_replicas", replicas), ("mhlo.num_partitions", partitions)):
        if count < 1:
            raise KilnError(f"{name} = {count}: a program runs on at least one device",
                            location=location, hint=f"set {name} to 1 or more")
    limit = max_devices()
    if replicas * partitions > limit:
        raise KilnError(f"the program asks for {replicas} replica(s) x {partitions} "
                        f"partition(s) = {replicas * partitions} devices; Kiln runs at most "
                        f"{limit} here", location=location,
                        hint="every device is a thread of this process; lower mhlo.num_replicas"
                             " / mhlo.num_partitions, or raise KILN_MAX_DEVICES if the machine "
                             "can run that many")


def device_counts(op, filename: str = "<module>") -> tuple[int, int]:
    """(num_replicas, num_partitions) the module holding `op` (a module or any op in it)
    declares with `mhlo.num_replicas` / `mhlo.num_partitions`; 1 where absent. Counts this
    machine cannot run are a KilnError located at the module (check_device_counts)."""
    from torch_mlir import ir
    from ..diagnostics import format_location
    top = getattr(op, "operation", op)
    while top.parent is not None:
        top = top.parent
    attrs = top.attributes
    counts = []
    for name in ("mhlo.num_replicas", "mhlo.num_partitions"):
        if name not in attrs:
            counts.append(1)
            continue
        try:
            counts.append(ir.IntegerAttr(attrs[name]).value)
        except ValueError:
            raise KilnError(f"{name} must be an integer, got {attrs[name]}",
                            location=format_location(top.location, filename),
                            hint=f"write e.g. {name} = 2 : i32") from None
    check_device_counts(*counts, location=format_location(top.location, filename))
    return tuple(counts)


def mode(op: str, channel_id: int, use_global_device_ids: bool) -> str:
    """The group mode of collective `op` (short name, e.g. "all_gather")."""
    if op in _PARTITION_CHANNEL_OPS:
        return CROSS_PARTITION if channel_id > 0 else CROSS_REPLICA
    if use_global_device_ids:
        return FLATTENED_IDS
    return CROSS_REPLICA_AND_PARTITION if channel_id > 0 else CROSS_REPLICA


def process_groups(kind: str, groups: list[list[int]], num_replicas: int,
                   num_partitions: int) -> list[list[int]]:
    """The groups as lists of device ids, in the order their members contribute."""
    replicas, partitions = range(num_replicas), range(num_partitions)
    device = lambda r, p: r * num_partitions + p  # noqa: E731
    if kind == FLATTENED_IDS:
        if not groups:
            raise KilnError("use_global_device_ids needs explicit replica groups",
                            hint="list the device ids of each group")
        out = [list(g) for g in groups]
        limit = num_replicas * num_partitions
    elif kind == CROSS_PARTITION:
        groups = groups or [list(partitions)]
        out = [[device(r, p) for p in g] for r in replicas for g in groups]
        limit = num_partitions
    elif kind == CROSS_REPLICA:
        groups = groups or [list(replicas)]
        out = [[device(r, p) for r in g] for p in partitions for g in groups]
        limit = num_replicas
    elif kind == CROSS_REPLICA_AND_PARTITION:
        groups = groups or [list(replicas)]
        out = [[device(r, p) for p in partitions for r in g] for g in groups]
        limit = num_replicas
    else:
        raise ValueError(kind)
    for g in groups:
        bad = [i for i in g if not 0 <= i < limit]
        if bad:
            raise KilnError(f"replica group {g} names id {bad[0]}, outside the program's "
                            f"{num_replicas} replica(s) x {num_partitions} partition(s)",
                            hint="mhlo.num_replicas / mhlo.num_partitions set the device counts")
    seen = [d for g in out for d in g]
    if len(seen) != len(set(seen)):
        raise KilnError(f"replica groups {groups} name a device twice",
                        hint="each device belongs to at most one group")
    return out


def group_of(groups: list[list[int]], device: int) -> list[int] | None:
    for g in groups:
        if device in g:
            return g
    return None


_IOTA = re.compile(r"^\[([\d,\s]+)\]<=\[([\d,\s]+)\](?:T\(([\d,\s]+)\))?$")


def parse_iota(text: str) -> list[list[int]]:
    """XLA's iota replica-group form `[G,S]<=[dims]T(perm)`: iota over `dims`, transposed by
    `perm`, reshaped to G groups of S."""
    groups = iota_groups(text)
    if groups is None:
        raise KilnError(f"cannot read replica groups {text!r}",
                        hint="XLA's forms: {{0,1},{2,3}} or [2,2]<=[4] or [2,2]<=[2,2]T(1,0)")
    return groups


def iota_groups(text: str) -> list[list[int]] | None:
    """The groups of `text` if it is in XLA's iota form, else None."""
    import numpy as np
    m = _IOTA.match(text.replace(" ", ""))
    if not m:
        return None
    shape = [int(x) for x in m.group(1).split(",")]
    dims = [int(x) for x in m.group(2).split(",")]
    count = math.prod(dims)
    if count > max_devices() or math.prod(shape) != count:
        raise KilnError(f"replica groups {text} list {count} device ids",
                        hint=f"the groups [{m.group(1)}] must hold as many ids as [{m.group(2)}],"
                             f" at most {max_devices()} (KILN_MAX_DEVICES)")
    ids = np.arange(count).reshape(dims)
    if m.group(3):
        ids = ids.transpose([int(x) for x in m.group(3).split(",")])
    return ids.reshape(shape).tolist()
