"""Shrink a saved failing program (a directory written by generate.py --out) while it still
fails the same way: drop returned results one at a time, then ops whose results nothing
uses. Each try runs `generate.py --replay` in a fresh process; the reduced program is
written beside the original as reduced.mlir (with the same inputs.npz).

    python tests/fuzz/reduce.py /tmp/fuzz-out/signal-1-17
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
_RETURN = re.compile(r'^(\s*)"func\.return"\((.*)\) : \((.*)\) -> \(\)$')
_DEFINES = re.compile(r"^\s*(%[\w]+(?:, %[\w]+)*) = ")


def _split_types(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch in "<(["
        depth -= ch in ">)]"
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    return parts + ([current.strip()] if current.strip() else [])


def _signature(lines: list[str], types: list[str]) -> list[str]:
    head = re.sub(r"-> \(.*\) \{$", "-> (" + ", ".join(types) + ") {", lines[0])
    return [head] + lines[1:]


def _fails(directory: Path, text: str, want: str, timeout: float) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        trial = Path(tmp) / "case"
        shutil.copytree(directory, trial)
        (trial / "program.mlir").write_text(text)
        info = json.loads((trial / "outcome.json").read_text())
        (trial / "outcome.json").write_text(json.dumps(info))
        try:
            done = subprocess.run([sys.executable, str(HERE / "generate.py"), "--replay", str(trial)],
                                  capture_output=True, timeout=timeout, text=True)
        except subprocess.TimeoutExpired:
            return want == "hang"
    if want == "signal":
        return done.returncode < 0
    return want in done.stdout.split("now:", 1)[-1]


def reduce(directory: Path, timeout: float = 60.0) -> str:
    info = json.loads((directory / "outcome.json").read_text())
    want = info["outcome"] if info["outcome"] in ("signal", "hang") else f'"{info["outcome"]}"'
    lines = (directory / "program.mlir").read_text().rstrip("\n").split("\n")
    ret = next(i for i, l in enumerate(lines) if _RETURN.match(l))
    indent, values, types = _RETURN.match(lines[ret]).groups()
    values, types = [v.strip() for v in values.split(",")], _split_types(types)
    i = 0
    while i < len(values) and len(values) > 1:  # 1. fewer results
        v2, t2 = values[:i] + values[i + 1:], types[:i] + types[i + 1:]
        trial = lines[:ret] + [f'{indent}"func.return"({", ".join(v2)}) : ({", ".join(t2)}) -> ()'] + lines[ret + 1:]
        trial = _signature(trial, t2)
        if _fails(directory, "\n".join(trial) + "\n", want, timeout):
            lines, values, types = trial, v2, t2
        else:
            i += 1
    changed = True
    while changed:  # 2. no dead ops (top-level lines defining values nothing uses)
        changed = False
        text = "\n".join(lines)
        for j in range(len(lines) - 1, 0, -1):
            m = _DEFINES.match(lines[j])
            if not m or lines[j].startswith("      "):
                continue
            names = [n.strip() for n in m.group(1).split(",")]
            rest = text.replace(lines[j], "", 1)
            if not any(re.search(re.escape(n) + r"\b", rest) for n in names) and '({' not in lines[j]:
                lines = lines[:j] + lines[j + 1:]
                changed = True
                break
    reduced = "\n".join(lines) + "\n"
    (directory / "reduced.mlir").write_text(reduced)
    return reduced


if __name__ == "__main__":
    print(reduce(Path(sys.argv[1])))
