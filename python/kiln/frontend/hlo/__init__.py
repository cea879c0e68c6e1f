"""HLO text -> StableHLO importer.

    hlo_to_stablehlo(text, filename="<hlo>") -> str   # MLIR text with public func.func @main
    is_hlo_text(text) -> bool
    stablehlo_to_hlo(module_text) -> str              # export back to HLO text

The emitted module is parsed and verified with the MLIR Python bindings before it is
returned, so callers always get valid StableHLO or a KilnError.
"""
from __future__ import annotations

import re

from kiln.errors import KilnError

from .emitter import SUPPORTED_OPCODES, Emitter
from .parser import is_hlo_text, parse_module

__all__ = ["hlo_to_stablehlo", "is_hlo_text", "parse_module", "stablehlo_to_hlo",
           "SUPPORTED_OPCODES", "verify_mlir"]


def verify_mlir(text: str, what: str = "emitted StableHLO"):
    """Parse and verify MLIR text with StableHLO registered; returns the module's pretty
    print.  Failures become KilnError (they indicate an importer bug, not a user error)."""
    from torch_mlir import ir
    from torch_mlir._mlir_libs import _stablehlo
    from ...dialects import load_all

    ctx = ir.Context()
    _stablehlo.register_dialect(ctx)
    load_all(ctx)  # Kiln's check and kiln dialects; no unregistered ones
    with ctx, ir.Location.unknown():
        try:
            module = ir.Module.parse(text)
            module.operation.verify()
        except Exception as e:  # MLIRError carries the diagnostics
            loc, msg = _first_diag(e)
            raise KilnError(f"{what} is invalid: {msg}", location=loc,
                            hint="the HLO instruction's shapes or attributes are inconsistent, "
                                 "or this is an importer bug") from None
        return str(module)


def _first_diag(e: Exception) -> tuple[str | None, str]:
    """(HLO location, message) of the first MLIR error; ops carry loc(file:line:col)."""
    for ln in str(e).splitlines():
        m = re.search(r'error: "(.*)":(\d+):(\d+): (.*)', ln)
        if m and m.group(1) != "-":
            return f"{m.group(1)}:{m.group(2)}:{m.group(3)}", m.group(4).strip()
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return None, " | ".join(lines[:3])


def hlo_to_stablehlo(text: str, filename: str = "<hlo>", verify: bool = True) -> str:
    """Import HLO module text; returns StableHLO MLIR text (func.func @main = ENTRY)."""
    module = parse_module(text, filename)
    mlir = Emitter(module).emit_module()
    return verify_mlir(mlir) if verify else mlir


def stablehlo_to_hlo(module_text: str, filename: str = "<stablehlo>") -> str:
    from ..untrusted import check_text_nesting
    from .exporter import stablehlo_to_hlo as _export
    check_text_nesting(module_text, filename)  # before the MLIR parser sees it
    return _export(module_text)
