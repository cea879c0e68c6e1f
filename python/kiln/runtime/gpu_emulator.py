"""The GPU emulator's device runtime: the plan's kernels, as the LLVM IR given to NVPTX,
retargeted to this CPU and run over their grids.

Retargeting keeps the kernels' code and changes only what names the hardware:
- the special registers (`llvm.nvvm.read.ptx.sreg.{tid,ntid,ctaid,nctaid}.{x,y,z}`) become
  reads of the emulator's per-thread state, which the launch loop sets before each thread;
- libdevice's `__nv_*` math functions are bound to the C library's (`__nv_tanhf` -> tanhf);
- `ptx_kernel` functions become plain functions, each with a launch wrapper
  `kiln_emu_launch_<kernel>(void **params, grid x/y/z, block x/y/z)` that takes parameters
  as cuLaunchKernel does (an array of pointers to values) and runs every thread of every
  block in order.
Threads run one after another, which is exact for kernels without barriers, shared memory,
warp shuffles or atomics: the kernels the GPU target makes today. A kernel using one of
those is refused by name (lowering it needs per-thread fibers switching at barriers).

Device memory is host memory; copies are memmoves; launches are synchronous.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import re

import numpy as np

from ..errors import KilnError
from .gpu_plan import DeviceRuntime

_REGISTERS = ["tid", "ntid", "ctaid", "nctaid"]
_DIMS = "xyz"
_SREG = re.compile(r"@llvm\.nvvm\.read\.ptx\.sreg\.(tid|ntid|ctaid|nctaid)\.([xyz])\b")
_SREG_DECLARE = re.compile(r"^declare [^\n]*@llvm\.nvvm\.read\.ptx\.sreg\.[^\n]*$", re.M)
_KERNEL = re.compile(r"^define ptx_kernel void @([\w.$]+)\((.*)\)", re.M)
_NV_DECLARE = re.compile(r"^declare [^@\n]*@(__nv_\w+)\(", re.M)
_NVVM_LEFT = re.compile(r"@(llvm\.nvvm\.[\w.]+)")
# libdevice functions with no C library function of the same name, defined in IR.
_NV_IN_IR = {
    "__nv_rsqrtf": "define internal float @__nv_rsqrtf(float %x) {\n  %s = call float "
                   "@llvm.sqrt.f32(float %x)\n  %r = fdiv float 1.0, %s\n  ret float %r\n}\n",
    "__nv_rsqrt": "define internal double @__nv_rsqrt(double %x) {\n  %s = call double "
                  "@llvm.sqrt.f64(double %x)\n  %r = fdiv double 1.0, %s\n  ret double %r\n}\n",
}


def retarget(llvm_ir: str, kernels: list[str]) -> str:
    """The kernels' NVPTX LLVM IR as host IR with a launch wrapper per kernel."""
    left = sorted({m for m in _NVVM_LEFT.findall(_SREG.sub("", llvm_ir))})
    if left:
        raise KilnError("the GPU emulator cannot run kernels using " + ", ".join(left),
                        hint="barriers, shared memory, warp shuffles and atomics need the "
                             "emulator's fibers, which are not built yet; use target='gpu'")
    text = _SREG_DECLARE.sub("", llvm_ir)
    text = _SREG.sub(lambda m: f"@kiln_emu_{m.group(1)}_{m.group(2)}", text)
    signatures = {name: _param_types(params) for name, params in _KERNEL.findall(text)}
    text = text.replace("define ptx_kernel ", "define ")
    for name, body in _NV_IN_IR.items():
        if re.search(rf"^declare [^\n]*@{name}\(", text, re.M):
            text = re.sub(rf"^declare [^\n]*@{name}\([^\n]*$", body, text, flags=re.M)
    parts = [text, "@kiln_emu_state = internal global [12 x i32] zeroinitializer\n"]
    for r, register in enumerate(_REGISTERS):
        for d, dim in enumerate(_DIMS):
            parts.append(f"define internal i32 @kiln_emu_{register}_{dim}() alwaysinline {{\n"
                         f"  %p = getelementptr [12 x i32], ptr @kiln_emu_state, i64 0, "
                         f"i64 {3 * r + d}\n  %v = load i32, ptr %p\n  ret i32 %v\n}}\n")
    for name in kernels:
        if name not in signatures:
            raise KilnError(f"kernel {name} is missing from the device IR")
        parts.append(_launch_wrapper(name, signatures[name]))
    return "\n".join(parts)


def _top_level_split(text: str) -> list[str]:
    """`text` split at the commas outside brackets: `{ float, float } %5, i64 %6`."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "{[(<"
        depth -= ch in "}])>"
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _param_types(params: str) -> list[str]:
    types = []
    for param in filter(None, (p.strip() for p in _top_level_split(params))):
        if param.startswith("{"):  # a struct (complex): up to its closing brace
            types.append(param[:param.index("}") + 1])
            continue
        words = param.split()
        t = words[0]
        if len(words) > 1 and words[1].startswith("addrspace("):
            t += " " + words[1]
        types.append(t)
    return types


def _launch_wrapper(name: str, types: list[str]) -> str:
    """void kiln_emu_launch_NAME(void **params, gx, gy, gz, bx, by, bz): every block, every
    thread, with the special registers set before each."""
    lines = [f"define void @kiln_emu_launch_{name}(ptr %params, i32 %gx, i32 %gy, i32 %gz, "
             "i32 %bx, i32 %by, i32 %bz) {", "entry:"]
    args = []
    for i, t in enumerate(types):
        lines += [f"  %pp{i} = getelementptr ptr, ptr %params, i64 {i}",
                  f"  %p{i} = load ptr, ptr %pp{i}",
                  f"  %a{i} = load {t}, ptr %p{i}"]
        args.append(f"{t} %a{i}")

    def put(slot: int, value: str):
        lines.append(f"  %s{slot} = getelementptr [12 x i32], ptr @kiln_emu_state, i64 0, i64 {slot}")
        lines.append(f"  store i32 {value}, ptr %s{slot}")
    for d, value in enumerate(("%bx", "%by", "%bz")):
        put(3 + d, value)
    for d, value in enumerate(("%gx", "%gy", "%gz")):
        put(9 + d, value)
    lines += ["  %gxy = mul i32 %gx, %gy", "  %nb = mul i32 %gxy, %gz",
              "  %bxy = mul i32 %bx, %by", "  %nt = mul i32 %bxy, %bz",
              "  %empty = icmp eq i32 %nb, 0", "  br i1 %empty, label %done, label %block",
              "block:",
              "  %b = phi i32 [ 0, %entry ], [ %b1, %block_end ]",
              "  %cx = urem i32 %b, %gx", "  %bq = udiv i32 %b, %gx",
              "  %cy = urem i32 %bq, %gy", "  %cz = udiv i32 %b, %gxy"]
    for d, value in enumerate(("%cx", "%cy", "%cz")):
        lines.append(f"  %c{d}p = getelementptr [12 x i32], ptr @kiln_emu_state, i64 0, i64 {6 + d}")
        lines.append(f"  store i32 {value}, ptr %c{d}p")
    lines += ["  br label %thread", "thread:",
              "  %t = phi i32 [ 0, %block ], [ %t1, %thread ]",
              "  %tx = urem i32 %t, %bx", "  %tq = udiv i32 %t, %bx",
              "  %ty = urem i32 %tq, %by", "  %tz = udiv i32 %t, %bxy"]
    for d, value in enumerate(("%tx", "%ty", "%tz")):
        lines.append(f"  %t{d}p = getelementptr [12 x i32], ptr @kiln_emu_state, i64 0, i64 {d}")
        lines.append(f"  store i32 {value}, ptr %t{d}p")
    lines += [f"  call void @{name}({', '.join(args)})",
              "  %t1 = add i32 %t, 1", "  %tmore = icmp ult i32 %t1, %nt",
              "  br i1 %tmore, label %thread, label %block_end",
              "block_end:",
              "  %b1 = add i32 %b, 1", "  %bmore = icmp ult i32 %b1, %nb",
              "  br i1 %bmore, label %block, label %done",
              "done:", "  ret void", "}", ""]
    return "\n".join(lines)


@functools.lru_cache(maxsize=None)
def _llvm():
    try:
        import llvmlite.binding as llvm
    except ImportError:
        raise KilnError("the GPU emulator needs llvmlite",
                        hint="pip install 'kiln[gpu]' (or llvmlite)") from None
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm


@functools.lru_cache(maxsize=None)
def _libm():
    return ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")


def _bind_libdevice(llvm, text: str) -> None:
    """Point each declared `__nv_*` function at the C library's function of that name."""
    libm = _libm()
    for name in set(_NV_DECLARE.findall(text)):
        c_name = name[len("__nv_"):].replace("fast_", "")
        try:
            address = ctypes.cast(getattr(libm, c_name), ctypes.c_void_p).value
        except AttributeError:
            raise KilnError(f"the GPU emulator has no host function for libdevice's {name}",
                            hint="add it to runtime/gpu_emulator.py's _NV_IN_IR") from None
        llvm.add_symbol(name, address)


class _Loaded:
    """A JIT-compiled kernel module: the engine stays alive with it."""

    def __init__(self, engine, module):
        self.engine, self.module = engine, module


_LAUNCH = ctypes.CFUNCTYPE(None, ctypes.c_void_p, *([ctypes.c_uint32] * 6))


class EmulatorRuntime(DeviceRuntime):
    def __init__(self):
        self._memory: dict[int, np.ndarray] = {}

    def load(self, bundle: dict):
        llvm = _llvm()
        text = retarget(bundle["llvm_ir"], bundle["kernels"])
        _bind_libdevice(llvm, text)
        try:
            module = llvm.parse_assembly(text)
            module.triple = llvm.get_process_triple()
            module.verify()
        except RuntimeError as exc:
            raise KilnError(f"the GPU emulator could not retarget the kernels: {exc}",
                            hint="`kiln-opt FILE --target gpu-emulator --stage llvm` shows "
                                 "the kernels' IR") from None
        # This CPU's features: f16 conversions are then instructions (F16C), not calls of
        # compiler-rt helpers the JIT cannot resolve.
        machine = llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
            opt=2, codemodel="jitdefault")
        engine = llvm.create_mcjit_compiler(module, machine)
        engine.finalize_object()
        return _Loaded(engine, module)

    def function(self, module: _Loaded, name: str):
        return _LAUNCH(module.engine.get_function_address(f"kiln_emu_launch_{name}"))

    def alloc(self, nbytes: int) -> int:
        block = np.empty(nbytes + 256, np.uint8)   # 256-byte aligned, as cuMemAlloc's
        address = (block.ctypes.data + 255) & ~255
        self._memory[address] = block
        return address

    def free(self, pointer: int) -> None:
        self._memory.pop(pointer, None)

    def upload(self, pointer: int, host: np.ndarray) -> None:
        ctypes.memmove(pointer, host.ctypes.data, host.nbytes)

    def download(self, host: np.ndarray, pointer: int) -> None:
        ctypes.memmove(host.ctypes.data, pointer, host.nbytes)

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)

    def launch(self, function, grid, block, shared_bytes: int, params: list) -> None:
        if shared_bytes:
            raise KilnError("the GPU emulator cannot run kernels with dynamic shared memory")
        pointers = (ctypes.c_void_p * max(1, len(params)))(
            *[ctypes.addressof(p) for p in params])
        function(ctypes.addressof(pointers), *grid, *block)
