"""Device code: the outlined gpu.modules -> one LLVM IR module for NVPTX -> PTX -> cubin.

The wheel's MLIR has only LLVM's X86 back end, so `gpu-module-to-binary` cannot serialize;
llvmlite's LLVM has NVPTX. The kernels' LLVM dialect is translated by MLIR, the text handed
to llvmlite, libdevice (from the nvidia-cuda-nvcc-cu12 wheel) linked in for the `__nv_*`
math functions, optimized at O3 and printed as PTX; `ptxas` from the same wheel assembles
it for the chosen architecture and reports each kernel's registers, spills and shared memory.
"""
from __future__ import annotations

import functools
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass

from torch_mlir import ir

from ...errors import KilnError
from ..llvm_function_attributes import check_device_function_attributes
from ..llvm_text import for_older_llvm

TRIPLE = "nvptx64-nvidia-cuda"
ARCHITECTURES = ("sm_80", "sm_86", "sm_89", "sm_90")
_INSTALL_HINT = "install the GPU extra: pip install 'kiln[gpu]' (llvmlite, nvidia-cuda-nvcc-cu12)"


def check_arch(arch: str) -> str:
    if arch not in ARCHITECTURES:
        raise KilnError(f"unknown GPU architecture '{arch}'",
                        hint="--gpu-arch / gpu_arch= takes one of " + ", ".join(ARCHITECTURES))
    return arch


def kernel_names(module: ir.Module) -> list[str]:
    """The kernels of every gpu.module, in program order. Outlining makes one gpu.module per
    kernel, named uniquely; in the one device module each kernel takes its module's name."""
    return [_symbol(m) for m in _gpu_modules(module)
            if any(_is_kernel(op.operation) for op in m.regions[0].blocks[0].operations)]


def _symbol(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def _is_kernel(op: ir.Operation) -> bool:
    return op.name == "llvm.func" and "nvvm.kernel" in op.attributes


def _gpu_modules(module: ir.Module) -> list[ir.Operation]:
    return [op.operation for op in module.body.operations if op.operation.name == "gpu.module"]


def check_kernels(module: ir.Module) -> None:
    """After the nvvm stage every op of a kernel module must be LLVM or NVVM: name the first
    that is not, where it came from, instead of failing in the translation to LLVM IR."""
    for gpu_module in _gpu_modules(module):
        for function in gpu_module.regions[0].blocks[0].operations:
            bad = _first_foreign(function.operation)
            if bad is not None:
                raise KilnError(f"'{bad.name}' has no lowering in GPU kernels yet",
                                location=str(bad.location),
                                hint="`kiln-opt FILE --target gpu --stage nvvm` shows the "
                                     "kernels; target='cpu' runs this program")


def _first_foreign(op: ir.Operation):
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                inner = inner.operation
                if not inner.name.startswith(("llvm.", "nvvm.")):
                    return inner
                found = _first_foreign(inner)
                if found is not None:
                    return found
    return None


def device_llvm_ir(module: ir.Module) -> str:
    """The LLVM IR of every kernel of `module` (after the nvvm stage), as one module: the
    gpu.modules' functions gathered (shared declarations once) and translated by MLIR."""
    from torch_mlir.dialects import llvm as llvm_dialect
    seen, parts = set(), []
    for gpu_module in _gpu_modules(module):
        # each module's globals (shared memory: `__wg_<function>_<n>`, where every kernel's
        # function is named alike) made unique by the module's name, uses included
        ops = [op.operation for op in gpu_module.regions[0].blocks[0].operations]
        for op in ops:  # the trust boundary's far end, as on the CPU (trust.py)
            if op.name == "llvm.func":
                check_device_function_attributes(op)
        owned = [_symbol(op) for op in ops if op.name == "llvm.mlir.global"]
        rename = re.compile(r"@(" + "|".join(map(re.escape, owned)) + r")(?![\w.$])") \
            if owned else None
        for op in ops:
            text = str(op)
            if rename is not None:
                text = rename.sub(lambda m: f"@{_symbol(gpu_module)}.{m.group(1)}", text)
            if _is_kernel(op):
                text = text.replace(f"@{_symbol(op)}(", f"@{_symbol(gpu_module)}(", 1)
            elif "sym_name" in op.attributes and op.name != "llvm.mlir.global":
                if _symbol(op) in seen:
                    continue  # a declaration every module repeats (__nv_tanhf)
                seen.add(_symbol(op))
            parts.append(text)
    if not parts:
        return ""
    with module.context, ir.Location.unknown():
        device = ir.Module.parse("module {\n" + "\n".join(parts) + "\n}")
        llvm_module = llvm_dialect.translate_module_to_llvmir(device.operation)
    text = for_older_llvm(str(llvm_module))
    check_device_calls(text)
    return re.sub(r'^target triple = .*$', "", text, flags=re.M)


_DECLARE = re.compile(r"^declare [^@\n]*@([\w.$]+)\(", re.M)


def check_device_calls(llvm_ir: str) -> None:
    """Kernels may call LLVM intrinsics and libdevice (`__nv_*`) only: anything else would be
    an unresolved symbol for ptxas (or, in the emulator, a call into the host process)."""
    foreign = sorted({name for name in _DECLARE.findall(llvm_ir)
                      if not name.startswith(("llvm.", "__nv_"))})
    if foreign:
        raise KilnError("a GPU kernel calls " + ", ".join(foreign) + ", which has no device "
                        "implementation", hint="such ops (custom calls, library calls) "
                        "are not supported by the GPU target yet; use target='cpu'")


@functools.lru_cache(maxsize=None)
def _llvm():
    try:
        import llvmlite.binding as llvm
    except ImportError:
        raise KilnError("the GPU target needs llvmlite", hint=_INSTALL_HINT) from None
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


def _nvcc_root() -> str:
    try:
        import nvidia.cuda_nvcc as nvcc
    except ImportError:
        raise KilnError("the GPU target needs libdevice and ptxas", hint=_INSTALL_HINT) from None
    return list(nvcc.__path__)[0]


def libdevice_path() -> str:
    return os.path.join(_nvcc_root(), "nvvm", "libdevice", "libdevice.10.bc")


def ptxas_path() -> str:
    return os.path.join(_nvcc_root(), "bin", "ptxas")


@functools.lru_cache(maxsize=None)
def _libdevice_bitcode() -> bytes:
    with open(libdevice_path(), "rb") as f:
        return f.read()


@functools.lru_cache(maxsize=None)
def _target_machine(arch: str):
    llvm = _llvm()
    target = llvm.Target.from_triple(TRIPLE)
    return target.create_target_machine(cpu=arch, opt=3, codemodel="default")


def to_ptx(llvm_ir: str, arch: str, kernels: list[str]) -> str:
    """PTX for every kernel of `llvm_ir` (device_llvm_ir's text) on `arch`."""
    llvm = _llvm()
    machine = _target_machine(check_arch(arch))
    try:
        mod = llvm.parse_assembly(llvm_ir)
    except RuntimeError as exc:
        raise KilnError(f"LLVM rejected the kernels' IR: {exc}",
                        hint="`kiln-opt FILE --target gpu --stage nvvm` shows the IR") from None
    mod.triple = TRIPLE
    mod.data_layout = str(machine.target_data)
    if any(f.name.startswith("__nv_") for f in mod.functions if f.is_declaration):
        libdevice = llvm.parse_bitcode(_libdevice_bitcode())
        libdevice.triple = TRIPLE
        libdevice.data_layout = mod.data_layout
        mod.link_in(libdevice)
    # Only the kernels are entry points: everything else (libdevice) may be inlined and
    # dropped, as nvcc does.
    for function in mod.functions:
        if not function.is_declaration and function.name not in kernels:
            function.linkage = "internal"
    mod.verify()
    options = llvm.create_pipeline_tuning_options(speed_level=3)
    builder = llvm.create_pass_builder(machine, options)
    builder.getModulePassManager().run(mod, builder)
    return machine.emit_assembly(mod)


@dataclass
class KernelResources:
    """ptxas -v's report for one kernel."""
    name: str
    registers: int
    spill_stores: int
    spill_loads: int
    stack_bytes: int
    shared_bytes: int

    def to_json(self) -> dict:
        return dict(self.__dict__)


def assemble(ptx: str, arch: str) -> tuple[bytes, list[KernelResources]]:
    """(cubin, each kernel's resources) from ptxas for `arch`."""
    check_arch(arch)
    with tempfile.TemporaryDirectory(prefix="kiln-ptxas-") as tmp:
        source, binary = os.path.join(tmp, "kernels.ptx"), os.path.join(tmp, "kernels.cubin")
        with open(source, "w") as f:
            f.write(ptx)
        done = subprocess.run([ptxas_path(), f"-arch={arch}", "-v", "-o", binary, source],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise KilnError(f"ptxas rejected the PTX for {arch}: {done.stderr.strip()[:2000]}",
                            hint="`kiln-opt FILE --target gpu --stage ptx` prints the PTX")
        with open(binary, "rb") as f:
            return f.read(), parse_resources(done.stderr)


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_USED = re.compile(r"Used (\d+) registers")
_SPILLS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_SHARED = re.compile(r"(\d+) bytes smem")


def parse_resources(report: str) -> list[KernelResources]:
    kernels: list[KernelResources] = []
    for line in report.splitlines():
        if m := _ENTRY.search(line):
            kernels.append(KernelResources(m.group(1), 0, 0, 0, 0, 0))
        elif kernels and (m := _SPILLS.search(line)):
            k = kernels[-1]
            k.stack_bytes, k.spill_stores, k.spill_loads = map(int, m.groups())
        elif kernels and (m := _USED.search(line)):
            kernels[-1].registers = int(m.group(1))
            if s := _SHARED.search(line):
                kernels[-1].shared_bytes = int(s.group(1))
    return kernels
