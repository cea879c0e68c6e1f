"""Pipelines scripted from Python (kiln.lowering.Pipeline), the pass registry, and Kiln's
Python passes running inside MLIR's pass manager."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from torch_mlir import ir

import kiln
from kiln.context import make_context
from kiln.lowering import Pipeline, passes, registry
from kiln.lowering.ir_util import walk
from kiln.targets import get_target

ROOT = Path(__file__).resolve().parents[2]

ADD = """func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %b : tensor<4xf32>
  %1 = stablehlo.add %0, %b : tensor<4xf32>
  return %1 : tensor<4xf32>
}
"""


def parse(text: str) -> ir.Module:
    with make_context():
        return ir.Module.parse(text)


def adds_to_multiplies(module: ir.Module) -> None:
    """A user's pass: every stablehlo.add becomes a stablehlo.multiply."""
    for op in [o for o in walk(module.operation) if o.name == "stablehlo.add"]:
        with ir.InsertionPoint(op), op.location:
            new = ir.Operation.create("stablehlo.multiply", results=[op.results[0].type],
                                      operands=list(op.operands))
        op.results[0].replace_all_uses_with(new.results[0])
        op.erase()


def op_names(module_text: str) -> list[str]:
    return re.findall(r"stablehlo\.\w+", module_text)


def test_user_pass_in_a_pipeline_compiles_and_runs():
    module = parse(ADD)
    Pipeline([adds_to_multiplies, "canonicalize", "kiln-fold-tuples"]).run(module)
    assert op_names(str(module)) == ["stablehlo.multiply", "stablehlo.multiply"]
    a, b = np.arange(4, dtype=np.float32), np.full(4, 3, np.float32)
    (y,) = kiln.compile(module)(a, b)
    np.testing.assert_array_equal(y, a * b * b)


def test_trace_gives_the_ir_after_every_step():
    module = parse(ADD)
    snapshots = Pipeline([adds_to_multiplies, "builtin.module(cse,func.func(canonicalize))",
                          "kiln-emit-c-interface"]).trace(module)
    assert [name for name, _ in snapshots] == ["py-adds-to-multiplies", "cse",
                                              "func.func(canonicalize)", "kiln-emit-c-interface"]
    first, last = snapshots[0][1], snapshots[-1][1]
    assert "stablehlo.multiply" in first and "llvm.emit_c_interface" not in first
    assert "llvm.emit_c_interface" in last
    assert last == str(module)


def test_observe_sees_each_step_in_order():
    seen = []
    module = parse(ADD)
    Pipeline(["kiln-outline-checks", "canonicalize"]).run(
        module, observe=lambda name, m: seen.append((name, "stablehlo.add" in str(m))))
    assert seen == [("kiln-outline-checks", True), ("canonicalize", True)]


def test_extra_passes_run_inside_the_targets_pipeline():
    a, b = np.arange(4, dtype=np.float32), np.full(4, 3, np.float32)
    exe = kiln.compile(ADD, extra_passes={"optimize": [adds_to_multiplies]})
    np.testing.assert_array_equal(exe(a, b)[0], a * b * b)
    assert "stablehlo.multiply" in exe.ir("optimize")
    assert "stablehlo.add" in exe.ir("verify")
    stage = next(s for s in exe.stages if s.name == "optimize")
    assert str(stage.steps[-1]) == "py-adds-to-multiplies"
    with pytest.raises(kiln.KilnError, match=r"unknown stage\(s\) nope.*stages: verify, partition, layout, optimize"):
        kiln.compile(ADD, extra_passes={"nope": ["cse"]})


def test_kiln_error_in_a_user_pass_is_located():
    def refuse_adds(module: ir.Module) -> None:
        for op in walk(module.operation):
            if op.name == "stablehlo.add":
                raise kiln.KilnError("no adds, please", location=str(op.location))
    module = parse(ADD)
    with pytest.raises(kiln.KilnError) as caught:
        Pipeline(["canonicalize", refuse_adds]).run(module, filename="model.mlir")
    assert caught.value.location == "model.mlir:2:8"
    assert "no adds, please" in str(caught.value)


def test_other_exceptions_come_through_unchanged_and_the_context_stays_usable():
    def broken(module: ir.Module) -> None:
        raise ZeroDivisionError("a bug in a user pass")

    def interrupted(module: ir.Module) -> None:
        raise KeyboardInterrupt
    module = parse(ADD)
    with pytest.raises(ZeroDivisionError, match="a bug in a user pass"):
        Pipeline([broken]).run(module)
    with pytest.raises(KeyboardInterrupt):
        Pipeline(["cse", interrupted]).run(module)
    Pipeline([adds_to_multiplies, "canonicalize"]).run(module)
    assert "stablehlo.multiply" in str(module)


def test_invalid_ir_from_a_python_pass_is_caught_by_the_verifier():
    def bad_signature(module: ir.Module) -> None:
        func = module.body.operations[0]
        func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get([], []))
    with pytest.raises(kiln.KilnError, match="stage 'pipeline' failed after py-bad-signature.*"
                                             "entry block must have 0 arguments"):
        Pipeline([bad_signature, "canonicalize"]).run(parse(ADD), filename="model.mlir")


def test_unknown_names_are_errors_naming_close_passes():
    with pytest.raises(kiln.KilnError, match="unknown pass 'kiln-lower-srot'.*kiln-lower-sort"):
        Pipeline(["kiln-lower-srot"])
    with pytest.raises(kiln.KilnError, match="unknown pass 'lower-sort'.*kiln-lower-sort"):
        Pipeline(["lower-sort"]).run(parse(ADD))
    with pytest.raises(kiln.KilnError, match="must be a pass name"):
        Pipeline([42])


def test_registry_lists_every_kiln_pass_of_the_pipeline():
    registered = {p.name for p in passes()}
    assert len(registered) >= 30 and all(name.startswith("kiln-") for name in registered)
    in_pipeline = {str(step).split("{")[0] for target in ("cpu", "gpu")
                   for stage in get_target(target).stages(None)
                   for step in stage.steps if str(step).startswith("kiln-")}
    assert in_pipeline <= registered
    # Only kiln-flatten-entry-tuples runs outside the stages (when the program is imported).
    assert registered - in_pipeline == {"kiln-flatten-entry-tuples"}
    assert all(p.summary and "\n" not in p.summary for p in passes())


def test_user_passes_can_be_registered_by_name():
    registry.register("test-adds-to-multiplies", "every add becomes a multiply",
                      adds_to_multiplies)
    module = parse(ADD)
    Pipeline(["test-adds-to-multiplies"]).run(module)
    assert "stablehlo.multiply" in str(module)
    with pytest.raises(kiln.KilnError, match="registered twice"):
        registry.register("test-adds-to-multiplies", "again", adds_to_multiplies)


@pytest.mark.parametrize("text", [
    "module {}",
    "func.func private @declared(tensor<2xf32>) -> tensor<2xf32>",
    "func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n  return %a : tensor<2xf32>\n}",
])
def test_every_pass_runs_on_any_module_and_leaves_it_alone_when_there_is_nothing_to_do(text):
    for registered in passes():
        module = parse(text)
        before = str(module)
        if registered.name == "kiln-validate" and "@declared" in text:
            # The one exception: checking inputs is its job, and an input program may not
            # declare external functions (the trust boundary).
            with pytest.raises(kiln.KilnError, match="declared without a body"):
                Pipeline([registered.name]).run(module)
            continue
        Pipeline([registered.name]).run(module)
        if registered.name == "kiln-emit-c-interface" and "@main" in text:
            assert "llvm.emit_c_interface" in str(module)  # an entry always gets one
        elif registered.name == "kiln-gpu-count-inputs" and "@main" in text:
            assert "kiln.gpu.inputs = 1" in str(module)  # and, for the GPU, its input count
        else:
            assert str(module) == before, registered.name


def test_stage_errors_from_python_passes_stay_located():
    src = ("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
           "  %0 = stablehlo.custom_call @no_such_kernel(%x) : (tensor<4xf32>) -> tensor<4xf32>\n"
           "  return %0 : tensor<4xf32>\n}\n")
    with pytest.raises(kiln.KilnError) as caught:
        kiln.compile(src, filename="prog.mlir")
    assert caught.value.location == "prog.mlir:2:8"
    assert "unknown custom-call target 'no_such_kernel'" in str(caught.value)


def test_docs_example_runs():
    # The scripting guide's first example (it moved there from the README, issue 30).
    guide = (ROOT / "docs" / "guides" / "scripting.md").read_text()
    section = guide.split("## Scripting from Python", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "docs/guides/scripting.md (Scripting from Python)", "exec"), namespace)
    cubes = np.array([0, 1, 8, 27], np.float32)
    np.testing.assert_array_equal(namespace["y"], cubes)
    np.testing.assert_array_equal(namespace["z"], cubes)
    assert namespace["names"][0] == "py-adds-to-multiplies"
