"""Kiln's own lowerings, for what upstream `stablehlo-legalize-to-linalg` lacks or gets wrong.

Each family module exports `before` (steps run before the upstream pass, usually rewriting
StableHLO ops into scf/tensor/linalg or into StableHLO that upstream handles) and `after`
(steps run after it). This list is the one place that decides their order.
"""
from __future__ import annotations

from ...pipeline import Step
from . import control_flow, custom_calls, data_movement, numerics, semantics

FAMILIES = [semantics, control_flow, data_movement, numerics, custom_calls]


def before_upstream() -> list[Step]:
    return [step for family in FAMILIES for step in family.before]


def after_upstream() -> list[Step]:
    return [step for family in FAMILIES for step in family.after]
