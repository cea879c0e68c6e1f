"""Devices across processes and hosts: `mpiexec -n N kiln run ...` (or any program calling
Kiln under mpiexec) runs each rank's share of the devices (device d on rank d // k, k =
devices / ranks, as threads), and the collectives between ranks go through MPI.

MPICH and mpi4py come from PyPI (`pip install kiln[mpi]`); Open MPI works too where it
runs. Ranks are detected from the launcher's environment, so a plain `python` run never
imports MPI. Every rank compiles the program (the compile cache makes the others cheap),
reads the global inputs, runs its device on its shard, and receives every device's results
so that each rank can assemble the global outputs (rank 0 writes them).

Collectives: with one device per rank, a plain all_reduce is one MPI_Allreduce over the
group's communicator and collective_permute one send and receive. Otherwise the group's
members on each rank meet in memory, one of them (the rank's *leader* for the group) trades
their operands with the other ranks' leaders (MPI_Allgatherv), and every member reads them
as the in-process fabric does.
"""
from __future__ import annotations

import os

import numpy as np

from ..errors import KilnError
from .fabric import LocalFabric

_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE")


def launched_size() -> int:
    """How many ranks the MPI launcher started (1 when not under mpiexec)."""
    for name in _SIZE_VARIABLES:
        value = os.environ.get(name)
        if value and value.isdigit():
            return int(value)
    return 1


def world():
    try:
        from mpi4py import MPI
    except ImportError:
        raise KilnError("this process runs under mpiexec, but mpi4py is not installed",
                        hint="pip install 'kiln[mpi]' (the mpich and mpi4py wheels)") from None
    return MPI


_OPS = {"add": "SUM", "multiply": "PROD", "maximum": "MAX", "minimum": "MIN",
        "and": "BAND", "or": "BOR", "xor": "BXOR"}


class MpiFabric(LocalFabric):
    """The devices spread over the ranks of MPI_COMM_WORLD, k consecutive ones per rank."""

    shares_memory = False

    def __init__(self, num_replicas: int, num_partitions: int):
        super().__init__(num_replicas, num_partitions)
        self.MPI = world()
        self.comm = self.MPI.COMM_WORLD
        if self.num_devices % self.comm.size:
            raise KilnError(f"the program runs on {self.num_devices} devices, which mpiexec's "
                            f"{self.comm.size} ranks cannot share evenly",
                            hint="run it with mpiexec -n N, N dividing the device count")
        self.per_rank = self.num_devices // self.comm.size
        self.rank = self.comm.rank
        self.local_devices = list(range(self.rank * self.per_rank, (self.rank + 1) * self.per_rank))
        self._comms: dict[tuple, object] = {}
        self._traded: dict[tuple, dict] = {}

    def rank_of(self, device: int) -> int:
        return device // self.per_rank

    def _group_comm(self, group: list[int], ranks: list[int]):
        """A communicator of the ranks hosting `group`, one per group: each rank's one
        thread that trades for the group makes it, at the same collective on every rank;
        threads leading other groups make theirs at once, told apart by the tag."""
        key = tuple(group)
        comm = self._comms.get(key)
        if comm is None:
            import zlib
            tag = zlib.crc32(repr(key).encode()) % 32000
            members = self.comm.Get_group().Incl(list(ranks))
            comm = self._comms[key] = self.comm.Create_group(members, tag)
        return comm

    def exchange(self, op: str, group: list[int], device: int, value, read):
        ranks = sorted({self.rank_of(m) for m in group})
        local = [m for m in group if self.rank_of(m) == self.rank]
        if ranks == [self.rank]:
            return super().exchange(op, group, device, value, read)
        key, posted = self.meet(op + "/mpi", local, device, value)
        try:
            if device == local[0]:  # this rank's leader for the group trades for all
                traded = self._trade(group, ranks, posted)
                with self._cond:
                    self._traded[key] = traded
                    self._cond.notify_all()
            with self._cond:
                if not self._cond.wait_for(lambda: self._failure or key in self._traded,
                                           timeout=600):
                    self._fail_locked(f"{op}: the rank's exchange did not finish")
                self._check()
                traded = self._traded[key]
            return read(traded)
        finally:
            self.leave(key)
            with self._cond:
                if key not in self._meetings:
                    self._traded.pop(key, None)

    def _trade(self, group: list[int], ranks: list[int], posted: dict) -> dict:
        """Every member's operands, from this rank's members' and the other ranks'."""
        comm = self._group_comm(group, ranks)
        members_of = {r: [m for m in group if self.rank_of(m) == r] for r in ranks}
        local = members_of[self.rank]
        out = {m: [] for m in group}
        for i in range(len(posted[local[0]])):
            mine = [np.ascontiguousarray(posted[m][i]) for m in local]
            shape, dtype = mine[0].shape, mine[0].dtype
            size = int(np.prod(shape))
            send = np.concatenate([a.reshape(-1) for a in mine]) if len(mine) > 1 else mine[0].reshape(-1)
            counts = [len(members_of[r]) * size for r in ranks]
            received = np.empty(sum(counts), dtype)
            comm.Allgatherv(send, [received, counts])
            position = 0
            for r in ranks:
                for m in members_of[r]:
                    out[m].append(received[position:position + size].reshape(shape))
                    position += size
        return out

    def all_reduce(self, group: list[int], operands, results, kind: str) -> bool:
        """MPI_Allreduce where every rank holds one member and MPI has the combiner for the
        type (False: use exchange)."""
        if self.per_rank != 1 or sorted(group) != list(group):
            return False  # MPI's reduction order follows ranks; keep the group's own order
        for a in operands:
            if a.dtype == np.bool_ or a.dtype.kind in "cV" or a.dtype.itemsize == 2 and a.dtype.kind == "f":
                return False
        op = getattr(self.MPI, _OPS[kind])
        comm = self._group_comm(group, list(group))
        for a, out in zip(operands, results):
            comm.Allreduce(np.ascontiguousarray(a), out, op=op)
        return True

    def permute(self, domain: list[int], device: int, pairs, operand, result) -> bool:
        if self.per_rank != 1:
            return False
        me = domain.index(device)
        target = next((domain[t] for s, t in pairs if s == me), None)
        source = next((domain[s] for s, t in pairs if t == me), None)
        send = np.ascontiguousarray(operand)
        if source is None:
            result[...] = 0
        requests = []
        if target is not None:
            requests.append(self.comm.Isend(send, dest=target, tag=7))
        if source is not None:
            buffer = np.empty(result.shape, result.dtype)
            self.comm.Recv(buffer, source=source, tag=7)
            result[...] = buffer
        self.MPI.Request.Waitall(requests)
        return True

    def send(self, channel: int, value) -> None:
        raise KilnError("send/recv between MPI ranks is not supported yet",
                        hint="run the program's devices in one process (without mpiexec)")

    def gather_results(self, local_results: dict[int, object]) -> list:
        """Every device's results, on every rank."""
        everyone = self.comm.allgather(local_results)
        merged = {}
        for part in everyone:
            merged.update(part)
        return [merged[d] for d in range(self.num_devices)]
