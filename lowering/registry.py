"""Kiln's pass registry: every Kiln pass under a `kiln-...` name, with a one-line summary and
the function that runs it, like MLIR's registered passes.

All registrations are in `_register_kiln_passes` below, which imports the lowering modules:
this is the one place that knows them. Targets list passes by these names (targets/cpu.py),
`kiln-opt --pass NAME` and `--pass-pipeline` run them alone, and `Pipeline`
(lowering/scripting.py) scripts them from Python.

Every pass runs on any valid module and does nothing when it finds nothing to do. A check
(`KilnPass.check`: kiln-validate, kiln-check-legalized...) never changes the module: it
reports, at its location, the first op that breaks its rule (StableHLO left after
legalization, say), so it refuses a valid module of an earlier or later stage. Passes
that work on the entry function take it as an option (`kiln-outline-checks{entry=f}`); by
default the entry is `main`, else the only public function, and a module with no function
definition is left alone.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Callable

from torch_mlir import ir, passmanager

from ..errors import KilnError
from ..pipeline import PyPass, Step
from . import call_bounds  # noqa: F401  (bounds inlining before any pipeline that inlines)

PREFIX = "kiln-"


@dataclass(frozen=True)
class KilnPass:
    """A registered pass: `function(module)`, or `function(module, entry)` when it works on
    the entry function (`takes_entry`)."""
    name: str
    summary: str
    function: Callable[..., None]
    takes_entry: bool = False
    # The ops it rewrites (pipeline.PyPass.applies_to); None: it always runs.
    applies_to: frozenset[str] | None = None
    # A check: it only reads the module, and raises a located KilnError where its rule fails.
    check: bool = False

    def bind(self, entry: str | None = None) -> PyPass:
        """This pass as a pipeline step, on `entry` (None: the default entry)."""
        if not self.takes_entry:
            return PyPass(self.name, self.function, self.summary, applies_to=self.applies_to)

        def run(module: ir.Module) -> None:
            if _has_entry(module, entry):
                self.function(module, entry)
        label = self.name if entry is None else f"{self.name}{{entry={entry}}}"
        return PyPass(label, run, self.summary, applies_to=self.applies_to)


_PASSES: dict[str, KilnPass] = {}
_kiln_passes_registered = False


def register(name: str, summary: str, function: Callable[..., None], *,
             takes_entry: bool = False, applies_to=None, check: bool = False) -> KilnPass:
    """Register `function(module)` as pass `name`, for kiln-opt and `Pipeline` (a user's own
    passes too; they follow Kiln's in `passes()`). `applies_to`: the op names (or dialect
    prefixes such as "stablehlo.") it rewrites; a module with none of them skips the pass.
    `check`: it only reads the module and reports where a rule fails (KilnPass.check)."""
    _ensure_registered()
    return _add(name, summary, function, takes_entry, applies_to, check)


def _add(name: str, summary: str, function: Callable[..., None], takes_entry: bool,
         applies_to=None, check: bool = False) -> KilnPass:
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
        raise KilnError(f"bad pass name '{name}'", hint="pass names are lowercase words "
                        "joined by '-', e.g. kiln-lower-sort")
    if name in _PASSES:
        raise KilnError(f"pass '{name}' is registered twice", hint="choose another name")
    if applies_to is None:  # a pattern pass knows its root ops (patterns.pattern_pass)
        applies_to = getattr(function, "applies_to", None)
    registered = KilnPass(name, summary, function, takes_entry,
                          None if applies_to is None else frozenset(applies_to), check)
    _PASSES[name] = registered
    return registered


def passes() -> list[KilnPass]:
    """Every registered pass, in the order of the CPU pipeline."""
    _ensure_registered()
    return list(_PASSES.values())


def get(name: str) -> KilnPass:
    _ensure_registered()
    if name not in _PASSES:
        raise unknown_pass(name)
    return _PASSES[name]


def is_registered(name: str) -> bool:
    _ensure_registered()
    return name in _PASSES


def unknown_pass(name: str, detail: str = "", where: str | None = None) -> KilnError:
    _ensure_registered()
    close = difflib.get_close_matches(name, list(_PASSES), n=3, cutoff=0.5)
    if not close and not name.startswith(PREFIX):
        close = difflib.get_close_matches(PREFIX + name, list(_PASSES), n=3, cutoff=0.6)
    hint = ("did you mean " + ", ".join(close) + "? " if close else "") + \
        "`kiln-opt --list-passes` lists Kiln's passes"
    return KilnError(f"unknown pass '{name}'" + (f": {detail}" if detail else ""),
                     location=where, hint=hint)


# -- steps: pipeline elements resolved against the registry -------------------------------------
_ELEMENT = re.compile(r"^([A-Za-z0-9_.-]+)(?:\{(.*)\})?$", re.S)


def resolve(element: str, entry: str | None = None, where: str | None = None) -> Step:
    """A pipeline element as a step: a registered name (with optional `{entry=NAME}`) becomes
    the Kiln pass, anything else stays upstream pass-pipeline text. `where` locates errors."""
    match = _ELEMENT.match(element.strip())
    if not match or not is_registered(match.group(1)):
        if match and match.group(1).startswith(PREFIX):
            raise unknown_pass(match.group(1), where=where)
        return element.strip()
    registered = get(match.group(1))
    options = _options(match.group(2) or "", registered, where)
    return registered.bind(options.get("entry", entry))


def resolve_steps(elements: list[str], entry: str | None = None,
                  where: str | None = None) -> list[Step]:
    return [resolve(e, entry, where) for e in elements]


def _options(text: str, registered: KilnPass, where: str | None) -> dict[str, str]:
    options = {}
    for item in text.split():
        key, _, value = item.partition("=")
        if key != "entry" or not registered.takes_entry or not value:
            accepted = "{entry=NAME}" if registered.takes_entry else "no options"
            raise KilnError(f"pass '{registered.name}' has no option '{item}'",
                            location=where, hint=f"it takes {accepted}")
        options[key] = value
    return options


def split_pipeline(text: str, where: str = "pass pipeline") -> list[str]:
    """The top-level elements of a textual pipeline, `builtin.module(...)` unwrapped:
    'builtin.module(a,b{x=1 y=2},func.func(c,d))' -> ['a', 'b{x=1 y=2}', 'func.func(c,d)']."""
    text = text.strip()
    inner = re.fullmatch(r"builtin\.module\((.*)\)", text, re.S)
    if inner:
        text = inner.group(1)
    elements, depth, current = [], 0, []
    for char in text:
        if char in "({":
            depth += 1
        elif char in ")}":
            depth -= 1
            if depth < 0:
                raise KilnError(f"unbalanced ')' or '}}' in '{text}'", location=where)
        if char == "," and depth == 0:
            elements.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    if depth:
        raise KilnError(f"unbalanced '(' or '{{' in '{text}'", location=where)
    elements.append("".join(current).strip())
    if any(not e for e in elements):
        raise KilnError(f"empty element in '{text}'", location=where,
                        hint="separate passes with single commas")
    return elements


def parse_pipeline(text: str, context: ir.Context, entry: str | None = None,
                   where: str = "pass pipeline") -> list[Step]:
    """Steps for a textual pipeline mixing Kiln names and upstream passes. Upstream elements
    are checked here, so that an unknown name is an error naming close Kiln passes."""
    steps = resolve_steps(split_pipeline(text, where), entry, where)
    for step in steps:
        if isinstance(step, str):
            check_upstream(step, context, where)
    return steps


def check_upstream(element: str, context: ir.Context, where: str = "pass pipeline") -> None:
    """Raise a located KilnError (naming close Kiln passes for an unknown name) if MLIR
    cannot parse the upstream pipeline element `element`."""
    nested = re.search(r"\(.*\b(kiln-[a-z0-9-]+)", element, re.S)
    if nested and is_registered(nested.group(1)):
        raise KilnError(f"'{nested.group(1)}' is nested in '{element}'", location=where,
                        hint="Kiln's passes run on the whole module: list them at the top level")
    try:
        with context:
            passmanager.PassManager("builtin.module").add(element)
    except ValueError as exc:
        message = str(exc).splitlines()[0].split("error: ")[-1]
        name = _ELEMENT.match(element)
        if "does not refer to a registered pass" in message:
            raise unknown_pass(name.group(1) if name else element, message, where) from None
        raise KilnError(f"cannot parse pass '{element}': {message}", location=where,
                        hint="upstream passes are written as in mlir-opt's --pass-pipeline"
                        ) from None


# -- the registrations ----------------------------------------------------------------------------
def _has_entry(module: ir.Module, entry: str | None) -> bool:
    """Whether an entry-function pass has a function to work on (an explicitly named entry
    that is missing is the user's error, which the pass reports)."""
    from .ir_util import find_entry, functions
    if entry is not None:
        return True
    if not any(len(f.regions[0].blocks) for f in functions(module)):
        return False
    # The default entry (main, else the only public function; ambiguity is an error with a
    # hint) must have a body too.
    return len(find_entry(module, None).regions[0].blocks) > 0


def _fold_tuples_everywhere(module: ir.Module) -> None:
    from .ir_util import functions
    from .tuples import fold_tuples
    for func in functions(module):
        fold_tuples(func)


def register_all() -> None:
    """Import and register every Kiln pass now, not at the first compile: a process that forks
    children to compile (kiln conformance) pays for the imports once instead of in each."""
    _ensure_registered()


def _ensure_registered() -> None:
    global _kiln_passes_registered
    if not _kiln_passes_registered:
        _kiln_passes_registered = True
        _register_kiln_passes()


def _register_kiln_passes() -> None:
    """Every Kiln pass, in the order the CPU pipeline runs them."""
    from . import (checks, dynamic_results, entry, fusion, guards, in_place, layouts,
                   parallel_outputs, tuples, verify)
    from .codegen import blas, fastmath, interrupts, parallel
    from .codegen import invariant_loads, loop_hints
    from .legalize.convolutions import canonicalize_convolutions
    from .codegen import loop_order, reductions, rows, tiling
    from .legalize import (control_flow, custom_calls, fft, floats, jax_targets, linalg_ops, rng,
                           scalarize, scans, scatter, semantics, slicing, sort, top_k,
                           windows)
    def register(name, summary, function, takes_entry=False, applies_to=None, check=False):
        _add(name, summary, function, takes_entry, applies_to, check)

    on_entry = {"takes_entry": True}
    # verify
    register("kiln-validate", "MLIR's verifier plus Kiln's input checks: only XLA dialects, "
             "no patterns known to crash MLIR", verify.validate_module, check=True)
    from . import size_limits
    register("kiln-check-buffer-sizes", "every tensor/memref type's byte size fits in 64 bits "
             "and KILN_MAX_BUFFER_BYTES (default: physical memory), else a located error",
             size_limits.check_buffer_sizes, check=True)
    # partition (seed 002's sharding passes)
    from . import spmd
    register("kiln-spmd-partition", "a global program with shardings (kiln.sharding, "
             "mhlo.sharding, shard_map markers) -> the program of one device: shards in and out, "
             "gathers and slices where whole values are needed", spmd.partition, **on_entry)
    # layout (XLA's layout assignment and layout normalization)
    register("kiln-layout-assignment", "decide each entry parameter's and result's layout "
             "(kiln.layout or mhlo.layout_mode, else the default) and check it",
             layouts.assign_layouts, **on_entry)
    register("kiln-layout-normalization", "entry parameters/results with a non-default "
             "layout become their physical arrays; the body works row-major",
             layouts.normalize_layouts, **on_entry)
    # optimize
    register("kiln-flatten-entry-tuples", "tuple arguments and results of the entry become "
             "flat lists of tensors", tuples.flatten_entry_tuples, **on_entry)
    register("kiln-make-entry-only-public", "make every function but the entry private, so "
             "inlining and symbol-dce fold the program into it",
             entry.make_entry_only_public, **on_entry)
    register("kiln-outline-checks", "check.* ops and check custom calls become extra entry "
             "results, listed in the entry's kiln.checks", checks.outline_checks, **on_entry)
    register("kiln-fold-tuples", "get_tuple_element of a tuple folds to the operand; dead "
             "tuples are dropped", _fold_tuples_everywhere)
    from . import bounded
    register("kiln-pad-bounded-dims", "bounded dynamic dimensions (f32[<=N]) computed at their "
             "bound, with their sizes and masks (XLA's dynamic padding)",
             bounded.pad_bounded_dims, applies_to={"stablehlo.set_dimension_size"}, **on_entry)
    register("kiln-fold-dynamic-top-k", "stablehlo.dynamic_top_k custom calls with a constant "
             "k -> a static top-k (stable sort, slice)", dynamic_results.fold_dynamic_top_k)
    register("kiln-fold-dynamic-reduce-window", "stablehlo.dynamic_reduce_window custom calls "
             "with constant windows -> stablehlo.reduce_window",
             dynamic_results.fold_dynamic_reduce_window)
    register("kiln-refine-entry-results", "the entry returns each result in its most static "
             "type (through tensor.casts), its signature updated",
             dynamic_results.refine_entry_results, **on_entry)
    register("kiln-dedupe-results", "return each distinct value of the entry once, recording "
             "the copies in kiln.result_sources", entry.dedupe_results, **on_entry)
    # legalize, before upstream stablehlo-legalize-to-linalg
    from .legalize import collectives
    register("kiln-lower-collectives", "collectives, replica/partition ids, send/recv and "
             "infeed/outfeed -> calls of Kiln's collective runtime (kiln.collective.*)",
             collectives.lower_collectives)
    register("kiln-fix-semantics", "rewrite ops upstream lowers with the wrong meaning (i1 "
             "add, saturating float->int convert, complex cbrt...)", semantics.fix_semantics)
    register("kiln-lower-jax-custom-calls", "JAX's op-like custom calls -> StableHLO: "
             "ApproxTopK (exact, a sort), dynamic_rng_bit_generator, device placement and "
             "sharding annotations (identity), constant shape_assertions; MHLO's mhlo.erf, "
             "mhlo.topk... (torch_xla, TensorFlow) -> the ops they stand for",
             jax_targets.lower_jax_custom_calls)
    register("kiln-lower-control-flow", "stablehlo.while/if/case -> scf; "
             "optimization_barrier -> its operands", control_flow.lower_control_flow)
    from .legalize import batch_norm
    register("kiln-lower-batch-norm", "stablehlo.batch_norm_inference/training/grad -> "
             "reductions, broadcasts and elementwise ops that fuse (XLA's BatchNormExpander)",
             batch_norm.lower_batch_norm)
    register("kiln-lower-rng-normal", "stablehlo.rng (UNIFORM on floats and integers, NORMAL) "
             "-> a hashed counter in StableHLO", rng.lower_rng)
    register("kiln-lower-scatter", "stablehlo.scatter -> scf loops over tensors",
             scatter.lower_scatters)
    register("kiln-lower-top-k", "stablehlo.sort read only through leading slices (top_k, "
             "approx_max_k) -> an O(n) selection of the first k in scf loops",
             top_k.lower_top_k, applies_to={"stablehlo.sort"})
    register("kiln-lower-sort", "stablehlo.sort -> a stable merge sort in scf loops",
             sort.lower_sorts)
    register("kiln-lower-select-and-scatter", "stablehlo.select_and_scatter -> scf loops",
             windows.lower_select_and_scatters)
    register("kiln-lower-cumulative-windows", "cumulative stablehlo.reduce_window (cumsum, "
             "cumprod, cummax...) -> a linear scan", scans.lower_cumulative_windows)
    register("kiln-widen-unsigned-slice-starts", "clamp unsigned dynamic_slice / "
             "dynamic_update_slice starts and widen them to i64", slicing.widen_unsigned_starts,
             applies_to={"stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice",
                         "stablehlo.gather"})
    from . import bounds_guards
    register("kiln-guard-run-time-shapes", "check the sizes, indices and strides a program "
             "computes at run time (real_dynamic_slice, dynamic_iota...) against the spec: a "
             "violation stops the call with a located error", bounds_guards.guard_run_time_shapes,
             applies_to=bounds_guards.GUARDED_OPS)
    register("kiln-push-slices-into-producers", "slice(pad) / slice(concatenate) -> pad / "
             "concatenate of slices: move only the kept elements",
             slicing.push_slices_into_producers, applies_to={"stablehlo.slice"})
    register("kiln-widen-narrow-floats", "compute on 8/6/4-bit floats in f32, rounding results "
             "back", floats.widen_narrow_floats)
    register("kiln-lower-fft", "stablehlo.fft -> real StableHLO matrix products",
             fft.lower_fft)
    register("kiln-lower-linalg-ops", "stablehlo.cholesky and triangular_solve -> StableHLO "
             "loops", linalg_ops.lower_linalg_ops)
    register("kiln-canonicalize-convolutions", "f32/f64 convolutions in any layout, with "
             "groups, padding or input dilation -> NHWC/HWIO ones upstream lowers to the fast "
             "op (transposes, per-group splits, polyphase for lhs_dilation)",
             canonicalize_convolutions)
    register("kiln-lower-custom-calls", "stablehlo.custom_call -> a call of the runtime's "
             "dispatcher", custom_calls.lower_custom_calls)
    from . import identity_ops
    register("kiln-fold-identity-ops", "reshape/convert/transpose/broadcast_in_dim that change "
             "nothing, and dynamic slices and updates of the whole operand -> their operand "
             "(upstream crashes on a 0-d unsigned identity reshape and a 0-d dynamic_slice)",
             identity_ops.fold_identity_ops,
             applies_to=frozenset(identity_ops.IDENTITY_FOLDABLE) |
             frozenset(identity_ops.WHOLE_WINDOW))
    from . import empty_values
    register("kiln-fold-empty-values", "pure ops with zero-element results -> dense<> "
             "constants; reduces, pads and reduce_windows over empty operands -> their init or "
             "padding values (upstream rejects an empty slice that starts at the end)",
             empty_values.fold_empty_values,
             applies_to=frozenset(empty_values.EMPTY_FOLDABLE | empty_values.PURE))
    # legalize, after upstream
    register("kiln-accurate-libm-calls", "math.log1p/expm1 -> libm calls (LLVM's log(1 + x) "
             "loses every digit for small x)", semantics.accurate_libm_calls,
             applies_to={"math.log1p", "math.expm1"})
    register("kiln-scalarize-0d-loops", "0-d linalg.generics inside Kiln's loops -> scalar "
             "code (no buffer per iteration)", scalarize.scalarize)
    register("kiln-lower-narrow-float-casts", "extf/truncf of 8/6/4-bit floats, and f32 -> bf16 "
             "truncf, -> integer code",
             floats.lower_narrow_float_casts, applies_to={"arith.extf", "arith.truncf"})
    register("kiln-check-legalized", "fail, naming the op, if any StableHLO/CHLO/check op "
             "remains", verify.check_legalized, check=True)
    # fuse
    register("kiln-protect-contractions", "move large f32/f64 contractions out of reach of "
             "elementwise fusion (bf16/f16/integer ones widened to f32/f64 first, exactly)",
             blas.protect_contractions)
    register("kiln-read-outputs-as-inputs", "all-parallel generics read what they read from "
             "their outputs as inputs (fill values as scalars), so that upstream fusion cannot "
             "add into one element from several iterations", parallel_outputs.read_outputs_as_inputs)
    register("kiln-fuse-shared-elementwise", "duplicate cheap elementwise producers with "
             "several users into each all-parallel consumer (XLA's fusion does too)",
             fusion.fuse_shared_elementwise)
    register("kiln-restore-contractions", "inline the contractions kiln-protect-contractions "
             "moved back into place", blas.restore_contractions)
    register("kiln-update-carried-in-place", "elementwise ops a loop yields write into the "
             "carried tensor (one buffer a loop, no copy an iteration)",
             in_place.update_carried_in_place)
    # bufferize
    register("kiln-emit-c-interface", "give the entry a C interface and read-only arguments",
             entry.emit_c_interface, **on_entry)
    register("kiln-copy-repeated-results", "return a copy where the entry returns one value "
             "twice", entry.copy_repeated_results, **on_entry)
    from . import switches_as_ifs
    register("kiln-switches-as-ifs", "scf.index_switch ops with tensor results -> scf.if "
             "chains, which One-Shot Bufferize analyses correctly",
             switches_as_ifs.switches_as_ifs, applies_to=frozenset({"scf.index_switch"}))
    from . import if_chains_as_switches
    register("kiln-if-chains-as-switches", "after bufferization, the scf.if chains "
             "kiln-switches-as-ifs made -> scf.index_switch again (one GPU plan step)",
             if_chains_as_switches.if_chains_as_switches, applies_to=frozenset({"scf.if"}))
    # codegen
    from .codegen import empty_iterations
    register("kiln-skip-empty-iterations", "linalg ops and copies over run-time shapes -> "
             "under scf.if their iteration space is non-empty (no loop over [2^62, 0])",
             empty_iterations.skip_empty_iterations,
             applies_to=frozenset({"linalg.", "memref.copy"}))
    register("kiln-blas-calls", "large f32/f64 matrix products (complex too) and convolutions "
             "-> BLAS gemm/gemv calls", blas.blas_calls)
    register("kiln-order-loops", "permute linalg.generic dimensions so the innermost loop "
             "walks memory contiguously", loop_order.order_loops)
    register("kiln-fuse-rows", "runs of row-wise linalg ops (softmax, norms) -> one loop "
             "over blocks of rows, each block through every op while in cache", rows.fuse_rows)
    register("kiln-split-reductions", "large full reductions -> per-chunk partials on all "
             "cores, then one combine", reductions.split_reductions)
    register("kiln-parallelize", "large linalg.generics -> kiln_parallel_for over their "
             "outermost parallel loop, on all cores", parallel.parallelize)
    register("kiln-tile-transposes", "large transposing linalg.generics -> 2-D tiles, "
             "so reads and writes both stay in cache", tiling.tile_transposes)
    register("kiln-approximate-math", "f32 exp/log/tanh/sin/cos/tan/log1p and f64 "
             "exp/log -> vectorizable polynomial approximations", fastmath.approximate_math)
    register("kiln-reassociate-reductions", "mark float reductions reassoc so LLVM can "
             "vectorize them", fastmath.reassociate_reductions)
    register("kiln-copies-as-loops", "memref.copy between strided views -> linalg.copy",
             guards.copies_as_loops, applies_to={"memref.copy"})
    register("kiln-reduction-loops", "linalg reductions with innermost reduction loops -> "
             "scf loops carrying the accumulators in registers", reductions.reduction_loops)
    register("kiln-hoist-invariant-loads", "loads of read-only buffers (marked by "
             "kiln-parallelize) out of loops they do not vary in",
             invariant_loads.hoist_invariant_loads)
    register("kiln-interrupt-checks", "poll for Ctrl-C at the top of while loops and outer "
             "for loops", interrupts.insert_interrupt_checks)
    register("kiln-loop-hints", "scf.for loops with long loops inside: LLVM does not unroll "
             "them (copies of vectorized loops cost LLVM time and buy nothing)",
             loop_hints.annotate_loops)
    from .codegen import c_interface, dedupe_kernels
    register("kiln-dedupe-kernels", "internal functions with the same code (outlined "
             "parallel loop bodies, gemm calls of repeated blocks) -> one, compiled once",
             dedupe_kernels.run)
    register("kiln-inline-entry-into-c-interface", "the entry becomes internal and "
             "always-inline: LLVM folds it into its C-interface wrapper (no call with an "
             "operand per descriptor field)", c_interface.inline_entry_into_c_interface)
    # the GPU target's passes (lowering/gpu/)
    from .gpu import register_passes as register_gpu_passes
    register_gpu_passes(register)
