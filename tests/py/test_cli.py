"""The console scripts: results printed, one-line errors, exit codes."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BIN = Path(sys.executable).parent
ADD = """func.func @main(%x: tensor<3xf32>, %y: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.add %x, %y : tensor<3xf32>
  return %0 : tensor<3xf32>
}
"""
CHECKED = """func.func @main() -> tensor<2xi32> {
  %a = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
  %0 = stablehlo.add %a, %a : tensor<2xi32>
  %e = stablehlo.constant dense<[2, EXPECTED]> : tensor<2xi32>
  stablehlo.custom_call @check.expect_eq(%0, %e) {has_side_effect = true} : (tensor<2xi32>, tensor<2xi32>) -> ()
  return %0 : tensor<2xi32>
}
"""


def kiln(*args, tool="kiln"):
    return subprocess.run([str(BIN / tool), *map(str, args)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONFAULTHANDLER": ""})


def one_line_error(proc, prog):
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"{prog}: error: ")
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_run_with_inputs_and_output(tmp_path):
    src = tmp_path / "add.mlir"
    src.write_text(ADD)
    np.savez(tmp_path / "in.npz", np.array([1, 2, 3], np.float32), np.array([10, 20, 30], np.float32))
    proc = kiln("run", src, "--inputs", tmp_path / "in.npz", "--output", tmp_path / "out.npz", "--print")
    assert proc.returncode == 0, proc.stderr
    assert "[11. 22. 33.]" in proc.stdout
    with np.load(tmp_path / "out.npz") as out:
        np.testing.assert_array_equal(out["arr_0"], [11, 22, 33])


def test_run_without_inputs_for_a_parameterised_entry(tmp_path):
    src = tmp_path / "add.mlir"
    src.write_text(ADD)
    line = one_line_error(kiln("run", src), "kiln run")
    assert "takes 2 argument(s)" in line and "--inputs" in line


def test_run_checks_exit_status(tmp_path):
    good, bad = tmp_path / "good.mlir", tmp_path / "bad.mlir"
    good.write_text(CHECKED.replace("EXPECTED", "4"))
    bad.write_text(CHECKED.replace("EXPECTED", "5"))
    ok = kiln("run", good)
    assert ok.returncode == 0 and "1 of 1 checks passed" in ok.stdout
    failed = kiln("run", bad)
    assert failed.returncode == 1
    assert "check.expect_eq at" in failed.stderr and "bad.mlir:5:3" in failed.stderr
    assert "actual np.int32(4), expected np.int32(5)" in failed.stderr


def test_errors_are_one_line(tmp_path):
    one_line_error(kiln("run", tmp_path / "missing.mlir"), "kiln run")
    one_line_error(kiln("run", "x.mlir", "--no-such-flag"), "kiln")
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @main() {\n  %0 = stablehlo.add\n}\n")
    assert "bad.mlir:2:" in one_line_error(kiln("run", bad), "kiln run")
    one_line_error(kiln("bad.mlir", "--stage", "nope", tool="kiln-opt"), "kiln-opt")


def test_opt_stage_and_pass_pipeline(tmp_path):
    src = tmp_path / "add.mlir"
    src.write_text(ADD)
    legal = kiln(src, "--stage", "legalize", tool="kiln-opt")
    assert legal.returncode == 0 and "linalg.generic" in legal.stdout
    pipeline = kiln(src, "--pass-pipeline", "builtin.module(func.func(stablehlo-legalize-to-linalg))",
                    tool="kiln-opt")
    assert pipeline.returncode == 0 and "arith.addf" in pipeline.stdout


def test_opt_split_input_file(tmp_path):
    src = tmp_path / "split.mlir"
    src.write_text(ADD + "// -----\n" + ADD.replace("add", "subtract"))
    proc = kiln(src, "--split-input-file", tool="kiln-opt")
    assert proc.returncode == 0
    assert proc.stdout.count("// -----") == 1
    assert "stablehlo.add" in proc.stdout and "stablehlo.subtract" in proc.stdout


def test_version_and_include_dir():
    assert kiln("--version").stdout.startswith("kiln ")
    include = Path(kiln("--include-dir").stdout.strip())
    assert (include / "kiln" / "custom_call.h").is_file()


def test_dump_dir_has_every_stage(tmp_path):
    proc = kiln("run", Path(__file__).parents[2] / "examples" / "mlp.mlir", "--dump-dir", tmp_path / "dump")
    assert proc.returncode == 0, proc.stderr
    names = sorted(p.name for p in (tmp_path / "dump").iterdir() if p.name.split(".")[2].isdigit())
    stages = [n.split(".")[3] for n in names]
    assert (tmp_path / "dump" / "module_0000.mlp.before_optimizations.mlir").is_file()
    assert stages[0] == "verify" and stages[-1] == "lower"
    assert {"verify", "optimize", "legalize", "fuse", "bufferize", "codegen"} <= set(stages)
    assert "llvm.func" in (tmp_path / "dump" / names[-1]).read_text()
