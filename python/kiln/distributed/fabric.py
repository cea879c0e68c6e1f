"""How devices meet: the rendezvous behind every collective, and the channels and host queues.

`LocalFabric` is N devices in one process, one thread each. A collective is a *meeting* of
its group: each member posts its operand arrays (views of its own buffers: nothing is
copied to post), waits until every member has posted, then reads what it needs straight
from the others' buffers into its own results, and waits again until every member has
finished reading, so no buffer is reused while a peer still reads it. Each byte a device
receives is copied once.

Members find the same meeting by (op, group, sequence): each device numbers its own
meetings per (op, group), and the program order of collectives is the same on every member,
which is what XLA requires too. A device that fails aborts the fabric: its peers stop
waiting with an error instead of hanging, and so does a meeting that does not complete
within KILN_COLLECTIVE_TIMEOUT seconds (default 600).
"""
from __future__ import annotations

import collections
import queue
import threading

from .. import environment
from ..errors import KilnError


def _timeout() -> float:
    try:
        return float(environment.get("KILN_COLLECTIVE_TIMEOUT"))
    except ValueError:
        return 600.0


class _Meeting:
    def __init__(self, size: int):
        self.size = size
        self.posted: dict[int, object] = {}
        self.left = 0


class LocalFabric:
    """`num_replicas` x `num_partitions` devices as threads of this process."""

    shares_memory = True  # members may write each other's results (collectives.py)

    def __init__(self, num_replicas: int = 1, num_partitions: int = 1):
        from .groups import check_device_counts
        check_device_counts(num_replicas, num_partitions)  # before a queue per device
        self.num_replicas, self.num_partitions = num_replicas, num_partitions
        self.num_devices = num_replicas * num_partitions
        self._cond = threading.Condition()
        self._meetings: dict[tuple, _Meeting] = {}
        self._sequence = [collections.Counter() for _ in range(self.num_devices)]
        self._channels: dict[int, queue.Queue] = collections.defaultdict(queue.Queue)
        self.infeed = [queue.Queue() for _ in range(self.num_devices)]
        self.outfeed = [queue.Queue() for _ in range(self.num_devices)]
        self.probes: dict[str, list] = collections.defaultdict(list)  # interpreter.probe
        self._failure: str | None = None

    # ---- meetings ----------------------------------------------------------------------------
    def meet(self, op: str, group: list[int], device: int, value):
        """Post `value` for `device`; return {member: value} once every member of `group`
        has posted. The caller reads from the values, then calls `leave` with the same key."""
        key = (op, tuple(group), self._sequence[device][(op, tuple(group))])
        self._sequence[device][(op, tuple(group))] += 1
        deadline = _timeout()
        with self._cond:
            meeting = self._meetings.get(key)
            if meeting is None:
                meeting = self._meetings[key] = _Meeting(len(group))
            meeting.posted[device] = value
            self._cond.notify_all()
            if not self._cond.wait_for(lambda: self._failure or len(meeting.posted) == meeting.size,
                                       timeout=deadline):
                missing = sorted(set(group) - set(meeting.posted))
                self._fail_locked(f"{op} on device {device} waited {deadline:g} s for "
                                  f"device(s) {missing}")
            self._check()
            return key, dict(meeting.posted)

    def leave(self, key) -> None:
        """Done reading the meeting's values; returns once every member is done."""
        deadline = _timeout()
        with self._cond:
            meeting = self._meetings[key]
            meeting.left += 1
            self._cond.notify_all()
            if not self._cond.wait_for(lambda: self._failure or meeting.left >= meeting.size,
                                       timeout=deadline):
                self._fail_locked(f"{key[0]}: a device did not finish reading in {deadline:g} s")
            self._check()
            if meeting.left == meeting.size and self._meetings.get(key) is meeting:
                del self._meetings[key]

    def exchange(self, op: str, group: list[int], device: int, value, read):
        """meet, `read(posted)` (it copies into this device's results), leave."""
        key, posted = self.meet(op, group, device, value)
        try:
            return read(posted)
        finally:
            self.leave(key)

    # ---- channels and failure ---------------------------------------------------------------
    def send(self, channel: int, value) -> None:
        self._channels[channel].put(value)

    def recv(self, channel: int, device: int):
        deadline = _timeout()
        step = 0.05
        waited = 0.0
        while True:
            try:
                return self._channels[channel].get(timeout=step)
            except queue.Empty:
                waited += step
                with self._cond:
                    self._check()
                if waited >= deadline:
                    self.abort(f"recv on channel {channel} (device {device}) waited "
                               f"{deadline:g} s for a send")
                    with self._cond:
                        self._check()

    def abort(self, why: str) -> None:
        with self._cond:
            self._fail_locked(why)

    def _fail_locked(self, why: str) -> None:
        if self._failure is None:
            self._failure = why
        self._cond.notify_all()

    def _check(self) -> None:
        if self._failure:
            raise KilnError(f"collective stopped: {self._failure}",
                            hint="every device must reach the same collectives in the same "
                                 "order (KILN_COLLECTIVE_TIMEOUT sets how long they wait)")

    def reset(self) -> None:
        """Ready for the next run: forget a failure and any half-finished meeting."""
        with self._cond:
            self._failure = None
            self._meetings.clear()
            self.probes.clear()
            for counter in self._sequence:
                counter.clear()
