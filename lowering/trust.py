"""The trust boundary: what an input program may hold, and what the code Kiln emits may call.

Users run programs they did not write (exports downloaded with a model, HLO dumps from a bug
report). Such a program must never reach native code Kiln did not put there, so two checks
stand at the two ends of the compile:

* `check_input` (the first pass of the `verify` stage) admits only the dialects an XLA program
  can hold, no function declarations (a body-less `func.func @system` is how a program would
  name a libc function for the JIT to resolve), no public function that shadows a symbol
  Kiln's own code calls (private ones are renamed), and none of the `llvm.*` or Kiln-internal attributes that lowerings trust.
* `check_lowered` (run on the LLVM-dialect module just before the JIT) requires every external
  function to be one Kiln's passes emit: Kiln's runtime, the C math library, the memref
  allocator and the library symbols the codegen binds (BLAS). The ExecutionEngine would
  resolve any other name against the whole process, so this is what keeps a lowering bug or
  a scripted pipeline from opening that door.
"""
from __future__ import annotations


from torch_mlir import ir

from ..dialects import kiln as names
from ..errors import KilnError
from .ir_util import walk

# Dialects whose ops a user's program may hold (see the README's "Untrusted programs").
# `interpreter` is the StableHLO reference interpreter's (run_parallel, probe): Kiln reports
# them with a clear error of its own instead of running them.
INPUT_DIALECTS = frozenset({"builtin", "func", "stablehlo", "chlo", "mhlo", "sdy", "check",
                            "interpreter"})


# Kiln's runtime library (runtime/*.c) as the generated code calls it.
RUNTIME_SYMBOLS = frozenset({
    "kiln_custom_call", "kiln_parallel_for", "kiln_check_interrupt",
    # bf16 and 8-bit matrix products (runtime/kiln_gemm.c)
    "kiln_gemm_bf16_f32", "kiln_gemm_i8_i32",
    "kiln_sgemv",   # large f32 matrix-vector products (runtime/kiln_gemv.c)
    "kiln_sgemm_small",   # f32 products with few rows (runtime/kiln_sgemm_small.c)
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


def check_input(module: ir.Module, library_symbols: frozenset[str] = frozenset()) -> None:
    """Reject anything an untrusted input could use to reach native code (see the module doc)."""
    reserved = RUNTIME_SYMBOLS | LIBC_SYMBOLS | library_symbols
    shadowing = []
    for op in walk(module.operation):
        dialect = op.name.split(".", 1)[0]
        if dialect not in INPUT_DIALECTS:
            raise KilnError(f"'{op.name}' is not allowed in an input program",
                            location=str(op.location),
                            hint="programs may hold only " + ", ".join(sorted(INPUT_DIALECTS - {"builtin"}))
                                 + " ops (see the README's 'Untrusted programs')")
        _check_attributes(op)
        if op.name == "func.func" and _check_function(op, reserved):
            shadowing.append(op)
    taken = {ir.StringAttr(f.attributes["sym_name"]).value for f in walk(module.operation)
             if f.name == "func.func"}
    for func in shadowing:
        old = ir.StringAttr(func.attributes["sym_name"]).value
        new = next(f"{old}_{n}" for n in range(1, len(taken) + 2) if f"{old}_{n}" not in taken)
        taken.add(new)
        ir.SymbolTable.replace_all_symbol_uses(old, new, module.operation)
        ir.SymbolTable.set_symbol_name(func, new)


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
    for key in ("arg_attrs", "res_attrs"):
        if key in func.attributes:
            for entry in ir.ArrayAttr(func.attributes[key]):
                for named in ir.DictAttr(entry):
                    _check_attribute_name(named.name, func, f"{key} of @{name}")
    return shadows


def _check_attributes(op: ir.Operation) -> None:
    for name in op.attributes:  # the map iterates over attribute names
        _check_attribute_name(name, op, f"'{op.name}'")


def _check_attribute_name(name: str, op: ir.Operation, where: str) -> None:
    # `kiln.*` attributes Kiln's front ends write (HLO layouts and tuple trees, JAX calling
    # conventions) may come with an input; every other one is set by a lowering and trusted
    # by a later one (dialects/kiln.py lists both kinds).
    if name.startswith("llvm.") or (name.startswith(names.PREFIX)
                                    and not names.is_frontend_attribute(name)):
        raise KilnError(f"attribute '{name}' on {where} is not allowed in an input program",
                        location=str(op.location),
                        hint="`llvm.*` and Kiln's internal `kiln.*` attributes steer code "
                             "generation; remove it")


def check_lowered(module: ir.Module, library_symbols: frozenset[str] = frozenset()) -> None:
    """Every external function of the LLVM-dialect module must be one Kiln's passes emit."""
    allowed = RUNTIME_SYMBOLS | LIBC_SYMBOLS | library_symbols
    for op in module.body.operations:
        op = op.operation
        if op.name == "llvm.func" and not op.regions[0].blocks:
            name = ir.StringAttr(op.attributes["sym_name"]).value
            if name not in allowed:
                raise KilnError(f"the lowered program calls an external function @{name} that "
                                f"Kiln does not provide", location=str(op.location),
                                hint="internal error: a lowering declared an unknown symbol; "
                                     "please report it with the program")


def external_functions(module: ir.Module) -> list[str]:
    """The functions the LLVM-dialect module declares without defining: what its object code
    needs from the process that loads it."""
    return sorted(ir.StringAttr(op.operation.attributes["sym_name"]).value
                  for op in module.body.operations
                  if op.operation.name == "llvm.func" and not op.operation.regions[0].blocks)
