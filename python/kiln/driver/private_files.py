"""Directories and files that only this user can change: the compile cache (driver/cache.py)
and compile-crash reproducers (driver/worker.py).

What Kiln later loads or overwrites must not be placed there by someone else. A directory
is trusted when it is owned by this user (or root), is not writable by group or others, and
nobody else can rename it away: each directory above it is owned by this user or root and
is not writable by group or others unless it has the sticky bit (as /tmp has). This is the
rule ssh applies to ~/.ssh. Paths are resolved once, so a symbolic link in the path is
judged by where it leads at that moment; nothing below a trusted directory can be swapped by
another user afterwards. Files are created with O_EXCL and written without following links.
"""
from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from ..errors import KilnError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class UntrustedDirectory(KilnError):
    """A directory someone other than this user could write to."""


def _owned_safely(info: os.stat_result) -> bool:
    return info.st_uid in (os.geteuid(), 0)


def _why_untrusted(path: Path, info: os.stat_result, *, leaf: bool) -> str | None:
    if not stat.S_ISDIR(info.st_mode):
        return f"'{path}' is not a directory"
    if leaf and info.st_uid != os.geteuid():
        return f"'{path}' is owned by user {info.st_uid}, not by this user ({os.geteuid()})"
    if not _owned_safely(info):
        return f"'{path}' is owned by user {info.st_uid}, who could replace what is below it"
    writable = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if writable and (leaf or not info.st_mode & stat.S_ISVTX):
        return f"'{path}' is writable by {'others' if info.st_mode & stat.S_IWOTH else 'its group'}"
    return None


def private_directory(path, *, what: str) -> Path:
    """`path`, created 0700 (with any missing parents) if it does not exist, resolved and
    checked as the module says; raises UntrustedDirectory saying why otherwise. `what`
    names the directory's use in the message."""
    path = Path(path).expanduser()
    try:
        _make_directories(path)
        real = Path(os.path.realpath(path))
        checked = [(real, True)] + [(parent, False) for parent in real.parents]
        for directory, leaf in checked:
            why = _why_untrusted(directory, os.lstat(directory), leaf=leaf)
            if why is not None:
                raise UntrustedDirectory(f"{what} {path} is not private to this user: {why}",
                                         hint="make it owned by you with mode 0700 (chmod 700), "
                                              "or choose another directory")
    except OSError as exc:
        raise UntrustedDirectory(f"{what} {path} cannot be used: {exc.strerror}",
                                 hint="choose another directory") from None
    return real


def _make_directories(path: Path) -> None:
    """Create `path` and whatever is missing above it, each 0700 (os.makedirs gives only
    the last one the mode)."""
    missing = []
    while not os.path.lexists(path):
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass  # made by another process meanwhile: judged like any existing directory


def user_scratch_directory(name: str) -> Path:
    """`$TMPDIR/kiln-<uid>/<name>`, private to this user (see private_directory)."""
    import tempfile
    base = Path(tempfile.gettempdir()) / f"kiln-{os.geteuid()}"
    return private_directory(base / name, what=f"Kiln's {name} directory")


def create_file(directory: Path, prefix: str, suffix: str) -> tuple[int, Path]:
    """A new file in `directory`, mode 0600, opened for writing: (descriptor, path). Created
    with O_EXCL, so it is never an existing file or a link someone planted."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    for _ in range(100):
        path = directory / f"{prefix}{secrets.token_hex(6)}{suffix}"
        try:
            return os.open(path, flags, 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free name for a new file in {directory}")


def overwrite(path, data: bytes | str) -> None:
    """Replace the content of the existing file `path`, refusing to follow a link there."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    handle = os.open(path, os.O_WRONLY | os.O_TRUNC | _NOFOLLOW | _CLOEXEC)
    with os.fdopen(handle, "wb") as out:
        out.write(data)


def replace_file(directory: Path, name: str, data: bytes) -> None:
    """Make `directory/name` hold `data`, atomically: a fresh private file renamed over it
    (a rename replaces a link, never what it points to)."""
    handle, temporary = create_file(directory, ".writing-", "")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, directory / name)
    except BaseException:
        _unlink_quietly(temporary)
        raise


def read_regular_file(path, limit: int) -> bytes | None:
    """The content of `path` if it is a regular file (not a link, device or pipe) of at most
    `limit` bytes; None otherwise. OSError if it cannot be opened."""
    handle = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
    with os.fdopen(handle, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        data = f.read(limit + 1)
        return data if len(data) <= limit else None  # it grew while being read


def secret_key(directory: Path, name: str, size: int = 32) -> bytes:
    """A random `size`-byte key kept in `directory/name` (mode 0600, owned by this user),
    made on first use. Processes that race to make it all end up with the one that was
    published first: each writes its own candidate in full, then links it into place, which
    fails if another got there first. Raises UntrustedDirectory when the file there is not
    a private key of this user's."""
    path = directory / name
    for _ in range(3):
        try:
            return _read_key(path, size)
        except FileNotFoundError:
            pass
        handle, candidate = create_file(directory, ".key-", "")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(secrets.token_bytes(size))
                out.flush()
                os.fsync(out.fileno())
            try:
                os.link(candidate, path)
            except FileExistsError:
                pass  # another process published its key first: read that one
        finally:
            _unlink_quietly(candidate)
    return _read_key(path, size)


# Keys read, by path: (the file's identity when read, the key); a stat tells a key file
# that is still the same from one replaced or changed since.
_keys: dict[Path, tuple[tuple, bytes]] = {}


def _key_identity(info: os.stat_result) -> tuple:
    return info.st_dev, info.st_ino, info.st_mtime_ns, info.st_uid, info.st_mode, info.st_size


def _read_key(path: Path, size: int) -> bytes:
    remembered = _keys.get(path)
    if remembered is not None:
        try:
            if _key_identity(os.lstat(path)) == remembered[0]:
                return remembered[1]
        except FileNotFoundError:
            _keys.pop(path, None)
            raise
    handle = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
    with os.fdopen(handle, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() \
                or info.st_mode & 0o077 or info.st_size != size:
            raise UntrustedDirectory(f"the key file {path} is not a {size}-byte file private "
                                     "to this user (mode 0600)",
                                     hint="remove it; Kiln makes a new one")
        key = f.read(size)
        if len(key) == size:
            _keys[path] = (_key_identity(info), key)
        return key


def _unlink_quietly(path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
