"""The CPU target: StableHLO -> linalg -> bufferized memrefs -> loops -> LLVM -> object code,
linked into the calling process (targets/objects.py)."""
from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import tempfile
import threading

import numpy as np
from torch_mlir import ir

from .. import environment
from .. import native
from ..dialects import kiln as names
from ..errors import KilnError
from ..pipeline import Stage
from ..runtime.memref import CallFrame
from . import objects
from .base import COMMON_STAGES, CompiledCode, Invoker, Target

# 8-bit floats have no LLVM arithmetic; compute in f32 and round on store.
_EMULATED_FLOATS = "f8E4M3FN,f8E5M2,f8E4M3FNUZ,f8E5M2FNUZ,f8E4M3B11FNUZ,f8E4M3,f8E3M4,f8E8M0FNU,f4E2M1FN,f6E2M3FN,f6E3M2FN"


class CpuTarget(Target):
    name = "cpu"

    # The CPU pipeline, in order. A step is a registered Kiln pass (`kiln-opt --list-passes`
    # prints each with its summary; `kiln-opt FILE --pass NAME` runs one alone) or upstream
    # pass-pipeline text. Each stage runs as one MLIR pass manager.
    pipeline = [
        *COMMON_STAGES,  # verify, optimize (base.py)
        Stage("legalize", "StableHLO -> linalg/tensor/arith/math (XLA: HLO -> LLVM IR emitters)", [
            "func.func(stablehlo-legalize-quant-to-math)",
            "func.func(chlo-legalize-to-stablehlo)",
            # Kiln's own lowerings (lowering/legalize/), for what the upstream pass below
            # lacks or gets wrong; most rewrite into scf loops or StableHLO it can lower.
            "kiln-lower-collectives",         # collectives -> Kiln's device runtime
            "kiln-fix-semantics",             # semantics: ops upstream lowers with another meaning
            # JAX's own custom calls (ApproxTopK, shape_assertion, placement annotations,
            # dynamic RNG): before `inline`, which folds ApproxTopK's comparator in
            "kiln-lower-jax-custom-calls",
            "func.func(stablehlo-legalize-composite-to-call)",  # control flow: composites
            "inline",                         # ... become calls, inlined like any call
            "kiln-lower-control-flow",        # while/if/case -> scf
            "kiln-lower-batch-norm",          # batch norm -> reductions + elementwise (fuses)
            "kiln-lower-rng-normal",          # rng: UNIFORM (floats, integers) and NORMAL
            "kiln-lower-scatter",             # data movement: scatter, sort, select_and_scatter
            "kiln-lower-top-k",               # sort + leading slices: O(n) top-k
            "kiln-lower-sort",
            "kiln-lower-select-and-scatter",
            "kiln-lower-cumulative-windows",  # cumsum & co: O(n) scans, not O(n^2) windows
            "kiln-widen-unsigned-slice-starts",
            "kiln-guard-run-time-shapes",     # run-time sizes/indices checked against the spec
            "kiln-push-slices-into-producers",  # slice(pad/concat): only the kept elements
            "kiln-widen-narrow-floats",       # numerics: 8/6/4-bit floats computed in f32
            "kiln-lower-fft",
            "kiln-lower-linalg-ops",          # cholesky, triangular_solve
            "kiln-lower-custom-calls",        # custom calls -> the C runtime's dispatcher
            "kiln-canonicalize-convolutions",  # any layout/groups/lhs_dilation -> NHWC/HWIO
            "kiln-fold-empty-values",         # zero-element slices: nothing to compute
            "kiln-fold-identity-ops",         # no-op reshapes (upstream crashes on 0-d unsigned)
            "func.func(stablehlo-legalize-to-linalg)",
            # After upstream: what its output still needs.
            "kiln-accurate-libm-calls",       # log1p/expm1 as libm calls
            "kiln-scalarize-0d-loops",        # no buffer per iteration in Kiln's loops
            "kiln-lower-narrow-float-casts",  # extf/truncf of narrow floats as integer code
            "stablehlo-convert-to-signless",
            "canonicalize",
            "kiln-check-legalized",           # name any op left over
        ]),
        Stage("fuse", "producer-consumer fusion of elementwise linalg ops (XLA: fusion)", [
            "kiln-protect-contractions",      # large products stay whole, for BLAS
            "kiln-read-outputs-as-inputs",    # no output read: upstream fuses those wrongly
            "linalg-fuse-elementwise-ops",
            "kiln-fuse-shared-elementwise",   # cheap producers with several users, duplicated
            "linalg-fuse-elementwise-ops",
            "kiln-fuse-shared-elementwise",   # ... and the loops fusion left dead
            "canonicalize",
            "cse",
            "kiln-restore-contractions",
            "kiln-update-carried-in-place",   # loops update carried tensors in place
        ]),
        Stage("bufferize", "tensors -> memrefs; results become caller-owned out-params "
                           "(XLA: buffer assignment)", [
            "kiln-emit-c-interface",
            "kiln-copy-repeated-results",
            "kiln-switches-as-ifs",           # upstream mis-analyses scf.index_switch
            "one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops "
            "function-boundary-type-conversion=identity-layout-map}",
            "kiln-if-chains-as-switches",     # ... and back, the IR the GPU target gets too
            "canonicalize",                   # loops that return their carried buffer as is
            "buffer-results-to-out-params{hoist-static-allocs modify-public-functions}",
            "buffer-deallocation-pipeline",
            "canonicalize",
            "kiln-check-buffer-sizes",        # the buffers lowering made (im2col...) fit memory
        ]),
        Stage("codegen", "large products -> BLAS calls, big loop nests on both cores, "
                         "vectorizable math; linalg -> loops", [
            "kiln-skip-empty-iterations",     # zero-element run-time shapes loop over nothing
            "kiln-blas-calls",
            # The loop strategy (lowering/codegen/: loop_order, reductions, parallel, tiling):
            "kiln-order-loops",               # innermost loops walk memory contiguously
            "kiln-fuse-rows",                 # row-wise chains: a block of rows at a time
            "kiln-split-reductions",          # whole-buffer reductions -> per-core partials
            # before kiln-parallelize: libm calls (which it will not outline) become code
            "kiln-approximate-math",
            "kiln-parallelize",               # outermost parallel loop over the cores
            "kiln-tile-transposes",           # transposes in cache-sized 2-D blocks
            "kiln-reassociate-reductions",
            "kiln-copies-as-loops",
            "kiln-reduction-loops",           # accumulators in registers, not memory
            "convert-linalg-to-loops",
            "kiln-hoist-invariant-loads",     # gathers: the index read once per row
            "kiln-interrupt-checks",          # Ctrl-C stops loops
            "kiln-loop-hints",                # LLVM: no copies of loops around long loops
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
            "kiln-dedupe-kernels",            # each distinct kernel compiled once
            "kiln-inline-entry-into-c-interface",  # no call with thousands of operands
        ]),
    ]

    def after_optimize(self, module: ir.Module) -> None:
        """Small programs are compiled at a lower LLVM level, tiny ones with LLVM's quick code
        generation too (targets/small_programs.py), unless the `opt_level` option says which."""
        from .small_programs import (OPT_LEVEL_ATTR, QUICK_CODEGEN_ATTR, SMALL_OPT_LEVEL,
                                     TINY_WORK, known_work)
        if "opt_level" in self.options:
            return
        found = known_work(module)
        if found is None:
            return
        with module.context:
            attributes = module.operation.attributes
            attributes[OPT_LEVEL_ATTR] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(64), SMALL_OPT_LEVEL)
            if found <= TINY_WORK:
                attributes[QUICK_CODEGEN_ATTR] = ir.UnitAttr.get()

    def opt_level(self, module: ir.Module) -> int:
        """LLVM's optimization level for `module`: the option, else what `after_optimize`
        decided, else O2 (O3's extra unrolling tripled LLVM's time on attention-sized
        programs and made no measured program faster: kiln bench --opt-level 3 compares)."""
        from .small_programs import OPT_LEVEL_ATTR
        if "opt_level" in self.options:
            return int(self.options["opt_level"])
        if OPT_LEVEL_ATTR in module.operation.attributes:
            return ir.IntegerAttr(module.operation.attributes[OPT_LEVEL_ATTR]).value
        return 2

    def quick_codegen(self, module: ir.Module) -> bool:
        """Whether LLVM's O0 code generation compiles `module` (targets/quick_codegen.py): for
        `opt_level=0`, as clang's -O0, and for the programs `after_optimize` found tiny.
        KILN_QUICK_CODEGEN=0 turns it off (to compare)."""
        from .small_programs import QUICK_CODEGEN_ATTR
        if environment.get("KILN_QUICK_CODEGEN") == "0":
            return False
        if "opt_level" in self.options:
            return int(self.options["opt_level"]) == 0
        return QUICK_CODEGEN_ATTR in module.operation.attributes

    def emit(self, module: ir.Module, entry: str) -> CompiledCode:
        """LLVM-compile the lowered module (in the compiling process: a worker, usually) into
        relocatable object code for this CPU."""
        # Imported here: loading code (`load`) needs none of the compiler.
        from torch_mlir.execution_engine import ExecutionEngine
        from ..lowering.trust import check_lowered, external_functions
        from ..runtime.libraries import jit_symbols
        from .llvm_options import apply as apply_llvm_options
        apply_llvm_options()
        library_symbols = jit_symbols()
        with module.context:
            check_lowered(module, frozenset(library_symbols))  # the trust boundary's far end
            externals = external_functions(module)
        if self.quick_codegen(module):
            from .quick_codegen import compile_object, packed_symbol
            code = compile_object(module, entry)
            if code is not None:
                return CompiledCode(code, packed_symbol(entry), externals)
        try:
            engine = ExecutionEngine(module, opt_level=self.opt_level(module),
                                     shared_libs=[str(p) for p in native.runtime_libraries()])
        except RuntimeError as exc:
            raise KilnError(f"LLVM could not compile @{entry}: {exc}",
                            hint="an operation reached LLVM without a lowering; "
                                 "`kiln-opt FILE --stage lower` shows the IR") from None
        # Library functions the codegen passes call (BLAS): bound so that the JIT links.
        for name, symbol in library_symbols.items():
            engine.raw_register_runtime(name, symbol)
        symbol = "_mlir__mlir_ciface_" + entry  # the packed form ExecutionEngine looks up
        engine.raw_lookup("_mlir_ciface_" + entry)  # compiles the module
        handle, path = tempfile.mkstemp(prefix="kiln-object-", suffix=".o", dir=_scratch_dir())
        try:
            with _signal_handlers_kept():  # LLVM's file writer installs its own handlers
                engine.dump_to_object_file(path)
            code = _read_back(handle, path)
        finally:
            os.close(handle)
            os.unlink(path)
        return CompiledCode(code, symbol, externals)

    def load(self, code: CompiledCode, call_sites: list, what: str) -> Invoker:
        """Link object code into this process and make its custom-call sites here."""
        from ..runtime.custom_call import SiteSpec, invoke_entry, make_site_for
        loaded = objects.load(code.code, code.externals, what)
        address = loaded.function(code.symbol)
        sites = []
        for index, spec in enumerate(call_sites):
            site = make_site_for(SiteSpec.from_json(spec))
            slot = loaded.global_variable(f"{names.CALL_SITE_SYMBOL}{index}")
            ctypes.c_int64.from_address(slot).value = site.address
            sites.append(site)

        frames = threading.local()  # each thread's CallFrame (memref.py)

        def invoke(arrays: list[np.ndarray]) -> None:
            # Through the runtime's KilnInvoke, where a failing custom call stops the run.
            frame = getattr(frames, "frame", None)
            if frame is None or not frame.fill(arrays):
                frame = frames.frame = CallFrame(arrays)
            invoke_entry(address, frame.packed)

        invoke.code = loaded  # the code lives as long as the invoker
        invoke.address = address  # for callers in C (driver/fast_call.py: native_plan)
        invoke.sites = sites
        return invoke


def _read_back(handle: int, path: str) -> bytes:
    """The object code LLVM wrote to `path`, read through the descriptor of the file made
    for it: the scratch directory may be shared (/dev/shm), and code is only ever read from
    the file this process created, never from whatever has that name now."""
    if os.stat(path, follow_symlinks=False).st_ino != os.fstat(handle).st_ino:
        raise KilnError(f"the object file {path} was replaced while LLVM wrote it",
                        hint="another process changed Kiln's scratch files; compile again")
    with os.fdopen(os.dup(handle), "rb") as f:
        f.seek(0)
        return f.read()


@functools.lru_cache(maxsize=None)
def _scratch_dir() -> str | None:
    """Where the object file passes through (the bindings only write it to a file): memory
    when the system has it. On this VM a write to /tmp's disk took 0.3-8 ms per compile, one
    to /dev/shm 0.03 ms. None: the default temporary directory."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


_signals_lock = threading.Lock()


@contextlib.contextmanager
def _signal_handlers_kept():
    """Run the body, then put back every signal disposition it changed (runtime/kiln_runtime.c:
    LLVM's signal handlers must not outlive a compile in the caller's process)."""
    from ..runtime.custom_call import runtime
    lib = runtime()
    with _signals_lock:
        lib.KilnSaveSignalHandlers()
        try:
            yield
        finally:
            lib.KilnRestoreSignalHandlers()
