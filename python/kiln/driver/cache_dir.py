"""Where the persistent compile cache lives (driver/cache.py), on its own so that what the
cache stores (driver/artifact.py: Kiln's build id, remembered there) can find it too.

The cache holds machine code that Kiln links into the calling process, so it is only used in
a directory private to this user (driver/private_files.py: owned by the user, not writable
by group or others, created 0700). Any other directory turns the cache off for the process,
with a one-line warning: the cache only saves time, and a compile without it gives the same
results, so an unsafe directory is no reason to refuse the compile.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from .. import environment
from .private_files import UntrustedDirectory, private_directory

_warned: set[str] = set()
# Directories found private, by configured path: (resolved path, _signature). Checking one
# costs a stat per directory above it; once checked, only this user or root can change what
# is above it, so a stat of the directory itself tells whether it is still the one checked.
_checked: dict[str, tuple[Path, tuple | None]] = {}


def _signature(path: Path) -> tuple | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino, info.st_uid, info.st_mode


def directory() -> Path | None:
    """The configured cache directory (not checked), or None when the cache is off."""
    if environment.get("KILN_CACHE").strip().lower() in ("0", "false", "off", "no"):
        return None
    if environment.get("KILN_CACHE_DIR"):
        return Path(environment.get("KILN_CACHE_DIR")).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "kiln"


def trusted_directory() -> Path | None:
    """The cache directory, created if missing and resolved, when it is private to this
    user; None when the cache is off or the directory is not private (said once per process
    and directory, on stderr)."""
    configured = directory()
    if configured is None:
        return None
    remembered = _checked.get(str(configured))
    if remembered is not None and _signature(configured) == remembered[1]:
        return remembered[0]
    try:
        real = private_directory(configured, what="the compile cache directory")
        _checked[str(configured)] = (real, _signature(configured))
        return real
    except UntrustedDirectory as exc:
        if str(configured) not in _warned:
            _warned.add(str(configured))
            print(f"kiln: warning: {exc.one_line()}; compiling without the cache",
                  file=sys.stderr)
        return None
