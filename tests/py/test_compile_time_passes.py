"""What keeps Kiln's stages fast without changing what they compute: where the IR is
verified (pipeline.py), and LLVM not unrolling loops around long loops (kiln-loop-hints)."""
from __future__ import annotations

import numpy as np
import pytest
from torch_mlir import ir

import kiln
from kiln.context import make_context
from kiln.lowering import Pipeline
from kiln.lowering.ir_util import walk
from kiln.pipeline import PyPass, _checks

ADD = """func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


def parse(text: str) -> ir.Module:
    with make_context():
        return ir.Module.parse(text)


def nothing(module: ir.Module) -> None:
    """A pass that leaves the IR as it is."""


def bad_signature(module: ir.Module) -> None:
    """A pass that breaks the IR: the function type no longer matches its block."""
    func = module.body.operations[0]
    func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get([], []))


def test_the_ir_is_verified_before_upstream_passes_and_at_the_end(monkeypatch):
    monkeypatch.delenv("KILN_VERIFY_EACH_PASS", raising=False)
    a, b, c = (PyPass(n, nothing) for n in "abc")
    observer = PyPass("observe(a)", nothing, verify=False)
    # after the last of each run of Python passes (observers do not count), and at the end
    # only when upstream passes ran after the last check
    assert _checks([a, observer, b, "cse", c]) == ([False, False, True, False, True], False)
    assert _checks([a, "cse", "canonicalize", observer]) == ([True, False, False, False], True)
    assert _checks(["cse"]) == ([False], True)
    monkeypatch.setenv("KILN_VERIFY_EACH_PASS", "1")  # the pass manager verifies instead
    assert _checks([a, "cse", b]) == ([False, False, False], False)


def test_invalid_ir_from_a_run_of_python_passes_is_caught_before_upstream_passes(monkeypatch):
    monkeypatch.delenv("KILN_VERIFY_EACH_PASS", raising=False)
    with pytest.raises(kiln.KilnError, match=r"failed after py-nothing \(the IR is verified after "
                                             r"'py-bad-signature,py-nothing'; "
                                             r"KILN_VERIFY_EACH_PASS=1 verifies after each\).*"
                                             r"entry block must have 0 arguments"):
        Pipeline([bad_signature, nothing, "canonicalize"]).run(parse(ADD), filename="m.mlir")
    # Asked to, the pass manager verifies after every pass and names the one that broke it.
    monkeypatch.setenv("KILN_VERIFY_EACH_PASS", "1")
    with pytest.raises(kiln.KilnError, match=r"failed after py-bad-signature.*"
                                             r"entry block must have 0 arguments") as info:
        Pipeline([bad_signature, nothing, "canonicalize"]).run(parse(ADD), filename="m.mlir")
    assert "py-nothing" not in str(info.value)


def test_invalid_ir_at_the_end_of_a_stage_is_caught():
    with pytest.raises(kiln.KilnError, match="failed after py-bad-signature.*"
                                             "entry block must have 0 arguments"):
        Pipeline(["cse", bad_signature]).run(parse(ADD), filename="m.mlir")


ROWS = """func.func @main(%x: tensor<64x1024xf32>) -> tensor<64x1024xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1]
      : (tensor<64x1024xf32>, tensor<f32>) -> tensor<64xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<64xf32>) -> tensor<64x1024xf32>
  %d = stablehlo.subtract %x, %mb : tensor<64x1024xf32>
  %e = stablehlo.exponential %d : tensor<64x1024xf32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<64x1024xf32>, tensor<f32>) -> tensor<64xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [0] : (tensor<64xf32>) -> tensor<64x1024xf32>
  %y = stablehlo.divide %e, %sb : tensor<64x1024xf32>
  return %y : tensor<64x1024xf32>
}
"""


def test_softmax_rows_reach_llvm_with_their_row_loops_not_unrolled_and_compute_the_same():
    exe = kiln.compile(ROWS)
    lowered = exe.ir("lower")
    assert "llvm.loop_annotation<unroll = #loop_unroll>" in lowered or \
        "#llvm.loop_unroll<disable = true>" in lowered
    assert "loop_annotation = #loop_annotation" in lowered   # on llvm.br, where LLVM reads it
    x = np.random.default_rng(0).standard_normal((64, 1024)).astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    (y,) = exe(x)
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_loop_hints_mark_only_loops_around_long_loops():
    exe = kiln.compile(ROWS)
    with make_context():
        module = ir.Module.parse(exe.ir("codegen"))
    marked = [op for op in walk(module.operation) if "loop_annotation" in op.attributes]
    assert marked and all(op.name == "scf.for" for op in marked)
    for op in marked:   # each has a loop inside it
        assert any(inner.name in ("scf.for", "scf.while") for inner in walk(op))
