"""A compiled specialisation as data: what crosses from a compile worker to the caller, what
the compile cache stores and what a `.kx` executable holds per argument shapes.

It is object code plus everything the caller needs around it: the packed entry symbol, the
external symbols the code needs, the custom-call sites to make at load time, the results and
checks, the execution plan, and what it was compiled for (Kiln build, target, CPU). Bytes on
disk: a magic line, a JSON header, the object code.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
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
        if name:  # the runtime library is hashed by content only
            digest.update(name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _fingerprint(files: list[tuple[str, Path]]) -> str:
    digest = hashlib.sha256()
    for _, path in files:
        info = path.stat()
        digest.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\0{info.st_ino}\n".encode())
    return digest.hexdigest()


_BUILD_FILE = "build-id.json"


def _remembered_build(fingerprint: str) -> str | None:
    from .cache_dir import directory
    root = directory()
    if root is None:
        return None
    try:
        entry = json.loads((root / _BUILD_FILE).read_text())
    except (OSError, ValueError):
        return None
    found = entry.get(fingerprint) if isinstance(entry, dict) else None
    return found if isinstance(found, str) else None


def _remember_build(fingerprint: str, digest: str) -> None:
    """Best effort, like the compile cache: a private file renamed into place."""
    from .cache_dir import directory
    root = directory()
    if root is None:
        return
    try:
        root.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".writing-", dir=root)
        with os.fdopen(handle, "w") as out:
            json.dump({fingerprint: digest}, out)
        os.replace(temporary, root / _BUILD_FILE)
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
        if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 8:
            raise KilnError(f"{what} is not compiled Kiln code", hint="it is damaged or not a "
                                                                      "Kiln artifact")
        (size,) = struct.unpack_from("<Q", data, len(MAGIC))
        start = len(MAGIC) + 8
        try:
            h = json.loads(data[start:start + size])
            # The imported module, when there is one, follows the code.
            imported_size = int(h.get("imported_size", 0))
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
        except (ValueError, KeyError, TypeError) as exc:
            raise KilnError(f"{what} is damaged: {type(exc).__name__}: {exc}",
                            hint="compile the program again") from None

    def check_loadable(self, what: str) -> None:
        """Refuse code from another Kiln build or for a CPU this one is not."""
        from ..targets.objects import check_cpu
        if self.kiln != kiln_build():
            raise KilnError(f"{what} was compiled by Kiln {self.kiln}; this is Kiln {kiln_build()}",
                            hint="compile it again with this Kiln")
        check_cpu(self.cpu, what)
