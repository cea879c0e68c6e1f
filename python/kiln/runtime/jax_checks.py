"""`shape_assertion`, the custom call JAX's shape-polymorphic exports check their dimension
arguments with, as a built-in Python target.

Kiln's `kiln-lower-jax-custom-calls` pass (lowering/legalize/jax_targets.py) decides the
assertions whose predicate folded to a constant at compile time; the others stay calls of this
target, with JAX's `error_message` as the string backend_config: operands are the predicate
(a 0-d bool) and the values the message's `{0}`, `{1}`... stand for.
"""
from __future__ import annotations

import numpy as np

from ..errors import KilnError

TARGET = "shape_assertion"


def format_assertion(message: str, args) -> str:
    """JAX's error message with its `{0}`, `{1}`... replaced by the arguments' values."""
    try:
        return message.format(*args)
    except (IndexError, KeyError, ValueError):
        return message


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
