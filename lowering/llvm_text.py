"""LLVM IR text from MLIR's LLVM, made readable by llvmlite's older LLVM.

MLIR's translation (torch_mlir's LLVM) prints some float constants in forms llvmlite's LLVM 22
cannot parse: infinities and NaNs as `+inf`/`-inf`/`+qnan`, raw bits as `f0x...`, and f32/f16/
bf16 values as their shortest decimal (6.168500e-01), which older LLVM accepts only when the
decimal is exact in double. `for_older_llvm` rewrites each into the hexadecimal form every
LLVM reads; nothing else in the text changes. Used for PTX (lowering/gpu/ptx.py) and for
small CPU programs compiled by llvmlite (targets/quick_codegen.py).
"""
from __future__ import annotations

import re
import struct

_SPECIAL = re.compile(r"(?<![\w.%@])([+-])?(inf|qnan)\b")
_HEX = {"double": {"+inf": "0x7FF0000000000000", "-inf": "0xFFF0000000000000",
                   "+qnan": "0x7FF8000000000000", "-qnan": "0xFFF8000000000000"},
        "half": {"+inf": "0xH7C00", "-inf": "0xHFC00", "+qnan": "0xH7E00", "-qnan": "0xHFE00"},
        "bfloat": {"+inf": "0xR7F80", "-inf": "0xRFF80", "+qnan": "0xR7FC0", "-qnan": "0xRFFC0"}}
_BITS = re.compile(r"\bf0x([0-9A-Fa-f]+)\b")  # newer LLVM: a float's raw bits
_TYPED_LITERAL = re.compile(r"\b(float|double|half|bfloat)\b|(?<![\w.%@])([-+]?\d+\.\d+e[-+]?\d+)")


def for_older_llvm(text: str) -> str:
    """`text` with every float literal older LLVM cannot read in hexadecimal."""
    return "\n".join(_line(x) for x in text.split("\n"))


def _line(line: str) -> str:
    if "e-" in line or "e+" in line:
        line = _exact_decimals(line)
    if "f0x" in line:
        kind = "bfloat" if " bfloat" in line else "other"
        line = _BITS.sub(lambda m: _from_bits(m, kind), line)
    if not _SPECIAL.search(line):
        return line
    kind = "half" if " half" in line else "bfloat" if " bfloat" in line \
        else "double"  # float and double literals are both written as doubles
    return _SPECIAL.sub(lambda m: _HEX[kind][(m.group(1) or "+") + m.group(2)], line)


def _from_bits(match, kind: str) -> str:
    digits = match.group(1)
    if len(digits) == 8:  # f32 bits: written as the double of the same value
        value = struct.unpack("<f", int(digits, 16).to_bytes(4, "little"))[0]
        return "0x%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]
    if len(digits) == 4:
        return ("0xR" if kind == "bfloat" else "0xH") + digits.upper()
    return "0x" + digits.upper()


def _exact_decimals(line: str) -> str:
    """Decimal constants of f32/f16/bf16 values in hexadecimal."""
    out, last, kind = [], 0, None
    for m in _TYPED_LITERAL.finditer(line):
        if m.group(1):
            kind = m.group(1)
            continue
        if kind in (None, "double"):
            continue
        value = float(m.group(2))
        if kind == "float":
            value = struct.unpack("<f", struct.pack("<f", value))[0]
            text = "0x%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]
        else:
            import ml_dtypes
            import numpy as np
            dtype = np.float16 if kind == "half" else ml_dtypes.bfloat16
            bits = int(np.array(value, dtype).view(np.uint16))
            text = ("0xH" if kind == "half" else "0xR") + "%04X" % bits
        out.append(line[last:m.start(2)] + text)
        last = m.end(2)
    return "".join(out) + line[last:]
