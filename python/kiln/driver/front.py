"""`kiln.compile` of a source in one trip to a compile worker.

When a compile runs in a worker anyway (driver/worker.py), the worker's child imports the
source too (driver/source_import.py): it parses the untrusted input (so the input is still
only ever parsed in a child process, never in the caller), reads what the Executable needs
around the code (signature, layouts, device counts, calling convention) and, for a static
signature, compiles it. The caller gets back data only: it makes no MLIR context and parses
nothing. The compile cache keys such a compile on the source's own bytes, so a hit needs no
parse either.

The caller parses the imported module only when it needs it: `exe.ir()`, a dynamic
signature's specialisations, shardings (driver/executable.py).
"""
from __future__ import annotations

import dataclasses

from .source_import import ExecutableInfo, ImportRequest


def compile_in_one_trip(source, target: str, entry: str | None, filename: str | None,
                        options: dict, verify: bool):
    """The Executable for `source`, imported and compiled in a worker (or found in the compile
    cache); None when this compile cannot go that way (an ir.Module, isolation off, options
    another process cannot rebuild), and the caller imports it itself."""
    from torch_mlir import ir
    if isinstance(source, ir.Module):
        return None
    from . import build, cache
    if not build.will_use_worker(options):
        return None
    from ..dumping import next_module_id
    from ..frontend import read_source
    from ..runtime.custom_call import REGISTRY
    from ..targets import get_target
    from .executable import Executable
    data, name = read_source(source)
    request = ImportRequest(data, filename or name, entry, target, dict(options),
                            REGISTRY.describe(), next_module_id())
    pickled = build.pickled_for_worker(request)
    if pickled is None:
        return None
    compiled_target = get_target(target, **options)  # an unknown target: an error up front
    key = cache.source_key(request)
    found = cache.load(key)
    if found is not None and found.executable is not None:
        info = ExecutableInfo.from_json(found.executable)
        imported = found.imported
        found.executable = found.imported = None  # the Executable keeps them, not the artifact
        return Executable.from_parts(compiled_target, info, imported, {_shapes(info): found},
                                     verify=verify)
    from .worker import import_in_worker
    progress = build.Progress(options, entry)
    try:
        info_json, imported, artifact = import_in_worker(
            request, pickled, progress.update, lambda info: progress.name_entry(info["entry"]))
    finally:
        progress.finish()
    info = ExecutableInfo.from_json(info_json)
    compiled = {}
    if artifact is not None:
        cache.store(key, dataclasses.replace(artifact, executable=info_json, imported=imported))
        compiled[_shapes(info)] = artifact
    return Executable.from_parts(compiled_target, info, imported, compiled, verify=verify)


def _shapes(info: ExecutableInfo) -> tuple:
    return tuple(s.shape for s in info.arg_specs)
