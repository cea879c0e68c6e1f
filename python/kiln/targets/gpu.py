"""The NVIDIA GPU target: StableHLO -> linalg -> buffers -> parallel loops -> gpu.launch ->
outlined kernels (NVVM) -> PTX -> cubin, with the host side kept as an execution plan.

The stages after the shared front half and the CPU target's `legalize` (the same StableHLO
lowerings, imported from targets/cpu.py):
- fuse: producer-consumer fusion of elementwise linalg ops (each fusion becomes a kernel);
- bufferize: one-shot bufferization, results as caller-provided out-parameters;
- gpu-map: linalg -> scf.parallel (the contiguous dimension first), full reductions in two
  phases, row reductions as one block per row (warp shuffles, shared memory:
  lowering/gpu/reductions.py), left-over serial work as one-thread loops, tiling by the
  block size, mapping to blocks/threads, gpu.launch, kernel outlining (lowering/gpu/loops.py);
- nvvm: the kernels' gpu.modules -> LLVM dialect with NVVM intrinsics;
- lower: the host function checked to be what the plan runs (lowering/gpu/host.py);
then `emit`: the plan (allocations, uploads, copies, launches, custom calls, host control
flow, command buffers) read off the host function,
the kernels' LLVM IR, PTX (llvmlite + libdevice, one module holding every kernel) and a cubin
from ptxas for `gpu_arch`.

Loading (`load`) needs no GPU until the first call: `kiln compile --target gpu` works on any
machine; a call without a CUDA driver or device fails with one line saying so. The
`gpu-emulator` target (targets/gpu_emulator.py) runs the same plan and kernel IR on the CPU.
"""
from __future__ import annotations

import base64
import json

from torch_mlir import ir

from ..errors import KilnError
from ..pipeline import Stage
from .base import COMMON_STAGES, CompiledCode, Invoker, Target

DEFAULT_ARCH = "sm_90"
BLOCK_SIZE = 256  # threads per block of an elementwise or row kernel (lowering/gpu/loops.py)


def _cpu_stage(name: str) -> Stage:
    from .cpu import CpuTarget
    return next(s for s in CpuTarget.pipeline if s.name == name)


def _legalize_stage() -> Stage:
    """The CPU target's `legalize` with, once JAX's op-like custom calls became ops, the GPU
    custom calls, collectives and host transfers made plan calls, and a check naming any
    custom call left (the GPU cannot run it)."""
    stage = _cpu_stage("legalize")
    steps = list(stage.steps)
    at = next(i for i, s in enumerate(steps) if str(s) == "kiln-lower-jax-custom-calls")
    steps.insert(at + 1, "kiln-gpu-check-supported")
    # sorts and scatters as parallel kernels, before the shared (serial) lowerings
    at = next(i for i, s in enumerate(steps) if str(s) == "kiln-lower-scatter")
    steps[at:at] = ["kiln-gpu-parallel-scatter", "kiln-gpu-bitonic-sort"]
    return Stage(stage.name, stage.doc, steps)


def gpu_stages(arch: str) -> list[Stage]:
    return [
        *COMMON_STAGES,
        _legalize_stage(),
        Stage("fuse", "producer-consumer fusion of elementwise linalg ops: one kernel each "
                      "(XLA: loop fusion)", [
            "kiln-gpu-dynamic-slices",        # offsets computed in the kernels
            "kiln-read-outputs-as-inputs",    # no output read: upstream fuses those wrongly
            "linalg-fuse-elementwise-ops",
            "kiln-gpu-multi-output-fusion",   # producers used elsewhere too: one kernel
            "canonicalize",
            "cse",
        ]),
        Stage("bufferize", "tensors -> device buffers; results become caller-owned "
                           "out-params (XLA: buffer assignment)", [
            "kiln-gpu-count-inputs",          # only results are copied back to the host
            "kiln-copy-repeated-results",
            "kiln-switches-as-ifs",           # upstream mis-analyses scf.index_switch
            "one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops "
            "function-boundary-type-conversion=identity-layout-map}",
            "kiln-if-chains-as-switches",     # ... and back: one host switch step, not a chain
            "canonicalize",
            "buffer-results-to-out-params{hoist-static-allocs modify-public-functions}",
            "canonicalize",
            "kiln-copies-as-loops",           # strided copies become kernels
        ]),
        Stage("gpu-map", "linalg -> parallel loops -> blocks and threads -> outlined kernels "
                         "(XLA: kernel emission)", [
            "kiln-gpu-libm-calls-as-math",    # kernels call libdevice, not the host's libm
            "symbol-dce",
            "linalg-generalize-named-ops",
            "kiln-gpu-order-dimensions",      # contiguous dimension on threadIdx.x
            "kiln-gpu-split-reductions",      # reductions to a scalar: two phases
            "kiln-gpu-tiled-products",        # contractions: 64x64 tiles, K staged in shared
            "kiln-gpu-block-reductions",      # rows: a block each, shuffles + shared memory
            "kiln-gpu-column-reductions",     # columns: 32 a block, partials in shared memory
            "kiln-gpu-tiled-transposes",      # moved contiguous dim: 32x33 tiles in shared
            "func.func(convert-linalg-to-parallel-loops)",
            # no buffer work left on the host but while/if/case steering kernels (the plan
            # runs them; lowering/gpu/control_flow.py)
            "kiln-gpu-serial-kernels",
            # constant bounds inside tiles (the launch's block size); no canonicalize here:
            # it would merge the tiles back into one loop
            f"func.func(scf-parallel-loop-tiling{{parallel-loop-tile-sizes={BLOCK_SIZE} "
            "no-min-max-bounds=true})",
            "sccp",
            "func.func(gpu-map-parallel-loops)",
            "func.func(convert-parallel-loops-to-gpu)",
            "kiln-gpu-sink-scalars",          # kernels compute their own scalars
            # ... and hold their constants: immediates in PTX (shuffle offsets, loop steps),
            # not kernel parameters
            "gpu-launch-sink-index-computations",
            "gpu-kernel-outlining",
            "kiln-gpu-annotate-launches",     # which buffers each launch reads and writes
            "lower-affine",
            "canonicalize",
            "cse",
        ]),
        Stage("nvvm", "kernels -> LLVM dialect with NVVM intrinsics, for " + arch, [
            f"nvvm-attach-target{{chip={arch}}}",
            "gpu.module(convert-scf-to-cf)",
            "gpu.module(expand-strided-metadata)",
            "gpu.module(lower-affine)",
            "gpu.module(convert-complex-to-standard)",
            "gpu.module(convert-gpu-to-nvvm)",
            "gpu.module(convert-complex-to-llvm)",
            "gpu.module(convert-math-to-llvm)",  # what has no libdevice function (ctpop)
            "gpu.module(convert-nvvm-to-llvm)",
            "gpu.module(reconcile-unrealized-casts)",
        ]),
        Stage("lower", "the host function checked against the execution plan (allocations, "
                       "constants, copies, launches)", [
            "kiln-gpu-check-kernels",         # every kernel op reached LLVM/NVVM
            "kiln-gpu-check-host",
        ]),
    ]


class GpuTarget(Target):
    """target="gpu": options gpu_arch (sm_80, sm_86, sm_89, sm_90; default sm_90)."""
    name = "gpu"
    # Printed by `kiln-opt FILE --target gpu --stage NAME` after the last pass stage.
    artifact_stages = ("llvm", "ptx", "plan")
    emits_cubin = True

    def __init__(self, **options):
        super().__init__(**options)
        from ..lowering.gpu.ptx import check_arch
        self.arch = check_arch(options.get("gpu_arch") or DEFAULT_ARCH)
        self.pipeline = gpu_stages(self.arch)

    # -- compiling -----------------------------------------------------------------------------
    def emit(self, module: ir.Module, entry: str) -> CompiledCode:
        return CompiledCode(json.dumps(self.bundle(module, entry)).encode(), entry, [])

    def bundle(self, module: ir.Module, entry: str, want: str = "cubin") -> dict:
        """What a compiled GPU program is: the plan, the kernels' LLVM IR and, for a real GPU,
        PTX and the cubin with ptxas's resource report."""
        from ..lowering.gpu import host, ptx
        with module.context:
            plan = host.read_plan(module, entry)
            kernels = ptx.kernel_names(module)
            llvm_ir = ptx.device_llvm_ir(module)
        bundle = {"format": "kiln-gpu-1", "arch": self.arch, "plan": plan, "kernels": kernels,
                  "llvm_ir": llvm_ir}
        if want in ("ptx", "cubin") and kernels:
            bundle["ptx"] = ptx.to_ptx(llvm_ir, self.arch, kernels)
        if want == "cubin" and self.emits_cubin and kernels:
            cubin, resources = ptx.assemble(bundle["ptx"], self.arch)
            bundle["cubin"] = base64.b64encode(cubin).decode()
            bundle["resources"] = [r.to_json() for r in resources]
        return bundle

    def artifact_text(self, exe, stage: str) -> str:
        """`kiln-opt --stage llvm|ptx|plan`: the kernels' LLVM IR, their PTX, or the plan."""
        from ..context import make_context
        ctx = make_context()
        with ctx:
            module = ir.Module.parse(exe.ir(self.pipeline[-1].name))
        bundle = self.bundle(module, exe.entry, want="ptx" if stage == "ptx" else "llvm")
        if stage == "plan":
            from ..runtime.gpu_plan import describe
            return describe(bundle)
        return bundle["ptx" if stage == "ptx" else "llvm_ir"]

    def gpu_plan(self, code: bytes) -> dict:
        """The execution plan a compiled GPU program holds (the driver reads it as its
        buffer assignment and thunk sequence: plan.from_gpu)."""
        return json.loads(code)["plan"]

    # -- loading -------------------------------------------------------------------------------
    def runtime(self, bundle: dict):
        """The device runtime a loaded program runs on (made at its first call)."""
        from ..runtime.cuda import CudaRuntime
        return CudaRuntime()

    def load(self, code: CompiledCode, call_sites: list, what: str) -> Invoker:
        if call_sites:
            raise KilnError(f"{what} calls custom-call targets, which the {self.name} target "
                            "cannot run yet", hint="use target='cpu'")
        from ..runtime.gpu_plan import PlanInvoker
        bundle = json.loads(code.code)
        return PlanInvoker(bundle, lambda: self.runtime(bundle), what)
