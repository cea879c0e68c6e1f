"""The interpret suite's check dialect syntax, read into the registered check ops at import."""
from __future__ import annotations

import pytest

import kiln
from kiln.conformance import run_file
from kiln.dialects.check import read_custom_syntax as rewrite

from conftest import INTERPRET, shared_file


def test_rewrite_keeps_line_numbers():
    text = ("func.func @f() {\n  %r = stablehlo.constant dense<[1, 2]> : tensor<2xi32>\n"
            "  check.expect_eq_const %r,\n      dense<[1, 2]> : tensor<2xi32>\n  func.return\n}\n")
    out = rewrite(text, "t.mlir")
    assert out.count("\n") == text.count("\n")
    assert out.splitlines()[4] == "  func.return"
    assert '"check.expect_eq_const"(%r) {value = dense<[1, 2]> : tensor<2xi32>}' in out


def test_rewrite_close_and_tolerance():
    out = rewrite("  check.expect_close %a, %b, max_ulp_difference = 3 : tensor<f16>, tensor<f16>\n"
                  "  check.expect_almost_eq_const %c, dense<5.1> : tensor<f64> {tolerance = 0.1 : f64}\n",
                  "t.mlir")
    assert '"check.expect_close"(%a, %b) {max_ulp_difference = 3 : i64} : (tensor<f16>, tensor<f16>) -> ()' in out
    assert "{value = dense<5.1> : tensor<f64>, tolerance = 0.1 : f64}" in out


def test_failing_check_is_reported():
    src = ("func.func @main() {\n  %r = stablehlo.constant dense<[1, 2]> : tensor<2xi32>\n"
           "  check.expect_eq_const %r, dense<[1, 3]> : tensor<2xi32>\n  func.return\n}\n")
    _, outcomes = kiln.compile(src, filename="f.mlir").run_checks()
    assert len(outcomes) == 1 and not outcomes[0].passed and outcomes[0].loc == "f.mlir:3:3"


def test_serialized_eq_compares_what_the_probe_recorded():
    src = ("func.func @main() {\n  %r = stablehlo.constant dense<[1, 2]> : tensor<2xi32>\n"
           '  %p = interpreter.probe %r, probe_id = "x" : tensor<2xi32>\n'
           '  check.expect_serialized_eq %p, probe_id = "x" : tensor<2xi32>\n'
           '  check.expect_serialized_eq %p, probe_id = "y" : tensor<2xi32>\n  func.return\n}\n')
    _, (recorded, missing) = kiln.compile(src, filename="p.mlir").run_checks()
    assert recorded.passed
    assert not missing.passed and "probe 'y' recorded no value" in missing.detail


@pytest.mark.parametrize("name", ["check.mlir", "atan2.mlir", "mulhi.mlir", "all_reduce.mlir",
                                  "send_recv.mlir", "probe.mlir"])
def test_interpret_files_pass(name):
    result = run_file(str(shared_file(name, INTERPRET)))
    assert result.passed, result.detail
    assert len(result.cases) > 1
