"""Compile orchestration: one specialisation of the entry through the target's stages.

The target says which stages run and how the lowered module is loaded; this module decides
what is read from the IR between them (the signature after checks are outlined, the checks,
which result is which) and what a compiled specialisation keeps.
"""
from __future__ import annotations

import io
import time
from dataclasses import dataclass, field
from typing import Callable

from torch_mlir import ir

from ..context import make_context
from ..errors import KilnError
from ..frontend.convention import CallingConvention
from ..lowering.checks import read_checks
from ..lowering.entry import read_result_sources
from ..lowering.ir_util import find_entry, function_type, symbol_name
from ..lowering.legalize.custom_calls import read_sites
from ..targets.objects import host_cpu
from ..dumping import DumpWriter, program_name
from ..pipeline import StageTiming, run_stages
from ..runtime.dtypes import SUB_BYTE_BITS
from ..runtime.memref import TensorSpec
from ..targets.base import Invoker, Target
from . import plan
from .artifact import Artifact, kiln_build
from .specialize import specialize_to


def tensor_spec(t: ir.Type, what: str) -> TensorSpec:
    try:
        ranked = ir.RankedTensorType(t)
    except ValueError:
        raise KilnError(f"{what} has type {t}, which Kiln cannot pass yet",
                        hint="entry parameters and results must be ranked tensors") from None
    shape = tuple(None if ir.ShapedType.is_dynamic_size(d) else d for d in ranked.shape)
    return TensorSpec(shape, str(ranked.element_type))


def signature(module: ir.Module, entry: str | None) -> tuple[str, list[TensorSpec], list[TensorSpec]]:
    """(entry name, parameter specs, result specs) of `module`'s entry function."""
    func = find_entry(module, entry)
    ftype = function_type(func)
    name = symbol_name(func)
    args = [tensor_spec(t, f"argument {i} of @{name}") for i, t in enumerate(ftype.inputs)]
    results = [tensor_spec(t, f"result {i} of @{name}") for i, t in enumerate(ftype.results)]
    return name, args, results


@dataclass
class Compiled:
    """One compiled specialization of the entry function, loaded in this process."""
    invoke: Invoker
    artifact: Artifact

    @property
    def results(self) -> list[TensorSpec]:
        return self.artifact.results

    @property
    def sources(self) -> list[int]:
        return self.artifact.sources

    @property
    def user_results(self) -> int:
        return self.artifact.user_results

    @property
    def checks(self) -> list[dict]:
        return self.artifact.checks

    @property
    def timings(self) -> list[StageTiming]:
        return self.artifact.timings

    @property
    def dimension_values(self) -> dict[int, int]:
        return self.artifact.dimension_values

    def __post_init__(self):
        # Decided once, not at every call.
        self.sub_byte_results = any(r.element in SUB_BYTE_BITS for r in self.artifact.results)
        self.distinct_sources = len(set(self.artifact.sources)) == len(self.artifact.sources)
        # Runs as a device of its executable's fabric: collectives, channels, host queues.
        self.uses_devices = any(str(site.get("target", "")).startswith("kiln.collective.")
                                for site in self.artifact.call_sites) or \
            _plan_calls_collectives((self.artifact.plan or {}).get("thunks", []))


def _plan_calls_collectives(thunks: list[dict]) -> bool:
    """A GPU plan's host-staged collective or host transfer (its custom-call thunks, nested
    ones too): the GPU targets keep no call sites, their plan names the targets."""
    return any(str(t.get("target") or "").startswith("kiln.collective.") or
               any(_plan_calls_collectives(body) for body in t.get("nested", []))
               for t in thunks)


@dataclass
class CompileRequest:
    """Everything a compile needs, as plain data: it may run in a worker process."""
    imported: bytes                    # the imported module, bytecode (entry tuples flattened)
    entry: str
    filename: str
    target: str
    options: dict
    arg_specs: list[TensorSpec]
    shapes: tuple | None               # concrete argument shapes (None: the signature's own)
    convention: CallingConvention
    module_id: int                     # numbers the dump files (dumping.py)
    custom_calls: list = field(default_factory=list)  # the caller's REGISTRY.describe()
    want_plan: bool = False            # also record the execution plan (plan.py)


def specialised_module(request: CompileRequest, ctx: ir.Context) -> tuple[ir.Module, dict[int, int]]:
    """The imported module, specialised to the request's shapes when the signature is dynamic;
    with the values that implies for JAX's dimension arguments."""
    with ctx:
        module = ir.Module.parse(request.imported)
    dimension_values: dict[int, int] = {}
    specs = request.arg_specs
    if request.shapes is not None and not all(s.is_static for s in specs):
        types = [s.mlir_type(tuple(shape)) for s, shape in zip(specs, request.shapes)]
        dimension_values = specialize_to(module, request.entry, types, request.filename,
                                         request.convention)
    return module, dimension_values


# Called with (stage, pass or None) as a compile reaches each stage (and pass, when asked).
ProgressHook = Callable[[str, str | None], None]


def compile_artifact(request: CompileRequest, progress: ProgressHook | None = None,
                     reproduce: dict | None = None, context: ir.Context | None = None,
                     module: ir.Module | None = None) -> Artifact:
    """Specialise, run every stage of the request's target and emit object code. Runs in a
    compile worker (driver/worker.py) or, when asked, in the caller. `progress(stage, None)`
    is told of each stage as it starts; `reproduce` holds the worker's reproducer hooks
    ("stage_start": (stage, module), "after_pass": (stage, pass, module)). A worker passes
    the `context` it made before forking; one that imported the source passes its `module`
    (the request's, parsed already: a static signature's, which needs no specialising)."""
    from ..targets import get_target
    target = get_target(request.target, **request.options)
    entry, filename = request.entry, request.filename
    if module is not None and request.shapes is None:
        dimension_values: dict[int, int] = {}
    else:
        module, dimension_values = specialised_module(request, context or make_context())
    timings: list[StageTiming] = []
    stages = target.stages(entry)
    dumper = dump_writer(target.options, module, filename, request.module_id)
    after_pass = dumper.after_pass if dumper and dumper.pass_pattern else None
    reproduce = reproduce or {}
    if "after_pass" in reproduce:
        after_pass = _chain_pass_hooks(after_pass, reproduce["after_pass"])

    def before_stage(stage: str, m: ir.Module) -> None:
        if progress is not None:
            progress(stage, None)
        if "stage_start" in reproduce:
            reproduce["stage_start"](stage, m)
    plan_json = None

    def dump(stage: str, m: ir.Module) -> None:
        nonlocal plan_json
        if dumper:
            dumper.stage(stage, m)
        if stage == "codegen" and (request.want_plan or dumper):
            assignment, thunks = plan.analyse_module(m, entry, len(results))
            plan_json = plan.to_json(assignment, thunks)
            if dumper:
                dumper.plan(str(assignment), str(thunks))
    hooks = {"timings": timings, "pass_timing": bool(target.options.get("timing")),
             "dump": dump, "after_pass": after_pass, "before_stage": before_stage}
    if dumper:
        dumper.before_optimizations(module)
    # The signature is read after `optimize` (checks outlined) and before `legalize`
    # (which erases signedness).
    split = [s.name for s in stages].index("optimize") + 1
    run_stages(module, stages[:split], filename, **hooks)
    if dumper:
        dumper.after_optimizations(module)
    _, _, results = signature(module, entry)
    target.after_optimize(module)
    checks, user_results = read_checks(find_entry(module, entry))
    sources = read_result_sources(find_entry(module, entry)) or list(range(len(results)))
    if any(not r.is_static for r in results):
        raise KilnError(f"result shapes of @{entry} stay dynamic after shape refinement: "
                        + ", ".join(map(str, results)),
                        location=filename, hint="results must have static shapes")
    run_stages(module, stages[split:], filename, **hooks)
    sites = [s.to_json() for s in read_sites(module)]
    if progress is not None:
        progress("llvm", None)
    start = time.perf_counter()
    code = target.emit(module, entry)
    timings.append(StageTiming("llvm", time.perf_counter() - start))
    if plan_json is None and hasattr(target, "gpu_plan"):  # GPU: the plan is in the code
        plan_json = plan.to_json(*plan.from_gpu(target.gpu_plan(code.code), len(results)))
    return Artifact(target.name, entry, code.symbol, code.code, code.externals, sites, results,
                    sources, len(sources) if user_results is None else user_results, checks,
                    dimension_values, host_cpu(), kiln_build(), timings, plan_json)


def _chain_pass_hooks(first, second):
    if first is None:
        return second

    def both(stage, step, module):
        first(stage, step, module)
        second(stage, step, module)
    return both


def load_compiled(artifact: Artifact, target: Target, what: str) -> Compiled:
    """Link an artifact's code into this process."""
    artifact.check_loadable(what)
    from ..targets.base import CompiledCode
    invoke = target.load(CompiledCode(artifact.code, artifact.symbol, artifact.externals),
                         artifact.call_sites, what)
    return Compiled(invoke, artifact)


def dump_writer(options: dict, module: ir.Module, filename: str,
                module_id: int | None = None) -> DumpWriter | None:
    """The writer for the `dump_dir=` / `dump_pass_regex=` options, if dumps are asked for."""
    if options.get("dump_pass_regex") and not options.get("dump_dir"):
        raise KilnError("dump_pass_regex= needs dump_dir=: the directory to write the IR to",
                        location=filename, hint="kiln run --dump-dir DIR --dump-pass-regex REGEX")
    if not options.get("dump_dir"):
        return None
    return DumpWriter(options["dump_dir"], program_name(module, filename),
                      options.get("dump_pass_regex"), module_id)


def to_bytecode(module: ir.Module) -> bytes:
    buf = io.BytesIO()
    module.operation.write_bytecode(buf)
    return buf.getvalue()
