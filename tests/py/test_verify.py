"""`Executable.verify` / `kiln run --verify`: a miscompiled op is named by comparing every
intermediate value with the StableHLO reference interpreter's."""
from __future__ import annotations

import numpy as np
import pytest
from torch_mlir import ir
from torch_mlir.dialects import math

import kiln
from kiln.lowering import registry
from kiln.lowering.ir_util import walk

PROGRAM = """func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e = stablehlo.exponential %x : tensor<8xf32>
  %t = stablehlo.tanh %e : tensor<8xf32>
  %s = stablehlo.add %t, %x : tensor<8xf32>
  return %s : tensor<8xf32>
}"""
X = np.linspace(-2, 2, 8).astype(np.float32)


@pytest.fixture
def broken_tanh(monkeypatch):
    """Replace the pass that lowers f32 tanh (kiln-approximate-math) by one that computes sin:
    a lowering broken on purpose."""
    real = registry.get("kiln-approximate-math")

    def tanh_as_sin(module: ir.Module) -> None:
        for op in [o for o in walk(module.operation) if o.name == "math.tanh"]:
            with ir.InsertionPoint(op), op.location:
                op.results[0].replace_all_uses_with(math.sin(op.operands[0]))
            op.erase()
        real.function(module)

    monkeypatch.setitem(registry._PASSES, real.name,
                        registry.KilnPass(real.name, real.summary, tanh_as_sin))
    # The patch lives in this process: compile here, and not from the cache.
    monkeypatch.setenv("KILN_COMPILE_IN_PROCESS", "1")
    monkeypatch.setenv("KILN_CACHE", "0")


def test_a_correct_program_verifies():
    report = kiln.compile(PROGRAM).verify(X)
    assert report.ok and report.compared == 4, str(report)


def test_the_first_differing_op_is_named_with_its_location(broken_tanh):
    exe = kiln.compile(PROGRAM, filename="prog.mlir")
    report = exe.verify(X)
    assert not report.ok
    assert report.difference.op == "stablehlo.tanh"
    assert report.difference.location == "prog.mlir:3:8"
    np.testing.assert_allclose(report.difference.reference, np.tanh(np.exp(X)), rtol=1e-5)
    np.testing.assert_allclose(report.difference.kiln, np.sin(np.exp(X)), rtol=1e-5)
    assert "'stablehlo.tanh' (result 0) is the first operation" in str(report)


def test_verify_true_makes_a_call_fail_on_a_miscompile(broken_tanh):
    exe = kiln.compile(PROGRAM, filename="prog.mlir", verify=True)
    with pytest.raises(kiln.KilnError, match=r"prog.mlir:3:8: 'stablehlo.tanh'"):
        exe(X)


def test_kiln_run_verify_reports_and_fails(broken_tanh, tmp_path, capsys):
    from kiln.cli.main import main
    src = tmp_path / "prog.mlir"
    src.write_text(PROGRAM)
    np.save(tmp_path / "x.npy", X)
    assert main(["run", str(src), "--inputs", str(tmp_path / "x.npy"), "--verify"]) == 1
    assert f"{src}:3:8: 'stablehlo.tanh'" in capsys.readouterr().err
