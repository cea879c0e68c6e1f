"""The persistent compile cache: compiled artifacts on disk, so that a program compiled once is
loaded, not compiled, by every later process.

On by default, in the user's cache directory ($XDG_CACHE_HOME/kiln or ~/.cache/kiln);
KILN_CACHE_DIR moves it, KILN_CACHE=0 turns it off, KILN_CACHE_MAX_MB bounds it (default
2048): past the bound, the least recently used entries go. An entry's key is a digest of
everything that decides the code: the imported module (or, for a source compiled in one
trip to a worker, driver/front.py, the source's own bytes and name), the argument shapes,
the entry, the target and its options, the calling convention, the custom-call targets it
may call, the CPU and Kiln's build. Writers write a private file and rename it into place, so processes that
compile the same program at once each leave a whole entry, never a torn one; a damaged entry
reads as a miss.

Entries are machine code that is linked into the calling process, so the cache trusts only
what this user wrote: its directory must be private to the user (driver/cache_dir.py), and
every entry starts with an HMAC-SHA256 of its key and content under a random per-user key
kept beside the entries (`hmac.key`, mode 0600). The digest is checked before anything of
the entry is parsed; an entry without the right digest (planted, copied from another
cache, damaged) is a miss, removed and compiled again.
"""
from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import os
from pathlib import Path

from .. import environment
from ..errors import KilnError
from .artifact import Artifact, kiln_build
from .cache_dir import directory, trusted_directory  # noqa: F401 - part of this module's interface
from .compiler import CompileRequest
from . import private_files

SUFFIX = ".kart"
# An entry on disk: ENTRY_MAGIC, the HMAC-SHA256 of (key, artifact bytes), the artifact bytes.
ENTRY_MAGIC = b"KILNMAC1"
_DIGEST_SIZE = 32
KEY_FILE = "hmac.key"
# Options that change what a compile reports or writes, not its code.
_REPORTING_OPTIONS = {"dump_dir", "dump_pass_regex", "timing", "progress", "isolate"}


def max_bytes() -> int:
    text = environment.get("KILN_CACHE_MAX_MB")
    try:
        return int(float(text) * (1 << 20))
    except (ValueError, OverflowError):
        raise KilnError(f"KILN_CACHE_MAX_MB={text!r} is not a number of megabytes") from None


def key(request: CompileRequest) -> str | None:
    """The request's cache key; None when it cannot be cached (options that are Python
    functions, whose behaviour no digest captures, or dumps and timing, which must run)."""
    return _digest({"entry": request.entry, "shapes": request.shapes,
                    "convention": dataclasses.asdict(request.convention),
                    "plan": request.want_plan}, request, request.imported)


def source_key(request) -> str | None:
    """The cache key of a whole source compiled in one trip (source_import.ImportRequest):
    its content and name (locations name it) instead of the imported module, so that a hit
    needs no parse."""
    source = request.source
    return _digest({"source of": request.filename, "entry": request.entry,
                    "text": isinstance(source, str)}, request,
                   source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source)


def _digest(described: dict, request, content: bytes) -> str | None:
    """A digest of `described`, `content` and what every key holds: the request's target,
    options and custom-call targets, the CPU and Kiln's build."""
    options = {k: v for k, v in request.options.items() if k not in _REPORTING_OPTIONS}
    if any(request.options.get(k) for k in ("dump_dir", "dump_pass_regex", "timing")):
        return None
    try:
        text = json.dumps({
            **described, "target": request.target, "options": options,
            "custom_calls": sorted(map(list, request.custom_calls), key=str), "kiln": kiln_build(),
        }, sort_keys=True, default=_refuse)
    except TypeError:
        return None
    from ..targets.objects import host_cpu
    digest = hashlib.sha256(text.encode())
    digest.update(json.dumps(host_cpu(), sort_keys=True).encode())
    # KILN_AMX=0 routes bf16/int8 products elsewhere when compiling (runtime/libraries.py)
    digest.update((environment.raw("KILN_AMX") or "").encode())
    # LLVM's options change the code it emits (targets/llvm_options.py)
    digest.update((environment.raw("KILN_LLVM_OPTIONS") or "").encode())
    # KILN_QUICK_CODEGEN=0 compiles tiny programs the slower way (targets/cpu.py)
    digest.update((environment.raw("KILN_QUICK_CODEGEN") or "").encode())
    digest.update(content)
    return digest.hexdigest()


def _refuse(value):
    raise TypeError(type(value).__name__)


def load(cache_key: str | None) -> Artifact | None:
    """The entry for `cache_key`, authenticated and checked loadable; None for a miss."""
    root = trusted_directory() if cache_key is not None else None
    if root is None:
        return None
    path = root / (cache_key + SUFFIX)
    try:
        data = private_files.read_regular_file(path, max_bytes())
    except OSError:
        return None  # no entry (or a link where an entry should be)
    try:
        secret = private_files.secret_key(root, KEY_FILE)
    except (KilnError, OSError):
        return None
    content = _authenticated(secret, cache_key, data)
    if content is not None:
        try:
            artifact = Artifact.from_bytes(content, str(path))
            artifact.check_loadable(str(path))
            _check_executable(artifact, str(path))
        except KilnError:
            artifact = None  # from another build or CPU, compiled again and overwritten
    else:
        artifact = None
    if artifact is None:
        _discard(path)
        return None
    try:
        os.utime(path)  # recently used
    except OSError:
        pass
    artifact.origin = "cache"
    return artifact


def _check_executable(artifact: Artifact, what: str) -> None:
    """A whole source's entry also holds the executable around its code (driver/front.py):
    it must read back, or the entry is damaged."""
    if artifact.executable is None:
        return
    from .source_import import ExecutableInfo
    try:
        ExecutableInfo.from_json(artifact.executable)
        from .layouts import EntryLayouts
        EntryLayouts.from_json(artifact.executable["layouts"])
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise KilnError(f"{what} is damaged: {type(exc).__name__}: {exc}") from None


def _tag(secret: bytes, cache_key: str, content: bytes) -> bytes:
    # The key is under the digest too, so that an entry renamed to another key is a miss.
    mac = hmac.new(secret, cache_key.encode() + b"\0", hashlib.sha256)
    mac.update(content)
    return mac.digest()


def _authenticated(secret: bytes, cache_key: str, data: bytes | None) -> bytes | None:
    """The artifact bytes of an entry whose digest is right; None otherwise."""
    start = len(ENTRY_MAGIC) + _DIGEST_SIZE
    if data is None or len(data) < start or not data.startswith(ENTRY_MAGIC):
        return None
    content = data[start:]
    if not hmac.compare_digest(data[len(ENTRY_MAGIC):start], _tag(secret, cache_key, content)):
        return None
    return content


def _discard(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def store(cache_key: str | None, artifact: Artifact) -> None:
    """Add an entry (best effort: a cache that cannot be written is no error)."""
    root = trusted_directory() if cache_key is not None else None
    if root is None:
        return
    limit = max_bytes()
    try:
        content = artifact.to_bytes()
        secret = private_files.secret_key(root, KEY_FILE)
        private_files.replace_file(root, cache_key + SUFFIX,
                                   ENTRY_MAGIC + _tag(secret, cache_key, content) + content)
        _evict(root, limit)
    except (OSError, KilnError):
        pass


def _evict(root: Path, limit: int) -> None:
    """Remove least recently used entries until the cache fits in `limit` bytes."""
    entries = []
    for path in root.glob("*" + SUFFIX):
        try:
            info = path.stat()
        except OSError:
            continue  # removed by another process
        entries.append((info.st_mtime, info.st_size, path))
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= limit:
            break
        try:
            path.unlink()
            total -= size
        except OSError:
            pass


def clear() -> int:
    """Remove every entry; returns how many."""
    root = trusted_directory()
    if root is None:
        return 0
    removed = 0
    for path in root.glob("*" + SUFFIX):
        try:
            path.unlink()
            removed += 1
        except OSError:
            pass
    return removed
