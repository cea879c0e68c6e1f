"""Running several devices in this process: one thread per device, each calling its program
with its own arguments while the fabric carries their collectives.

A device that raises aborts the fabric, so its peers stop waiting in their collectives; the
first device's own error (not a peer's "collective stopped") is what the caller sees.
"""
from __future__ import annotations

import threading
from typing import Callable, Sequence

from ..errors import KilnError
from .collectives import on_device
from .fabric import LocalFabric


def run_devices(fabric: LocalFabric, programs: Sequence[Callable], arguments: Sequence[Sequence]
                ) -> list:
    """Call `programs[d](*arguments[d])` as device d of `fabric`, all at once; their results
    in device order."""
    n = fabric.num_devices
    if len(programs) != n or len(arguments) != n:
        raise KilnError(f"{n} devices need {n} programs and argument lists, got "
                        f"{len(programs)} and {len(arguments)}")
    fabric.reset()
    results: list = [None] * n
    errors: list = [None] * n

    def device(d: int) -> None:
        try:
            with on_device(fabric, d):
                results[d] = programs[d](*arguments[d])
        except BaseException as exc:  # noqa: BLE001 - re-raised below, in the caller
            errors[d] = exc
            fabric.abort(f"device {d} failed: {type(exc).__name__}: {exc}")

    local = list(getattr(fabric, "local_devices", range(n)))  # an MPI rank runs its own
    if len(local) == 1:
        device(local[0])
    else:
        threads = [threading.Thread(target=device, args=(d,), name=f"kiln-device-{d}", daemon=True)
                   for d in local]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    failed = [(d, e) for d, e in enumerate(errors) if e is not None]
    if failed:
        # A device's own error first; peers that only saw the abort come after it.
        own = [(d, e) for d, e in failed if "collective stopped" not in str(e)]
        d, exc = (own or failed)[0]
        if isinstance(exc, KilnError) and n > 1 and not exc.message.startswith("device "):
            exc.message = f"device {d}: {exc.message}"
            exc.args = (exc.one_line(),)
        raise exc
    gather = getattr(fabric, "gather_results", None)
    if gather is not None:
        results = gather({d: results[d] for d in local})
    return results
