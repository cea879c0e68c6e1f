"""XLA's serialized HLO protos as an input format.

    looks_like_hlo_proto(data) -> bool          # content detection (detect.py)
    read_hlo_proto(data) -> HloProtoFile        # which message, the module, any arguments
    hlo_proto_to_stablehlo(data, filename) -> str
    snapshot_arguments(data) -> list[np.ndarray]

Three messages carry a module: `HloModuleProto` (jax's
`lowered.compiler_ir("hlo").as_serialized_hlo_module_proto()`), `HloProto` (what
`--xla_dump_hlo_as_proto` writes: the module plus a buffer assignment Kiln ignores) and
`HloSnapshot` (an HloProto with the arguments of one run). They are parsed with the protobuf
runtime from Kiln's own declaration of the fields it reads (hlo_subset.proto), turned into
the HLO text importer's model (convert.py) and emitted by the same emitter as HLO text.
"""
from __future__ import annotations

import numpy as np

from kiln.errors import KilnError

from .messages import HloProtoFile, looks_like_hlo_proto, read_hlo_proto

__all__ = ["HloProtoFile", "looks_like_hlo_proto", "read_hlo_proto", "hlo_proto_to_stablehlo",
           "snapshot_arguments"]


def hlo_proto_to_stablehlo(data: bytes, filename: str = "<hlo proto>", verify: bool = True) -> str:
    """Import a serialized HLO module; returns StableHLO MLIR text (func.func @main = ENTRY)."""
    from ..hlo import verify_mlir
    from ..hlo.emitter import Emitter
    from .convert import to_module
    module = to_module(read_hlo_proto(data, filename).module, filename)
    mlir = Emitter(module).emit_module()
    return verify_mlir(mlir) if verify else mlir


def snapshot_arguments(data: bytes, filename: str = "<hlo proto>") -> list[np.ndarray]:
    """An HloSnapshot's arguments (tuple arguments flattened, as the entry takes them)."""
    from .convert import shape_of
    from .literals import literal_leaves
    found = read_hlo_proto(data, filename)
    if found.kind != "HloSnapshot":
        raise KilnError(f"an {found.kind} carries no arguments", location=filename,
                        hint="only an HloSnapshot records the arguments of a run")
    out: list[np.ndarray] = []
    for i, literal in enumerate(found.arguments):
        where = f"{filename}: argument {i}"
        shape = shape_of(literal.shape, where)
        got = literal_leaves(literal, shape, where)
        out.extend(got if shape.is_tuple else [got])
    return out
