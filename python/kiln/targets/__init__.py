"""Targets turn a StableHLO module into something callable. Registry: name -> Target; the
built-in ones are listed in `_builtin_targets`, others register with `register_target`."""
from __future__ import annotations

from ..errors import KilnError
from .base import Target

_TARGETS: dict[str, type[Target]] = {}


def register_target(cls: type[Target]) -> type[Target]:
    _TARGETS[cls.name] = cls
    return cls


def _builtin_targets() -> list[type[Target]]:
    # Listed here rather than registering themselves, so that no target module imports this
    # package (which would close an import circle); imported lazily, on first use.
    from .cpu import CpuTarget
    from .gpu import GpuTarget
    from .gpu_emulator import GpuEmulatorTarget
    return [CpuTarget, GpuTarget, GpuEmulatorTarget]


def get_target(name: str, **options) -> Target:
    if name not in _TARGETS:
        for target in _builtin_targets():
            _TARGETS.setdefault(target.name, target)
    try:
        return _TARGETS[name](**options)
    except KeyError:
        raise KilnError(f"unknown target '{name}'", hint="available: " + ", ".join(sorted(_TARGETS))) from None
