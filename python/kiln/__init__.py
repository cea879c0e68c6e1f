"""Kiln: an MLIR-based compiler for XLA programs.

    exe = kiln.compile(source, target="cpu")   # text, bytes, path or ir.Module
    outputs = exe(*numpy_arrays)               # tuple of numpy arrays
    print(exe.ir("legalize"))                  # IR after a named stage
"""
from __future__ import annotations

# First, before anything imports torch_mlir: load its LLVM so that its symbols stay private
# (TensorFlow imported before Kiln aborted the process; see mlir_loading.py).
from . import mlir_loading as _mlir_loading
_mlir_loading.load_privately()

from .driver import Executable  # noqa: E402
from .errors import CheckFailure, KilnError, api_boundary
from .jit import jit
from .runtime.custom_call import register_custom_call, register_custom_call_library
from .runtime.custom_call import REGISTRY as _REGISTRY
from .runtime.lapack import register_lapack_targets as _register_lapack_targets
from .runtime.jax_checks import register_jax_check_targets as _register_jax_check_targets
from .runtime.sparse import register_sparse_targets as _register_sparse_targets
from .runtime.fft import register_fft_targets as _register_fft_targets
from .distributed.collectives import register_collective_targets as _register_collective_targets

_register_lapack_targets(_REGISTRY)  # JAX's CPU linear algebra (lapack_*_ffi) is built in
_register_jax_check_targets(_REGISTRY)  # shape_assertion, when not decided at compile time
_register_sparse_targets(_REGISTRY)  # jax.experimental.sparse's CSR product on CPU
_register_collective_targets(_REGISTRY)  # kiln.collective.*: collectives between devices
_register_fft_targets(_REGISTRY)  # kiln.fft: stablehlo.fft through DUCC (else scipy.fft)

__all__ = ["compile", "load", "load_executable", "jit", "Executable", "KilnError", "CheckFailure",
           "register_custom_call", "register_custom_call_library"]
from .version import __version__  # noqa: E402


@api_boundary
def load(path, *, context=None):
    """Parse a file (any supported format) into a StableHLO `ir.Module`."""
    from pathlib import Path

    from .context import make_context
    from .frontend import import_module
    module, _ = import_module(Path(path), context or make_context())
    return module


@api_boundary
def load_executable(path, *, verify: bool = False) -> Executable:
    """Load an executable saved with `Executable.save` or `kiln compile -o` (a `.kx` file):
    its code is linked in, not compiled. Only load files you trust: they hold machine code."""
    return Executable.load(path, verify=verify)


@api_boundary
def compile(source, target: str = "cpu", *, entry: str | None = None, filename: str | None = None,
            **options) -> Executable:
    """Compile `source` for `target`; see Executable for calling it. `filename` names text or
    bytes sources in error messages."""
    from .driver import compile_source
    return compile_source(source, target, entry=entry, filename=filename, **options)
