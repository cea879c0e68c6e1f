"""Turn MLIR diagnostics into located KilnErrors."""
from __future__ import annotations

import contextlib
import re

from torch_mlir import ir

from .errors import KilnError



def format_location(loc: ir.Location | str, filename: str) -> str:
    """`loc("-":3:7)` (what parsing from memory records) as `file:3:7`."""
    text = str(loc)
    m = re.search(r'"([^"]*)":(\d+):(\d+)', text)
    if m:
        name = filename if m.group(1) in ("-", "") else m.group(1)
        # 0:0 is what MLIR records when it has no position (e.g. inside bytecode).
        return name if m.group(2) == "0" else f"{name}:{m.group(2)}:{m.group(3)}"
    return text


_OP_AT = re.compile(r'(?:%[\w#:, %]*=\s*)?"?([a-z_][\w]*\.[\w.]+)')


def _op_at(source: str | None, location: str) -> str | None:
    """The op name written at `file:line:col` in `source`, to name it in the message."""
    m = re.search(r":(\d+):(\d+)$", location)
    if source is None or not m:
        return None
    lines = source.splitlines()
    line, col = int(m.group(1)), int(m.group(2))
    if not 0 < line <= len(lines):
        return None
    found = _OP_AT.match(lines[line - 1][col - 1:])
    return found.group(1) if found else None


def error_from_mlir(exc: ir.MLIRError, filename: str, what: str, source: str | None = None) -> KilnError:
    diags = list(exc.error_diagnostics)
    if not diags:
        return KilnError(f"{what}: {exc}", location=filename)
    first = diags[0]
    notes = "; ".join(n.message for n in first.notes)[:300]
    location = format_location(first.location, filename)
    op = _op_at(source, location)
    message = first.message if op is None or op in first.message else f"'{op}': {first.message}"
    return KilnError(f"{what}: {message}", location=location, hint=notes or None)


@contextlib.contextmanager
def mlir_errors(filename: str, what: str, source: str | None = None):
    """Re-raise MLIR's errors inside the block as one located KilnError, and give KilnErrors
    raised by Kiln's own passes (located by `str(op.location)`) the file's name."""
    try:
        yield
    except ir.MLIRError as exc:
        raise error_from_mlir(exc, filename, what, source) from None
    except KilnError as exc:
        if exc.location and exc.location.startswith("loc("):
            exc.location = format_location(exc.location, filename)
            exc.args = (exc.one_line(),)
        raise
