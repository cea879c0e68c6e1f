"""Every registered pass runs alone on any valid module, as lowering/registry.py promises.

The passes come from the registry itself, so a pass registered later is covered without
touching this file. Each runs alone (`Pipeline([name])`, what `kiln-opt --pass NAME` does) on:
- the module the pipeline hands it: the IR just before it in the CPU and GPU pipelines, for
  a few plain StableHLO programs; alone, it must produce what it produces there;
- the module at the start of every stage of both pipelines (StableHLO, linalg on tensors,
  buffers, loops, GPU kernels, LLVM), and after the last: it must succeed, leaving IR that
  verifies. Two kinds of refusal are allowed, each a located KilnError with a hint: a check
  (`KilnPass.check`) refuses a module that breaks its rule, and a pass of one target may
  refuse, in IR only the other target makes, a construct its own target cannot run. A
  check leaves the module as it was either way.
All of it runs in this one process, on one MLIR context.
"""
from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from torch_mlir import ir

from kiln.context import make_context
from kiln.errors import KilnError
from kiln.lowering import Pipeline, passes, registry
from kiln.pipeline import op_names, run_stages
from kiln.targets import get_target

TARGETS = ("cpu", "gpu")

# Plain StableHLO programs, each a valid input Kiln compiles (the values are not checked
# here; other tests do).
PROGRAMS = {
    # The program: a contraction, elementwise work, a reduction and a loop.
    "dot_add_reduce_while": """
func.func @main(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>, %c: tensor<4x3xf32>)
    -> (tensor<4xf32>, tensor<i32>) {
  %d = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
      : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %s = stablehlo.add %d, %c : tensor<4x3xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%s init: %z) applies stablehlo.add across dimensions = [1]
      : (tensor<4x3xf32>, tensor<f32>) -> tensor<4xf32>
  %i0 = stablehlo.constant dense<0> : tensor<i32>
  %w:2 = stablehlo.while(%it = %i0, %acc = %r) : tensor<i32>, tensor<4xf32>
   cond {
    %n = stablehlo.constant dense<5> : tensor<i32>
    %p = stablehlo.compare LT, %it, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %it, %one : tensor<i32>
    %m = stablehlo.multiply %acc, %acc : tensor<4xf32>
    stablehlo.return %next, %m : tensor<i32>, tensor<4xf32>
  }
  return %w#1, %w#0 : tensor<4xf32>, tensor<i32>
}
""",
    # A call, a sort, a cumulative window, a case, a scatter and an unsigned dynamic slice:
    # what Kiln's own legalize passes rewrite.
    "call_sort_case_scatter": """
func.func private @sorted(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = "stablehlo.sort"(%x) ({
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %lt = stablehlo.compare LT, %l, %r : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }) {dimension = 0 : i64, is_stable = true} : (tensor<8xf32>) -> tensor<8xf32>
  return %s : tensor<8xf32>
}
func.func @main(%x: tensor<8xf32>, %branch: tensor<i32>, %start: tensor<ui32>)
    -> (tensor<8xf32>, tensor<3xf32>) {
  %s = func.call @sorted(%x) : (tensor<8xf32>) -> tensor<8xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %cumsum = "stablehlo.reduce_window"(%s, %zero) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %t = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %t : tensor<f32>
  }) {window_dimensions = array<i64: 8>, padding = dense<[[7, 0]]> : tensor<1x2xi64>}
      : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %picked = "stablehlo.case"(%branch) ({
    stablehlo.return %cumsum : tensor<8xf32>
  }, {
    %n = stablehlo.negate %cumsum : tensor<8xf32>
    stablehlo.return %n : tensor<8xf32>
  }) : (tensor<i32>) -> tensor<8xf32>
  %idx = stablehlo.constant dense<[[1], [3]]> : tensor<2x1xi32>
  %upd = stablehlo.constant dense<[10.0, 20.0]> : tensor<2xf32>
  %scattered = "stablehlo.scatter"(%picked, %idx, %upd) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %t = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %t : tensor<f32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0],
      scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}
      : (tensor<8xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<8xf32>
  %window = stablehlo.dynamic_slice %scattered, %start, sizes = [3]
      : (tensor<8xf32>, tensor<ui32>) -> tensor<3xf32>
  return %scattered, %window : tensor<8xf32>, tensor<3xf32>
}
""",
}

# What the import does before the first stage (driver/executable.py): run outside the stages.
IMPORT_PASSES = ("kiln-flatten-entry-tuples",)


@dataclass
class PassRun:
    """One run of a pass inside a pipeline: where, and the IR before and after it."""
    where: str
    before: str
    after: str


@dataclass
class Traced:
    # "program cpu:legalize" -> the module as that stage starts ("... cpu:end": after the last)
    stage_inputs: dict[str, ir.Module] = field(default_factory=dict)
    pass_runs: dict[str, list[PassRun]] = field(default_factory=dict)


def _kiln_pass_name(step: str) -> str | None:
    name = step.split("{")[0]
    return name if registry.is_registered(name) else None


def copy_module(module: ir.Module) -> ir.Module:
    """A copy of `module`: its attributes and its ops cloned (8x faster than printing and
    parsing it, which would make this file take a minute)."""
    with module.context, module.operation.location:
        copy = ir.Module.create()
        for attribute in module.operation.attributes:
            name = getattr(attribute, "name", attribute)
            copy.operation.attributes[name] = module.operation.attributes[name]
        where = ir.InsertionPoint(copy.body)
        for op in module.body.operations:
            op.operation.clone(where)
    return copy


def _trace(context: ir.Context, program: str, text: str, target_name: str, traced: Traced):
    with context:
        module = ir.Module.parse(text)
    previous = str(module)
    for name in IMPORT_PASSES:
        Pipeline([name]).run(module)
        traced.pass_runs.setdefault(name, []).append(
            PassRun(f"{program} {target_name}:import", previous, str(module)))
        previous = str(module)

    for stage in get_target(target_name).stages(None):
        traced.stage_inputs[f"{program} {target_name}:{stage.name}"] = copy_module(module)
        names = [_kiln_pass_name(str(step)) for step in stage.steps] + [None]
        # The IR is printed only around Kiln's passes (printing it after every step of
        # the upstream runs between them was a third of this file's time).
        previous = str(module) if names[0] else None
        done = 0

        def after_pass(stage_name: str, step: str, module: ir.Module) -> None:
            nonlocal previous, done
            name, next_name = names[done], names[done + 1]
            done += 1
            after = str(module) if name or next_name else None
            if name is not None:
                traced.pass_runs.setdefault(name, []).append(
                    PassRun(f"{program} {target_name}:{stage_name}", previous, after))
            previous = after

        run_stages(module, [stage], f"{program}.mlir", after_pass=after_pass)
        assert done == len(stage.steps)
    traced.stage_inputs[f"{program} {target_name}:end"] = module


@pytest.fixture(scope="module")
def context() -> ir.Context:
    return make_context()


@pytest.fixture(scope="module", autouse=True)
def kiln_opt_started(tmp_path_factory):
    """`kiln-opt PROGRAM --pass kiln-gpu-serial-kernels`, started before the other tests so
    that its start-up (a new Python importing every pass) overlaps them."""
    source = tmp_path_factory.mktemp("alone") / "program.mlir"
    source.write_text(PROGRAMS["dot_add_reduce_while"])
    command = subprocess.Popen(
        [str(Path(sys.executable).with_name("kiln-opt")), str(source),
         "--pass", "kiln-gpu-serial-kernels"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    yield source, command
    if command.poll() is None:  # the test that reads it did not run
        command.kill()
        command.wait()


@pytest.fixture(scope="module")
def traced(context) -> Traced:
    """Every program through both pipelines, once for the whole file."""
    result = Traced()
    for program, text in PROGRAMS.items():
        for target_name in TARGETS:
            _trace(context, program, text, target_name, result)
    return result


@dataclass
class StageInput:
    module: ir.Module
    text: str
    targets: set[str]  # the targets whose pipelines hand on this module
    op_names: set[str]


def _has_work(registered: registry.KilnPass, present: set[str]) -> bool:
    """Whether the module's ops include one the pass rewrites (or it names none)."""
    if registered.applies_to is None:
        return True
    return any(name in present if not name.endswith(".") else
               any(op.startswith(name) for op in present) for name in registered.applies_to)


@pytest.fixture(scope="module")
def distinct_stage_inputs(traced) -> dict[str, StageInput]:
    """The stage inputs, each distinct module once (a stage that changed nothing, or both
    targets' shared stages, hand on the same module). IR already in the LLVM dialect is
    taken from the first program only: no Kiln pass rewrites it, and the other programs'
    (the largest modules) would double the time of this file."""
    first_program = next(iter(PROGRAMS))
    distinct: dict[str, tuple[str, StageInput]] = {}
    for where, module in traced.stage_inputs.items():
        program, stage = where.split()
        present = op_names(module.operation)
        if program != first_program and any(name.startswith("llvm.") for name in present):
            continue
        text = str(module)
        target_name = stage.split(":")[0]
        if text not in distinct:
            distinct[text] = (where, StageInput(module, text, set(), present))
        distinct[text][1].targets.add(target_name)
    return dict(distinct.values())


def pass_targets(name: str) -> set[str]:
    """The targets whose pipelines run pass `name`: every target for the import's passes
    and for a pass no pipeline runs (a user's)."""
    found = {target_name for target_name in TARGETS
             for stage in get_target(target_name).stages(None)
             for step in stage.steps if _kiln_pass_name(str(step)) == name}
    return set(TARGETS) if name in IMPORT_PASSES or not found else found


def _run_alone(context: ir.Context, name: str, text: str) -> ir.Module:
    with context:
        module = ir.Module.parse(text)
    Pipeline([name]).run(module, filename="alone.mlir")
    assert module.operation.verify()
    return module


def _printed(context: ir.Context, text: str) -> str:
    with context:
        return str(ir.Module.parse(text))


PASS_NAMES = [p.name for p in passes()]


def test_every_pass_has_a_one_line_summary():
    for registered in passes():
        summary = registered.summary.strip()
        assert summary and "\n" not in summary and len(summary) > 10, registered.name


def test_every_kiln_pass_runs_in_a_traced_pipeline(traced):
    """The programs reach every Kiln pass of both pipelines, so that the test below sees
    each on the module its stage hands it."""
    in_pipelines = {_kiln_pass_name(str(step)) for target_name in TARGETS
                    for stage in get_target(target_name).stages(None) for step in stage.steps}
    in_pipelines.discard(None)
    assert in_pipelines | set(IMPORT_PASSES) <= set(traced.pass_runs)
    # Both pipelines and every program are traced, through every stage and to the end.
    for program in PROGRAMS:
        for target_name in TARGETS:
            names = [s.name for s in get_target(target_name).stages(None)]
            for stage in [*names, "end"]:
                assert f"{program} {target_name}:{stage}" in traced.stage_inputs
    assert "llvm.func" in str(traced.stage_inputs["dot_add_reduce_while cpu:end"])
    assert "gpu.module" in str(traced.stage_inputs["dot_add_reduce_while gpu:end"])


@pytest.mark.parametrize("name", PASS_NAMES)
def test_alone_on_its_own_stage_it_does_what_the_pipeline_does(name, traced, context):
    runs = traced.pass_runs.get(name)
    if not runs:  # a pass no pipeline runs (a user's): its stage is unknown, StableHLO then
        for text in PROGRAMS.values():
            _run_alone(context, name, text)
        return
    for run in runs:
        module = _run_alone(context, name, run.before)
        assert str(module) == run.after, f"{name} alone differs from the pipeline ({run.where})"


@pytest.mark.parametrize("name", PASS_NAMES)
def test_alone_on_every_stage_it_succeeds_or_reports_what_it_cannot_do(
        name, distinct_stage_inputs):
    """On its own target's modules a pass succeeds, and a check may refuse one that breaks its
    rule. On IR only the other target makes (the CPU's buffers and loops, the GPU's
    kernels), a pass may also report a construct its target cannot run."""
    registered = registry.get(name)
    own_targets = pass_targets(name)
    refused = []
    for where, stage_input in distinct_stage_inputs.items():
        if not _has_work(registered, stage_input.op_names):
            continue  # the pass manager would skip it too (pipeline.PyPass.applies_to)
        module = copy_module(stage_input.module)
        try:
            # Pipeline.run verifies the IR after a Python pass: invalid IR fails here.
            Pipeline([name]).run(module, filename="alone.mlir")
        except KilnError as exc:
            assert registered.check or not (stage_input.targets & own_targets), \
                f"{name} refused the module at {where}: {exc}"
            # At the op in the file, or the module; an op Kiln made has no position, and
            # the message names it then.
            assert re.fullmatch(r"alone\.mlir(:\d+:\d+)?|loc\(unknown\)", exc.location or ""), \
                (where, exc)
            assert re.search(r"'[a-z_]+\.[\w.]+'|@\w+", exc.message), (where, exc)
            assert exc.hint, (where, exc)
            refused.append(where)
        if registered.check:
            assert str(module) == stage_input.text, f"check {name} changed the module at {where}"
    # A pass refuses what breaks its rule, not every stage's module.
    assert len(refused) < len(distinct_stage_inputs), refused


def test_gpu_serial_kernels_leaves_modules_on_tensors_alone(traced, distinct_stage_inputs):
    """The issue's example: the GPU serial-kernel rule is about buffers, and the pass used
    to refuse a plain StableHLO while. Before bufferization (StableHLO, linalg on tensors,
    the GPU's own legalize output with a buffer in it) it leaves the module as it is; on its
    own stage's module it still makes one-thread kernels."""
    on_tensors = [s for where, s in distinct_stage_inputs.items()
                  if where.endswith((":verify", ":legalize", ":fuse", ":bufferize"))]
    assert len(on_tensors) >= 6 and any("bufferization.to_buffer" in s.text for s in on_tensors)
    for stage_input in on_tensors:
        module = copy_module(stage_input.module)
        Pipeline(["kiln-gpu-serial-kernels"]).run(module)
        assert str(module) == stage_input.text
    runs = traced.pass_runs["kiln-gpu-serial-kernels"]
    assert len(runs) == len(PROGRAMS)
    for run in runs:
        assert run.after.count("scf.parallel") > run.before.count("scf.parallel"), run.where


def test_kiln_opt_runs_a_pass_alone(kiln_opt_started, context, capsys):
    from kiln.cli import opt
    source, command = kiln_opt_started
    text = source.read_text()
    # The command itself, once: the pass the issue names, on a plain StableHLO module.
    out, err = command.communicate(timeout=300)
    assert command.returncode == 0, err
    assert out.strip() == _printed(context, text).strip()
    # In this process: kiln-opt prints what Pipeline makes, for --pass and --pass-pipeline
    # (with an entry option).
    for flag, pipeline, made in [
            ("--pass", "kiln-lower-control-flow", "scf.while"),
            ("--pass-pipeline", "builtin.module(kiln-emit-c-interface{entry=main})",
             "llvm.emit_c_interface")]:
        assert opt.main([str(source), flag, pipeline]) == 0
        expected = str(_run_alone(context, registry.split_pipeline(pipeline)[0], text))
        assert made in expected and made not in text
        assert capsys.readouterr().out.strip() == expected.strip()
    # A check that refuses the module: one located line and status 1, not a traceback.
    assert opt.main([str(source), "--pass", "kiln-check-legalized"]) == 1
    err = capsys.readouterr().err
    assert re.match(rf"kiln-opt: error: {re.escape(str(source))}:\d+:\d+: Kiln cannot lower "
                    r"'stablehlo\.", err), err
    assert "Traceback" not in err
