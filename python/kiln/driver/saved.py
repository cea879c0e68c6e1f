"""AOT executables: `.kx` files (`kiln compile FILE -o prog.kx`, `Executable.save`,
`kiln.load_executable`).

A `.kx` file is a zip archive:

    manifest.json        format, Kiln build, target and options, CPU, entry signature and
                         result layouts, calling convention, and the compiled shapes
    module.mlirbc        the imported module (for `ir()`, `verify()` and other shapes)
    compiled/N.kart      one compiled specialisation each (driver/artifact.py): object code,
                         buffer assignment and thunk sequence, checks, custom-call sites
    compiled/N.buffer-assignment.txt, compiled/N.thunk-sequence.txt
                         the plan as text, for reading without Kiln

Loading links the object code in; nothing is compiled. A file from another Kiln build or
for a CPU with features this one lacks is refused with a clear error. A `.kx` file holds
machine code that runs when it is loaded and called: load only files you trust, as you
would a shared library. Kiln loads one only when asked to by name (`kiln.load_executable`,
`kiln run PROG.kx`), never because an input turned out to be a zip (frontend/detect.py).
Unlike compile-cache entries, `.kx` files carry no keyed digest: they are made to be copied
to other machines and users, where no key of the writer's exists; trusting the file is the
reader's decision, as with a shared library. What reading does promise is that a damaged or
crafted archive (truncated, a manifest not as `save` writes it, members that would unpack
to far more than the file's size, code whose signature disagrees with the manifest) is a
KilnError naming the file, found before any code is linked.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
import json
import struct
import zipfile
import zlib
from pathlib import Path

from ..errors import KilnError
from ..frontend.convention import Aval, CallingConvention
from ..runtime.memref import TensorSpec
from . import plan
from .artifact import Artifact, kiln_build

FORMAT = "kiln-executable"
VERSION = 1


def save(exe, path, *, with_plan: bool = True) -> Path:
    """Write `exe` with every specialisation it has compiled (a static signature's one, at
    least) to `path`. `with_plan=False` leaves out the plan as text (which may need a compile
    more, recording it): for files only Kiln reads back (the PJRT plugin's serialized
    executables, kiln/pjrt/serialized.py)."""
    from ..targets.objects import host_cpu
    path = Path(path)
    if not exe._cache:
        if not all(s.is_static for s in exe.arg_specs):
            raise KilnError(f"@{exe.entry} has a dynamic signature and has not been called yet, "
                            "so nothing is compiled to save",
                            hint="call it once per argument shapes to include, then save")
        exe._compiled_for(tuple(s.shape for s in exe.arg_specs))
    options = {k: v for k, v in exe.target.options.items() if _is_json(v)
               and k not in ("dump_dir", "dump_pass_regex", "timing", "progress")}
    compiled = []
    with exe._lock:
        entries = list(exe._cache.items())
    artifacts = []
    for shapes, specialisation in entries:
        artifact = specialisation.artifact
        if artifact.plan is None and with_plan:  # compile once more, recording the plan
            artifact = exe._compile(shapes, want_plan=True).artifact
        artifacts.append((shapes, artifact))
    manifest = {
        "format": FORMAT, "version": VERSION, "kiln": kiln_build(), "target": exe.target.name,
        "options": options, "cpu": host_cpu(), "entry": exe.entry, "filename": exe.filename,
        "arguments": [_spec(s) for s in exe.arg_specs],
        "results": [_spec(s) for s in exe.result_specs],
        "layouts": exe.layouts.to_json(),
        "convention": dataclasses.asdict(exe.convention),
        "compiled": compiled,
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("module.mlirbc", exe._imported)
        for number, (shapes, artifact) in enumerate(artifacts):
            name = f"compiled/{number}"
            compiled.append({"shapes": [list(s) for s in shapes], "artifact": name + ".kart"})
            archive.writestr(name + ".kart", artifact.to_bytes())
            if artifact.plan is not None:
                assignment, thunks = plan.from_json(artifact.plan)
                archive.writestr(name + ".buffer-assignment.txt", str(assignment))
                archive.writestr(name + ".thunk-sequence.txt", str(thunks))
        archive.writestr("manifest.json", json.dumps(manifest, indent=1))
    return path


@dataclass
class Saved:
    """What a `.kx` file holds, read and checked; `Executable.load` makes it callable."""
    target: object
    filename: str
    convention: CallingConvention
    imported: bytes
    entry: str
    arg_specs: list[TensorSpec]
    result_specs: list[TensorSpec]
    layouts: dict                      # EntryLayouts.to_json() (driver/executable.py)
    artifacts: dict[tuple, Artifact]


# Bounds on what reading a `.kx` file may unpack, so that a crafted archive (a zip bomb: a
# small file declaring huge members) is refused before anything is decompressed. Kiln's own
# files unpack to a few times their size; these leave a wide margin.
_MAX_MANIFEST_BYTES = 16 << 20
_MAX_EXPANSION = 64            # unpacked bytes per archive byte, over the members read
_EXPANSION_ALLOWANCE = 64 << 20  # ... plus this much, for small files
_MAX_COMPILED = 4096
# What can go wrong reading a damaged zip archive, besides BadZipFile.
_ARCHIVE_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, zlib.error,
                   NotImplementedError, RuntimeError, ValueError, struct.error)


def read(path) -> Saved:
    """Read and check the `.kx` file at `path` (its code is not linked in yet). Anything
    wrong with it (not a zip, damaged, members too large, a manifest not as `save` writes
    it) is a KilnError naming the file."""
    from ..targets import get_target
    from ..targets.objects import check_cpu
    from .layouts import EntryLayouts
    path = Path(path)
    what = str(path)
    try:
        archive = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise KilnError(f"{what} does not exist") from None
    except _ARCHIVE_ERRORS as exc:
        raise KilnError(f"{what} is not a Kiln executable ({_reason(exc)})",
                        hint="make one with `kiln compile FILE -o prog.kx`") from None
    with archive:
        budget = _Budget(what, path.stat().st_size * _MAX_EXPANSION + _EXPANSION_ALLOWANCE)
        try:
            manifest = json.loads(budget.read(archive, "manifest.json", _MAX_MANIFEST_BYTES))
        except KeyError as exc:
            raise KilnError(f"{what} is not a Kiln executable (no manifest: {exc})",
                            hint="make one with `kiln compile FILE -o prog.kx`") from None
        except (ValueError, RecursionError) as exc:
            raise KilnError(f"{what} is not a Kiln executable (its manifest is not JSON: "
                            f"{_reason(exc)})",
                            hint="make one with `kiln compile FILE -o prog.kx`") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT \
                or manifest.get("version") != VERSION:
            found = manifest if isinstance(manifest, dict) else {}
            raise KilnError(f"{what} is a {found.get('format')!r} file of version "
                            f"{found.get('version')!r}; this Kiln reads {FORMAT} {VERSION}",
                            hint="compile the program again with this Kiln")
        _check_manifest(manifest, what)
        if manifest["kiln"] != kiln_build():
            raise KilnError(f"{what} was compiled by Kiln {manifest['kiln']}; this is Kiln "
                            f"{kiln_build()}", hint="compile the program again with this Kiln")
        check_cpu(manifest["cpu"], what)
        try:
            imported = budget.read(archive, "module.mlirbc")
            blobs = [(tuple(tuple(s) for s in c["shapes"]), budget.read(archive, c["artifact"]))
                     for c in manifest["compiled"]]
        except KeyError as exc:
            raise KilnError(f"{what} is damaged: it has no member {exc}",
                            hint="compile it again") from None
    arg_specs = [TensorSpec(tuple(s), e) for s, e in manifest["arguments"]]
    result_specs = [TensorSpec(tuple(s), e) for s, e in manifest["results"]]
    artifacts = {}
    try:
        laid_out = [bool(r) for r in manifest["layouts"]["results"]]
    except (KeyError, TypeError):
        raise KilnError(f"{what} is damaged: its manifest has no result layouts",
                        hint="compile it again") from None
    for shapes, blob in blobs:
        artifact = Artifact.from_bytes(blob, what)
        _check_agrees(artifact, shapes, arg_specs, result_specs, laid_out, what)
        artifact.origin = "file"
        artifacts[shapes] = artifact
    try:
        target = get_target(manifest["target"], **manifest["options"])
        convention = convention_from_json(manifest["convention"])
        EntryLayouts.from_json(manifest["layouts"])  # what loading makes of them
    except KilnError as exc:  # an unknown target or option: say which file asked for it
        raise KilnError(exc.message, location=what, hint=exc.hint) from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise KilnError(f"{what} is damaged: {type(exc).__name__}: {exc}",
                        hint="compile it again") from None
    return Saved(target, manifest["filename"], convention, imported, manifest["entry"],
                 arg_specs, result_specs, manifest["layouts"], artifacts)


def _fits(shape: tuple, spec: TensorSpec) -> bool:
    return len(shape) == len(spec.shape) and all(
        d is None or d == s for d, s in zip(spec.shape, shape))


def _check_agrees(artifact: Artifact, shapes: tuple, arg_specs: list[TensorSpec],
                  result_specs: list[TensorSpec], laid_out: list[bool], what: str) -> None:
    """Refuse code whose arguments or results are not what the manifest's signature says:
    calls are checked against the signature, and the code trusts them. A result with a
    non-default layout is compiled as its physical array (a tiled one has more dimensions),
    so only its element type is compared."""
    results = [artifact.results[s] for s in artifact.sources[:artifact.user_results]]
    laid_out = laid_out + [False] * (len(result_specs) - len(laid_out))
    if len(shapes) != len(arg_specs) or not all(map(_fits, shapes, arg_specs)) \
            or len(results) != len(result_specs) \
            or any(r.element != s.element or (not physical and len(r.shape) != len(s.shape))
                   for r, s, physical in zip(results, result_specs, laid_out)):
        raise KilnError(f"{what} is damaged: code compiled for arguments {list(shapes)} does not "
                        "match the signature in its manifest", hint="compile it again")


class _Budget:
    """Reads archive members up to a total number of unpacked bytes, judged by each
    member's declared size before it is unpacked (zipfile never unpacks past that size)."""

    def __init__(self, what: str, limit: int):
        self.what, self.left = what, limit

    def read(self, archive: zipfile.ZipFile, name: str, limit: int | None = None) -> bytes:
        info = archive.getinfo(name)  # KeyError: no such member
        if info.file_size > self.left or (limit is not None and info.file_size > limit):
            raise KilnError(f"{self.what} is not a Kiln executable: its member '{name}' would "
                            f"unpack to {info.file_size} bytes, more than a Kiln executable of "
                            "its size holds", hint="it is damaged or was made to exhaust memory")
        self.left -= info.file_size
        try:
            with archive.open(info) as member:
                return member.read()
        except _ARCHIVE_ERRORS as exc:
            raise KilnError(f"{self.what} is damaged: its member '{name}' cannot be read "
                            f"({_reason(exc)})", hint="compile it again") from None


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_spec(value) -> bool:
    return isinstance(value, list) and len(value) == 2 and isinstance(value[0], list) \
        and all(d is None or (_is_int(d) and 0 <= d < 1 << 62) for d in value[0]) \
        and isinstance(value[1], str)


# The manifest's fields as `save` writes them; anything else is a damaged file.
_MANIFEST_FIELDS = {
    "kiln": lambda v: isinstance(v, str), "target": lambda v: isinstance(v, str),
    "options": lambda v: isinstance(v, dict),
    "cpu": lambda v: isinstance(v, dict) and isinstance(v.get("name"), str)
    and isinstance(v.get("features"), list) and all(isinstance(f, str) for f in v["features"]),
    "entry": lambda v: isinstance(v, str), "filename": lambda v: isinstance(v, str),
    "arguments": lambda v: isinstance(v, list) and all(map(_is_spec, v)),
    "results": lambda v: isinstance(v, list) and all(map(_is_spec, v)),
    "layouts": lambda v: isinstance(v, dict) and isinstance(v.get("params"), list)
    and isinstance(v.get("results"), list),
    "convention": lambda v: isinstance(v, dict),
    "compiled": lambda v: isinstance(v, list) and len(v) <= _MAX_COMPILED and all(
        isinstance(c, dict) and isinstance(c.get("artifact"), str)
        and isinstance(c.get("shapes"), list)
        and all(isinstance(s, list) and all(_is_int(d) and 0 <= d < 1 << 62 for d in s)
                for s in c["shapes"]) for c in v),
}


def _check_manifest(manifest: dict, what: str) -> None:
    for name, valid in _MANIFEST_FIELDS.items():
        if name not in manifest or not valid(manifest[name]):
            raise KilnError(f"{what} is damaged: its manifest's '{name}' is "
                            f"{'missing' if name not in manifest else 'malformed'}",
                            hint="compile it again")


def _spec(spec: TensorSpec) -> list:
    return [list(spec.shape), spec.element]


def _is_json(value) -> bool:
    try:
        json.dumps(value)
        return True
    except TypeError:
        return False


def convention_from_json(data: dict) -> CallingConvention:
    """The CallingConvention that `dataclasses.asdict` (then JSON) made `data` of."""
    def avals(items):
        return None if items is None else tuple(Aval(**a) for a in items)
    fields = dict(data)
    fields["in_avals"] = avals(data.get("in_avals"))
    fields["out_avals"] = avals(data.get("out_avals"))
    for name in ("kept_arguments", "ordered_effects"):
        if fields.get(name) is not None:
            fields[name] = tuple(fields[name])
    return CallingConvention(**fields)
