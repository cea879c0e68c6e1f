"""Load the MLIR Kiln uses so that its symbols stay its own, whatever else the process loaded.

torch-mlir's `libTorchMLIRAggregateCAPI.so` holds a whole LLVM and MLIR, with their C++
symbols exported (default visibility). TensorFlow's `libtensorflow_framework.so.2` and
`libtensorflow_cc.so.2` hold another LLVM, also exported, and TensorFlow loads them with
RTLD_GLOBAL, which puts those symbols in the process's global scope. A library loaded later
resolves its references there first, so after `import tensorflow` torch-mlir's static
initializers registered their LLVM command-line options (`print-inst-addrs`, ...) in
TensorFlow's option registry, which already had options of those names:

    CommandLine Error: Option 'print-inst-addrs' registered more than once!
    LLVM ERROR: inconsistency in registered CommandLine options      (and abort)

(`import kiln` first worked: torch-mlir is loaded RTLD_LOCAL, so TensorFlow's LLVM never
saw it.) The fix loads the library before anything imports torch_mlir, with

* RTLD_DEEPBIND: its references resolve to its own definitions before the global scope's,
  so it keeps its own LLVM (option registry, pass registry, type IDs) next to any other; and
* RTLD_LOCAL: its symbols stay out of the global scope, so libraries loaded after it
  (TensorFlow after Kiln) keep theirs.

torch_mlir's extension modules then find it loaded (by its soname) and use this copy. Only
that library exports LLVM (its extension modules and nanobind support libraries export none,
checked with `nm -D`); llvmlite's and jaxlib's LLVM are hidden already.

`kiln/__init__.py` calls `load_privately()` first thing. RTLD_DEEPBIND is glibc's: elsewhere
(macOS's two-level namespaces do not have the problem) this does nothing. AddressSanitizer
refuses RTLD_DEEPBIND: set KILN_MLIR_DEEPBIND=0 to load torch-mlir the ordinary way.
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import sys

from . import environment

LIBRARY = "libTorchMLIRAggregateCAPI.so"
_handle = None


def library_path() -> str | None:
    """Where torch-mlir's aggregate library is, found without importing torch_mlir."""
    spec = importlib.util.find_spec("torch_mlir")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = os.path.join(location, "_mlir_libs", LIBRARY)
        if os.path.exists(path):
            return path
    return None


def load_privately() -> bool:
    """dlopen torch-mlir's library RTLD_LOCAL | RTLD_DEEPBIND unless torch_mlir is already
    imported (then it is too late, and whatever loaded it decided). Returns whether it did."""
    global _handle
    if _handle is not None:
        return True
    deepbind = getattr(os, "RTLD_DEEPBIND", None)
    if deepbind is None or environment.get("KILN_MLIR_DEEPBIND") == "0":
        return False
    if "torch_mlir._mlir_libs._mlir" in sys.modules:
        return False
    path = library_path()
    if path is None:
        return False  # the import that needs it reports the missing package
    _handle = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL | deepbind)
    return True
