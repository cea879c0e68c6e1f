"""target="gpu-emulator": the GPU target's plan and kernels, run on the CPU.

The pipeline is the GPU target's, to the same kernels' LLVM IR (what NVPTX receives); no
PTX or cubin is made. Loading retargets that IR to the host and JIT-compiles it, and the
plan runs through the emulator's device runtime (runtime/gpu_emulator.py): device memory
is host memory, a launch runs every thread of its grid. So everything but the NVPTX back
end and the hardware is exercised on a machine without a GPU.
"""
from __future__ import annotations

from .gpu import GpuTarget


class GpuEmulatorTarget(GpuTarget):
    name = "gpu-emulator"
    emits_cubin = False

    def bundle(self, module, entry: str, want: str = "llvm") -> dict:
        return super().bundle(module, entry, want="ptx" if want == "ptx" else "llvm")

    def runtime(self, bundle: dict):
        from ..runtime.gpu_emulator import EmulatorRuntime
        return EmulatorRuntime()
