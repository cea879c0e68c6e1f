"""Kiln's own lowerings, for what upstream `stablehlo-legalize-to-linalg` lacks or gets wrong,
one module per op family: semantics, control_flow (and rng), data movement (scatter, sort,
windows, slicing, scalarize), numerics (floats, fft, linalg_ops) and custom_calls.

Each lowering is a pass registered in lowering/registry.py; the order they run in, before
and after the upstream pass, is the `legalize` stage of targets/cpu.py.
"""
