"""XLA-style dumps of the IR during a compile (XLA: --xla_dump_to, --xla_dump_hlo_pass_re).

Every compiled module gets a process-wide id, so files of several compiles in one directory
do not collide and sort by compile:

    module_0000.mlp.before_optimizations.mlir    the imported module
    module_0000.mlp.01.verify.mlir               the IR after each stage, numbered in order
    module_0000.mlp.02.optimize.mlir
    module_0000.mlp.after_optimizations.mlir     after the last StableHLO-level stage
    module_0000.mlp.02.optimize.canonicalize.mlir  after a pass matching the pass regex
    module_0000.mlp.buffer-assignment.txt        the execution plan (driver/plan.py)
    module_0000.mlp.thunk-sequence.txt
"""
from __future__ import annotations

import hashlib
import itertools
import re
import threading
from collections import Counter
from pathlib import Path

from torch_mlir import ir

from .errors import KilnError

_module_ids = itertools.count()
_ids_lock = threading.Lock()


def next_module_id() -> int:
    """A process-wide number for the next compiled module (its dump files' prefix)."""
    with _ids_lock:
        return next(_module_ids)


# The longest program name a dump file's name keeps: file systems allow 255 bytes per name, and
# the prefix, stage and suffix need room ("module_0000." ... ".02.optimize.canonicalize.mlir").
MAX_NAME = 64


def sanitize(name: str) -> str:
    """`name` as one file-name component: no dots, slashes or brackets, and at most MAX_NAME
    characters (a longer one keeps its start and gets a digest of the whole, so that two long
    names stay apart)."""
    clean = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_") or "module"
    if len(clean) <= MAX_NAME:
        return clean
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{clean[:MAX_NAME - len(digest) - 1]}-{digest}"


def program_name(module: ir.Module, filename: str) -> str:
    """The module's sym_name if it has one, else the file's stem."""
    attributes = module.operation.attributes
    if "sym_name" in attributes:
        return sanitize(ir.StringAttr(attributes["sym_name"]).value)
    return sanitize(Path(filename).stem.strip("<>"))


def compile_pass_regex(pattern: str | None, option: str = "dump_pass_regex") -> re.Pattern | None:
    if not pattern:
        return None
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise KilnError(f"{option}: invalid regular expression '{pattern}': {exc}",
                        hint="a Python regular expression searched in each pass name, "
                             "e.g. 'canonicalize|kiln-lower-.*'") from None


class DumpWriter:
    """Writes one module's dumps into `directory` (created on demand)."""

    def __init__(self, directory: str | Path, program: str, pass_regex: str | None = None,
                 module_id: int | None = None):
        self.root = Path(directory)
        self.root.mkdir(parents=True, exist_ok=True)
        number = next_module_id() if module_id is None else module_id
        self.prefix = f"module_{number:04d}.{sanitize(program)}"
        self.pass_pattern = compile_pass_regex(pass_regex)
        self.stages_done = 0
        self._pass_names: Counter = Counter()  # of the stage in progress, for repeated passes

    def _write(self, suffix: str, module: ir.Module) -> None:
        (self.root / f"{self.prefix}.{suffix}.mlir").write_text(str(module))

    def plan(self, buffer_assignment: str, thunk_sequence: str) -> None:
        """The execution plan after `codegen`, in the text forms of XLA's dumps."""
        (self.root / f"{self.prefix}.buffer-assignment.txt").write_text(buffer_assignment)
        (self.root / f"{self.prefix}.thunk-sequence.txt").write_text(thunk_sequence)

    def before_optimizations(self, module: ir.Module) -> None:
        self._write("before_optimizations", module)

    def after_optimizations(self, module: ir.Module) -> None:
        self._write("after_optimizations", module)

    def stage(self, stage: str, module: ir.Module) -> None:
        self.stages_done += 1
        self._pass_names.clear()
        self._write(f"{self.stages_done:02d}.{sanitize(stage)}", module)

    def wants_pass(self, name: str) -> bool:
        return self.pass_pattern is not None and self.pass_pattern.search(name) is not None

    def after_pass(self, stage: str, name: str, module: ir.Module) -> None:
        """The IR after pass `name` of `stage` (the stage in progress), when the regex
        selects it. A pass that runs twice in a stage gets `-2`, `-3`... on later runs."""
        if not self.wants_pass(name):
            return
        self._pass_names[name] += 1
        count = self._pass_names[name]
        label = sanitize(name) + (f"-{count}" if count > 1 else "")
        self._write(f"{self.stages_done + 1:02d}.{sanitize(stage)}.{label}", module)
