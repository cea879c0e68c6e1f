"""Which of XLA's HLO messages a byte string holds (content detection and reading),
kept apart from the converter so that `kiln.frontend.detect` can ask without importing
the HLO importer."""
from __future__ import annotations

from dataclasses import dataclass, field


from kiln.errors import KilnError

# The first byte of each message as XLA writes it: a length-delimited or varint field 1-6
# (HloSnapshot.hlo, HloProto.hlo_module and HloModuleProto.name are all field 1).
_FIRST_BYTES = {0x0A, 0x12, 0x1A, 0x22, 0x28, 0x30}
_MESSAGES = ("HloSnapshot", "HloProto", "HloModuleProto")


@dataclass
class HloProtoFile:
    kind: str                 # "HloSnapshot", "HloProto" or "HloModuleProto"
    module: object            # the HloModuleProto
    arguments: list = field(default_factory=list)  # an HloSnapshot's LiteralProtos


def _plausible(module) -> bool:
    """A module XLA could have written: named computations of instructions with opcodes,
    one of them the entry. Rejects bytes that merely happen to parse as protobuf."""
    if not module.computations:
        return False
    names = {c.name for c in module.computations}
    ids = {c.id for c in module.computations}
    if module.entry_computation_name not in names and module.entry_computation_id not in ids:
        return False
    for c in module.computations:
        if not c.name or not c.instructions:
            return False
        for ins in c.instructions:
            op = ins.opcode
            if not op or not all(ch.islower() or ch.isdigit() or ch == "-" for ch in op):
                return False
    return True


def _parse(data: bytes) -> HloProtoFile | None:
    from google.protobuf.message import DecodeError
    from . import hlo_subset_pb2 as pb
    if not data or data[0] not in _FIRST_BYTES:
        return None
    for kind in _MESSAGES:
        message = getattr(pb, kind)()
        try:
            message.ParseFromString(data)
        except (DecodeError, ValueError, RuntimeError):
            continue
        module = {"HloSnapshot": lambda m: m.hlo.hlo_module, "HloProto": lambda m: m.hlo_module,
                  "HloModuleProto": lambda m: m}[kind](message)
        if _plausible(module):
            arguments = list(message.arguments) if kind == "HloSnapshot" else []
            return HloProtoFile(kind, module, arguments)
    return None


def looks_like_hlo_proto(data: bytes) -> bool:
    return isinstance(data, (bytes, bytearray)) and _parse(bytes(data)) is not None


def read_hlo_proto(data: bytes, filename: str = "<hlo proto>") -> HloProtoFile:
    found = _parse(bytes(data))
    if found is None:
        raise KilnError("not a serialized HLO module (HloModuleProto, HloProto or HloSnapshot)",
                        location=filename,
                        hint="write it with XLA_FLAGS=--xla_dump_hlo_as_proto or "
                             "compiler_ir('hlo').as_serialized_hlo_module_proto()")
    return found
