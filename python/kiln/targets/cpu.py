"""The CPU target: StableHLO -> linalg -> bufferized memrefs -> loops -> LLVM -> JIT."""
from __future__ import annotations

import numpy as np
from torch_mlir import ir
from torch_mlir.execution_engine import ExecutionEngine

from .. import native
from ..errors import KilnError
from ..lowering.entry import copy_repeated_results, emit_c_interface
from ..lowering import codegen, guards, legalize
from ..lowering.codegen.interrupts import insert_interrupt_checks
from ..lowering.trust import check_lowered
from ..lowering.verify import check_legalized
from ..pipeline import PyPass, Stage
from ..runtime.memref import pack_arguments
from . import register_target
from .base import Invoker, Target, common_stages

# 8-bit floats have no LLVM arithmetic; compute in f32 and round on store.
_EMULATED_FLOATS = "f8E4M3FN,f8E5M2,f8E4M3FNUZ,f8E5M2FNUZ,f8E4M3B11FNUZ,f8E4M3,f8E3M4,f8E8M0FNU,f4E2M1FN,f6E2M3FN,f6E3M2FN"


@register_target
class CpuTarget(Target):
    name = "cpu"

    def stages(self, entry: str | None) -> list[Stage]:
        return common_stages(entry) + [
            Stage("legalize", "StableHLO -> linalg/tensor/arith/math (XLA: HLO -> LLVM IR emitters)", [
                "func.func(stablehlo-legalize-quant-to-math)",
                "func.func(chlo-legalize-to-stablehlo)",
                *legalize.before_upstream(),
                "func.func(stablehlo-legalize-to-linalg)",
                *legalize.after_upstream(),
                "stablehlo-convert-to-signless",
                "canonicalize",
                PyPass("check-legalized", check_legalized),
            ]),
            Stage("fuse", "producer-consumer fusion of elementwise linalg ops (XLA: fusion)", [
                PyPass("protect-contractions", codegen.protect_contractions),
                "linalg-fuse-elementwise-ops",
                "canonicalize",
                "cse",
                PyPass("restore-contractions", codegen.restore_contractions),
            ]),
            Stage("bufferize", "tensors -> memrefs; results become caller-owned out-params "
                               "(XLA: buffer assignment)", [
                PyPass("emit-c-interface", lambda m: emit_c_interface(m, entry)),
                PyPass("copy-repeated-results", lambda m: copy_repeated_results(m, entry)),
                "one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops "
                "function-boundary-type-conversion=identity-layout-map}",
                "buffer-results-to-out-params{hoist-static-allocs modify-public-functions}",
                "buffer-deallocation-pipeline",
                "canonicalize",
            ]),
            Stage("codegen", "large products -> BLAS calls, big loop nests on both cores, "
                             "vectorizable math; linalg -> loops", [
                PyPass("blas-calls", codegen.blas_calls),
                PyPass("parallelize", codegen.parallelize),
                PyPass("approximate-math", codegen.approximate_math),
                PyPass("reassociate-reductions", codegen.reassociate_reductions),
                PyPass("copies-as-loops", guards.copies_as_loops),
                "convert-linalg-to-loops",
                PyPass("interrupt-checks", insert_interrupt_checks),  # Ctrl-C stops loops
            ]),
            Stage("lower", "everything -> LLVM dialect", [
                "convert-scf-to-cf",
                "expand-strided-metadata",
                "lower-affine",
                f"arith-emulate-unsupported-floats{{source-types={_EMULATED_FLOATS} target-type=f32}}",
                "convert-complex-to-standard",
                # temporaries come from Kiln's buffer pool (runtime/kiln_parallel.c)
                "finalize-memref-to-llvm{use-generic-functions=1}",
                "convert-math-to-llvm",
                "convert-math-to-libm",
                "convert-complex-to-llvm",
                "convert-arith-to-llvm",
                "convert-func-to-llvm",
                "convert-cf-to-llvm",
                "reconcile-unrealized-casts",
            ]),
        ]

    def load(self, module: ir.Module, entry: str) -> Invoker:
        libs = [str(p) for p in native.runtime_libraries()]
        library_symbols = codegen.jit_symbols()
        with module.context:
            check_lowered(module, frozenset(library_symbols))  # the trust boundary's far end
        try:
            engine = ExecutionEngine(module, opt_level=int(self.options.get("opt_level", 3)),
                                     shared_libs=libs)
        except RuntimeError as exc:
            raise KilnError(f"LLVM could not compile @{entry}: {exc}",
                            hint="an operation reached LLVM without a lowering; "
                                 "`kiln-opt FILE --stage lower` shows the IR") from None
        # Library functions the codegen passes call (BLAS), bound in this JIT only.
        for name, symbol in library_symbols.items():
            engine.raw_register_runtime(name, symbol)
        address = engine.raw_lookup("_mlir_ciface_" + entry)
        # Through the runtime's KilnInvoke, where a failing custom call stops the computation.
        from ..runtime.custom_call import invoke_entry

        def invoke(arrays: list[np.ndarray]) -> None:
            packed, keep_alive = pack_arguments(arrays)
            invoke_entry(address, packed)
            del keep_alive

        invoke.engine = engine  # the JITed code lives as long as the engine
        return invoke
