"""MHLO inputs (`mhlo.add`, XLA's older dialect), converted through jaxlib.

Like CHLO (see chlo.py) the bundled bindings lack the dialect; jaxlib has it and its
`hlo-legalize-to-stablehlo` conversion, after which the module travels to Kiln's context as a
portable artifact. CHLO mixed into the program is legalized in the same run.
"""
from __future__ import annotations

import re

from torch_mlir import ir

from .chlo import convert_through_jaxlib, upcast_narrow_floats

# An mhlo op, not one of the `mhlo.*` attributes JAX puts on StableHLO modules.
_MHLO_OP = re.compile(r'(?:^\s*|=\s*)"?mhlo\.[a-z_0-9]+\b(?!\s*=)', re.M)


def has_mhlo(text: str) -> bool:
    return _MHLO_OP.search(text) is not None


def mhlo_to_stablehlo(text: str, ctx: ir.Context, filename: str) -> ir.Module:
    return convert_through_jaxlib(
        text, ctx, filename, "MHLO",
        "builtin.module(func.func(chlo-legalize-to-stablehlo),hlo-legalize-to-stablehlo,"
        "func.func(chlo-legalize-to-stablehlo))", prepare=upcast_narrow_floats)
