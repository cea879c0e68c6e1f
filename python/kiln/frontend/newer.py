"""Ops of StableHLO versions newer than the bundled one, rewritten (as text, before parsing)
into forms the bundled StableHLO parses and Kiln lowers.

- `collective_broadcast` with `has_dynamic_root` (its last operand names, per data operand,
  the group member that sends): the bundled op takes one operand and no root, so it becomes
  `stablehlo.custom_call @kiln.collective.collective_broadcast_dynamic`, keeping its
  replica_groups / channel_handle, for kiln-lower-collectives.
"""
from __future__ import annotations

import re

_BROADCAST = re.compile(r'"stablehlo\.collective_broadcast"\(')
_DYNAMIC_ROOT = re.compile(r",?\s*\bhas_dynamic_root\b(\s*=\s*true)?\s*,?")


def has_newer_ops(text: str) -> bool:
    return "has_dynamic_root" in text


def _matching(text: str, start: int, open_: str, close: str) -> int:
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i
    return -1


def upgrade(text: str) -> str:
    out, last = [], 0
    for m in _BROADCAST.finditer(text):
        close = _matching(text, m.end() - 1, "(", ")")
        brace = text.find("{", close)
        if close < 0 or brace < 0 or text[close + 1:brace].strip():
            continue
        end = _matching(text, brace, "{", "}")
        attrs = text[brace + 1:end]
        if end < 0 or not _DYNAMIC_ROOT.search(attrs):
            continue
        kept = _DYNAMIC_ROOT.sub(lambda x: "," if x.group(0).startswith(",") and
                                 x.group(0).rstrip().endswith(",") else "", attrs).strip().strip(",")
        new_attrs = ('call_target_name = "kiln.collective.collective_broadcast_dynamic", '
                     'has_side_effect = true' + (", " + kept if kept else ""))
        out.append(text[last:m.start()] + '"stablehlo.custom_call"(' + text[m.end():brace + 1]
                   + new_attrs + "}")
        last = end + 1
    out.append(text[last:])
    return "".join(out)
