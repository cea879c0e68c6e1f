"""Serialized executables of Kiln's PJRT plugin: what PJRT_Executable_Serialize returns and
PJRT_Executable_DeserializeAndLoad takes back (JAX's persistent compilation cache stores them).

A serialized executable is machine code that is linked into the process that loads it, and
JAX keeps it in a directory Kiln does not control (`jax_compilation_cache_dir`, possibly
shared). So it is signed as Kiln's own compile-cache entries are (driver/cache.py): an
HMAC-SHA256 under the per-user key kept in Kiln's private cache directory, checked before any
byte of the content is parsed. Bytes signed by another user, another cache directory or
nobody, or changed since, are refused with a KilnError; JAX then reports it and compiles
again. After the signature, the content is read as a `.kx` file is (driver/saved.py: Kiln
build, CPU and the code's signature checked before anything is linked).

Layout:  MAGIC | HMAC-SHA256(key, DOMAIN | payload) | payload
payload: u32 little-endian header length | header (JSON) | `.kx` archive bytes
"""
from __future__ import annotations

import hashlib
import hmac
import json
import struct
import tempfile
from pathlib import Path

from ..errors import KilnError

MAGIC = b"KILNPJX1"
# Keeps these signatures apart from the compile cache's, which use the same key.
DOMAIN = b"kiln-pjrt-serialized-executable\0"
_TAG_SIZE = 32
_HEADER_LIMIT = 1 << 20
_HEADER_FIELDS = {"name": str, "fingerprint": str, "donated": list}
HINT = ("JAX compiles the program again; entries are signed with the key in Kiln's compile "
        "cache directory (KILN_CACHE_DIR), so they load only for the user and cache "
        "directory that wrote them")


def _signing_key() -> bytes:
    from ..driver import cache, private_files
    root = cache.trusted_directory()
    if root is None:
        raise KilnError("Kiln's PJRT plugin signs serialized executables with the key in its "
                        "compile cache directory, and the cache is off (KILN_CACHE=0) or its "
                        "directory is not private to this user",
                        hint="turn Kiln's compile cache on to use JAX's persistent cache")
    return private_files.secret_key(root, cache.KEY_FILE)


def _tag(key: bytes, payload: bytes) -> bytes:
    mac = hmac.new(key, DOMAIN, hashlib.sha256)
    mac.update(payload)
    return mac.digest()


def dump(executable, header: dict) -> bytes:
    """`executable` (a kiln Executable) and the plugin's `header`, signed."""
    from ..driver.saved import save
    with tempfile.TemporaryDirectory(prefix="kiln-pjrt-") as scratch:
        path = Path(scratch) / "program.kx"
        save(executable, path, with_plan=False)
        archive = path.read_bytes()
    text = json.dumps(header, sort_keys=True).encode()
    payload = struct.pack("<I", len(text)) + text + archive
    return MAGIC + _tag(_signing_key(), payload) + payload


def load(data: bytes):
    """(kiln Executable, header) from `dump`'s bytes; a KilnError for anything not signed by
    this user's key or not as `dump` writes it, found before any code is linked."""
    start = len(MAGIC) + _TAG_SIZE
    if len(data) < start + 4 or not data.startswith(MAGIC):
        raise KilnError("the serialized executable is not one of Kiln's PJRT plugin", hint=HINT)
    payload = data[start:]
    if not hmac.compare_digest(data[len(MAGIC):start], _tag(_signing_key(), payload)):
        raise KilnError("the serialized executable's signature does not match this user's key "
                        "(it was changed, or written by another user or cache directory): "
                        "refused before loading", hint=HINT)
    # Signed by this user's Kiln: what follows is still checked, for another Kiln build.
    (size,) = struct.unpack_from("<I", payload)
    if size > min(_HEADER_LIMIT, len(payload) - 4):
        raise KilnError("the serialized executable is damaged (header size)", hint=HINT)
    try:
        header = json.loads(payload[4:4 + size])
    except (ValueError, RecursionError):
        header = None
    if not isinstance(header, dict) or any(not isinstance(header.get(k), t)
                                           for k, t in _HEADER_FIELDS.items()) \
            or not all(isinstance(i, int) and i >= 0 for i in header["donated"]):
        raise KilnError("the serialized executable is damaged (header)", hint=HINT)
    from ..driver.executable import Executable
    with tempfile.TemporaryDirectory(prefix="kiln-pjrt-") as scratch:
        path = Path(scratch) / "program.kx"
        path.write_bytes(payload[4 + size:])
        try:
            executable = Executable.load(path)
        except KilnError as exc:  # name what was loaded, not the scratch file
            raise KilnError(exc.message.replace(str(path), "the serialized executable"),
                            hint=exc.hint or HINT) from None
    return executable, header
