"""The trust boundary: what an input program may hold, and what the code Kiln emits may call.

Users run programs they did not write (exports downloaded with a model, HLO dumps from a bug
report). Such a program must never reach native code Kiln did not put there, so two checks
stand at the two ends of the compile:

* `check_input` (run on a program as soon as the compile paths have imported it, and as the
  first pass of the `verify` stage) admits only the dialects an XLA program can hold; no
  function declarations (a body-less `func.func @system` is how a program would name a libc
  function for the JIT to resolve); no public function that shadows a symbol Kiln's own code
  calls (private ones are renamed); no call of Kiln's internal `kiln.*` custom-call targets,
  whose configuration the runtime trusts; and only the attributes on Kiln's allowlist
  (input_allowlist.py): an op's own attributes, checked by its dialect's verifier, and the
  discardable metadata JAX, XLA and Kiln's front ends write. Names and strings must be UTF-8.
* `check_lowered` (run on the LLVM-dialect module just before the JIT) requires every external
  function to be one Kiln's passes emit: Kiln's runtime, the C math library, the memref
  allocator and the library symbols the codegen binds (BLAS). The ExecutionEngine would
  resolve any other name against the whole process, so this is what keeps a lowering bug or
  a scripted pipeline from opening that door. Every function's attributes must be ones Kiln's
  passes set (llvm_function_attributes.py; the GPU target checks its kernels the same way).
"""
from __future__ import annotations

import weakref

from torch_mlir import ir

from ..dialects import kiln as names
from ..errors import KilnError
from .input_allowlist import (CUSTOM_CALL, DYNAMIC_BROADCAST, DYNAMIC_BROADCAST_TARGET,
                              SPMD_MARKERS, check_op_attributes, check_value_attributes, is_a,
                              text)
from . import attribute_reader
from .ir_util import walk
from .llvm_function_attributes import check_function_attributes
from .type_allowlist import TypeChecker

# Dialects whose ops a user's program may hold (see docs/guides/trust.md).
# `interpreter` is the StableHLO reference interpreter's (run_parallel, probe): Kiln reports
# them with a clear error of its own instead of running them.
INPUT_DIALECTS = frozenset({"builtin", "func", "stablehlo", "chlo", "mhlo", "sdy", "check",
                            "interpreter"})


# Kiln's runtime library (runtime/*.c) as the generated code calls it.
RUNTIME_SYMBOLS = frozenset({
    "kiln_custom_call", "kiln_parallel_for", "kiln_check_interrupt",
    "kiln_runtime_check_failed",   # a run-time guard failed (lowering/bounds_guards.py)
    # bf16 and 8-bit matrix products (runtime/kiln_gemm.c)
    "kiln_gemm_bf16_f32", "kiln_gemm_i8_i32",
    "kiln_sgemv",   # large f32 matrix-vector products (runtime/kiln_gemv.c)
    "kiln_sgemm_small",   # f32 products with few rows (runtime/kiln_sgemm_small.c)
    # large f32/f64 products in pieces on Kiln's pool (runtime/kiln_gemm_pooled.c)
    "kiln_sgemm_pooled", "kiln_dgemm_pooled",
    "kiln_blas_set_threads",   # OpenBLAS on the calling thread only (runtime/kiln_parallel.c)
    "_mlir_memref_to_llvm_alloc", "_mlir_memref_to_llvm_free",
    "_mlir_memref_to_llvm_aligned_alloc",
    # Soft-float conversions compiler-rt would provide (runtime/kiln_runtime.c).
    "__truncdfhf2", "__truncdfbf2", "__truncsfhf2", "__truncsfbf2", "__extendhfsf2",
    "__gnu_h2f_ieee", "__gnu_f2h_ieee",
})

# The C library functions MLIR's lowerings call: libm (convert-math-to-libm, complex and
# float emulation) and the memory functions LLVM itself may call.
_LIBM = ("acos asin atan atan2 acosh asinh atanh cbrt ceil copysign cos cosh erf erfc exp exp2 "
         "expm1 fabs floor fma fmax fmin fmod hypot ldexp lgamma log log10 log1p log2 nextafter "
         "pow remainder rint round roundeven sin sinh sqrt tan tanh tgamma trunc cexp clog cpow "
         "csqrt csin ccos ctan casin cacos catan csinh ccosh ctanh casinh cacosh catanh cabs carg "
         "sincos").split()
LIBC_SYMBOLS = frozenset([name + suffix for name in _LIBM for suffix in ("", "f")]
                         + ["memcpy", "memmove", "memset", "malloc", "free", "aligned_alloc"])

# Names an input function may not take: they would shadow a symbol Kiln's code calls.
_RESERVED_PREFIXES = ("kiln_", "_mlir_", "__", "mlir_", "cblas_", "openblas_", "llvm.")

# Kiln's internal custom-call targets (kiln.collective.*, kiln.fft, kiln.spmd.*...): its
# lowerings make them after this check and the runtime trusts their backend_config.
INTERNAL_TARGET_PREFIX = names.PREFIX


# Modules check_input passed in this process: the compile paths check a program right after
# import, before Kiln reads its entry and metadata (driver/), and the `verify` stage then finds
# it done. (A live entry keeps its module alive, so no other module can take its place.)
_checked: weakref.WeakSet = weakref.WeakSet()


def check_input(module: ir.Module, library_symbols: frozenset[str] = frozenset()) -> None:
    """Reject anything an untrusted input could use to reach native code (see the module doc);
    drop the metadata attributes Kiln does not keep (input_allowlist.py)."""
    reserved = RUNTIME_SYMBOLS | LIBC_SYMBOLS | library_symbols
    attribute_reader.self_test(module.operation)  # the C API reads the bindings' objects
    shadowing, names_read, types = [], {}, TypeChecker()
    for op in _operations(module.operation):
        op_name = op.name
        if op_name.split(".", 1)[0] not in INPUT_DIALECTS or op_name in _BUILTIN_CASTS:
            raise KilnError(f"'{op_name}' is not allowed in an input program",
                            location=str(op.location),
                            hint="programs may hold only " + ", ".join(sorted(INPUT_DIALECTS - {"builtin"}))
                                 + " ops (see docs/guides/trust.md)")
        types.check(op)   # value types by allowlist (type_allowlist.py)
        places = _check_custom_call(op) if op_name == CUSTOM_CALL else ()
        check_op_attributes(op, op_name, places, names_read)
        if op_name == "func.func":
            check_value_attributes(op)
            if _check_function(op, reserved):
                shadowing.append(op)
    if not shadowing:
        return
    taken = {ir.StringAttr(f.attributes["sym_name"]).value for f in walk(module.operation)
             if f.name == "func.func"}
    for func in shadowing:
        old = ir.StringAttr(func.attributes["sym_name"]).value
        new = next(f"{old}_{n}" for n in range(1, len(taken) + 2) if f"{old}_{n}" not in taken)
        taken.add(new)
        ir.SymbolTable.replace_all_symbol_uses(old, new, module.operation)
        ir.SymbolTable.set_symbol_name(func, new)


def _operations(top: ir.Operation) -> list[ir.Operation]:
    """`top` and every op nested in it, in program order (MLIR's walk: faster than a
    Python recursion over regions and blocks)."""
    found = []

    def visit(op):
        found.append(op)
        return ir.WalkResult.ADVANCE
    top.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def check_imported(module: ir.Module, filename: str) -> None:
    """`check_input` on a program just imported (the compile paths call it before anything
    reads the program), its errors located in `filename`."""
    from ..diagnostics import mlir_errors
    with module.context, mlir_errors(filename, "cannot check the program"):
        check_input(module)
    _checked.add(module)


def check_unless_imported(module: ir.Module) -> None:
    """`check_input`, unless check_imported passed this module already (the `verify` stage of
    a compile: the program was checked when it was imported)."""
    if module not in _checked:
        check_input(module)


# `builtin.unrealized_conversion_cast` turns a tensor into any type (a pointer): only the
# module op of `builtin` is a program's.
_BUILTIN_CASTS = frozenset({"builtin.unrealized_conversion_cast"})


def _check_custom_call(op: ir.Operation) -> tuple[str, ...]:
    """Refuse a call of Kiln's internal targets; the places its attributes are checked at."""
    target = text(op.attributes["call_target_name"], op, "the custom-call target")
    if target.startswith(INTERNAL_TARGET_PREFIX):
        if target == DYNAMIC_BROADCAST_TARGET:
            _check_dynamic_broadcast(op)
            return (DYNAMIC_BROADCAST,)
        if target in SPMD_MARKERS:
            _check_spmd_marker(op, target)
            return (f"{CUSTOM_CALL} @{target}",)
        raise KilnError(f"custom call @{target} names one of Kiln's internal runtime targets",
                        location=str(op.location),
                        hint="`kiln.*` targets are made by Kiln's own lowerings (collectives, "
                             "FFTs); a program uses the StableHLO op instead")
    return (f"{CUSTOM_CALL} @{target}",)


def _check_dynamic_broadcast(op: ir.Operation) -> None:
    """The front end's form of collective_broadcast with a dynamic root (frontend/newer.py):
    the data operands, then an integer tensor of roots; results typed as the data; no
    backend_config (the lowering writes it, and the runtime trusts it)."""
    operands, results = list(op.operands), list(op.results)
    roots = operands[-1].type if operands else None
    well_formed = (
        "backend_config" not in op.attributes and len(results) >= 1
        and len(operands) == len(results) + 1
        and [str(o.type) for o in operands[:-1]] == [str(r.type) for r in results]
        and is_a(ir.RankedTensorType, roots)
        and is_a(ir.IntegerType, ir.RankedTensorType(roots).element_type))
    if not well_formed:
        raise KilnError(f"custom call @{DYNAMIC_BROADCAST_TARGET} is malformed",
                        location=str(op.location),
                        hint="write it as stablehlo.collective_broadcast with has_dynamic_root: "
                             "data operands, then an integer tensor of roots, one per operand; "
                             "results typed as the data")


def _check_spmd_marker(op: ir.Operation, target: str) -> None:
    """The JAX reader's shard_map bounds (dialects/sdy.py): one tensor in, one out, and the
    sharding (checked with the attributes); no backend_config."""
    if not (len(op.operands) == 1 and len(op.results) == 1 and "backend_config" not in
            op.attributes and names.SHARDING in op.attributes
            and is_a(ir.RankedTensorType, op.operands[0].type)
            and is_a(ir.RankedTensorType, op.results[0].type)):
        raise KilnError(f"custom call @{target} is malformed", location=str(op.location),
                        hint=f"Kiln's JAX reader writes it with one tensor operand, one result "
                             f"and a {names.SHARDING} attribute, for a shard_map body")


def _check_function(func: ir.Operation, reserved: frozenset[str]) -> bool:
    """Validate one function; True when it is private and must be renamed (a JAX program may
    well name a helper `exp`), since its name would shadow a symbol Kiln's code calls."""
    name = ir.StringAttr(func.attributes["sym_name"]).value
    if not func.regions[0].blocks:
        raise KilnError(f"function @{name} is declared without a body",
                        location=str(func.location),
                        hint="an input program may not declare external functions: it can call "
                             "only functions it defines, and custom calls registered with Kiln")
    shadows = name in reserved or name.startswith(_RESERVED_PREFIXES)
    public = "sym_visibility" not in func.attributes or \
        ir.StringAttr(func.attributes["sym_visibility"]).value == "public"
    if shadows and public:
        raise KilnError(f"public function @{name} would shadow a symbol of Kiln's runtime or the "
                        f"C library", location=str(func.location), hint="rename the function")
    return shadows


def check_lowered(module: ir.Module, library_symbols: frozenset[str] = frozenset()) -> None:
    """Before any code is linked: every external function of the LLVM-dialect module must be
    one Kiln's passes emit, and every function's attributes must be ones they set
    (llvm_function_attributes.py)."""
    allowed = RUNTIME_SYMBOLS | LIBC_SYMBOLS | library_symbols
    for op in module.body.operations:
        op = op.operation
        if op.name != "llvm.func":
            continue
        if not op.regions[0].blocks:
            name = ir.StringAttr(op.attributes["sym_name"]).value
            if name not in allowed:
                raise KilnError(f"the lowered program calls an external function @{name} that "
                                f"Kiln does not provide", location=str(op.location),
                                hint="internal error: a lowering declared an unknown symbol; "
                                     "please report it with the program")
        check_function_attributes(op)


def external_functions(module: ir.Module) -> list[str]:
    """The functions the LLVM-dialect module declares without defining: what its object code
    needs from the process that loads it."""
    return sorted(ir.StringAttr(op.operation.attributes["sym_name"]).value
                  for op in module.body.operations
                  if op.operation.name == "llvm.func" and not op.operation.regions[0].blocks)
