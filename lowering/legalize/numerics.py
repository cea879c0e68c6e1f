"""Lowerings: numerics (see passes/legalize/__init__.py).

The numerical-library ops upstream `stablehlo-legalize-to-linalg` lacks, each in its own
module, rewritten in place into StableHLO that upstream then lowers:

* fft.py         `stablehlo.fft` (FFT, IFFT, RFFT, IRFFT; any length)
* linalg_ops.py  `stablehlo.cholesky`, `stablehlo.triangular_solve`
* floats.py      8-, 6- and 4-bit floats; `stablehlo.reduce_precision` with no mantissa bits

They build their StableHLO with hlo_builder.py (shared with rng.py); this module only
describes the family: its passes are registered in lowering/registry.py and ordered in
targets/cpu.py.
"""
from __future__ import annotations

