"""MLIR inputs: StableHLO text, MLIR bytecode and StableHLO portable artifacts (VHLO)."""
from __future__ import annotations

import re

from torch_mlir import ir, passmanager
from torch_mlir._mlir_libs import _stablehlo

from ..diagnostics import mlir_errors
from ..errors import KilnError
from . import older

_PRODUCER = re.compile(rb"StableHLO_v(\d+)\.(\d+)\.(\d+)")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))


def check_artifact_version(data: bytes, filename: str) -> None:
    """A portable artifact from a StableHLO this build cannot read gets a clear error up front
    instead of a deserializer failure deep inside."""
    m = _PRODUCER.search(data[:64])
    if not m:
        return
    found = tuple(int(x) for x in m.groups())
    lo, hi = _stablehlo.get_minimum_version(), _stablehlo.get_current_version()
    if found < _version(lo) or found > _version(hi):
        raise KilnError(
            f"portable artifact was written by StableHLO {'.'.join(map(str, found))}; this Kiln "
            f"reads StableHLO {lo} to {hi}", location=filename,
            hint="re-export it targeting a version in that range (e.g. jax.export with an older "
                 "serialization version), or upgrade Kiln's torch-mlir pin")


def parse_bytecode(data: bytes, ctx: ir.Context, filename: str) -> ir.Module:
    if _PRODUCER.search(data[:64]):
        check_artifact_version(data, filename)
        with mlir_errors(filename, "cannot deserialize StableHLO portable artifact"):
            try:
                return _stablehlo.deserialize_portable_artifact(ctx, data)
            except (ValueError, RuntimeError) as exc:  # the binding's own failures
                raise _unreadable(exc, filename) from None
    with ctx, mlir_errors(filename, "cannot parse MLIR bytecode"):
        try:
            module = ir.Module.parse(data)
        except (ValueError, RuntimeError) as exc:
            raise _unreadable(exc, filename) from None
        return legalize_vhlo(module, filename)


def _unreadable(exc: Exception, filename: str) -> KilnError:
    first = (str(exc).strip().splitlines() or ["unknown reason"])[0][:300]
    return KilnError(f"cannot read MLIR bytecode: {first}", location=filename,
                     hint="it may use a dialect or attribute this build of StableHLO cannot read "
                          "(e.g. Shardy 'sdy'); re-export it as plain StableHLO")


def parse_text(text: str, ctx: ir.Context, filename: str) -> ir.Module:
    if older.has_older_forms(text):
        text = older.upgrade(text)
    with ctx, mlir_errors(filename, "cannot parse MLIR", text):
        return legalize_vhlo(ir.Module.parse(text), filename)


def legalize_vhlo(module: ir.Module, filename: str) -> ir.Module:
    """VHLO written as text or plain bytecode becomes StableHLO like an artifact does."""
    if not any(op.operation.name.startswith("vhlo.") for op in module.body.operations):
        return module
    with mlir_errors(filename, "cannot legalize VHLO to StableHLO"):
        passmanager.PassManager.parse("builtin.module(vhlo-legalize-to-stablehlo)").run(module.operation)
    return module
