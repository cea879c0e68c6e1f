"""Compile orchestration: one specialisation of the entry through the target's stages.

The target says which stages run and how the lowered module is loaded; this module decides
what is read from the IR between them (the signature after checks are outlined, the checks,
which result is which) and what a compiled specialisation keeps.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field

from torch_mlir import ir

from ..errors import KilnError
from ..lowering.checks import read_checks
from ..lowering.entry import read_result_sources
from ..lowering.ir_util import find_entry, function_type, symbol_name
from ..dumping import DumpWriter, program_name
from ..pipeline import StageTiming, run_stages
from ..runtime.memref import TensorSpec
from ..targets.base import Invoker, Target


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
    """One fully compiled specialization of the entry function."""
    invoke: Invoker
    results: list[TensorSpec]          # every distinct compiled result, check operands included
    sources: list[int]                 # program result i is compiled result sources[i]
    user_results: int
    checks: list[dict]
    timings: list[StageTiming] = field(default_factory=list)
    context: ir.Context | None = None  # keeps the JITed module's context alive
    dimension_values: dict[int, int] = field(default_factory=dict)  # JAX dimension arguments


def compile_module(module: ir.Module, target: Target, entry: str, filename: str,
                   dimension_values: dict[int, int]) -> Compiled:
    """Run every stage of `target` on `module` (already specialised to static argument
    shapes) and load the result. `module`'s context is kept alive by the result."""
    timings: list[StageTiming] = []
    stages = target.stages(entry)
    dumper = dump_writer(target.options, module, filename)
    hooks = {"timings": timings, "pass_timing": bool(target.options.get("timing")),
             "dump": dumper.stage if dumper else None,
             "after_pass": dumper.after_pass if dumper and dumper.pass_pattern else None}
    if dumper:
        dumper.before_optimizations(module)
    # The signature is read after `optimize` (checks outlined) and before `legalize`
    # (which erases signedness).
    split = [s.name for s in stages].index("optimize") + 1
    run_stages(module, stages[:split], filename, **hooks)
    if dumper:
        dumper.after_optimizations(module)
    _, _, results = signature(module, entry)
    checks, user_results = read_checks(find_entry(module, entry))
    sources = read_result_sources(find_entry(module, entry)) or list(range(len(results)))
    if any(not r.is_static for r in results):
        raise KilnError(f"result shapes of @{entry} stay dynamic after shape refinement: "
                        + ", ".join(map(str, results)),
                        location=filename, hint="results must have static shapes")
    run_stages(module, stages[split:], filename, **hooks)
    invoke = target.load(module, entry)
    return Compiled(invoke, results, sources,
                    len(sources) if user_results is None else user_results, checks, timings,
                    module.context, dimension_values)


def dump_writer(options: dict, module: ir.Module, filename: str) -> DumpWriter | None:
    """The writer for the `dump_dir=` / `dump_pass_regex=` options, if dumps are asked for."""
    if options.get("dump_pass_regex") and not options.get("dump_dir"):
        raise KilnError("dump_pass_regex= needs dump_dir=: the directory to write the IR to",
                        location=filename, hint="kiln run --dump-dir DIR --dump-pass-regex REGEX")
    if not options.get("dump_dir"):
        return None
    return DumpWriter(options["dump_dir"], program_name(module, filename),
                      options.get("dump_pass_regex"))


def to_bytecode(module: ir.Module) -> bytes:
    buf = io.BytesIO()
    module.operation.write_bytecode(buf)
    return buf.getvalue()
