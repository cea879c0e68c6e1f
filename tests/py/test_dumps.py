"""XLA-style dumps (module_NNNN.<name>.*.mlir, the pass regex) and the timing report."""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kiln
from kiln.errors import KilnError

BIN = Path(sys.executable).parent
MLP = Path(__file__).parents[2] / "examples" / "mlp.mlir"
# `optimize` drops the unused private function: the dumps before and after it differ there.
NAMED = """module @adder {
  func.func private @unused(%x: tensor<3xi32>) -> tensor<3xi32> {
    %0 = stablehlo.add %x, %x : tensor<3xi32>
    return %0 : tensor<3xi32>
  }
  func.func @main(%x: tensor<3xi32>) -> tensor<3xi32> {
    %1 = stablehlo.multiply %x, %x : tensor<3xi32>
    return %1 : tensor<3xi32>
  }
}
"""


def cli(*args, tool="kiln"):
    return subprocess.run([str(BIN / tool), *map(str, args)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONFAULTHANDLER": ""})


def dumped(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_file_names_follow_xla(tmp_path):
    proc = cli("run", MLP, "--dump-dir", tmp_path)
    assert proc.returncode == 0, proc.stderr
    names = dumped(tmp_path)
    assert "module_0000.mlp.before_optimizations.mlir" in names
    assert "module_0000.mlp.after_optimizations.mlir" in names
    stages = [n.split(".")[2:4] for n in names if n.split(".")[2].isdigit()]
    assert stages == [["01", "verify"], ["02", "partition"], ["03", "layout"], ["04", "optimize"],
                      ["05", "legalize"], ["06", "fuse"], ["07", "bufferize"], ["08", "codegen"],
                      ["09", "lower"]]


def test_before_and_after_optimizations_content(tmp_path):
    exe = kiln.compile(NAMED, dump_dir=tmp_path)
    np.testing.assert_allclose(exe(np.array([1, 2, 3], np.int32))[0], [1, 4, 9])
    (before,) = tmp_path.glob("module_*.adder.before_optimizations.mlir")  # the sym_name
    (after,) = tmp_path.glob("module_*.adder.after_optimizations.mlir")
    (optimized,) = tmp_path.glob("module_*.adder.04.optimize.mlir")
    assert re.fullmatch(r"module_\d{4}", before.name.split(".")[0])
    assert "@unused" in before.read_text() and "@unused" not in after.read_text()
    assert "stablehlo.multiply" in after.read_text() and "linalg" not in after.read_text()
    assert after.read_text() == optimized.read_text()


def test_module_ids_count_compiles(tmp_path):
    kiln.compile(NAMED, dump_dir=tmp_path)
    kiln.compile(NAMED, dump_dir=tmp_path)
    ids = {p.name.split(".")[0] for p in tmp_path.glob("*.before_optimizations.mlir")}
    assert len(ids) == 2


def test_pass_regex_selects_passes(tmp_path):
    kiln.compile(NAMED, dump_dir=tmp_path, dump_pass_regex=r"^(cse|kiln-lower-sort)$")
    passes = sorted(".".join(p.name.split(".")[2:-1]) for p in tmp_path.iterdir()
                    if len(p.name.split(".")) == 6)
    # cse runs in optimize and fuse; kiln-lower-sort in legalize; nothing else matches.
    assert passes == ["04.optimize.cse", "05.legalize.kiln-lower-sort", "06.fuse.cse"]
    (after_cse,) = tmp_path.glob("*.04.optimize.cse.mlir")
    assert "stablehlo.multiply" in after_cse.read_text()


def test_pass_regex_needs_a_directory_and_a_valid_pattern(tmp_path):
    with pytest.raises(KilnError, match="needs dump_dir"):
        kiln.compile(NAMED, dump_pass_regex="cse")
    with pytest.raises(KilnError, match="invalid regular expression"):
        kiln.compile(NAMED, dump_dir=tmp_path, dump_pass_regex="(")


def test_executable_timings_hold_passes():
    exe = kiln.compile(NAMED, timing=True)
    stages = {t.name: t for t in exe.timings}
    # Every stage, then LLVM's code generation.
    assert list(stages) == exe.stage_names()[1:] + ["llvm"]
    assert {"verify", "optimize", "legalize", "bufferize", "codegen", "lower"} <= set(stages)
    optimize = [p.name for p in stages["optimize"].passes]
    assert "cse" in optimize and any(n.startswith("kiln-outline-checks") for n in optimize)
    for stage in stages.values():
        assert sum(p.seconds for p in stage.passes) <= stage.seconds * 1.01 + 1e-4
    assert not kiln.compile(NAMED).timings[0].passes  # per pass only when asked for


def test_run_timing_report(tmp_path):
    proc = cli("run", MLP, "--timing")
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stderr.splitlines() if "%)" in line]
    stage_rows = [r.split("%)")[1] for r in rows if re.search(r"%\)  \S", r)]
    assert [r.strip() for r in stage_rows] == ["verify", "partition", "layout", "optimize",
                                               "legalize", "fuse",
                                               "bufferize", "codegen", "lower", "llvm", "Total"]
    nested = [r.split("%)")[1].strip() for r in rows if "%)    " in r]
    assert "kiln-validate" in nested and "canonicalize" in nested  # a Kiln and an upstream pass
    assert "Total wall time" in proc.stderr and "Total wall time" not in proc.stdout


def test_opt_stage_dumps_and_timing(tmp_path):
    proc = cli("--stage", "optimize", "--timing", "--dump-dir", tmp_path, "--dump-pass-regex",
               "^cse$", MLP, tool="kiln-opt")
    assert proc.returncode == 0, proc.stderr
    assert "func.func" in proc.stdout and "linalg" not in proc.stdout
    assert "    cse" in proc.stderr and "legalize" not in proc.stderr
    assert dumped(tmp_path) == ["module_0000.mlp.01.verify.mlir",
                                "module_0000.mlp.02.partition.mlir",
                                "module_0000.mlp.03.layout.mlir",
                                "module_0000.mlp.04.optimize.cse.mlir",
                                "module_0000.mlp.04.optimize.mlir",
                                "module_0000.mlp.after_optimizations.mlir",
                                "module_0000.mlp.before_optimizations.mlir"]


def test_the_plan_is_dumped_as_text(tmp_path):
    exe = kiln.compile(NAMED, dump_dir=tmp_path)
    text = {p.name.split(".", 2)[2]: p.read_text() for p in tmp_path.iterdir()
            if p.suffix == ".txt"}
    assert text["buffer-assignment.txt"] == str(exe.buffer_assignment())
    assert text["thunk-sequence.txt"] == str(exe.thunks())
    assert "allocation 0: size 12, parameter 0" in text["buffer-assignment.txt"]


def test_opt_pass_dumps_and_timing(tmp_path):
    proc = cli("--pass", "canonicalize,cse", "--dump-dir", tmp_path, "--dump-pass-regex",
               "^cse$", "--timing", MLP, tool="kiln-opt")
    assert proc.returncode == 0, proc.stderr
    assert dumped(tmp_path) == ["module_0000.mlp.01.passes.cse.mlir", "module_0000.mlp.01.passes.mlir",
                                "module_0000.mlp.before_optimizations.mlir"]
    assert "Total wall time" in proc.stderr and "canonicalize" in proc.stderr


def test_long_compiles_show_progress(monkeypatch, capfd):
    from kiln.driver import build
    monkeypatch.setattr(build, "PROGRESS_AFTER_S", 0.0)
    kiln.compile(NAMED, progress=True, isolate=False, extra_passes={
        "fuse": [lambda module: __import__("time").sleep(0.6)]})
    err = capfd.readouterr().err
    assert "kiln: compiling @main: " in err and "kiln: compiling @main: done in" in err
    assert "fuse" in err  # the stage it was in while it waited
