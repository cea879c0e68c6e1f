"""Lowerings: data_movement (see lowering/legalize/__init__.py).

Kiln lowers the data-movement ops that upstream `stablehlo-legalize-to-linalg` lacks
(scatter, sort, select_and_scatter) into scf loops over tensors, built in place with op
builders (loops.py holds the shared machinery); their regions are cloned as 0-d StableHLO,
which upstream then lowers, and `scalarize` (an `after` step, scalarize.py) unwraps the
resulting 0-d linalg.generics into scalars inside those loops. Unsigned dynamic-slice starts
and ui64 gather indices are bounded and widened first (slicing.py), and the sizes, indices and
strides the program computes at run time (real_dynamic_slice, dynamic_iota...) are checked
against the spec before the op (lowering/bounds_guards.py). This module only describes the
family: its passes are
registered in lowering/registry.py and ordered in targets/cpu.py.
"""
from __future__ import annotations

