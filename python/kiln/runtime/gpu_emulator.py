"""The GPU emulator's device runtime: the plan's kernels, as the LLVM IR given to NVPTX,
retargeted to this CPU and run over their grids.

Retargeting keeps the kernels' code and changes only what names the hardware:
- the special registers (`llvm.nvvm.read.ptx.sreg.{tid,ntid,ctaid,nctaid}.{x,y,z}`, `laneid`,
  `warpsize`) become reads of the emulator's per-thread state;
- libdevice's `__nv_*` math functions are bound to the C library's (`__nv_tanhf` -> tanhf);
- shared memory (`addrspace(3)` globals) becomes ordinary globals: blocks run one after
  another, so one copy serves every block. It is filled before each block with 0xFF bytes
  (NaN, -1: the hardware gives no initial value, so a kernel reading what it never wrote
  shows it), or zeros with KILN_GPU_EMULATOR_SHARED=zero;
- barriers (`llvm.nvvm.barrier*`), warp shuffles (`llvm.nvvm.shfl.sync.*`), votes
  (`llvm.nvvm.vote.*.sync`) and `bar.warp.sync` call the native runtime's fibers
  (runtime/kiln_gpu_fibers.c); memory fences are no-ops and atomics stay LLVM atomics (all
  threads run on one OS thread, switching only at those calls);
- `ptx_kernel` functions become plain functions, each with a launch wrapper
  `i32 kiln_emu_launch_<kernel>(void **params, grid x/y/z, block x/y/z)` that takes parameters
  as cuLaunchKernel does (an array of pointers to values) and runs every block in order.
  A kernel without barriers or warp operations runs its threads one after another (the fast
  path); the others run each block's threads as fibers that switch at those calls.

Device memory is host memory; copies are memmoves; launches are synchronous. A GPU custom
call runs on the CPU too: its target gets the null stream (there is no CUstream) and the
buffers' device pointers, which are host addresses here, so a C target built for the host
runs and can be checked. A typed-FFI handler (api_version 4) that asks for its stream
(`ffi::PlatformStream<cudaStream_t>`) gets `EMULATOR_FFI_STREAM`: not null, so decoding
succeeds as on a GPU, but no CUstream either (the address of 8 bytes spelling "KILNEMU"),
which a handler must not give to CUDA; everything here is synchronous. Command buffers
are recorded as lists of launches and copies (with the parameter values of the recording)
and replayed from them.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import re
import threading

import numpy as np

from .. import environment
from ..errors import KilnError
from .gpu_plan import DeviceRuntime

_REGISTERS = ["tid", "ntid", "ctaid", "nctaid"]
_DIMS = "xyz"
# @kiln_emu_state's slots: 3 * register + dimension, then the lane id (the fibers' runtime
# writes tid and laneid on every switch: kiln_gpu_fibers.c's SLOT_*).
_LANEID_SLOT = 12
_STATE_SLOTS = 13
_NVVM = re.compile(r"@llvm\.nvvm\.([\w.]+)")
_NVVM_DECLARE = re.compile(r"^declare [^\n]*@llvm\.nvvm\.([\w.]+)\(([^\n]*)\)[^\n]*$", re.M)
_KERNEL = re.compile(r"^define ptx_kernel void @([\w.$]+)\((.*)\)", re.M)
_NV_DECLARE = re.compile(r"^declare [^@\n]*@(__nv_\w+)\(", re.M)
_SHARED = re.compile(r"^@([\w.$]+) = [^\n]*addrspace\(3\) global (.+?) (undef|zeroinitializer|"
                     r"poison)\s*(?:, align \d+)?$", re.M)
_DYNAMIC_SHARED = re.compile(r"^@[\w.$]+ = external [^\n]*addrspace\(3\) global", re.M)
_ADDRSPACE = re.compile(r" addrspace\(\d+\)")
# libdevice functions with no C library function of the same name, defined in IR.
_NV_IN_IR = {
    "__nv_rsqrtf": "define internal float @__nv_rsqrtf(float %x) {\n  %s = call float "
                   "@llvm.sqrt.f32(float %x)\n  %r = fdiv float 1.0, %s\n  ret float %r\n}\n",
    "__nv_rsqrt": "define internal double @__nv_rsqrt(double %x) {\n  %s = call double "
                  "@llvm.sqrt.f64(double %x)\n  %r = fdiv double 1.0, %s\n  ret double %r\n}\n",
}
# The native runtime's entry points the retargeted IR calls (runtime/kiln_gpu_fibers.c).
_NATIVE = {
    "kiln_emu_run_block": "declare i32 @kiln_emu_run_block(i32, i32, i32, ptr, ptr, ptr)",
    "kiln_emu_barrier": "declare void @kiln_emu_barrier()",
    "kiln_emu_warp_sync": "declare void @kiln_emu_warp_sync(i32)",
    "kiln_emu_warp_shfl": "declare i32 @kiln_emu_warp_shfl(i32, i32, i32, i32, i32, ptr)",
    "kiln_emu_warp_vote": "declare i32 @kiln_emu_warp_vote(i32, i32, i32)",
}
# What a launch's nonzero status from kiln_emu_run_block means.
_RUN_BLOCK_ERRORS = {
    1: "its threads wait for each other forever: a barrier or warp operation that not every "
       "thread (or lane of the mask) reaches",
    2: "the emulator could not map memory for the threads' stacks",
    3: "a block has more than 1024 threads",
}
_SHUFFLE_MODES = {"up": 0, "down": 1, "bfly": 2, "idx": 3}
_VOTE_MODES = {"all": 0, "any": 1, "uni": 2, "ballot": 3}
# NVVM intrinsics that synchronize threads: a kernel calling one runs its blocks as fibers.
_SYNCHRONIZING = re.compile(r"@kiln_emu\.nvvm\.(barrier|bar\.|shfl\.|vote\.)")
_HINT = "`kiln-opt FILE --target gpu-emulator --stage llvm` shows the kernels' IR"


def shared_fill() -> int:
    """The byte shared memory holds at the start of each block (KILN_GPU_EMULATOR_SHARED)."""
    mode = environment.get("KILN_GPU_EMULATOR_SHARED")
    if mode not in ("poison", "zero"):
        raise KilnError(f"KILN_GPU_EMULATOR_SHARED={mode!r}", hint="poison (0xFF bytes, the "
                        "default) or zero")
    return 0xFF if mode == "poison" else 0


def retarget(llvm_ir: str, kernels: list[str], fill: int = 0xFF) -> str:
    """The kernels' NVPTX LLVM IR as host IR with a launch wrapper per kernel."""
    if _DYNAMIC_SHARED.search(llvm_ir):
        raise KilnError("the GPU emulator cannot run kernels with dynamic shared memory",
                        hint=_HINT)
    definitions = []
    for name, params in _NVVM_DECLARE.findall(llvm_ir):
        definitions.append(_intrinsic(name, _param_types(params)))
    shared = [(name, t) for name, t, _ in _SHARED.findall(llvm_ir)]
    text = _NVVM_DECLARE.sub("", llvm_ir)
    text = _NVVM.sub(lambda m: f"@kiln_emu.nvvm.{m.group(1)}", text)
    # one address space: shared memory is a global, generic pointers are host pointers
    text = _ADDRSPACE.sub("", text).replace("addrspacecast", "bitcast")
    text = re.sub(r"^(@[\w.$]+ = [^\n]*global .+?) (?:undef|poison)(\s*(?:, align \d+)?)$",
                  r"\1 zeroinitializer\2", text, flags=re.M)
    signatures = {name: _param_types(params) for name, params in _KERNEL.findall(text)}
    bodies = _kernel_bodies(text)
    text = text.replace("define ptx_kernel ", "define ")
    for name, body in _NV_IN_IR.items():
        if re.search(rf"^declare [^\n]*@{name}\(", text, re.M):
            text = re.sub(rf"^declare [^\n]*@{name}\([^\n]*$", body, text, flags=re.M)
    parts = [text, *definitions, *_NATIVE.values(),
             f"@kiln_emu_state = internal global [{_STATE_SLOTS} x i32] zeroinitializer\n",
             _reset_shared(shared, fill, text)]
    for r, register in enumerate(_REGISTERS):
        for d, dim in enumerate(_DIMS):
            parts.append(_state_reader(f"kiln_emu_{register}_{dim}", 3 * r + d))
    for name in kernels:
        if name not in signatures:
            raise KilnError(f"kernel {name} is missing from the device IR")
        if _SYNCHRONIZING.search(bodies.get(name, "")):
            parts.append(_fiber_launch_wrapper(name, signatures[name]))
        else:
            parts.append(_launch_wrapper(name, signatures[name]))
    return "\n".join(parts)


def _kernel_bodies(text: str) -> dict[str, str]:
    bodies = {}
    for match in _KERNEL.finditer(text):
        end = text.find("\n}", match.end())
        bodies[match.group(1)] = text[match.end():end]
    return bodies


def _state_reader(function: str, slot: int) -> str:
    return (f"define internal i32 @{function}() alwaysinline {{\n"
            f"  %p = getelementptr [{_STATE_SLOTS} x i32], ptr @kiln_emu_state, i64 0, "
            f"i64 {slot}\n  %v = load i32, ptr %p\n  ret i32 %v\n}}\n")


def _intrinsic(name: str, params: list[str]) -> str:
    """A definition of `@kiln_emu.nvvm.NAME` (what `@llvm.nvvm.NAME` was renamed to) over the
    emulator's state and the native runtime; an intrinsic with none is refused by name."""
    head = f"@kiln_emu.nvvm.{name}(" + ", ".join(f"{t} %a{i}" for i, t in enumerate(params)) + ")"
    parts = name.split(".")
    if parts[:3] == ["read", "ptx", "sreg"]:
        register = ".".join(parts[3:])
        if register == "warpsize":
            return f"define internal i32 {head} {{\n  ret i32 32\n}}\n"
        if register == "laneid":
            return _state_reader(f"kiln_emu.nvvm.{name}", _LANEID_SLOT)
        if len(parts) == 5 and parts[3] in _REGISTERS and parts[4] in _DIMS:
            return (f"define internal i32 {head} {{\n  %v = call i32 @kiln_emu_{parts[3]}_"
                    f"{parts[4]}()\n  ret i32 %v\n}}\n")
    elif parts[0] == "barrier" or name == "barrier0":
        return f"define internal void {head} {{\n  call void @kiln_emu_barrier()\n  ret void\n}}\n"
    elif name == "bar.warp.sync":
        return (f"define internal void {head} {{\n  call void @kiln_emu_warp_sync(i32 %a0)\n"
                "  ret void\n}\n")
    elif parts[0] in ("membar", "fence"):
        return f"define internal void {head} {{\n  ret void\n}}\n"
    elif parts[:2] == ["shfl", "sync"] and len(parts) == 4 and parts[2] in _SHUFFLE_MODES:
        return _shuffle(name, head, parts[2], parts[3])
    elif parts[0] == "vote" and parts[-1] == "sync" and parts[1] in _VOTE_MODES:
        mode = _VOTE_MODES[parts[1]]
        result = "i32" if parts[1] == "ballot" else "i1"
        lines = [f"define internal {result} {head} {{",
                 "  %p = zext i1 %a1 to i32",
                 f"  %r = call i32 @kiln_emu_warp_vote(i32 {mode}, i32 %a0, i32 %p)"]
        lines += ["  ret i32 %r"] if result == "i32" else \
            ["  %b = trunc i32 %r to i1", "  ret i1 %b"]
        return "\n".join(lines + ["}", ""])
    raise KilnError(f"the GPU emulator cannot run kernels using llvm.nvvm.{name}",
                    hint="the emulator runs barriers, warp shuffles and votes, shared memory "
                         "and LLVM atomics; use target='gpu' for the rest")


def _shuffle(name: str, head: str, mode: str, kind: str) -> str:
    """shfl.sync.MODE.{i32,f32}[p]: the value as 32 bits through the fibers' exchange; the
    `p` forms also return whether the source lane was in range."""
    with_valid = kind.endswith("p")
    t = {"i32": "i32", "f32": "float"}.get(kind.rstrip("p"))
    if t is None:
        raise KilnError(f"the GPU emulator cannot run kernels using llvm.nvvm.{name}",
                        hint="warp shuffles of i32 and f32 values are emulated")
    result = f"{{ {t}, i1 }}" if with_valid else t
    lines = [f"define internal {result} {head} {{", "  %valid = alloca i32"]
    lines.append("  %bits = bitcast float %a1 to i32" if t == "float"
                 else "  %bits = add i32 %a1, 0")
    lines.append(f"  %r = call i32 @kiln_emu_warp_shfl(i32 {_SHUFFLE_MODES[mode]}, i32 %a0, "
                 "i32 %bits, i32 %a2, i32 %a3, ptr %valid)")
    lines.append("  %v = bitcast i32 %r to float" if t == "float" else "  %v = add i32 %r, 0")
    if with_valid:
        lines += ["  %ok32 = load i32, ptr %valid", "  %ok = trunc i32 %ok32 to i1",
                  f"  %s0 = insertvalue {result} poison, {t} %v, 0",
                  f"  %s1 = insertvalue {result} %s0, i1 %ok, 1", f"  ret {result} %s1"]
    else:
        lines.append(f"  ret {t} %v")
    return "\n".join(lines + ["}", ""])


def _reset_shared(shared: list[tuple[str, str]], fill: int, text: str) -> str:
    """kiln_emu_reset_shared(): every shared-memory global filled with `fill` (per block)."""
    lines = ["define internal void @kiln_emu_reset_shared() {"]
    byte = fill - 256 if fill > 127 else fill   # LLVM's i8 literals are signed
    for i, (name, t) in enumerate(shared):
        lines += [f"  %end{i} = getelementptr {t}, ptr null, i64 1",   # the global's size
                  f"  %n{i} = ptrtoint ptr %end{i} to i64",
                  f"  call void @llvm.memset.p0.i64(ptr @{name}, i8 {byte}, i64 %n{i}, "
                  "i1 false)"]
    lines += ["  ret void", "}"]
    if shared and not re.search(r"^declare [^\n]*@llvm\.memset\.p0\.i64\(", text, re.M):
        lines.append("declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)")
    return "\n".join(lines) + "\n"


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


def _load_params(name: str, types: list[str]) -> tuple[list[str], list[str]]:
    """IR loading a kernel's arguments from cuLaunchKernel's `void **params`."""
    lines, args = [], []
    for i, t in enumerate(types):
        lines += [f"  %pp{i} = getelementptr ptr, ptr %params, i64 {i}",
                  f"  %p{i} = load ptr, ptr %pp{i}",
                  f"  %a{i} = load {t}, ptr %p{i}"]
        args.append(f"{t} %a{i}")
    return lines, args


def _put(slot: int, value: str, tag: str) -> list[str]:
    return [f"  %{tag} = getelementptr [{_STATE_SLOTS} x i32], ptr @kiln_emu_state, i64 0, "
            f"i64 {slot}", f"  store i32 {value}, ptr %{tag}"]


def _launch_wrapper(name: str, types: list[str]) -> str:
    """i32 kiln_emu_launch_NAME(void **params, gx, gy, gz, bx, by, bz): every block, and in
    each every thread one after another, with the special registers set before each."""
    return _grid_loop(name, types, fibers=False)


def _fiber_launch_wrapper(name: str, types: list[str]) -> str:
    """As _launch_wrapper, but each block's threads run as fibers (kiln_emu_run_block) that
    switch at barriers and warp operations; kiln_emu_thread_NAME(params, t) is one thread."""
    loads, args = _load_params(name, types)
    thread = [f"define internal void @kiln_emu_thread_{name}(ptr %params, i32 %t) {{",
              *loads, f"  call void @{name}({', '.join(args)})", "  ret void", "}", ""]
    return "\n".join(thread) + _grid_loop(name, types, fibers=True)


def _grid_loop(name: str, types: list[str], fibers: bool) -> str:
    lines = [f"define i32 @kiln_emu_launch_{name}(ptr %params, i32 %gx, i32 %gy, i32 %gz, "
             "i32 %bx, i32 %by, i32 %bz) {", "entry:"]
    loads, args = _load_params(name, types)
    if not fibers:
        lines += loads
    for d, value in enumerate(("%bx", "%by", "%bz")):
        lines += _put(3 + d, value, f"s{3 + d}")
    for d, value in enumerate(("%gx", "%gy", "%gz")):
        lines += _put(9 + d, value, f"s{9 + d}")
    lines += ["  %gxy = mul i32 %gx, %gy", "  %nb = mul i32 %gxy, %gz",
              "  %bxy = mul i32 %bx, %by", "  %nt = mul i32 %bxy, %bz",
              "  %empty = icmp eq i32 %nb, 0", "  br i1 %empty, label %done, label %block",
              "block:",
              "  %b = phi i32 [ 0, %entry ], [ %b1, %block_end ]",
              "  %cx = urem i32 %b, %gx", "  %bq = udiv i32 %b, %gx",
              "  %cy = urem i32 %bq, %gy", "  %cz = udiv i32 %b, %gxy"]
    for d, value in enumerate(("%cx", "%cy", "%cz")):
        lines += _put(6 + d, value, f"c{d}p")
    lines.append("  call void @kiln_emu_reset_shared()")
    if fibers:
        lines += [f"  %rc = call i32 @kiln_emu_run_block(i32 %bx, i32 %by, i32 %bz, "
                  f"ptr @kiln_emu_state, ptr @kiln_emu_thread_{name}, ptr %params)",
                  "  %failed = icmp ne i32 %rc, 0",
                  "  br i1 %failed, label %fail, label %block_end",
                  "fail:", "  ret i32 %rc"]
    else:
        lines += ["  br label %thread", "thread:",
                  "  %t = phi i32 [ 0, %block ], [ %t1, %thread ]",
                  "  %tx = urem i32 %t, %bx", "  %tq = udiv i32 %t, %bx",
                  "  %ty = urem i32 %tq, %by", "  %tz = udiv i32 %t, %bxy",
                  "  %lane = urem i32 %t, 32"]
        for d, value in enumerate(("%tx", "%ty", "%tz")):
            lines += _put(d, value, f"t{d}p")
        lines += _put(_LANEID_SLOT, "%lane", "lanep")
        lines += [f"  call void @{name}({', '.join(args)})",
                  "  %t1 = add i32 %t, 1", "  %tmore = icmp ult i32 %t1, %nt",
                  "  br i1 %tmore, label %thread, label %block_end"]
    lines += ["block_end:",
              "  %b1 = add i32 %b, 1", "  %bmore = icmp ult i32 %b1, %nb",
              "  br i1 %bmore, label %block, label %done",
              "done:", "  ret i32 0", "}", ""]
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


def _bind_native(llvm) -> None:
    """Point the fibers' entry points at the native runtime's (runtime/kiln_gpu_fibers.c)."""
    from .custom_call import runtime
    lib = runtime()
    for name in _NATIVE:
        llvm.add_symbol(name, ctypes.cast(getattr(lib, name), ctypes.c_void_p).value)


class _Loaded:
    """A JIT-compiled kernel module: the engine stays alive with it."""

    def __init__(self, engine, module):
        self.engine, self.module = engine, module


# One kernel at a time in the process: the devices of a multi-device run are threads, and
# the fibers' runtime (kiln_gpu_fibers.c) runs one block's threads at a time.
_LAUNCHES = threading.Lock()
_LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, *([ctypes.c_uint32] * 6))


class _Kernel:
    """A kernel's launch wrapper, with its name for errors."""

    def __init__(self, name: str, address: int):
        self.name, self.call = name, _LAUNCH(address)


class _Recording:
    """A command buffer in the emulator: the launches and copies recorded, with the
    parameter values they were recorded with, replayed in order by launch_graph."""

    def __init__(self):
        self.commands: list[tuple] = []


# The stream a typed-FFI handler gets in the emulator: a recognisable non-null address.
_FFI_STREAM_MARK = ctypes.create_string_buffer(b"KILNEMU", 8)
EMULATOR_FFI_STREAM = ctypes.addressof(_FFI_STREAM_MARK)


class EmulatorRuntime(DeviceRuntime):
    can_capture = True

    def ffi_stream(self) -> int:
        """Not the null stream the api_version 1-3 targets get: an FFI handler's
        PlatformStream decodes it (see the module's docstring)."""
        return EMULATOR_FFI_STREAM

    def __init__(self):
        self._memory: dict[int, np.ndarray] = {}
        self._recording: _Recording | None = None

    def load(self, bundle: dict):
        llvm = _llvm()
        text = retarget(bundle["llvm_ir"], bundle["kernels"], shared_fill())
        _bind_libdevice(llvm, text)
        _bind_native(llvm)
        try:
            module = llvm.parse_assembly(text)
            module.triple = llvm.get_process_triple()
            module.verify()
        except RuntimeError as exc:
            raise KilnError(f"the GPU emulator could not retarget the kernels: {exc}",
                            hint=_HINT) from None
        # This CPU's features: f16 conversions are then instructions (F16C), not calls of
        # compiler-rt helpers the JIT cannot resolve.
        machine = llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
            opt=2, codemodel="jitdefault")
        engine = llvm.create_mcjit_compiler(module, machine)
        engine.finalize_object()
        return _Loaded(engine, module)

    def function(self, module: _Loaded, name: str):
        return _Kernel(name, module.engine.get_function_address(f"kiln_emu_launch_{name}"))

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
        if self._recording is not None:
            self._recording.commands.append(("copy", dst, src, nbytes))
            return
        ctypes.memmove(dst, src, nbytes)

    # -- command buffers: recorded, not run, between begin_capture and end_capture ----------
    def begin_capture(self) -> None:
        if self._recording is not None:
            raise KilnError("a command buffer is already being recorded")
        self._recording = _Recording()

    def end_capture(self) -> _Recording:
        recording, self._recording = self._recording, None
        return recording

    def launch_graph(self, graph: _Recording) -> None:
        for command in graph.commands:
            if command[0] == "copy":
                ctypes.memmove(*command[1:])
            else:
                self._run_kernel(*command[1:])

    def launch(self, function, grid, block, shared_bytes: int, params: list) -> None:
        if self._recording is not None:
            # the values are copied now, as cuLaunchKernel copies them when captured
            copies = [type(p).from_buffer_copy(p) for p in params]
            self._recording.commands.append(("launch", function, grid, block, shared_bytes,
                                             copies))
            return
        self._run_kernel(function, grid, block, shared_bytes, params)

    def _run_kernel(self, function, grid, block, shared_bytes: int, params: list) -> None:
        with _LAUNCHES:
            self._run_kernel_alone(function, grid, block, shared_bytes, params)

    def _run_kernel_alone(self, function, grid, block, shared_bytes: int, params: list) -> None:
        if shared_bytes:
            raise KilnError("the GPU emulator cannot run kernels with dynamic shared memory",
                            hint=_HINT)
        pointers = (ctypes.c_void_p * max(1, len(params)))(
            *[ctypes.addressof(p) for p in params])
        status = function.call(ctypes.addressof(pointers), *grid, *block)
        if status:
            raise KilnError(f"kernel {function.name} (grid={tuple(grid)}, block={tuple(block)}) "
                            "failed in the GPU emulator: " + _RUN_BLOCK_ERRORS.get(
                                status, f"status {status}"),
                            hint="every thread of a block must reach each barrier, and every "
                                 "lane of a warp operation's mask must reach it; " + _HINT)
