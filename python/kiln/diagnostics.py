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


# How MLIR's parser reports an op of a dialect the context does not know (Kiln's contexts allow
# none): custom form, generic form of an unknown dialect, unknown op of a known dialect.
_UNKNOWN_CUSTOM_OP = re.compile(r"Dialect `[^']*' not found for custom op '([^']+)'")
_UNKNOWN_OP_OF_DIALECT = re.compile(r"unregistered operation '([^']+)' found in dialect")
_UNKNOWN_GENERIC_OP = "operation being parsed with an unregistered dialect"
_UNKNOWN_DIALECT = re.compile(r"dialect '([^']+)' is unknown")  # bytecode names no op
_GENERIC_NAME = re.compile(r'"([a-z_][\w$]*\.[\w.$]+)"\s*\(')


def _unknown_op(message: str, source: str | None, location: str) -> tuple[str, str] | None:
    """(op name, location of its name) when `message` reports an unknown op; only the
    dialect's name when bytecode reports it."""
    for pattern in (_UNKNOWN_CUSTOM_OP, _UNKNOWN_OP_OF_DIALECT, _UNKNOWN_DIALECT):
        if m := pattern.search(message):
            return m.group(1), location
    if _UNKNOWN_GENERIC_OP not in message:
        return None
    # MLIR points after the quoted name; find the name on that line and point at it.
    m = re.search(r":(\d+):(\d+)$", location)
    lines = source.splitlines() if source is not None else []
    if not m or not 0 < int(m.group(1)) <= len(lines):
        return "<unknown>", location
    line = lines[int(m.group(1)) - 1][:int(m.group(2))]
    names = list(_GENERIC_NAME.finditer(line))
    if not names:
        return "<unknown>", location
    return names[-1].group(1), f"{location[:m.start()]}:{m.group(1)}:{names[-1].start() + 1}"


# What to do about ops Kiln's contexts do not register on purpose (dialects/sdy.py says why
# Shardy cannot be declared), by op name, else by dialect.
_UNKNOWN_OP_HINTS = {
    "sdy.manual_computation": "a shard_map body (sdy.manual_computation) computes per-device "
                              "shards and Kiln runs one device: export the function without shard_map",
    "sdy": "Shardy ('sdy') sharding annotations are dropped when read through jaxlib: pass the "
           "bytes of jax.export's exp.serialize() (or exp.mlir_module_serialized), not the "
           "module's text",
    "kiln": "the 'kiln' dialect is Kiln's own and has no such op",
}
_DEFAULT_UNKNOWN_OP_HINT = ("Kiln reads StableHLO (and CHLO, MHLO, VHLO), the interpreter's "
                            "'check' ops and upstream MLIR dialects: lower it to StableHLO first")


def unknown_op_error(name: str, location: str, what: str) -> KilnError:
    """`name` is an op's name, or only its dialect's when bytecode names no op."""
    dialect = name.split(".")[0]
    hint = _UNKNOWN_OP_HINTS.get(name) or _UNKNOWN_OP_HINTS.get(dialect)
    if dialect == "kiln":
        hint = f"{hint}; {_DEFAULT_UNKNOWN_OP_HINT}"
    what_is_unknown = f"unknown op '{name}'" if "." in name else f"unknown dialect '{name}'"
    return KilnError(f"{what}: {what_is_unknown}", location=location,
                     hint=hint or _DEFAULT_UNKNOWN_OP_HINT)


def error_from_mlir(exc: ir.MLIRError, filename: str, what: str, source: str | None = None) -> KilnError:
    diags = list(exc.error_diagnostics)
    if not diags:
        return KilnError(f"{what}: {exc}", location=filename)
    first = diags[0]
    notes = "; ".join(n.message for n in first.notes)[:300]
    location = format_location(first.location, filename)
    if unknown := _unknown_op(first.message, source, location):
        return unknown_op_error(*unknown, what)
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
