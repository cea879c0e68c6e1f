"""Lowerings: data_movement (see passes/legalize/__init__.py)."""
from __future__ import annotations

from ...pipeline import Step

before: list[Step] = []
after: list[Step] = []
