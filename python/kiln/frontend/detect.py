"""Tell source formats apart by their content, never by a file name."""
from __future__ import annotations

import enum

MLIR_BYTECODE_MAGIC = b"ML\xefR"


class Format(enum.Enum):
    MLIR_TEXT = "mlir-text"
    MLIR_BYTECODE = "mlir-bytecode"  # includes StableHLO portable artifacts (VHLO bytecode)
    HLO_TEXT = "hlo-text"
    JAX_EXPORTED = "jax-exported"  # jax.export.Exported.serialize(): a flatbuffer around VHLO


def _strip_comments(text: str) -> str:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("//"):
            return stripped
    return ""


def detect(data: bytes | str) -> Format:
    if isinstance(data, bytes):
        if data.startswith(MLIR_BYTECODE_MAGIC):
            return Format.MLIR_BYTECODE
        from .jax_export import looks_like_exported
        if looks_like_exported(data):
            return Format.JAX_EXPORTED
        data = data.decode("utf-8", errors="replace")
    first = _strip_comments(data)
    if first.startswith("HloModule"):
        return Format.HLO_TEXT
    return Format.MLIR_TEXT
