"""Kiln's one form of a sharding (distributed/sharding.py), read from Shardy and GSPMD."""
from __future__ import annotations

import numpy as np
import pytest

from kiln.distributed.groups import parse_iota, process_groups, mode
from kiln.distributed.sharding import Sharding, from_hlo, from_sdy
from kiln.errors import KilnError


def test_sdy_two_axes_on_two_dimensions_and_a_replicated_axis():
    # mesh x=2, y=2, z=2 (devices 0..7 in mesh order); dim 0 over y, dim 1 over x; z replicates
    s = from_sdy([("x", 2), ("y", 2), ("z", 2)], [], [["y"], ["x"]], "test")
    assert s.tiles == (2, 2)
    grid = s.grid
    mesh = np.arange(8).reshape(2, 2, 2)
    for x in range(2):
        for y in range(2):
            assert sorted(grid[y, x]) == sorted(mesh[x, y])
    a = np.arange(4 * 6).reshape(4, 6)
    shards = s.split(a, 8)
    assert np.array_equal(shards[int(mesh[1, 0, 1])], a[0:2, 3:6])  # x=1 -> dim 1 shard 1
    assert np.array_equal(s.assemble(shards, a.shape, a.dtype), a)


def test_sdy_device_ids_order_the_mesh():
    s = from_sdy([("x", 2)], [1, 0], [["x"]], "test")
    assert s.coordinates(1) == (0,) and s.coordinates(0) == (1,)


def test_gspmd_strings():
    assert from_hlo("{replicated}", 2, 4, "t") == Sharding.replicated(2, 4)
    assert from_hlo("{manual}", 2, 4, "t") == "manual"
    s = from_hlo("{devices=[2,1]<=[2]}", 2, 2, "t")
    assert s.tiles == (2, 1) and s.devices == (0, 1)
    s = from_hlo("{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}", 2, 4, "t")
    assert s.tiles == (2, 1) and s.gather_groups(0) == [[0, 1], [2, 3]]
    s = from_hlo("{devices=[2,2]<=[2,2]T(1,0)}", 2, 4, "t")
    assert s.devices == (0, 2, 1, 3)
    with pytest.raises(KilnError, match="cannot read the sharding"):
        from_hlo("{devices=oops}", 2, 4, "t")


def test_uneven_split_is_a_clear_error():
    with pytest.raises(KilnError, match="does not split evenly"):
        from_hlo("{devices=[2]<=[2]}", 1, 2, "t").local_shape((5,), "argument 0")


def test_groups_modes_and_iota():
    assert parse_iota("[2,2]<=[4]") == [[0, 1], [2, 3]]
    assert parse_iota("[2,2]<=[2,2]T(1,0)") == [[0, 2], [1, 3]]
    assert mode("all_reduce", 0, False) == "cross_replica"
    assert mode("all_reduce", 1, False) == "cross_replica_and_partition"
    assert mode("all_reduce", 1, True) == "flattened_ids"
    assert mode("collective_permute", 1, False) == "cross_partition"
    # 2 replicas x 2 partitions: device = replica * 2 + partition
    assert process_groups("cross_replica", [[0, 1]], 2, 2) == [[0, 2], [1, 3]]
    assert process_groups("cross_partition", [], 2, 2) == [[0, 1], [2, 3]]
    assert process_groups("cross_replica_and_partition", [[0, 1]], 2, 2) == [[0, 2, 1, 3]]
    with pytest.raises(KilnError, match="name a device twice"):
        process_groups("flattened_ids", [[0, 1], [1, 2]], 1, 4)
