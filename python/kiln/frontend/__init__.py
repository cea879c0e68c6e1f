"""Front ends: every source format becomes a StableHLO module in a given context, plus the
calling convention its entry follows (convention.py)."""
from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path

from torch_mlir import ir

from ..errors import KilnError
from . import mlir as mlir_frontend
from . import untrusted
from .convention import CallingConvention
from .detect import Format, detect, refuse_archive
from .jax_export import recorded_convention  # any module may carry a JAX export's convention

def read_source(source) -> tuple[bytes | str, str]:
    """(content, name for messages). A str is a path if it names an existing file and does not
    look like IR; otherwise it is program text."""
    if isinstance(source, os.PathLike) or (isinstance(source, str) and _looks_like_path(source)):
        path = Path(source)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise KilnError(f"cannot read '{path}': {exc.strerror}", location=str(path)) from None
        refuse_archive(data, str(path))  # a .kx file loads only by kiln.load_executable
        return data, str(path)
    if isinstance(source, (bytes, bytearray)):
        refuse_archive(source, "<bytes>")
        return bytes(source), "<bytes>"
    if isinstance(source, str):
        return source, "<string>"
    raise KilnError(f"cannot compile a {type(source).__name__}",
                    hint="pass MLIR/HLO text, bytes, a file path or an ir.Module")


def _looks_like_path(text: str) -> bool:
    # Any program has braces or a newline; a path has neither.
    return "\n" not in text and "{" not in text and len(text) < 4096


@dataclass
class Imported:
    """What a front end returns: the module and how callers reach its entry."""
    module: ir.Module
    filename: str  # names in-memory sources in messages
    convention: CallingConvention


def import_program(source, ctx: ir.Context, filename: str | None = None, *,
                   disposable: bool = False) -> Imported:
    """Parse `source` into a StableHLO module owned by `ctx`, with its calling convention.
    `disposable`: this process is a compile worker's child, which a reader's crash may take
    down (driver/front.py), so binary formats are read right here instead of in a child of
    Kiln's reader process, with the same checks on what they produced."""
    if isinstance(source, ir.Module):
        # Re-home the module in Kiln's own context so the caller's stays untouched.
        module = mlir_frontend.parse_bytecode(_module_bytes(source), ctx, "<ir.Module>")
        return Imported(module, "<ir.Module>", recorded_convention(module))
    data, name = read_source(source)
    filename = filename or name
    fmt = detect(data, filename)
    if fmt in (Format.MLIR_BYTECODE, Format.JAX_EXPORTED) and disposable:
        module = untrusted.read_here(fmt, data, ctx, filename)
        return Imported(module, filename, recorded_convention(module))
    if fmt in (Format.MLIR_BYTECODE, Format.JAX_EXPORTED):
        # Binary readers crash on corrupt bytes: they run in Kiln's reader process, which
        # hands the module back as text (untrusted.py). The calling convention travels with
        # it as the module's `kiln.jax.info` attribute.
        text = untrusted.read_in_child(fmt, data, filename, untrusted.reader_name(fmt))
        untrusted.check_text_nesting(text, filename)  # the child printed what it read
        module = mlir_frontend.parse_text(text, ctx, filename)
        return Imported(module, filename, recorded_convention(module))
    if fmt is Format.HLO_PROTO:  # parsed by protobuf (no crash on bad bytes): read here
        from .hlo_proto import hlo_proto_to_stablehlo
        text = hlo_proto_to_stablehlo(data, filename)
        untrusted.check_text_nesting(text, filename)  # nested tuple shapes, before MLIR parses
        module = _parse_mlir_text(text, ctx, filename)
        return Imported(module, filename, recorded_convention(module))
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    untrusted.check_text_nesting(text, filename, angle_brackets=fmt is not Format.HLO_TEXT)
    if fmt is Format.HLO_TEXT:
        from .hlo import hlo_to_stablehlo
        text = hlo_to_stablehlo(text, filename)
    module = _parse_mlir_text(text, ctx, filename)
    return Imported(module, filename, recorded_convention(module))


def import_module(source, ctx: ir.Context, filename: str | None = None) -> tuple[ir.Module, str]:
    """Parse `source` into a StableHLO module owned by `ctx`. Returns (module, filename);
    `filename` names in-memory sources in messages."""
    imported = import_program(source, ctx, filename)
    return imported.module, imported.filename


def _parse_mlir_text(text: str, ctx: ir.Context, filename: str) -> ir.Module:
    """MLIR text, after the rewrites its content asks for: the check dialect's custom syntax
    (dialects/check.py), and CHLO/MHLO (dialects only jaxlib has)."""
    from ..dialects import check
    from . import chlo, mhlo, newer
    if check.has_check_syntax(text):
        text = check.read_check_syntax(text, filename)
    if newer.has_newer_ops(text):
        text = newer.upgrade(text)
    if mhlo.has_mhlo(text):
        return mhlo.mhlo_to_stablehlo(text, ctx, filename)
    if chlo.has_chlo(text):
        return chlo.chlo_to_stablehlo(text, ctx, filename)
    return mlir_frontend.parse_text(text, ctx, filename)


def _module_bytes(module: ir.Module) -> bytes:
    buf = io.BytesIO()
    module.operation.write_bytecode(buf)
    return buf.getvalue()
