"""Seed 001's collectives at run time: the `kiln.collective.*` custom-call targets that
kiln-lower-collectives (lowering/legalize/collectives.py) turns every collective into.

Each target runs on the device thread that reached it (`current()` says which device and
fabric that is), meets its group on the fabric and fills its results from the members'
operands. Groups arrive resolved to device ids (groups.py), in the backend config.
Reductions with a plain combiner (add, multiply, min, max, and, or, xor) reduce here in
group order, so every member computes bit-identical results; any other combiner was
lowered to a gather of the members' operands (`all_gather_stacked`) followed by a compiled
`stablehlo.reduce`.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass

import numpy as np

from ..errors import KilnError
from .fabric import LocalFabric
from .groups import group_of

PREFIX = "kiln.collective."


@dataclass
class Device:
    fabric: LocalFabric
    id: int

    @property
    def replica(self) -> int:
        return self.id // self.fabric.num_partitions

    @property
    def partition(self) -> int:
        return self.id % self.fabric.num_partitions


_local = threading.local()
_SINGLE = LocalFabric(1, 1)


def current() -> Device:
    """The device this thread runs (a lone device when no multi-device run set one)."""
    device = getattr(_local, "device", None)
    return device if device is not None else Device(_SINGLE, 0)


class on_device:
    """`with on_device(fabric, id):` runs the body as device `id` of `fabric`."""

    def __init__(self, fabric: LocalFabric, device_id: int):
        self.device = Device(fabric, device_id)

    def __enter__(self):
        self.saved = getattr(_local, "device", None)
        _local.device = self.device
        return self.device

    def __exit__(self, *exc):
        _local.device = self.saved


# ---- reductions ---------------------------------------------------------------------------------

def _combine(kind: str, dtype: np.dtype):
    boolean = dtype == np.bool_
    return {"add": np.logical_or if boolean else np.add,
            "multiply": np.logical_and if boolean else np.multiply,
            "maximum": np.logical_or if boolean else np.maximum,
            "minimum": np.logical_and if boolean else np.minimum,
            "and": np.logical_and if boolean else np.bitwise_and,
            "or": np.logical_or if boolean else np.bitwise_or,
            "xor": np.logical_xor if boolean else np.bitwise_xor}[kind]


def _reduce_into(out: np.ndarray, parts: list[np.ndarray], kind: str) -> None:
    f = _combine(kind, out.dtype)
    if len(parts) == 1:
        out[...] = parts[0]
        return
    f(parts[0], parts[1], out=out)
    for p in parts[2:]:
        f(out, p, out=out)


def _chunk(a: np.ndarray, dim: int, count: int, index: int) -> np.ndarray:
    size = a.shape[dim] // count
    where = [slice(None)] * a.ndim
    where[dim] = slice(index * size, (index + 1) * size)
    return a[tuple(where)]


def _config(backend_config: str) -> dict:
    return json.loads(backend_config)


def expect_shape(op: str, out: np.ndarray, want: tuple, group: list[int]) -> None:
    """Last line of defence behind kiln-lower-collectives' compile-time shape check (which
    cannot see dynamic dimensions): a result that cannot hold what the group produces is a
    KilnError, not numpy's bare ValueError from the copy."""
    if tuple(out.shape) != tuple(want):
        raise KilnError(f"{op}: the result has shape {list(out.shape)}, but group {group} "
                        f"produces {list(want)}",
                        hint="declare the collective's result shape that its operand and "
                             "replica groups give")


def _scaled(shape: tuple, dim: int, num: int, den: int = 1) -> tuple:
    out = list(shape)
    out[dim] = out[dim] * num // den
    return tuple(out)


def _my_group(cfg: dict, device: Device, op: str) -> list[int] | None:
    group = group_of(cfg["groups"], device.id)
    if group is None and cfg.get("everyone", True):
        raise KilnError(f"{op}: device {device.id} (replica {device.replica}, partition "
                        f"{device.partition}) is in none of its groups {cfg['groups']}",
                        hint="replica groups must cover every device that runs the op")
    return group


# ---- targets -------------------------------------------------------------------------------------
# Each is a Python custom-call target: (results, operands, attributes=, backend_config=).

def device_id(results, operands, attributes=None, backend_config=""):
    d = current()
    which = _config(backend_config)["which"]
    results[0][...] = d.replica if which == "replica" else d.partition


def all_gather(results, operands, attributes=None, backend_config=""):
    cfg, d = _config(backend_config), current()
    group = _my_group(cfg, d, "all_gather")
    dim = cfg["dim"]

    def read(posted):
        for i, out in enumerate(results):
            expect_shape("all_gather", out, _scaled(np.shape(operands[i]), dim, len(group)), group)
            np.concatenate([posted[m][i] for m in group], axis=dim, out=out)
    d.fabric.exchange("all_gather", group, d.id, operands, read)


def all_gather_stacked(results, operands, attributes=None, backend_config=""):
    """Each member's operands stacked on a new leading dimension, in group order."""
    cfg, d = _config(backend_config), current()
    group = _my_group(cfg, d, "all_gather")

    def read(posted):
        for i, out in enumerate(results):
            for j, m in enumerate(group):
                out[j] = posted[m][i]
    d.fabric.exchange("all_gather", group, d.id, operands, read)


def all_reduce(results, operands, attributes=None, backend_config=""):
    cfg, d = _config(backend_config), current()
    group = _my_group(cfg, d, "all_reduce")
    # Checked before meeting: the expected shape does not depend on the group, so every
    # member raises alike and none is left waiting.
    for operand, out in zip(operands, results):
        expect_shape("all_reduce", out, np.shape(operand), group)
    fast = getattr(d.fabric, "all_reduce", None)  # MPI_Allreduce (mpi.py)
    if fast is not None and fast(group, operands, results, cfg["reduction"]):
        return
    if getattr(d.fabric, "shares_memory", False):
        # Reduce-scatter then all-gather, in memory: member j reduces the j-th slice of every
        # operand and writes it into every member's result. Each element is combined once
        # (so every result holds the same bits) and each byte crosses memory once.
        me = group.index(d.id)

        def read(posted):
            for i in range(len(results)):
                flat = [posted[m][0][i].reshape(-1) for m in group]
                outs = [posted[m][1][i].reshape(-1) for m in group]
                lo, hi = _slice_bounds(flat[0].size, len(group), me)
                _reduce_into(outs[me][lo:hi], [f[lo:hi] for f in flat], cfg["reduction"])
                for j, out in enumerate(outs):
                    if j != me:
                        out[lo:hi] = outs[me][lo:hi]
        d.fabric.exchange("all_reduce", group, d.id, (operands, results), read)
        return

    def read(posted):
        for i, out in enumerate(results):
            _reduce_into(out, [posted[m][i] for m in group], cfg["reduction"])
    d.fabric.exchange("all_reduce", group, d.id, operands, read)


def _slice_bounds(size: int, parts: int, index: int) -> tuple[int, int]:
    step = -(-size // parts)
    return min(size, index * step), min(size, (index + 1) * step)


def collective_reduce(results, operands, attributes=None, backend_config=""):
    """The reduction to the group's first member; the others get zeros."""
    cfg, d = _config(backend_config), current()
    group = _my_group(cfg, d, "collective_reduce")

    def read(posted):
        for i, out in enumerate(results):
            if group[0] == d.id:
                _reduce_into(out, [posted[m][i] for m in group], cfg["reduction"])
            else:
                out[...] = 0
    d.fabric.exchange("collective_reduce", group, d.id, operands, read)


def reduce_scatter(results, operands, attributes=None, backend_config=""):
    cfg, d = _config(backend_config), current()
    group = _my_group(cfg, d, "reduce_scatter")
    me = group.index(d.id)

    def read(posted):
        for i, out in enumerate(results):
            dim = cfg["dim"]
            if np.shape(operands[i])[dim] % len(group):
                raise KilnError(f"reduce_scatter: dimension {dim} of size "
                                f"{np.shape(operands[i])[dim]} does not split into {len(group)} "
                                "equal parts", hint="make it a multiple of the group size")
            expect_shape("reduce_scatter", out, _scaled(np.shape(operands[i]), dim, 1, len(group)),
                         group)
            parts = [_chunk(posted[m][i], cfg["dim"], len(group), me) for m in group]
            _reduce_into(out, parts, cfg["reduction"])
    d.fabric.exchange("reduce_scatter", group, d.id, operands, read)


def all_to_all(results, operands, attributes=None, backend_config=""):
    cfg, d = _config(backend_config), current()
    group = _my_group(cfg, d, "all_to_all")
    me = group.index(d.id)
    split, concat = cfg["split_dim"], cfg["concat_dim"]

    def read(posted):
        for i, out in enumerate(results):
            if np.shape(operands[i])[split] % len(group):
                raise KilnError(f"all_to_all: dimension {split} of size "
                                f"{np.shape(operands[i])[split]} does not split into "
                                f"{len(group)} equal parts",
                                hint="make it a multiple of the group size")
            want = _scaled(_scaled(np.shape(operands[i]), split, 1, len(group)), concat, len(group))
            expect_shape("all_to_all", out, want, group)
            np.concatenate([_chunk(posted[m][i], split, len(group), me) for m in group],
                           axis=concat, out=out)
    d.fabric.exchange("all_to_all", group, d.id, operands, read)


def all_to_all_stacked(results, operands, attributes=None, backend_config=""):
    """Chunk `me` of every member's operands, stacked in group order (a reduce_scatter with
    a combiner only compiled code can run reduces this over its leading dimension)."""
    cfg, d = _config(backend_config), current()
    group = _my_group(cfg, d, "reduce_scatter")
    me = group.index(d.id)

    def read(posted):
        for i, out in enumerate(results):
            for j, m in enumerate(group):
                out[j] = _chunk(posted[m][i], cfg["dim"], len(group), me)
    d.fabric.exchange("reduce_scatter", group, d.id, operands, read)


def ragged_all_to_all(results, operands, attributes=None, backend_config=""):
    """lax.ragged_all_to_all: the offsets and sizes hold one entry per (member, slice);
    entry k of sender s goes to member k // per_member, where it is written at the sender's
    output_offsets[k]. The result starts as the `output` operand."""
    cfg, d = _config(backend_config), current()
    group = _my_group(cfg, d, "ragged_all_to_all")
    me = group.index(d.id)
    data, output, in_off, send, out_off, recv = operands
    entries = np.asarray(in_off).shape[0]
    if entries % len(group):
        raise KilnError(f"ragged_all_to_all: {entries} offsets for a group of {len(group)}",
                        hint="the offset and size arrays hold a multiple of the group size")
    per = entries // len(group)
    results[0][...] = output

    def read(posted):
        for s, m in enumerate(group):
            p_data, p_in, p_send, p_out = posted[m]
            for j in range(per):
                k, mine = me * per + j, s * per + j
                lo, n, at = int(p_in[k]), int(p_send[k]), int(p_out[k])
                if n != int(recv[mine]):
                    raise KilnError(f"ragged_all_to_all: member {m} sends {n} rows to "
                                    f"device {d.id}, which expects recv_sizes[{mine}] = "
                                    f"{int(recv[mine])}")
                if n and (lo < 0 or at < 0 or lo + n > p_data.shape[0]
                          or at + n > results[0].shape[0]):
                    raise KilnError(f"ragged_all_to_all: rows {lo}..{lo + n} of member {m} "
                                    f"to rows {at}..{at + n} of device {d.id} are out of "
                                    "bounds", hint="check input_offsets, send_sizes and "
                                                   "output_offsets")
                results[0][at:at + n] = p_data[lo:lo + n]
    d.fabric.exchange("ragged_all_to_all", group, d.id, (data, in_off, send, out_off), read)


def collective_permute(results, operands, attributes=None, backend_config=""):
    """Each target receives its source's operand; a device no pair targets gets zeros.
    The meeting spans the pairs' domain (`groups`: the devices that number their pairs)."""
    cfg, d = _config(backend_config), current()
    domain = group_of(cfg["groups"], d.id)
    me = domain.index(d.id)
    source = next((s for s, t in cfg["pairs"] if t == me), None)
    fast = getattr(d.fabric, "permute", None)  # MPI send and receive (mpi.py)
    if fast is not None and fast(domain, d.id, cfg["pairs"], operands[0], results[0]):
        return

    def read(posted):
        expect_shape("collective_permute", results[0], np.shape(operands[0]), domain)
        if source is None:
            results[0][...] = 0
        else:
            results[0][...] = posted[domain[source]][0]
    d.fabric.exchange("collective_permute", domain, d.id, operands, read)


def collective_broadcast(results, operands, attributes=None, backend_config=""):
    """The group's first member's operand to every member; devices in no group get zeros."""
    cfg, d = _config(backend_config), current()
    _broadcast(results, operands, d, group_of(cfg["groups"], d.id), [0] * len(results))


def collective_broadcast_dynamic(results, operands, attributes=None, backend_config=""):
    """Data operand i from the group member `root[i]` (the last operand), to every member."""
    cfg, d = _config(backend_config), current()
    group = group_of(cfg["groups"], d.id)
    roots = [int(r) for r in np.asarray(operands[-1]).reshape(-1)]
    if group is not None and (len(roots) != len(results) or
                              any(not 0 <= r < len(group) for r in roots)):
        raise KilnError(f"collective_broadcast: root {roots} must name one member of the "
                        f"group {group} per data operand")
    _broadcast(results, operands[:-1], d, group, roots)


def _broadcast(results, operands, d: Device, group: list[int] | None, roots: list[int]) -> None:
    """Result i is the operand i of group member roots[i]; a device in no group gets zeros."""
    if group is None:
        for out in results:
            out[...] = 0
        return

    def read(posted):
        for i, out in enumerate(results):
            out[...] = posted[group[roots[i]]][i]
    d.fabric.exchange("collective_broadcast", group, d.id, operands, read)


_print_lock = threading.Lock()


def host_print(results, operands, attributes=None, backend_config=""):
    """interpreter.print: one value per call, never interleaved with another device's."""
    value = operands[0]
    with np.printoptions(threshold=1 << 20, linewidth=1 << 16):
        body = np.array2string(value, separator=", ")
    with _print_lock:
        print(f"{_config(backend_config)['type']} {{\n  {body}\n}}", flush=True)


def probe(results, operands, attributes=None, backend_config=""):
    """interpreter.probe: record a copy of the value (each run's values, in order, per id)."""
    d = current()
    d.fabric.probes[_config(backend_config)["probe_id"]].append(np.array(operands[0], copy=True))
    results[0][...] = operands[0]


def group_root(results, operands, attributes=None, backend_config=""):
    """True on the first member of this device's group."""
    cfg, d = _config(backend_config), current()
    group = group_of(cfg["groups"], d.id)
    results[0][...] = group is not None and group[0] == d.id


def send(results, operands, attributes=None, backend_config=""):
    cfg, d = _config(backend_config), current()
    d.fabric.send(cfg["channel"], [np.array(x, copy=True) for x in operands if x is not None])


def recv(results, operands, attributes=None, backend_config=""):
    cfg, d = _config(backend_config), current()
    values = d.fabric.recv(cfg["channel"], d.id)
    arrays = [r for r in results if r is not None]
    if len(values) != len(arrays) or any(v.shape != r.shape for v, r in zip(values, arrays)):
        raise KilnError(f"recv on channel {cfg['channel']}: the send carried "
                        f"{[v.shape for v in values]}, the recv expects {[r.shape for r in arrays]}",
                        hint="a send and its recv must agree on their arrays")
    for v, r in zip(values, arrays):
        r[...] = v


def infeed(results, operands, attributes=None, backend_config=""):
    d = current()
    arrays = [r for r in results if r is not None]
    import queue
    from .fabric import _timeout
    try:
        values = d.fabric.infeed[d.id].get(timeout=_timeout())
    except queue.Empty:
        raise KilnError(f"infeed on device {d.id}: the host queue stayed empty for "
                        f"{_timeout():g} s", hint="put the values first: "
                        "Executable.infeed(*arrays, device=N) (KILN_COLLECTIVE_TIMEOUT sets the "
                        "wait)") from None
    values = values if isinstance(values, (list, tuple)) else [values]
    if len(values) != len(arrays):
        raise KilnError(f"infeed on device {d.id} expects {len(arrays)} array(s), the queue "
                        f"held {len(values)}")
    for v, r in zip(values, arrays):
        v = np.asarray(v)
        if v.shape != r.shape:
            raise KilnError(f"infeed on device {d.id}: expected shape {r.shape}, the queue "
                            f"held {v.shape}")
        r[...] = v


def outfeed(results, operands, attributes=None, backend_config=""):
    d = current()
    d.fabric.outfeed[d.id].put([np.array(x, copy=True) for x in operands if x is not None])


TARGETS = {name: fn for name, fn in [
    ("device_id", device_id), ("all_gather", all_gather), ("all_gather_stacked", all_gather_stacked),
    ("all_reduce", all_reduce), ("collective_reduce", collective_reduce),
    ("reduce_scatter", reduce_scatter), ("all_to_all", all_to_all),
    ("all_to_all_stacked", all_to_all_stacked), ("collective_permute", collective_permute),
    ("ragged_all_to_all", ragged_all_to_all),
    ("collective_broadcast", collective_broadcast),
    ("collective_broadcast_dynamic", collective_broadcast_dynamic), ("group_root", group_root),
    ("print", host_print), ("probe", probe),
    ("send", send), ("recv", recv), ("infeed", infeed), ("outfeed", outfeed)]}


def register_collective_targets(registry) -> None:
    for name, fn in TARGETS.items():
        registry.register(PREFIX + name, fn, "cpu", api_version=1, origin="kiln")
