"""The conformance runner isolates each file: a crash or a hang fails that file only."""
import os
import signal
import time

import pytest

from kiln import conformance

PASSING = """func.func @main() -> tensor<i32> {
  %a = stablehlo.constant dense<2> : tensor<i32>
  %0 = stablehlo.multiply %a, %a : tensor<i32>
  %e = stablehlo.constant dense<4> : tensor<i32>
  stablehlo.custom_call @check.expect_eq(%0, %e) {has_side_effect = true} : (tensor<i32>, tensor<i32>) -> ()
  return %0 : tensor<i32>
}
"""


@pytest.fixture
def suite(tmp_path):
    for name in ("a_pass", "b_crash", "c_hang", "d_wrong"):
        (tmp_path / f"{name}.mlir").write_text(PASSING if name != "d_wrong" else PASSING.replace("dense<4>", "dense<5>"))
    return tmp_path


def test_crash_and_hang_fail_only_their_file(suite, monkeypatch):
    real = conformance.run_file

    def sabotaged(path):
        # Runs in the forked child: simulate a segfault and a hang inside MLIR.
        if "crash" in os.path.basename(path):
            os.kill(os.getpid(), signal.SIGSEGV)
        if "hang" in os.path.basename(path):
            time.sleep(60)
        return real(path)

    monkeypatch.setattr(conformance, "run_file", sabotaged)
    lines = []
    results = conformance.run([str(suite)], jobs=2, timeout=3, report=lines.append)
    verdicts = {os.path.basename(r.path): (r.passed, r.detail) for r in results}
    assert verdicts["a_pass.mlir"][0], verdicts
    assert verdicts["b_crash.mlir"] == (False, "process died with SIGSEGV")
    assert verdicts["c_hang.mlir"] == (False, "timed out after 3 s")
    assert not verdicts["d_wrong.mlir"][0] and "expect_eq" in verdicts["d_wrong.mlir"][1]
    assert conformance.summary(results) == "1 passed, 3 failed"
    assert [line.split()[0] for line in lines] == ["PASS", "FAIL", "FAIL", "FAIL"]


def test_split_files_run_case_by_case(tmp_path):
    case = """func.func @case_NAME() {
  %c = stablehlo.constant dense<[1, 2]> : tensor<2xi8>
  %0 = stablehlo.negate %c : tensor<2xi8>
  "check.expect_eq_const"(%0) <{value = dense<[-1, EXPECTED]> : tensor<2xi8>}> : (tensor<2xi8>) -> ()
  return
}
"""
    path = tmp_path / "split.mlir"
    path.write_text(case.replace("NAME", "a").replace("EXPECTED", "-2") + "// -----\n"
                    + case.replace("NAME", "b").replace("EXPECTED", "7"))
    result = conformance.run_file(str(path))
    assert not result.passed
    assert [(c.name, c.passed) for c in result.cases] == [("case_a", True), ("case_b", False)]
    assert result.detail.startswith("1/2 cases passed")


def test_dynamic_program_without_checks_is_compared_with_the_interpreter(tmp_path):
    path = tmp_path / "dyn.mlir"
    path.write_text("""func.func @main(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %0 = stablehlo.exponential %x : tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}
""")
    result = conformance.run_file(str(path))
    assert result.passed, result.detail
    assert "match the reference interpreter" in result.detail
