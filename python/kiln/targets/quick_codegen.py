"""Object code for small programs, through llvmlite's LLVM at O0 (FastISel, fast register
allocation).

MLIR's ExecutionEngine always generates code with LLVM's full instruction selector and
register allocator, whatever its `opt_level`: about 10 ms for a JAX test program, most of a
small program's compile. llvmlite's target machine takes a code-generation level, and at O0
the same IR is compiled in about a third of that time. The code is slower, which is why only
programs that `small_programs.is_small` picks come this way: their calls cost a few
microseconds either way.

The lowered module is translated to LLVM IR by MLIR, rewritten for llvmlite's older LLVM
(lowering/llvm_text.py), given the packed entry point ExecutionEngine would add, and compiled
for this CPU with the code model and relocations ExecutionEngine uses (large, absolute), so
that targets/objects.py links it the same way.
"""
from __future__ import annotations

import re
import threading

from torch_mlir import ir

from ..errors import KilnError

_lock = threading.Lock()
_machine = None
_PARAM_NAME = re.compile(r"%[-\w.$]+")


def packed_symbol(entry: str) -> str:
    """The packed entry point's name: ExecutionEngine's, `_mlir_` + the C interface's name."""
    return "_mlir__mlir_ciface_" + entry


def compile_object(module: ir.Module, entry: str) -> bytes | None:
    """Relocatable object code for `module` (lowered to the LLVM dialect), compiled at O0;
    None when llvmlite's LLVM cannot read the IR (a constant spelled in a form only the newer
    LLVM knows, such as a NaN's payload) or the entry is not the C interface Kiln emits: the
    caller compiles it with ExecutionEngine."""
    import llvmlite.binding as llvm
    from torch_mlir.dialects import llvm as llvm_dialect
    from ..lowering.llvm_text import for_older_llvm
    with module.context:
        text = str(llvm_dialect.translate_module_to_llvmir(module.operation))
    packed = _packed_entry(text, entry)
    if packed is None:
        return None
    text = for_older_llvm(text) + packed
    machine = _target_machine()
    try:
        llvm_module = llvm.parse_assembly(text)
    except RuntimeError:
        return None
    llvm_module.triple = machine.triple
    llvm_module.data_layout = str(machine.target_data)
    return machine.emit_object(llvm_module)


def _target_machine():
    """This CPU's target machine at code-generation level 0 (one per process)."""
    global _machine
    import llvmlite.binding as llvm
    with _lock:
        if _machine is None:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _machine = llvm.Target.from_default_triple().create_target_machine(
                cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
                opt=0, reloc="static", codemodel="large")
        return _machine


def _packed_entry(text: str, entry: str) -> str | None:
    """`void _mlir__mlir_ciface_<entry>(void **args)`: what ExecutionEngine generates for the
    entry, and what runtime/kiln_runtime.c's KilnInvoke calls: args[i] points at the i-th
    argument of the C interface (each a pointer to a memref descriptor)."""
    found = re.search(r"^define (?:[\w ]* )?void @_mlir_ciface_" + re.escape(entry) + r"\((.*)\)",
                      text, re.M)
    if found is None:
        raise KilnError(f"the lowered module has no C interface for @{entry}",
                        hint="kiln-emit-c-interface should have added it")
    # Each parameter is "TYPE ATTRIBUTES %NAME": the text before each name says its type.
    params = [p for p in _PARAM_NAME.split(found.group(1)) if p.strip(" ,")]
    if any(not p.strip(" ,").startswith("ptr") for p in params):
        return None  # not the C interface Kiln emits: ExecutionEngine packs any signature
    lines = [f"define void @{packed_symbol(entry)}(ptr %args) {{"]
    for i in range(len(params)):
        lines += [f"  %slot{i} = getelementptr inbounds ptr, ptr %args, i64 {i}",
                  f"  %at{i} = load ptr, ptr %slot{i}",
                  f"  %arg{i} = load ptr, ptr %at{i}"]
    lines.append(f"  call void @_mlir_ciface_{entry}("
                 + ", ".join(f"ptr %arg{i}" for i in range(len(params))) + ")")
    lines += ["  ret void", "}", ""]
    return "\n" + "\n".join(lines)
