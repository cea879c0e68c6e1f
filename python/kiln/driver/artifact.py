"""A compiled specialisation as data: what crosses from a compile worker to the caller, what
the compile cache stores and what a `.kx` executable holds per argument shapes.

It is object code plus everything the caller needs around it: the packed entry symbol, the
external symbols the code needs, the custom-call sites to make at load time, the results and
checks, the execution plan, and what it was compiled for (Kiln build, target, CPU). Bytes on
disk: a magic line, a JSON header, the object code.
"""
from __future__ import annotations

import binascii
import hashlib
import json
import os
import struct
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..errors import KilnError
from ..pipeline import PassTiming, StageTiming
from ..runtime.memref import TensorSpec
from ..runtime.serialization import decode, encode

MAGIC = b"KILNART1"


@lru_cache(maxsize=None)
def kiln_build() -> str:
    """Kiln's version and a digest of its code (Python sources and the native runtime): code
    compiled by one build is only ever loaded by the same build.

    Reading and hashing every source costs a new process about 5-10 ms on its first compile,
    so the digest is kept in the compile cache's directory under a fingerprint of the files'
    names, sizes and modification times (`_fingerprint`), which costs a directory walk."""
    from ..version import __version__
    files = _build_files()
    fingerprint = _fingerprint(files)
    digest = _remembered_build(fingerprint)
    if digest is None:
        digest = _digest_files(files)
        _remember_build(fingerprint, digest)
    return f"{__version__}+{digest}"


def _build_files() -> list[tuple[str, Path]]:
    """(name, path) of every file the build digest covers, in digest order: each package
    root's Python sources (sorted as paths), then the native runtime library."""
    from ..native import runtime_library
    package = Path(__file__).resolve().parents[1]
    files = []
    for root in sorted({package, *(Path(m.__file__).resolve().parent for m in _subpackages())}):
        found = []
        for directory, subdirectories, names in os.walk(root):
            subdirectories[:] = [d for d in subdirectories if d != "__pycache__"]
            found += [Path(directory) / n for n in names if n.endswith(".py")]
        files += [(str(p.relative_to(root)), p) for p in sorted(found)]
    try:
        files.append(("", runtime_library()))
    except KilnError:
        pass
    return files


def _digest_files(files: list[tuple[str, Path]]) -> str:
    digest = hashlib.sha256()
    for name, path in files:
        try:
            content = path.read_bytes()
        except FileNotFoundError:
            continue  # removed since the walk (a source tree being edited): not part of it
        if name:  # the runtime library is hashed by content only
            digest.update(name.encode())
        digest.update(content)
    return digest.hexdigest()[:16]


def _fingerprint(files: list[tuple[str, Path]]) -> str:
    digest = hashlib.sha256()
    for _, path in files:
        try:
            info = path.stat()
        except FileNotFoundError:
            continue  # as in _digest_files
        digest.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\0{info.st_ino}\n".encode())
    return digest.hexdigest()


_BUILD_FILE = "build-id.json"


def _remembered_build(fingerprint: str) -> str | None:
    from .cache_dir import trusted_directory
    from .private_files import read_regular_file
    root = trusted_directory()
    if root is None:
        return None
    try:
        entry = json.loads(read_regular_file(root / _BUILD_FILE, 1 << 16) or b"")
    except (OSError, ValueError, RecursionError):
        return None
    found = entry.get(fingerprint) if isinstance(entry, dict) else None
    return found if isinstance(found, str) else None


def _remember_build(fingerprint: str, digest: str) -> None:
    """Best effort, like the compile cache: a private file renamed into place."""
    from .cache_dir import trusted_directory
    from .private_files import replace_file
    root = trusted_directory()
    if root is None:
        return
    try:
        replace_file(root, _BUILD_FILE, json.dumps({fingerprint: digest}).encode())
    except OSError:
        pass


def _subpackages():
    # kiln.lowering and kiln.dialects live outside python/kiln in an editable install.
    from .. import dialects, lowering
    return [lowering, dialects]


@dataclass
class Artifact:
    target: str
    entry: str
    symbol: str                        # the packed entry point (`_mlir__mlir_ciface_<entry>`)
    code: bytes                        # relocatable object code
    externals: list[str]               # symbols the code needs from this process
    call_sites: list[dict]             # custom-call SiteSpecs, JSON form, by index
    results: list[TensorSpec]          # every distinct compiled result, check operands included
    sources: list[int]                 # program result i is compiled result sources[i]
    user_results: int
    checks: list[dict]
    dimension_values: dict[int, int]
    cpu: dict                          # {"name", "features"} it was compiled for
    kiln: str                          # kiln_build() of the compiler
    timings: list[StageTiming] = field(default_factory=list)
    plan: dict | None = None           # plan.to_json(), when asked for
    origin: str = "compiled"           # or "cache", "file": where this process got it (not saved)
    # Only in a compile-cache entry for a whole source (driver/front.py): the executable
    # around the code (source_import.ExecutableInfo.to_json()) and its imported module, bytecode.
    executable: dict | None = None
    imported: bytes | None = None

    def header(self) -> dict:
        return {
            "target": self.target, "entry": self.entry, "symbol": self.symbol,
            "externals": self.externals, "call_sites": self.call_sites,
            "results": [[list(r.shape), r.element] for r in self.results],
            "sources": self.sources, "user_results": self.user_results,
            "checks": encode(self.checks),
            "dimension_values": [[k, v] for k, v in self.dimension_values.items()],
            "cpu": self.cpu, "kiln": self.kiln,
            "timings": [[t.name, t.seconds, [[p.name, p.seconds] for p in t.passes]]
                        for t in self.timings],
            "plan": self.plan,
        }

    def to_bytes(self) -> bytes:
        header = self.header()
        imported = self.imported or b""
        if self.executable is not None:
            header["executable"] = self.executable
            header["imported_size"] = len(imported)
        encoded = json.dumps(header, separators=(",", ":")).encode()
        return MAGIC + struct.pack("<Q", len(encoded)) + encoded + self.code + imported

    @classmethod
    def from_bytes(cls, data: bytes, what: str) -> Artifact:
        """The artifact `data` holds; a KilnError saying it is damaged when it is not one
        (wrong magic, sizes past the end, a header that is not the expected JSON)."""
        if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 8:
            raise KilnError(f"{what} is not compiled Kiln code", hint="it is damaged or not a "
                                                                      "Kiln artifact")
        (size,) = struct.unpack_from("<Q", data, len(MAGIC))
        start = len(MAGIC) + 8
        try:
            if start + size > len(data):
                raise ValueError("the header overruns the data")
            h = json.loads(data[start:start + size])
            _check_header(h)
            # The imported module, when there is one, follows the code.
            imported_size = h.get("imported_size", 0)
            end = len(data) - imported_size
            if end < start + size:
                raise ValueError("the sections overrun the data")
            return cls(h["target"], h["entry"], h["symbol"], data[start + size:end], h["externals"],
                       h["call_sites"], [TensorSpec(tuple(s), e) for s, e in h["results"]],
                       h["sources"], h["user_results"], decode(h["checks"]),
                       {k: v for k, v in h["dimension_values"]}, h["cpu"], h["kiln"],
                       [StageTiming(n, s, [PassTiming(pn, ps) for pn, ps in p])
                        for n, s, p in h["timings"]], h["plan"],
                       executable=h.get("executable"),
                       imported=data[end:] if "executable" in h else None)
        except (ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError,
                binascii.Error) as exc:
            raise KilnError(f"{what} is damaged: {type(exc).__name__}: {exc}",
                            hint="compile the program again") from None

    def check_loadable(self, what: str) -> None:
        """Refuse code from another Kiln build or for a CPU this one is not."""
        from ..targets.objects import check_cpu
        if self.kiln != kiln_build():
            raise KilnError(f"{what} was compiled by Kiln {self.kiln}; this is Kiln {kiln_build()}",
                            hint="compile it again with this Kiln")
        check_cpu(self.cpu, what)


def _is_list_of(value, kind) -> bool:
    return isinstance(value, list) and all(isinstance(v, kind) and not isinstance(v, bool)
                                           for v in value)


def _is_dimension(value) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool)
                             and 0 <= value < 1 << 62)


# An artifact header's fields and what each must be; anything else is a damaged artifact.
_HEADER_FIELDS = {
    "target": lambda v: isinstance(v, str), "entry": lambda v: isinstance(v, str),
    "symbol": lambda v: isinstance(v, str), "kiln": lambda v: isinstance(v, str),
    "externals": lambda v: _is_list_of(v, str), "call_sites": lambda v: _is_list_of(v, dict),
    "results": lambda v: isinstance(v, list) and all(
        isinstance(r, list) and len(r) == 2 and isinstance(r[0], list)
        and all(map(_is_dimension, r[0])) and isinstance(r[1], str) for r in v),
    "sources": lambda v: _is_list_of(v, int),
    "user_results": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "checks": lambda v: isinstance(v, list),
    "dimension_values": lambda v: isinstance(v, list) and all(
        _is_list_of(p, int) and len(p) == 2 for p in v),
    "cpu": lambda v: isinstance(v, dict) and isinstance(v.get("name"), str)
    and _is_list_of(v.get("features"), str),
    "timings": lambda v: isinstance(v, list) and all(
        isinstance(t, list) and len(t) == 3 and isinstance(t[0], str)
        and isinstance(t[1], (int, float)) and isinstance(t[2], list)
        and all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
                and isinstance(p[1], (int, float)) for p in t[2]) for t in v),
    "plan": lambda v: v is None or isinstance(v, dict),
}


def _check_header(header) -> None:
    """Raise ValueError unless `header` has every field, each of its expected form."""
    if not isinstance(header, dict):
        raise ValueError(f"the header is a JSON {type(header).__name__}, not an object")
    for name, valid in _HEADER_FIELDS.items():
        if name not in header:
            raise ValueError(f"the header has no '{name}'")
        if not valid(header[name]):
            raise ValueError(f"the header's '{name}' is malformed")
    if any(not 0 <= s < len(header["results"]) for s in header["sources"]) \
            or not 0 <= header["user_results"] <= len(header["sources"]):
        raise ValueError("the header's 'sources' or 'user_results' name results it lacks")
    if "executable" in header:
        size = header.get("imported_size")
        if not isinstance(header["executable"], dict) or not isinstance(size, int) \
                or isinstance(size, bool) or size < 0:
            raise ValueError("the header's 'executable' or 'imported_size' is malformed")
    elif "imported_size" in header:
        raise ValueError("the header has 'imported_size' without 'executable'")
