"""How a global array is split over devices: Kiln's one form of a sharding, read from Shardy's
`#sdy.sharding` (with its `sdy.mesh`) and from GSPMD's `mhlo.sharding` strings.

A sharding is a *device grid*: an array of device ids whose shape is the number of shards
along each tensor dimension, then the number of partial values (`partials`: Shardy's
`unreduced` axes, XLA's UNREDUCED subgroup: the shard is the sum of that many devices' values),
then the devices that hold the same value (replication). The device at grid position
(c0, ..., c{r-1}, p, k) holds, along dimension i, the c_i-th of `tiles[i]` equal slices, as
its p-th partial. Everything else (a device's slice, the host's split and assembly, the
gathers and sums that rebuild a global value inside the program) follows from it.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from ..errors import KilnError


@dataclass(frozen=True)
class Sharding:
    tiles: tuple[int, ...]        # shards along each tensor dimension
    devices: tuple[int, ...]      # device ids, in grid order (tiles + (partials, replication))
    partials: int = 1             # partial values summed into each shard (unreduced)

    @staticmethod
    def replicated(rank: int, num_devices: int) -> "Sharding":
        return Sharding((1,) * rank, tuple(range(num_devices)))

    @property
    def grid(self) -> np.ndarray:
        """Device ids by shard: (*tiles, every device holding a part of that shard)."""
        return np.array(self.devices, np.int64).reshape(*self.tiles, -1)

    @property
    def is_replicated(self) -> bool:
        """Whole on every device: no split, no partial values."""
        return all(t == 1 for t in self.tiles) and self.partials == 1

    @property
    def replication(self) -> int:
        return len(self.devices) // (int(np.prod(self.tiles)) * self.partials)

    def to_json(self) -> str:
        data = {"tiles": list(self.tiles), "devices": list(self.devices)}
        if self.partials != 1:
            data["partials"] = self.partials
        return json.dumps(data)

    @staticmethod
    def from_json(text: str) -> "Sharding":
        data = json.loads(text)
        return Sharding(tuple(data["tiles"]), tuple(data["devices"]), data.get("partials", 1))

    # ---- partial values --------------------------------------------------------------------
    def partial_index(self, device: int) -> int:
        """Which of its shard's partial values `device` holds (0 without unreduced axes)."""
        grid = np.array(self.devices, np.int64).reshape(*self.tiles, self.partials, -1)
        return int(np.argwhere(grid == device)[0][-2])

    def reduce_groups(self) -> list[list[int]]:
        """Groups of devices whose values sum to one shard (one device of each partial): an
        all_reduce over them makes every device hold its whole shard."""
        grid = np.array(self.devices, np.int64).reshape(*self.tiles, self.partials, -1)
        return np.moveaxis(grid, -2, -1).reshape(-1, self.partials).tolist()

    # ---- shapes and slices -------------------------------------------------------------------
    def local_shape(self, shape, what: str = "a value") -> tuple[int, ...]:
        if len(shape) != len(self.tiles):
            raise KilnError(f"{what} has rank {len(shape)}, its sharding splits {len(self.tiles)} "
                            "dimensions")
        for d, (n, t) in enumerate(zip(shape, self.tiles)):
            if n % t:
                raise KilnError(f"{what}: dimension {d} of size {n} does not split evenly into "
                                f"{t} shards", hint="Kiln shards dimensions divisible by their "
                                                    "shard count (pad the array)")
        return tuple(n // t for n, t in zip(shape, self.tiles))

    def coordinates(self, device: int) -> tuple[int, ...]:
        where = np.argwhere(self.grid == device)
        if not len(where):
            raise KilnError(f"device {device} holds no shard of this sharding (devices "
                            f"{sorted(set(self.devices))})")
        return tuple(int(c) for c in where[0][:-1])

    def offsets(self, device: int, shape) -> tuple[int, ...]:
        local = self.local_shape(shape)
        return tuple(c * n for c, n in zip(self.coordinates(device), local))

    def slices(self, device: int, shape) -> tuple[slice, ...]:
        local = self.local_shape(shape)
        return tuple(slice(o, o + n) for o, n in zip(self.offsets(device, shape), local))

    def gather_groups(self, dim: int) -> list[list[int]]:
        """Groups of devices that together hold all of dimension `dim` (the others fixed),
        each in shard order: an all_gather along `dim` over them rebuilds that dimension."""
        moved = np.moveaxis(self.grid, dim, -1)
        return moved.reshape(-1, self.tiles[dim]).tolist()

    # ---- the host's side ---------------------------------------------------------------------
    def split(self, array: np.ndarray, num_devices: int) -> list[np.ndarray]:
        """Each device's shard of a global array, row-major as compiled code reads it (a
        copy where the slice is not contiguous; devices outside the grid get None). Of a
        shard's partial values, the first is the shard and the others zeros."""
        out = [None] * num_devices
        for d in set(self.devices):
            shard = np.ascontiguousarray(array[self.slices(d, array.shape)])
            out[d] = shard if self.partials == 1 or self.partial_index(d) == 0 else \
                np.zeros_like(shard)
        return out

    def assemble(self, shards: list[np.ndarray], shape, dtype) -> np.ndarray:
        """The global array from each device's shard (one holder of each partial value of
        each shard is read; partial values are summed)."""
        out = np.empty(shape, dtype)
        grid = np.array(self.devices, np.int64).reshape(*self.tiles, self.partials, -1)
        for index in np.ndindex(*self.tiles):
            holders = [int(grid[index][p][0]) for p in range(self.partials)]
            total = shards[holders[0]]
            for d in holders[1:]:
                total = total + shards[d]
            out[self.slices(holders[0], shape)] = total
        return out


# ---- Shardy --------------------------------------------------------------------------------------

def from_sdy(axes: list[tuple[str, int]], device_ids: list[int], dims: list[list[str]],
             what: str, unreduced: list[str] = ()) -> Sharding:
    """A Shardy sharding over mesh `axes` ([(name, size)], major to minor; `device_ids` in
    mesh order, empty for iota): dimension i split over the mesh axes `dims[i]`, major first;
    the values along the `unreduced` axes are partial sums."""
    names = [a for a, _ in axes]
    sizes = dict(axes)
    used = [a for dim in dims for a in dim]
    for a in used + list(unreduced):
        if a not in sizes:
            raise KilnError(f"{what}: sharding names mesh axis {a!r}, the mesh has {names}")
    if len(set(used + list(unreduced))) != len(used) + len(unreduced):
        raise KilnError(f"{what}: a mesh axis shards two dimensions (or is also unreduced)")
    total = int(np.prod([s for _, s in axes])) if axes else 1
    mesh = np.array(device_ids or range(total), np.int64).reshape([s for _, s in axes] or [1])
    if not axes:
        return Sharding((1,) * len(dims), tuple(mesh.reshape(-1).tolist()))
    unreduced = [a for a in names if a in unreduced]  # mesh order
    rest = [a for a in names if a not in used and a not in unreduced]
    order = [names.index(a) for a in used + unreduced + rest]
    tiles = tuple(int(np.prod([sizes[a] for a in dim])) if dim else 1 for dim in dims)
    grid = mesh.transpose(order).reshape(*tiles, -1)
    partials = int(np.prod([sizes[a] for a in unreduced])) if unreduced else 1
    return Sharding(tiles, tuple(grid.reshape(-1).tolist()), partials)


# ---- GSPMD (mhlo.sharding, HLO's sharding={...}) -----------------------------------------------

_DEVICES = re.compile(r"devices=\[([\d,]+)\]((?:<=\[[\d,]+\](?:T\([\d,]+\))?)|[\d,]+)")


def from_hlo(text: str, rank: int, num_devices: int, what: str) -> Sharding | str:
    """An `mhlo.sharding` string: a Sharding, or "manual" for `{manual}`."""
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1].strip()
    if body.startswith("{"):
        raise KilnError(f"{what}: tuple shardings ({text}) are not supported on entry values",
                        hint="flatten the tuple")
    if body in ("replicated", "") or body.startswith("maximal"):
        # maximal: one device computes it; every device holding it all is equally right.
        return Sharding.replicated(rank, num_devices)
    if body == "unreduced":  # a partial value on every device
        return Sharding((1,) * rank, tuple(range(num_devices)), num_devices)
    if body == "manual":
        return "manual"
    m = _DEVICES.search(body)
    if not m:
        raise KilnError(f"{what}: cannot read the sharding {text!r}",
                        hint="forms: {replicated}, {maximal device=N}, {devices=[a,b]0,1,...}, "
                             "{devices=[a,b]<=[n]} (with T(...) and last_tile_dim_replicate)")
    dims = [int(x) for x in m.group(1).split(",")]
    ids_text = m.group(2)
    if ids_text.startswith("<="):
        from .groups import parse_iota
        ids = np.array(parse_iota(f"[{int(np.prod(dims))},1]{ids_text}")).reshape(-1)
    else:
        ids = np.array([int(x) for x in ids_text.split(",")])
    kinds = []
    if "last_tile_dim_replicate" in body:
        kinds = ["replicated"]
    elif "last_tile_dims=" in body:
        kinds = [k.strip() for k in
                 re.search(r"last_tile_dims=\{([^}]*)\}", body).group(1).split(",")]
        if any(k not in ("replicated", "unreduced") for k in kinds) or \
                len(set(kinds)) != len(kinds):
            raise KilnError(f"{what}: sharding {text!r} has manual subgroups, which Kiln does "
                            "not partition yet", hint="use a fully manual shard_map")
    tiles = dims[:len(dims) - len(kinds)]
    if len(tiles) != rank:
        raise KilnError(f"{what}: sharding {text!r} tiles {len(tiles)} dimensions of a rank-"
                        f"{rank} value")
    sizes = dict(zip(kinds, dims[len(tiles):]))
    partials, copies = sizes.get("unreduced", 1), sizes.get("replicated", 1)
    grid = ids.reshape(*dims)
    if kinds == ["replicated", "unreduced"]:  # Kiln's grid has the partial values first
        grid = np.swapaxes(grid, -1, -2)
    grid = grid.reshape(*tiles, partials, copies)
    return Sharding(tuple(tiles), tuple(int(i) for i in grid.reshape(-1)), partials)
