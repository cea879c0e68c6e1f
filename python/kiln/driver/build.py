"""Where a compile runs: the persistent cache first (driver/cache.py), then a compile worker
(driver/worker.py), whose artifact is cached and linked into this process.

A compile runs in this process instead when it must: KILN_COMPILE_IN_PROCESS=1, the option
`isolate=False`, or a request that cannot be sent (an extra pass that is a lambda or a
function of `__main__`, which another process cannot import).
"""
from __future__ import annotations

import sys
import threading
import time

from .. import environment
from . import cache
from .artifact import Artifact
from .compiler import CompileRequest, compile_artifact

# Progress appears after this many seconds, on a terminal (or always with progress=True).
PROGRESS_AFTER_S = 2.0


def obtain(request: CompileRequest, module=None) -> Artifact:
    """The artifact for `request`: from the cache, or compiled (and then cached). `module`:
    the request's module, parsed already (a static signature's), which a compile in this
    process may take over instead of parsing its own."""
    key = cache.key(request)
    artifact = cache.load(key)
    if artifact is not None:
        return artifact
    progress = Progress(request.options, request.entry)
    sendable = pickled_for_worker(request)
    try:
        if sendable is None:
            artifact = compile_artifact(request, progress.update, module=module,
                                        context=module.context if module is not None else None)
        else:
            from .worker import compile_in_worker
            artifact = compile_in_worker(request, sendable, progress.update)
    finally:
        progress.finish()
    cache.store(key, artifact)
    return artifact


def will_use_worker(options: dict) -> bool:
    """Whether compiles with these options go to a worker (unless the request cannot be sent,
    see `pickled_for_worker`)."""
    return not (environment.get("KILN_COMPILE_IN_PROCESS") not in ("", "0")
                or options.get("isolate", True) is False)


def pickled_for_worker(request) -> bytes | None:
    """`request` (a CompileRequest, or source_import.py's ImportRequest) pickled for a compile
    worker, or None when it compiles here: isolation is off, or the request holds what
    another process cannot rebuild (worker.pickle_request)."""
    if not will_use_worker(request.options):
        return None
    from .worker import pickle_request
    return pickle_request(request)


class Progress:
    """One self-rewriting line on stderr naming the stage a long compile is in: shown once a
    compile has taken PROGRESS_AFTER_S, only on a terminal (option progress=True: always)."""

    def __init__(self, options: dict, entry: str | None):
        wanted = options.get("progress")
        self.enabled = wanted if wanted is not None else _stderr_is_terminal()
        self.start = time.monotonic()
        self.label = f"kiln: compiling @{entry}" if entry else "kiln: compiling"
        self.stage = "import"
        self.shown = False
        self._stop = threading.Event()
        self._ticker = None
        if self.enabled:
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()

    def name_entry(self, entry: str) -> None:
        """The entry's name, once an import has found it."""
        self.label = f"kiln: compiling @{entry}"

    def update(self, stage: str, step: str | None) -> None:
        self.stage = stage if step is None else f"{stage}: {step}"

    def _tick(self) -> None:
        while not self._stop.wait(0.25):
            elapsed = time.monotonic() - self.start
            if elapsed >= PROGRESS_AFTER_S:
                line = f"{self.label}: {self.stage} ({elapsed:.0f} s)"
                sys.stderr.write("\r" + line[:100].ljust(100) if _stderr_is_terminal()
                                 else line + "\n")
                sys.stderr.flush()
                self.shown = True
                if not _stderr_is_terminal():
                    self._stop.wait(5.0)  # a log, not a live line: every few seconds

    def finish(self) -> None:
        if self._ticker is None:
            return
        self._stop.set()
        self._ticker.join()
        if self.shown:
            elapsed = time.monotonic() - self.start
            done = f"{self.label}: done in {elapsed:.1f} s"
            sys.stderr.write(("\r" + done.ljust(100) if _stderr_is_terminal() else done) + "\n")
            sys.stderr.flush()


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
