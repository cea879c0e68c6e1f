"""Turn MLIR diagnostics into located KilnErrors."""
from __future__ import annotations

import contextlib
import re

from torch_mlir import ir

from .errors import KilnError

_STDIN_LOC = re.compile(r'^loc\("-":(\d+):(\d+)\)$')


def format_location(loc: ir.Location | str, filename: str) -> str:
    """`loc("-":3:7)` (what parsing from memory records) as `file:3:7`."""
    text = str(loc)
    m = _STDIN_LOC.match(text)
    if m:
        return f"{filename}:{m.group(1)}:{m.group(2)}"
    m = re.search(r'"([^"]*)":(\d+):(\d+)', text)
    if m:
        name = filename if m.group(1) in ("-", "") else m.group(1)
        return f"{name}:{m.group(2)}:{m.group(3)}"
    return text


def error_from_mlir(exc: ir.MLIRError, filename: str, what: str) -> KilnError:
    diags = list(exc.error_diagnostics)
    if not diags:
        return KilnError(f"{what}: {exc}", location=filename)
    first = diags[0]
    notes = "; ".join(n.message for n in first.notes)[:300]
    return KilnError(f"{what}: {first.message}", location=format_location(first.location, filename),
                     hint=notes or None)


@contextlib.contextmanager
def mlir_errors(filename: str, what: str):
    """Re-raise MLIR's errors inside the block as one located KilnError, and give KilnErrors
    raised by Kiln's own passes (located by `str(op.location)`) the file's name."""
    try:
        yield
    except ir.MLIRError as exc:
        raise error_from_mlir(exc, filename, what) from None
    except KilnError as exc:
        if exc.location and exc.location.startswith("loc("):
            exc.location = format_location(exc.location, filename)
            exc.args = (exc.one_line(),)
        raise
