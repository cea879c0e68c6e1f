"""Object code in and out of this process.

A CPU program leaves the compiler as a relocatable object file (what MLIR's ExecutionEngine
compiled, dumped from its object cache), so that it can cross a process boundary (compile
workers), be saved (`.kx` executables) and be cached on disk. It is linked into the calling
process by llvmlite's MCJIT linker (RuntimeDyld), against Kiln's runtime library, libm and
the BLAS functions Kiln binds by name.

MCJIT aborts the process on a symbol it cannot resolve, so `load` first checks every external
symbol the object needs (recorded when it was compiled) against what this process provides.
"""
from __future__ import annotations

import ctypes.util
import threading
from dataclasses import dataclass
from functools import lru_cache

from ..errors import KilnError

_lock = threading.Lock()
_ready = False


def _llvm():
    """llvmlite's binding, initialised once with Kiln's symbols visible to its linker."""
    global _ready
    import llvmlite.binding as llvm
    with _lock:
        if not _ready:
            from .. import native
            from ..runtime.custom_call import runtime
            from ..runtime.libraries import bind_thread_control, jit_symbols
            runtime()  # loaded RTLD_GLOBAL first: the runtime's state is shared with ctypes
            bind_thread_control()
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            # The C library and libm (memcpy, expf, log1p...), by name: MCJIT's linker
            # searches only the libraries it was given, not whatever this process loaded.
            for name in ("c", "m"):
                found = ctypes.util.find_library(name)
                if found:
                    llvm.load_library_permanently(found)
            for library in native.runtime_libraries():
                llvm.load_library_permanently(str(library))
            for name, address in jit_symbols().items():
                llvm.add_symbol(name, address.value)
            _ready = True
    return llvm


@lru_cache(maxsize=None)
def host_cpu() -> dict:
    """The CPU name and enabled features LLVM detects here (what JIT code is compiled for)."""
    import llvmlite.binding as llvm
    features = sorted(f for f, on in llvm.get_host_cpu_features().items() if on)
    return {"name": llvm.get_host_cpu_name(), "features": features}


def check_cpu(compiled_for: dict, what: str) -> None:
    """Refuse code compiled for a CPU with features this one lacks."""
    here = host_cpu()
    missing = sorted(set(compiled_for.get("features", [])) - set(here["features"]))
    if missing:
        shown = ", ".join(missing[:12]) + (f" and {len(missing) - 12} more" if len(missing) > 12 else "")
        raise KilnError(f"{what} was compiled for a {compiled_for.get('name')} CPU; this "
                        f"{here['name']} lacks {shown}",
                        hint="compile it again on this machine (or one with the same CPU)")


@dataclass
class LoadedObject:
    """Object code linked into this process; its code lives as long as this object."""
    engine: object

    def function(self, name: str) -> int:
        return self._address(name, self.engine.get_function_address)

    def global_variable(self, name: str) -> int:
        return self._address(name, self.engine.get_global_value_address)

    @staticmethod
    def _address(name: str, lookup) -> int:
        address = lookup(name)
        if not address:
            raise KilnError(f"the compiled code has no symbol {name}",
                            hint="the executable is damaged or was made by another Kiln")
        return address


def load(code: bytes, externals: list[str], what: str) -> LoadedObject:
    """Link object `code` into this process. `externals` are the symbols it needs from
    outside (recorded at compile time); one this process cannot provide is a KilnError."""
    llvm = _llvm()
    missing = [name for name in externals if not llvm.address_of_symbol(name)]
    if missing:
        raise KilnError(f"{what} needs symbol(s) this process does not provide: "
                        + ", ".join(missing[:8]),
                        hint="it was compiled by another Kiln build or with a BLAS library that "
                             "is not installed here; compile it again")
    with _lock:
        target_machine = llvm.Target.from_default_triple().create_target_machine()
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), target_machine)
        engine.add_object_file(llvm.ObjectFileRef.from_data(code))
        engine.finalize_object()
    return LoadedObject(engine)
