"""The plan's device runtime on a real NVIDIA GPU, over the CUDA driver API (cuda-python's
`cuda.bindings.driver`): the primary context of device 0, one stream, the program's cubin
loaded with cuModuleLoadData, device buffers from cuMemAlloc, host<->device copies at the
entry boundary (and of the scalars host control flow reads), cuLaunchKernel with parameters
as an array of pointers to values, the convention the emulator (runtime/gpu_emulator.py)
mirrors, and command buffers as CUDA graphs: the stream captured once
(cuStreamBeginCapture/cuStreamEndCapture, cuGraphInstantiate), then cuGraphLaunch.

Without a driver or a device, making a `CudaRuntime` raises a one-line KilnError
("no CUDA device: ..."); nothing else in Kiln needs one.
"""
from __future__ import annotations

import base64
import ctypes

import numpy as np

from ..errors import KilnError
from .gpu_plan import DeviceRuntime

_HINT = ("the 'gpu' target runs on a machine with an NVIDIA GPU and driver; "
         "target='gpu-emulator' runs the same program on the CPU")


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError:
        raise KilnError("no CUDA device: cuda-python is not installed",
                        hint="pip install 'kiln[gpu]'; " + _HINT) from None
    return driver


def no_device_reason() -> str | None:
    """Why no CUDA device can be used here (None: one can)."""
    try:
        CudaRuntime.driver_and_device()
    except KilnError as exc:
        return exc.message
    return None


class CudaRuntime(DeviceRuntime):
    def __init__(self):
        self.cu, self.device = self.driver_and_device()
        cu = self.cu
        self.context = self._check(cu.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain")
        self._check(cu.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        self.stream = self._check(cu.cuStreamCreate(0), "cuStreamCreate")
        self._images: list[bytes] = []  # cubins stay alive as long as their modules

    @staticmethod
    def driver_and_device():
        cu = _driver()
        try:
            (err,) = cu.cuInit(0)
        except Exception as exc:  # noqa: BLE001 - cuda.pathfinder's DynamicLibNotFoundError
            raise KilnError(f"no CUDA device: the CUDA driver library cannot be loaded "
                            f"({type(exc).__name__})", hint=_HINT) from None
        if err != cu.CUresult.CUDA_SUCCESS:
            raise KilnError(f"no CUDA device: cuInit failed ({_name(cu, err)})", hint=_HINT)
        err, count = cu.cuDeviceGetCount()
        if err != cu.CUresult.CUDA_SUCCESS or count == 0:
            raise KilnError("no CUDA device: the driver reports none", hint=_HINT)
        err, device = cu.cuDeviceGet(0)
        if err != cu.CUresult.CUDA_SUCCESS:
            raise KilnError(f"no CUDA device: cuDeviceGet failed ({_name(cu, err)})", hint=_HINT)
        return cu, device

    def _check(self, result, what: str):
        err, *values = result if isinstance(result, tuple) else (result,)
        if err != self.cu.CUresult.CUDA_SUCCESS:
            raise KilnError(f"CUDA error in {what}: {_name(self.cu, err)}",
                            hint="the GPU program failed on the device")
        return values[0] if len(values) == 1 else values or None

    def load(self, bundle: dict):
        if "cubin" not in bundle:
            raise KilnError("this program holds no cubin", hint="compile with target='gpu'")
        image = base64.b64decode(bundle["cubin"])
        self._images.append(image)
        return self._check(self.cu.cuModuleLoadData(image), "cuModuleLoadData")

    def function(self, module, name: str):
        return self._check(self.cu.cuModuleGetFunction(module, name.encode()),
                           f"cuModuleGetFunction({name})")

    def alloc(self, nbytes: int) -> int:
        return int(self._check(self.cu.cuMemAlloc(nbytes), "cuMemAlloc"))

    def free(self, pointer: int) -> None:
        self._check(self.cu.cuMemFree(self.cu.CUdeviceptr(pointer)), "cuMemFree")

    def upload(self, pointer: int, host: np.ndarray) -> None:
        if host.nbytes:
            self._check(self.cu.cuMemcpyHtoDAsync(self.cu.CUdeviceptr(pointer), host.ctypes.data,
                                                  host.nbytes, self.stream), "cuMemcpyHtoD")
            self.synchronize()  # the host array may go away after the call

    def download(self, host: np.ndarray, pointer: int) -> None:
        self._check(self.cu.cuMemcpyDtoHAsync(host.ctypes.data, self.cu.CUdeviceptr(pointer),
                                              host.nbytes, self.stream), "cuMemcpyDtoH")
        self.synchronize()

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        self._check(self.cu.cuMemcpyDtoDAsync(self.cu.CUdeviceptr(dst), self.cu.CUdeviceptr(src),
                                              nbytes, self.stream), "cuMemcpyDtoD")

    def launch(self, function, grid, block, shared_bytes: int, params: list) -> None:
        pointers = (ctypes.c_void_p * max(1, len(params)))(
            *[ctypes.addressof(p) for p in params])
        self._check(self.cu.cuLaunchKernel(function, *grid, *block, shared_bytes, self.stream,
                                           ctypes.addressof(pointers), 0), "cuLaunchKernel")
        # params live until the launch has copied them: cuLaunchKernel copies at the call

    def synchronize(self) -> None:
        self._check(self.cu.cuStreamSynchronize(self.stream), "cuStreamSynchronize")

    def stream_handle(self) -> int:
        return int(self.stream)

    def ffi_device_memory(self) -> tuple[int, int]:
        """The driver's own cuMemAlloc_v2 and cuMemFree_v2 (their signatures are what
        kiln_ffi_call_on_device takes), called in this thread's current context: the plan's."""
        import ctypes
        driver = ctypes.CDLL("libcuda.so.1")  # loaded already, by cuInit
        return (ctypes.cast(driver.cuMemAlloc_v2, ctypes.c_void_p).value,
                ctypes.cast(driver.cuMemFree_v2, ctypes.c_void_p).value)

    # -- command buffers: the stream's launches and copies captured as a CUDA graph -------
    can_capture = True

    def begin_capture(self) -> None:
        mode = self.cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        self._check(self.cu.cuStreamBeginCapture(self.stream, mode), "cuStreamBeginCapture")

    def end_capture(self):
        """The captured graph, instantiated: (graph, executable graph)."""
        graph = self._check(self.cu.cuStreamEndCapture(self.stream), "cuStreamEndCapture")
        return graph, self._check(self.cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")

    def launch_graph(self, graph) -> None:
        self._check(self.cu.cuGraphLaunch(graph[1], self.stream), "cuGraphLaunch")

    def release_graph(self, graph) -> None:
        self.synchronize()   # it may still run
        self._check(self.cu.cuGraphExecDestroy(graph[1]), "cuGraphExecDestroy")
        self._check(self.cu.cuGraphDestroy(graph[0]), "cuGraphDestroy")


def _name(cu, err) -> str:
    try:
        e, name = cu.cuGetErrorName(err)
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001
        return str(err)
