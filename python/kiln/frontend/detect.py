"""Tell source formats apart by their content, never by a file name.

A zip archive is never a source: Kiln's saved executables (`.kx`) are zip archives holding
machine code, and they load only through `kiln.load_executable` or `kiln run PROG.kx`, chosen
by that suffix, never because some input turned out to be one. Any other way in refuses
an archive with an error that says how to load it (`refuse_archive`).
"""
from __future__ import annotations

import enum

from ..errors import KilnError

MLIR_BYTECODE_MAGIC = b"ML\xefR"
# A zip archive starts with a local file header, or with the end record when it is empty.
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")


class Format(enum.Enum):
    MLIR_TEXT = "mlir-text"
    MLIR_BYTECODE = "mlir-bytecode"  # includes StableHLO portable artifacts (VHLO bytecode)
    HLO_TEXT = "hlo-text"
    JAX_EXPORTED = "jax-exported"  # jax.export.Exported.serialize(): a flatbuffer around VHLO
    HLO_PROTO = "hlo-proto"  # XLA's HloModuleProto / HloProto / HloSnapshot (frontend/hlo_proto)


def _strip_comments(text: str) -> str:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("//"):
            return stripped
    return ""


def is_archive(data: bytes | str) -> bool:
    head = data[:4]
    if isinstance(head, str):
        head = head.encode("utf-8", "surrogateescape")
    return head in ZIP_MAGICS


def refuse_archive(data: bytes | str, filename: str | None) -> None:
    """Raise the KilnError for a zip archive given where a program was expected."""
    if is_archive(data):
        raise KilnError("is a zip archive, not a program: Kiln's executables (`.kx` files) are "
                        "zip archives of machine code, and Kiln never loads one by its content",
                        location=filename or "<input>",
                        hint="load an executable you trust with kiln.load_executable('PROG.kx') "
                             "or `kiln run PROG.kx`; the name must end in .kx")


def detect(data: bytes | str, filename: str | None = None) -> Format:
    refuse_archive(data, filename)
    if isinstance(data, bytes):
        if data.startswith(MLIR_BYTECODE_MAGIC):
            return Format.MLIR_BYTECODE
        from .jax_export import looks_like_exported
        if looks_like_exported(data):
            return Format.JAX_EXPORTED
        from .hlo_proto.messages import looks_like_hlo_proto
        if looks_like_hlo_proto(data):
            return Format.HLO_PROTO
        data = data.decode("utf-8", errors="replace")
    first = _strip_comments(data)
    if first.startswith("HloModule"):
        return Format.HLO_TEXT
    return Format.MLIR_TEXT
