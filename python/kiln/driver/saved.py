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
would a shared library.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
import json
import threading
import zipfile
from pathlib import Path

from ..errors import KilnError
from ..frontend.convention import Aval, CallingConvention
from ..runtime.memref import TensorSpec
from . import plan
from .artifact import Artifact, kiln_build

FORMAT = "kiln-executable"
VERSION = 1


def save(exe, path) -> Path:
    """Write `exe` with every specialisation it has compiled (a static signature's one, at
    least) to `path`."""
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
        if artifact.plan is None:  # compile once more, recording the plan
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


def read(path) -> Saved:
    """Read and check the `.kx` file at `path` (its code is not linked in yet)."""
    from ..targets import get_target
    from ..targets.objects import check_cpu
    path = Path(path)
    what = str(path)
    try:
        archive = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise KilnError(f"{what} does not exist") from None
    except (zipfile.BadZipFile, OSError) as exc:
        raise KilnError(f"{what} is not a Kiln executable ({exc})",
                        hint="make one with `kiln compile FILE -o prog.kx`") from None
    with archive:
        try:
            manifest = json.loads(archive.read("manifest.json"))
        except (KeyError, ValueError) as exc:
            raise KilnError(f"{what} is not a Kiln executable (no readable manifest: {exc})",
                            hint="make one with `kiln compile FILE -o prog.kx`") from None
        if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
            raise KilnError(f"{what} is a {manifest.get('format')} file of version "
                            f"{manifest.get('version')}; this Kiln reads {FORMAT} {VERSION}",
                            hint="compile the program again with this Kiln")
        if manifest["kiln"] != kiln_build():
            raise KilnError(f"{what} was compiled by Kiln {manifest['kiln']}; this is Kiln "
                            f"{kiln_build()}", hint="compile the program again with this Kiln")
        check_cpu(manifest["cpu"], what)
        try:
            imported = archive.read("module.mlirbc")
            blobs = [(tuple(tuple(s) for s in c["shapes"]), archive.read(c["artifact"]))
                     for c in manifest["compiled"]]
        except KeyError as exc:
            raise KilnError(f"{what} is damaged: {exc}", hint="compile it again") from None
    artifacts = {}
    for shapes, blob in blobs:
        artifact = Artifact.from_bytes(blob, what)
        artifact.origin = "file"
        artifacts[shapes] = artifact
    return Saved(get_target(manifest["target"], **manifest["options"]), manifest["filename"],
                 convention_from_json(manifest["convention"]), imported, manifest["entry"],
                 [TensorSpec(tuple(s), e) for s, e in manifest["arguments"]],
                 [TensorSpec(tuple(s), e) for s, e in manifest["results"]],
                 manifest["layouts"], artifacts)


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
