"""Running a GPU program's execution plan (lowering/gpu/host.py) on a device runtime.

The plan is the host side of a compiled GPU program: device allocations, uploads of
constants, device-to-device copies, kernel launches and custom calls (seed 004's convention,
XLA's typed FFI, and host-staged collectives and host transfers) in program order;
control flow (`while`, `for`, `if`, `switch`) holding nested step lists, steered by scalars
the host computes (gpu_host_ops.py) or downloads from the device, as XLA's while and
conditional thunks read their predicates; and command buffers, runs of launches and copies
recorded once and replayed. `PlanInvoker` replays it for each call through a
`DeviceRuntime`: the CUDA driver (runtime/cuda.py) on a GPU, or the emulator
(runtime/gpu_emulator.py), which runs the same kernels' LLVM IR on the CPU; both run every
step through the same code here. Arguments are copied to the device at the entry and
results back at the exit.
"""
from __future__ import annotations

import base64
import ctypes
import heapq
import threading

import numpy as np

from ..errors import CustomCallError, KilnError
from . import gpu_host_ops as host_ops


class DeviceRuntime:
    """What the plan needs from a device, in the CUDA driver's terms. Pointers are ints."""

    def load(self, bundle: dict):
        """Load the program's kernels (a cubin, or the emulator's JIT); returns a handle."""
        raise NotImplementedError

    def function(self, module, name: str):
        raise NotImplementedError

    def alloc(self, nbytes: int) -> int:
        raise NotImplementedError

    def free(self, pointer: int) -> None:
        raise NotImplementedError

    def upload(self, pointer: int, host: np.ndarray) -> None:
        raise NotImplementedError

    def download(self, host: np.ndarray, pointer: int) -> None:
        raise NotImplementedError

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        raise NotImplementedError

    def launch(self, function, grid, block, shared_bytes: int, params: list) -> None:
        """cuLaunchKernel: `params` are ctypes values, passed as an array of pointers."""
        raise NotImplementedError

    def synchronize(self) -> None:
        pass

    def stream_handle(self) -> int | None:
        """The CUstream a GPU custom call is given (None: the null stream)."""
        return None

    def ffi_stream(self) -> int | None:
        """What a typed-FFI handler's `PlatformStream<cudaStream_t>` decodes to: the stream
        (None fails XLA_FFI_Stream_Get with "no stream", as on the CPU)."""
        return self.stream_handle()

    def ffi_device_memory(self) -> tuple[int | None, int | None]:
        """The functions a typed-FFI handler's ScratchAllocator gets device memory from and
        gives it back to, as addresses of `int alloc(void**, size_t)` and `int free(void*)`
        (kiln/ffi.h); (None, None): host memory (the CPU, and the emulator, whose device
        memory is host memory)."""
        return None, None

    # Command buffers (seed 002): launches and copies recorded once, replayed as one unit.
    can_capture = False

    def begin_capture(self) -> None:
        """From here, launches and copies are recorded, not run (cuStreamBeginCapture)."""
        raise NotImplementedError

    def end_capture(self):
        """The recorded commands as a graph ready to launch (cuStreamEndCapture and
        cuGraphInstantiate)."""
        raise NotImplementedError

    def launch_graph(self, graph) -> None:
        """Run a recorded graph's commands, in order (cuGraphLaunch)."""
        raise NotImplementedError

    def release_graph(self, graph) -> None:
        pass


_SCALAR_CTYPES = {"i1": ctypes.c_bool, "i8": ctypes.c_int8, "i16": ctypes.c_int16,
                  "i32": ctypes.c_int32, "i64": ctypes.c_int64, "f32": ctypes.c_float,
                  "f64": ctypes.c_double}


def kernel_params(args: list[dict], device: dict[int, int], values: dict | None = None) -> list:
    """A launch's parameters as ctypes values: each memref as MLIR's expanded descriptor
    (allocated and aligned pointers, offset, sizes, strides), scalars as themselves (those
    the host computes, a loop counter, read from `values`)."""
    params = []
    for arg in args:
        if arg.get("id") is not None:   # a scalar computed on the host this call
            arg = {**arg, "value": values[arg["id"]]}
        if arg["kind"] == "memref":
            base = device[arg["root"]]
            params += [ctypes.c_void_p(base), ctypes.c_void_p(base), ctypes.c_int64(arg["offset"])]
            params += [ctypes.c_int64(n) for n in arg["sizes"] + arg["strides"]]
        elif arg["type"] in _SCALAR_CTYPES:
            params.append(_SCALAR_CTYPES[arg["type"]](arg["value"]))
        elif arg["type"].startswith("i") and arg["type"][1:].isdigit():  # i2, i4: a byte
            width = int(arg["type"][1:])
            kind = next(c for w, c in ((8, ctypes.c_int8), (16, ctypes.c_int16),
                                       (32, ctypes.c_int32), (64, ctypes.c_int64)) if width <= w)
            params.append(kind(arg["value"]))
        elif arg["type"] in ("complex<f32>", "complex<f64>"):  # a {re, im} struct
            part = ctypes.c_float if arg["type"] == "complex<f32>" else ctypes.c_double
            params.append((part * 2)(*arg["value"]))
        elif arg["type"] in ("f16", "bf16"):
            bits = np.array(arg["value"], np.float16 if arg["type"] == "f16" else np.float32)
            raw = bits.view(np.uint16) if arg["type"] == "f16" else bits.view(np.uint32) >> 16
            params.append(ctypes.c_uint16(int(raw)))
        else:
            raise KilnError(f"kernel argument of type {arg['type']} cannot be passed",
                            hint="scalar kernel arguments: integers, f16, bf16, f32, f64")
    return params


class PlanInvoker:
    """The loaded program: `invoke(arrays)` with the inputs then the outputs (filled).

    Each device of a multi-device run (a thread, distributed/run.py) has its own runtime,
    loaded kernels and memory (`DeviceState`); a device runs one call at a time, and its
    collectives meet the other devices' on the fabric."""

    def __init__(self, bundle: dict, make_runtime, what: str):
        self.bundle, self.plan, self.what = bundle, bundle["plan"], what
        self._make_runtime = make_runtime
        self._devices: dict[int, DeviceState] = {}
        self._lock = threading.Lock()   # guards _devices
        self._written = written_roots(self.plan["steps"])

    def device(self, number: int = 0) -> DeviceState:
        with self._lock:
            if number not in self._devices:
                self._devices[number] = DeviceState(self)
            return self._devices[number]

    def __call__(self, arrays: list[np.ndarray]) -> None:
        from ..distributed.collectives import current
        state = self.device(current().id)
        with state.lock:
            state.run(arrays)


class DeviceState:
    """One device's share of a loaded program. Device memory outlives a call, as XLA keeps
    its buffer allocations: constants are uploaded at the first call (again each call only
    if a kernel writes them), and buffers come from a pool, so a later call, or a later
    iteration of a loop, gets the same addresses back and its command buffers replay
    without a new capture."""

    def __init__(self, invoker: PlanInvoker):
        self.invoker, self.plan, self.what = invoker, invoker.plan, invoker.what
        self._runtime = None
        self._functions: dict[str, object] = {}
        self.lock = threading.Lock()   # one call at a time on a device
        self._pool: dict[int, list[int]] = {}        # bytes -> free device buffers
        self._sizes: dict[int, int] = {}             # device buffer -> its bytes
        self._constants: dict[int, int] = {}         # upload id -> its device buffer
        self._written = invoker._written
        self._graphs: dict[int, tuple] = {}          # id(command-buffer step) -> (key, graph)
        self._targets: dict[tuple, object] = {}      # GPU custom-call targets, as ctypes
        self._ffi_sites: dict[int, int] = {}         # id(typed-FFI step) -> its C FFI site

    def ffi_site(self, step: dict) -> int:
        """The C FFI site (runtime/kiln_ffi.c) of a typed-FFI step, made at its first call:
        the handler resolved in this process's registry, its instantiate stage run once,
        as XLA instantiates a handler per executable. Sites live as long as the process, as
        the CPU target's do."""
        key = id(step)
        if key not in self._ffi_sites:
            from . import ffi
            from .custom_call import REGISTRY, Leaf, runtime
            name = step["target"]
            target = REGISTRY.lookup(name, "CUDA")
            if target is None or target.address is None or target.placeholder:
                raise KilnError(f"{self.what} calls GPU custom-call target '{name}', which is "
                                "not registered in this process",
                                hint="register its XLA FFI handler (platform='CUDA') before "
                                     "calling")
            operands, results = ([Leaf(tuple(shape), np.dtype(np.uint8), None, element)
                                  for element, shape in step["ffi"][k]]
                                 for k in ("operands", "results"))
            attributes = [ffi.FfiAttr.from_json(a) for a in step["ffi"]["attributes"]]
            self._ffi_sites[key] = ffi.create_site(
                runtime(), name, target.ffi_stages or {"execute": target.address},
                operands, results, attributes)
        return self._ffi_sites[key]

    def _custom_call_target(self, name: str, api_version: int):
        """The C function registered for the GPU under `name`, as a ctypes function."""
        key = (name, api_version)
        if key not in self._targets:
            from .custom_call import REGISTRY
            target = REGISTRY.lookup(name, "CUDA")
            if target is None or target.address is None or target.placeholder:
                raise KilnError(f"{self.what} calls GPU custom-call target '{name}', which is "
                                "not registered in this process",
                                hint="register it (platform='CUDA') before calling")
            arguments = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p,
                         ctypes.c_size_t] + ([ctypes.c_void_p] if api_version != 1 else [])
            self._targets[key] = ctypes.CFUNCTYPE(None, *arguments)(target.address)
        return self._targets[key]

    def _ready(self) -> DeviceRuntime:
        if self._runtime is None:
            bundle = self.invoker.bundle
            runtime = self.invoker._make_runtime()
            if bundle["kernels"]:
                # held as long as the invoker: its functions live in it (JIT code, CUmodule)
                self._module = runtime.load(bundle)
                self._functions = {k: runtime.function(self._module, k)
                                   for k in bundle["kernels"]}
            self._runtime = runtime
        return self._runtime

    def run(self, arrays: list[np.ndarray]) -> None:
        rt, plan = self._ready(), self.plan
        if len(arrays) != len(plan["params"]):
            raise KilnError(f"{self.what} takes {len(plan['params'])} buffers, got {len(arrays)}")
        call = _Call(self, rt)
        try:
            for number, (vid, array) in enumerate(zip(plan["params"], arrays)):
                call.device[vid] = call.take(array.nbytes)
                if number < plan["inputs"]:  # results start uninitialised, as on the CPU
                    rt.upload(call.device[vid], np.ascontiguousarray(array))
            call.run(plan["steps"])
            rt.synchronize()
            # the results only: a kernel may have updated an input's device copy in place
            for vid, array in list(zip(plan["params"], arrays))[plan["inputs"]:]:
                if array.nbytes:
                    rt.download(array, call.device[vid])
        finally:
            call.release(set())


def written_roots(steps: list[dict]) -> set[int]:
    """The buffers some step of `steps` (nested ones too) writes."""
    written = set()
    for step in steps:
        if step["op"] == "launch":
            written |= {a["root"] for a in step["args"]
                        if a["kind"] == "memref" and "w" in a["access"]}
        elif step["op"] == "copy":
            written.add(step["dst"])
        elif step["op"] == "custom-call":
            written |= {b["root"] for b in step["results"]}
        for region in nested_regions(step):
            written |= written_roots(region["steps"])
    return written


def nested_regions(step: dict) -> list[dict]:
    """The step lists a control-flow or command-buffer step holds, as regions."""
    op = step["op"]
    if op == "while":
        return [step["before"], step["after"]]
    if op == "for":
        return [step["body"]]
    if op in ("if", "switch"):
        return step["regions"]
    if op == "command-buffer":
        return [{"args": [], "steps": step["steps"]}]
    return []


# Steps that put work on the device's stream: what a command buffer records.
COMMANDS = frozenset({"launch", "copy"})


class _Call:
    """One call's state: device buffers and host scalars by value id."""

    def __init__(self, invoker: DeviceState, rt: DeviceRuntime):
        self.invoker, self.rt = invoker, rt
        self.plan = invoker.plan
        self.memrefs = self.plan["memrefs"]
        self.device: dict[int, int] = {}
        self.values: dict[int, object] = {
            int(k): _constant(c) for k, c in self.plan.get("constants", {}).items()}
        self.owned: set[int] = set()    # buffers taken from the pool by this call

    # -- device memory ------------------------------------------------------------------
    def take(self, nbytes: int) -> int:
        free = self.invoker._pool.get(nbytes)
        # the lowest free address: the same requests get the same buffers, call after call
        pointer = heapq.heappop(free) if free else self.rt.alloc(max(1, nbytes))
        self.owned.add(pointer)
        self.invoker._sizes[pointer] = nbytes
        return pointer

    def release(self, live: set[int]) -> None:
        """Give back to the pool every buffer of this call no live value refers to."""
        for pointer in [p for p in self.owned if p not in live]:
            self.owned.discard(pointer)
            heapq.heappush(self.invoker._pool.setdefault(self.invoker._sizes[pointer], []), pointer)

    def pointer(self, vid: int) -> int:
        return self.device[self.memrefs[str(vid)]["root"]]

    # -- steps ----------------------------------------------------------------------------
    def run(self, steps: list[dict]) -> None:
        for step in steps:
            getattr(self, "_" + step["op"].replace("-", "_"))(step)

    def _alloc(self, step: dict) -> None:
        self.device[step["id"]] = self.take(step["bytes"])

    def _upload(self, step: dict) -> None:
        vid, constants = step["id"], self.invoker._constants
        if vid in self.invoker._written:   # a kernel writes it: a fresh copy per call
            self.device[vid] = self.take(step["bytes"])
        elif vid in constants:
            self.device[vid] = constants[vid]
            return
        else:
            constants[vid] = self.device[vid] = self.rt.alloc(max(1, step["bytes"]))
        data = np.frombuffer(base64.b64decode(step["data"]), np.uint8)
        self.rt.upload(self.device[vid], data)

    def _copy(self, step: dict) -> None:
        self.rt.copy(self.device[step["dst"]] + step["dst_offset"],
                     self.device[step["src"]] + step["src_offset"], step["bytes"])

    def _launch(self, step: dict) -> None:
        self.rt.launch(self.invoker._functions[step["kernel"]], step["grid"], step["block"], 0,
                       kernel_params(step["args"], self.device, self.values))

    def _custom_call(self, step: dict) -> None:
        """Seed 004's GPU convention: f(stream, buffers, opaque, opaque_len[, status]), the
        buffers the operands' then the results' device pointers, on the runtime's stream;
        typed-FFI (api_version 4) and host-staged steps have their own methods."""
        if step.get("host_staged"):
            self._host_staged_call(step)
            return
        if step["api_version"] == 4:
            self._ffi_call(step)
            return
        function = self.invoker._custom_call_target(step["target"], step["api_version"])
        pointers = [self.device[b["root"]] + b["offset"]
                    for b in step["operands"] + step["results"]]
        buffers = (ctypes.c_void_p * max(1, len(pointers)))(*pointers)
        opaque = step["opaque"].encode()
        if step["api_version"] == 1:
            function(self.rt.stream_handle(), buffers, opaque, len(opaque))
            return
        from .custom_call import runtime
        lib = runtime()
        status = lib.KilnStatusCreate()
        try:
            function(self.rt.stream_handle(), buffers, opaque, len(opaque), status)
            if lib.KilnStatusFailed(status):
                message = (lib.KilnStatusMessage(status) or b"").decode(errors="replace")
                raise CustomCallError(f"GPU custom call '{step['target']}' failed: {message}",
                                      hint="the target reported failure through its "
                                           "XlaCustomCallStatus")
        finally:
            lib.KilnStatusDestroy(status)

    def _ffi_call(self, step: dict) -> None:
        """XLA's typed FFI: the handler's prepare, initialize and execute stages with a call
        frame of the operands' and results' device pointers (null for a token, as XLA
        passes it) and the runtime's stream; a failure is a CustomCallError, as on the CPU."""
        from .custom_call import runtime
        site = self.invoker.ffi_site(step)
        buffers = iter(step["operands"] + step["results"])   # the leaves that are not tokens
        pointers = []
        for element, _ in step["ffi"]["operands"] + step["ffi"]["results"]:
            buffer = None if element == "!stablehlo.token" else next(buffers)
            pointers.append(None if buffer is None
                            else self.device[buffer["root"]] + buffer["offset"])
        leaves = (ctypes.c_void_p * max(1, len(pointers)))(*pointers)
        lib = runtime()
        status = lib.KilnStatusCreate()
        try:
            alloc, free = self.rt.ffi_device_memory()
            lib.kiln_ffi_call_on_device(site, leaves, self.rt.ffi_stream(), alloc, free, status)
            if lib.KilnStatusFailed(status):
                message = (lib.KilnStatusMessage(status) or b"").decode(errors="replace")
                raise CustomCallError(message, hint="the FFI handler returned an error; the "
                                                    "computation was stopped")
        finally:
            lib.KilnStatusDestroy(status)

    def _host_staged_call(self, step: dict) -> None:
        """A collective, run on the host as the CPU target runs it: the operands downloaded,
        Kiln's collective runtime called (it meets the other devices' threads on the
        fabric), the results uploaded."""
        from .custom_call import REGISTRY
        target = REGISTRY.lookup(step["target"], "cpu")
        if target is None or target.function is None:
            raise KilnError(f"{self.invoker.what} runs '{step['target']}', which is not a "
                            "registered host function")
        operands = [self._host_array(b) for b in step["operands"]]
        for array, b in zip(operands, step["operands"]):
            if array.nbytes:
                self.rt.download(array, self.device[b["root"]] + b["offset"])
        results = [self._host_array(b) for b in step["results"]]
        target.function(results, operands, attributes={}, backend_config=step["opaque"])
        for array, b in zip(results, step["results"]):
            if array.nbytes:
                self.rt.upload(self.device[b["root"]] + b["offset"], array)

    @staticmethod
    def _host_array(buffer: dict) -> np.ndarray:
        element = buffer["element"]
        dtype = host_ops.FLOATS.get(element) or _OTHER_DTYPES.get(element) or \
            np.dtype(f"i{max(1, int(element[1:]) // 8)}")
        return np.empty(buffer["shape"], dtype)

    def _scalar(self, step: dict) -> None:
        self.values[step["id"]] = host_ops.evaluate(
            step, [self.values[i] for i in step["operands"]])

    def _download(self, step: dict) -> None:
        """A scalar the host needs (a predicate, an index) read back from the device: the
        stream is synchronized, as XLA's while thunk does for its predicate."""
        element = step["offset"] + sum(self.values[i] * s
                                       for i, s in zip(step["indices"], step["strides"]))
        raw = np.empty(step["element_bytes"], np.uint8)
        self.rt.download(raw, self.device[step["src"]] + element * step["element_bytes"])
        self.values[step["id"]] = host_ops.from_bytes(raw.tobytes(), step["type"])

    # -- control flow ---------------------------------------------------------------------
    def read(self, ids: list[int]) -> list[tuple[bool, object]]:
        """Values flowing into a region or out of an op: (is a buffer, pointer or scalar)."""
        return [(True, self.pointer(i)) if str(i) in self.memrefs and i not in self.values
                else (False, self.values[i]) for i in ids]

    def bind(self, ids: list[int], items: list[tuple[bool, object]]) -> None:
        for vid, (is_buffer, value) in zip(ids, items):
            (self.device if is_buffer else self.values)[vid] = value

    def leave(self, region: dict, passed: list[tuple[bool, object]]) -> None:
        """Forget what `region` defined (its values are dead past its end) and give back
        the buffers nothing live refers to any more: neither a value still bound nor one
        the region passes on (`passed`, bound next)."""
        for vid in _defined(region):
            self.device.pop(vid, None)
            self.values.pop(vid, None)
        self.release(set(self.device.values()) | {p for is_buffer, p in passed if is_buffer})

    def region(self, region: dict, items: list) -> list[tuple[bool, object]]:
        """Run a region with its arguments bound to `items`; what it yields."""
        self.bind(region["args"], items)
        self.run(region["steps"])
        out = self.read(region["yield"])
        condition = self.values[region["condition"]] if "condition" in region else None
        self.leave(region, out)
        return out if condition is None else (bool(condition), out)

    def _while(self, step: dict) -> None:
        carried = self.read(step["inits"])
        while True:
            go, forwarded = self.region(step["before"], carried)
            if not go:
                break
            carried = self.region(step["after"], forwarded)
        self.bind(step["results"], forwarded)

    def _for(self, step: dict) -> None:
        lower, upper, stride = (self.values[step[k]] for k in ("lower", "upper", "step"))
        carried = self.read(step["inits"])
        for induction in range(lower, upper, stride):
            carried = self.region(step["body"], [(False, induction), *carried])
        self.bind(step["results"], carried)

    def _if(self, step: dict) -> None:
        region = step["regions"][0 if self.values[step["condition"]] else 1]
        self.bind(step["results"], self.region(region, []))

    def _switch(self, step: dict) -> None:
        index = self.values[step["index"]]
        cases = step["cases"]
        region = step["regions"][cases.index(index) if index in cases else len(cases)]
        self.bind(step["results"], self.region(region, []))

    def _command_buffer(self, step: dict) -> None:
        """Consecutive launches and copies as one command buffer (seed 002): recorded once
        (a CUDA graph; the emulator's list of commands) and replayed while the buffers and
        arguments it was recorded with are the same, re-recorded when they change, as
        XLA updates a command buffer whose allocations moved."""
        rt = self.rt
        commands = []
        for inner in step["steps"]:   # host bookkeeping first: no device work in it
            if inner["op"] in COMMANDS:
                commands.append(inner)
            else:
                self.run([inner])
        if not rt.can_capture:
            self.run(commands)
            return
        key = tuple(self._command_key(c) for c in commands)
        cached = self.invoker._graphs.get(id(step))
        if cached is None or cached[0] != key:
            rt.begin_capture()
            try:
                self.run(commands)
            finally:
                graph = rt.end_capture()
            if cached is not None:
                rt.release_graph(cached[1])
            self.invoker._graphs[id(step)] = cached = (key, graph)
        rt.launch_graph(cached[1])

    def _command_key(self, step: dict) -> tuple:
        if step["op"] == "copy":
            return ("copy", self.device[step["dst"]] + step["dst_offset"],
                    self.device[step["src"]] + step["src_offset"], step["bytes"])
        params = kernel_params(step["args"], self.device, self.values)
        return (step["kernel"], tuple(step["grid"]), tuple(step["block"]),
                b"".join(bytes(p) for p in params))


_OTHER_DTYPES = {"i1": np.bool_, "complex<f32>": np.complex64, "complex<f64>": np.complex128}


def _defined(region: dict) -> list[int]:
    """The ids a region defines at its top level: its arguments, what its steps make."""
    ids = list(region["args"])
    for step in region["steps"]:
        if "id" in step:
            ids.append(step["id"])
        ids.extend(step.get("results", []) if step["op"] != "custom-call" else [])
        if step["op"] == "command-buffer":
            ids.extend(_defined({"args": [], "steps": step["steps"]}))
    return ids


def _constant(scalar: dict):
    t = host_ops.runtime_type(scalar["type"])
    if t in host_ops.FLOATS:
        return host_ops.FLOATS[t](scalar["value"])
    return host_ops.wrap(int(scalar["value"]), t)


def describe(bundle: dict) -> str:
    """The plan as text, like XLA's *.thunk-sequence.txt: one line per step, the steps a
    control-flow or command-buffer step holds indented under it."""
    plan = bundle["plan"]
    lines = [f"// @{plan['entry']}: parameters " + ", ".join(f"%{v}" for v in plan["params"])]
    _describe_steps(plan["steps"], "", lines)
    return "\n".join(lines) + "\n"


def _describe_steps(steps: list[dict], indent: str, lines: list[str]) -> None:
    for step in steps:
        lines.append(indent + describe_step(step))
        op = step["op"]
        if op == "command-buffer":
            _describe_steps(step["steps"], indent + "  ", lines)
            continue
        names = {"while": ["condition", "body"], "for": ["body"],
                 "if": ["then", "else"]}.get(op)
        if op == "switch":
            names = [f"case {c}" for c in step["cases"]] + ["default"]
        for name, region in zip(names or [], nested_regions(step)):
            args = ", ".join(f"%{a}" for a in region["args"])
            lines.append(f"{indent}  {name}" + (f" (%s)" % args if args else "") + ":")
            _describe_steps(region["steps"], indent + "    ", lines)
            tail = ("condition %" + str(region["condition"]) + ", " if "condition" in region
                    else "") + "yield " + ", ".join(f"%{v}" for v in region["yield"])
            lines.append(f"{indent}    {tail}")


def _values(ids: list[int]) -> str:
    return ", ".join(f"%{v}" for v in ids)


def describe_step(step: dict) -> str:
    op = step["op"]
    if op == "alloc":
        return f"alloc %{step['id']} {step['bytes']} bytes"
    if op == "upload":
        return f"memcpy-h2d %{step['id']} {step['bytes']} bytes (constant)"
    if op == "copy":
        return f"memcpy-d2d %{step['dst']}+{step['dst_offset']} <- %{step['src']}+" \
               f"{step['src_offset']} {step['bytes']} bytes"
    if op == "scalar":
        return f"host %{step['id']} = {step['name']} {_values(step['operands'])} : {step['type']}"
    if op == "download":
        return f"memcpy-d2h %{step['id']} <- %{step['src']}[{_values(step['indices'])}] " \
               f": {step['type']}"
    if op == "while":
        return f"while ({_values(step['inits'])}) -> ({_values(step['results'])})"
    if op == "for":
        return f"for %{step['lower']} to %{step['upper']} step %{step['step']} " \
               f"({_values(step['inits'])}) -> ({_values(step['results'])})"
    if op == "if":
        return f"conditional %{step['condition']} -> ({_values(step['results'])})"
    if op == "switch":
        return f"conditional index %{step['index']} -> ({_values(step['results'])})"
    if op == "command-buffer":
        commands = sum(s["op"] in COMMANDS for s in step["steps"])
        return f"command-buffer {commands} commands"
    if op == "custom-call":
        operands, results = ([b["root"] for b in step[k]] for k in ("operands", "results"))
        staged = " (host-staged)" if step.get("host_staged") else ""
        return f"custom-call {step['target']}{staged} operands=({_values(operands)}) " \
               f"results=({_values(results)})"
    args = ", ".join(f"%{a['root']}" if a["kind"] == "memref"
                     else f"{a['type']} %{a['id']}" if a.get("id") is not None
                     else f"{a['type']} {a['value']}" for a in step["args"])
    return (f"kernel {step['kernel']} grid=({','.join(map(str, step['grid']))}) "
            f"block=({','.join(map(str, step['block']))}) args=({args})")
