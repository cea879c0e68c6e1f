"""Targets turn a StableHLO module into something callable. Registry: name -> Target."""
from __future__ import annotations

from ..errors import KilnError
from .base import Target

_TARGETS: dict[str, type[Target]] = {}


def register_target(cls: type[Target]) -> type[Target]:
    _TARGETS[cls.name] = cls
    return cls


def get_target(name: str, **options) -> Target:
    if name not in _TARGETS:
        # Targets register on import; importing here keeps the registry explicit and lazy.
        from . import cpu  # noqa: F401
    try:
        return _TARGETS[name](**options)
    except KeyError:
        raise KilnError(f"unknown target '{name}'", hint="available: " + ", ".join(sorted(_TARGETS))) from None
