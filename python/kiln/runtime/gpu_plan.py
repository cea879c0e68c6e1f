"""Running a GPU program's execution plan (lowering/gpu/host.py) on a device runtime.

The plan is the host side of a compiled GPU program: device allocations, uploads of
constants, device-to-device copies and kernel launches, in program order. `PlanInvoker`
replays it for each call through a `DeviceRuntime`: the CUDA driver (runtime/cuda.py) on a
GPU, or the emulator (runtime/gpu_emulator.py), which runs the same kernels' LLVM IR on the
CPU. Arguments are copied to the device at the entry and results back at the exit.
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from ..errors import KilnError


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


_SCALAR_CTYPES = {"i1": ctypes.c_bool, "i8": ctypes.c_int8, "i16": ctypes.c_int16,
                  "i32": ctypes.c_int32, "i64": ctypes.c_int64, "f32": ctypes.c_float,
                  "f64": ctypes.c_double}


def kernel_params(args: list[dict], device: dict[int, int]) -> list:
    """A launch's parameters as ctypes values: each memref as MLIR's expanded descriptor
    (allocated and aligned pointers, offset, sizes, strides), scalars as themselves."""
    params = []
    for arg in args:
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
    """The loaded program: `invoke(arrays)` with the inputs then the outputs (filled)."""

    def __init__(self, bundle: dict, make_runtime, what: str):
        self.bundle, self.plan, self.what = bundle, bundle["plan"], what
        self._make_runtime = make_runtime
        self._runtime = None
        self._functions: dict[str, object] = {}
        self._lock = threading.Lock()  # one call at a time on a device

    def _ready(self) -> DeviceRuntime:
        if self._runtime is None:
            runtime = self._make_runtime()
            if self.bundle["kernels"]:
                # held as long as the invoker: its functions live in it (JIT code, CUmodule)
                self._module = runtime.load(self.bundle)
                self._functions = {k: runtime.function(self._module, k)
                                   for k in self.bundle["kernels"]}
            self._runtime = runtime
        return self._runtime

    def __call__(self, arrays: list[np.ndarray]) -> None:
        with self._lock:
            self._run(self._ready(), arrays)

    def _run(self, rt: DeviceRuntime, arrays: list[np.ndarray]) -> None:
        plan = self.plan
        if len(arrays) != len(plan["params"]):
            raise KilnError(f"{self.what} takes {len(plan['params'])} buffers, got {len(arrays)}")
        device: dict[int, int] = {}
        try:
            for number, (vid, array) in enumerate(zip(plan["params"], arrays)):
                device[vid] = rt.alloc(max(1, array.nbytes))
                if number < plan["inputs"]:  # results start uninitialised, as on the CPU
                    rt.upload(device[vid], np.ascontiguousarray(array))
            for step in plan["steps"]:
                op = step["op"]
                if op == "alloc":
                    device[step["id"]] = rt.alloc(max(1, step["bytes"]))
                elif op == "upload":
                    device[step["id"]] = rt.alloc(max(1, step["bytes"]))
                    data = np.frombuffer(__import__("base64").b64decode(step["data"]), np.uint8)
                    rt.upload(device[step["id"]], data)
                elif op == "copy":
                    rt.copy(device[step["dst"]] + step["dst_offset"],
                            device[step["src"]] + step["src_offset"], step["bytes"])
                elif op == "launch":
                    rt.launch(self._functions[step["kernel"]], step["grid"], step["block"], 0,
                              kernel_params(step["args"], device))
            rt.synchronize()
            # the results only: a kernel may have updated an input's device copy in place
            for vid, array in list(zip(plan["params"], arrays))[plan["inputs"]:]:
                if array.nbytes:
                    rt.download(array, device[vid])
        finally:
            for pointer in device.values():
                rt.free(pointer)


def describe(bundle: dict) -> str:
    """The plan as text, like XLA's *.thunk-sequence.txt: one line per step."""
    lines = []
    plan = bundle["plan"]
    lines.append(f"// @{plan['entry']}: parameters " + ", ".join(f"%{v}" for v in plan["params"]))
    for step in plan["steps"]:
        lines.append(describe_step(step))
    return "\n".join(lines) + "\n"


def describe_step(step: dict) -> str:
    op = step["op"]
    if op == "alloc":
        return f"alloc %{step['id']} {step['bytes']} bytes"
    if op == "upload":
        return f"memcpy-h2d %{step['id']} {step['bytes']} bytes (constant)"
    if op == "copy":
        return f"memcpy-d2d %{step['dst']}+{step['dst_offset']} <- %{step['src']}+" \
               f"{step['src_offset']} {step['bytes']} bytes"
    args = ", ".join(f"%{a['root']}" if a["kind"] == "memref" else f"{a['type']} {a['value']}"
                     for a in step["args"])
    return (f"kernel {step['kernel']} grid=({','.join(map(str, step['grid']))}) "
            f"block=({','.join(map(str, step['block']))}) args=({args})")
