"""`shape_assertion`, the custom call JAX's shape-polymorphic exports check their dimension
arguments with, as a built-in Python target.

Kiln's `kiln-lower-jax-custom-calls` pass (lowering/legalize/jax_targets.py) decides the
assertions whose predicate folded to a constant at compile time; the others stay calls of this
target, with JAX's `error_message` as the string backend_config: operands are the predicate
(a 0-d bool) and the values the message's `{0}`, `{1}`... stand for.
"""
from __future__ import annotations

import re

import numpy as np

from ..errors import KilnError

TARGET = "shape_assertion"


# What JAX's messages use of str.format: `{N}` (a positional argument) and `{{`, `}}` (literal
# braces). The message comes with the program, so it is not given to str.format, whose field
# syntax reads attributes and items (`{0.__class__.__mro__}`): only these forms are
# substituted, and anything else stays as written.
_FIELD = re.compile(r"\{\{|\}\}|\{([0-9]{1,9})\}")
MAX_MESSAGE = 4000  # characters of a program's message shown


def format_assertion(message: str, args) -> str:
    """JAX's error message with its `{0}`, `{1}`... replaced by the arguments' values (integers:
    dimension sizes). A placeholder with no such argument, or one whose value is not an
    integer, stays as written."""
    def substitute(match: re.Match) -> str:
        field = match.group(0)
        if field in ("{{", "}}"):
            return field[0]
        index = int(match.group(1))
        if index < len(args) and isinstance(args[index], (int, np.integer)) \
                and not isinstance(args[index], (bool, np.bool_)):
            return str(int(args[index]))
        return field
    text = _FIELD.sub(substitute, message)
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + "..."


def shape_assertion(results, operands, *, attributes=None, backend_config=""):
    if not operands:
        raise KilnError("shape_assertion has no predicate operand")
    if bool(np.asarray(operands[0]).item()):
        return
    args = [np.asarray(a).item() for a in operands[1:]]
    raise KilnError(format_assertion(backend_config or "shape assertion failed", args),
                    hint="the arguments' shapes break the export's shape-polymorphism constraints")


def register_jax_check_targets(registry) -> list[str]:
    """Register `shape_assertion` with `registry.register(name, fn, platform="cpu")`."""
    registry.register(TARGET, shape_assertion, platform="cpu")
    return [TARGET]
