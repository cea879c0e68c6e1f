"""MLIR text printed by older MLIR builds, rewritten (before parsing) into what the bundled one
reads.

- Dense `i1` tensors as hex: MLIR used to pack them 8 elements a byte (element i in bit
  i % 8 of byte i // 8) and now stores a byte an element, so the bundled parser refuses the
  packed form ("elements hex data size is invalid"). torch_xla 2.9's
  `get_stablehlo_text` prints its masks that way (Swin-T's attention masks). A packed
  string, recognised by its length (ceil(n / 8) bytes for n elements, never n unless n is 1,
  where both forms agree), is spread out to a byte an element.
"""
from __future__ import annotations

import math
import re

_I1_HEX = re.compile(r'dense<"0x([0-9A-Fa-f]*)">(\s*:\s*tensor<((?:\d+x)*)i1>)')


def has_older_forms(text: str) -> bool:
    return "i1>" in text and 'dense<"0x' in text


def upgrade(text: str) -> str:
    return _I1_HEX.sub(_spread_bits, text)


def _spread_bits(m: re.Match) -> str:
    digits, dims = m.group(1), m.group(3)
    n = math.prod(int(d) for d in dims.split("x") if d)
    if len(digits) != 2 * ((n + 7) // 8) or len(digits) == 2 * n:
        return m.group(0)
    packed = bytes.fromhex(digits)
    spread = "".join("01" if packed[i // 8] >> (i % 8) & 1 else "00" for i in range(n))
    return f'dense<"0x{spread.upper()}">{m.group(2)}'
