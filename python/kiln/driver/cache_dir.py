"""Where the persistent compile cache lives (driver/cache.py), on its own so that what the
cache stores (driver/artifact.py: Kiln's build id, remembered there) can find it too."""
from __future__ import annotations

import os
from pathlib import Path


def directory() -> Path | None:
    """The cache directory, or None when the cache is off."""
    if os.environ.get("KILN_CACHE", "1").strip().lower() in ("0", "false", "off", "no"):
        return None
    if os.environ.get("KILN_CACHE_DIR"):
        return Path(os.environ["KILN_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "kiln"
