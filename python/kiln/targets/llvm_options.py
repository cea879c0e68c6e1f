"""Command-line options of the LLVM that compiles Kiln's CPU code (the one inside MLIR's
ExecutionEngine, in torch_mlir's native library), like `clang -mllvm OPTION`.

LLVM keeps its options in process-wide globals that can be set once per process, so they are
set before the first compile (`apply`): Kiln's own choices (`KILN_DEFAULTS`) first, then the
user's, from KILN_LLVM_OPTIONS (space-separated, e.g. "-vectorize-slp=false"), which win.
Tiny programs are compiled by llvmlite's LLVM instead (targets/quick_codegen.py), which these
options do not reach; `opt_level=2` sends a program through this one.
"""
from __future__ import annotations

import ctypes
import threading
from pathlib import Path

from .. import environment
from ..errors import KilnError

# LLVM's own defaults serve Kiln's code; none is changed today.
KILN_DEFAULTS: tuple[str, ...] = ()

_lock = threading.Lock()
_applied: tuple[str, ...] | None = None


def requested() -> tuple[str, ...]:
    """The options this process compiles with: Kiln's defaults, then KILN_LLVM_OPTIONS."""
    return KILN_DEFAULTS + tuple(environment.get("KILN_LLVM_OPTIONS").split())


def apply() -> tuple[str, ...]:
    """Set the options in this process's LLVM, once (later calls return what was set)."""
    global _applied
    with _lock:
        if _applied is None:
            options = requested()
            if options:
                _parse(options)
            _applied = options
        return _applied


def _parse(options: tuple[str, ...]) -> None:
    for option in options:
        if not option.startswith("-"):
            raise KilnError(f"KILN_LLVM_OPTIONS: '{option}' is not an LLVM option",
                            hint="options start with '-', e.g. KILN_LLVM_OPTIONS=-vectorize-slp=false")
    library = _mlir_library()
    argv = (ctypes.c_char_p * (len(options) + 1))(b"kiln", *[o.encode() for o in options])
    # LLVM reports an unknown option on stderr and ends the process: where compiles run in a
    # worker (the default), that is a compile worker's crash, reported as such.
    library.LLVMParseCommandLineOptions(len(options) + 1, argv, None)


def _mlir_library() -> ctypes.CDLL:
    import torch_mlir._mlir_libs as libs
    found = sorted(Path(libs.__file__).parent.glob("libTorchMLIRAggregateCAPI*.so*"))
    if not found:
        raise KilnError("MLIR's native library (libTorchMLIRAggregateCAPI) was not found",
                        hint="reinstall torch_mlir")
    return ctypes.CDLL(str(found[0]))
