"""The driver: the layer above front ends and targets. It imports a source through a front
end (a module plus its calling convention), compiles it with a target's stages (per argument
shapes when they are dynamic) and calls the result with numpy arrays (`Executable`), applying
the calling convention. Nothing below it imports it."""
from __future__ import annotations

from .avals import ShapedArray
from .executable import Executable

__all__ = ["Executable", "ShapedArray", "compile_source"]


def compile_source(source, target: str = "cpu", *, entry: str | None = None,
                   filename: str | None = None, **options) -> Executable:
    """Import `source` (text, bytes, a path or an ir.Module) and compile it for `target`:
    in one trip to a compile worker when it compiles in one (driver/front.py), else here."""
    from .front import compile_in_one_trip
    verify = bool(options.pop("verify", False))
    exe = compile_in_one_trip(source, target, entry, filename, options, verify)
    if exe is not None:
        return exe
    from ..context import make_context
    from ..frontend import import_program
    from ..targets import get_target
    imported = import_program(source, make_context(), filename)
    return Executable(imported.module, get_target(target, **options), entry, imported.filename,
                      convention=imported.convention, verify=verify, consume=True)
