"""tests/jax_suite/run_jax_tests.py, the JAX-suite comparison of issue 26: how it reads pytest's
outcomes, resumes after a crash, groups failure reasons and builds its table. (The JAX suite
itself is not run here: it takes hours.)"""
import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "jax_suite" / "run_jax_tests.py"


@pytest.fixture(scope="module")
def runner():
    spec = importlib.util.spec_from_file_location("run_jax_tests", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def test_reason_groups_alike_messages(runner):
    one = runner.reason("Traceback...\n  File x\njax.errors.JaxRuntimeError: INVALID_ARGUMENT: "
                        "Kiln: /j/t.py:12:5: 'stablehlo.foo' in 'jit_f' of f32[3,4] at 0x7f12 "
                        "is not supported (3 ops)")
    two = runner.reason("jax.errors.JaxRuntimeError: INVALID_ARGUMENT: Kiln: /j/t.py:99:1: "
                        "'stablehlo.foo' in 'jit_g' of s32[7] at 0xabc is not supported (12 ops)")
    assert one == two == ("JaxRuntimeError: INVALID_ARGUMENT: Kiln: 'stablehlo.foo' in '…' of "
                          "T[…] at <address> is not supported (N ops)")
    other = runner.reason("JaxRuntimeError: Kiln: 'stablehlo.bar' in 'jit_f' is not supported")
    assert "'stablehlo.bar'" in other  # op names tell groups apart
    assert runner.reason("") == "(no message)"


def test_outcomes_from_lines_and_the_test_that_crashed(runner):
    outcomes, done = runner.Outcomes(), []
    stdout = textwrap.dedent("""\
        collected 4 items
        t.py::A::test_pass PASSED [ 25%]
        t.py::A::test_fail FAILED [ 50%]
        t.py::A::test_skip SKIPPED (no) [ 75%]
        t.py::A::test_crash """)
    crashed = runner.read_lines(stdout, outcomes, done, "the test process died (exit -6)")
    assert crashed == "t.py::A::test_crash"
    assert outcomes.passed == {"t.py::A::test_pass"}
    assert outcomes.skipped == {"t.py::A::test_skip"}
    assert outcomes.failed["t.py::A::test_crash"] == "the test process died (exit -6)"
    assert done == ["t.py::A::test_pass", "t.py::A::test_fail", "t.py::A::test_skip",
                    "t.py::A::test_crash"]


def test_failure_messages_from_the_junit_report(runner, tmp_path):
    report = tmp_path / "r.xml"
    report.write_text('<testsuites><testsuite><testcase classname="t.A" name="test_fail">'
                      '<failure message="AssertionError: 1 != 2">trace</failure></testcase>'
                      '</testsuite></testsuites>')
    outcomes = runner.Outcomes(failed={"t.py::A::test_fail": "?"})
    runner.read_report(report, outcomes)
    assert outcomes.failed == {"t.py::A::test_fail": "AssertionError: N != N"}


def test_compare_counts_only_cpu_passes_and_groups_kiln_failures(runner):
    cpu = runner.Outcomes(passed={"a", "b", "c", "d", "e"}, failed={"z": "x"})
    kiln = runner.Outcomes(passed={"a", "z"}, failed={"b": "E1", "c": "E1", "d": "E2"},
                           skipped={"e"})
    row = runner.compare("f.py", {"cpu": cpu, "kiln": kiln}, top=10)
    assert (row["cpu"], row["kiln"], row["rate"]) == (5, 1, 0.2)
    assert [(g["reason"], g["count"], g["example"]) for g in row["groups"]] == [
        ("E1", 2, "b"), ("E2", 1, "d"),
        ("skipped on kiln (the JAX test decides by platform)", 1, "e")]
    table = runner.format_table([row])
    assert "f.py" in table and "20.0%" in table and "e.g. b" in table


def test_file_names(runner):
    assert runner.file_names([], "fft_test, nn_test.py") == ["fft_test.py", "nn_test.py"]
    assert len(runner.file_names([], None)) == 15


def test_a_crashing_test_process_is_resumed_after_the_crash(runner, tmp_path):
    (tmp_path / "t_test.py").write_text(textwrap.dedent("""\
        import os
        def test_a(): pass
        def test_b(): os.abort()
        def test_c(): assert False, "wrong"
        """))
    outcomes = runner.run_file(tmp_path, "t_test.py", "cpu", None, timeout=60, test_timeout=0,
                               env={"PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1"})
    assert outcomes.passed == {"t_test.py::test_a"}
    assert outcomes.failed["t_test.py::test_b"].startswith("the test process died")
    assert outcomes.failed["t_test.py::test_c"].startswith("AssertionError: wrong")
    assert outcomes.restarts == 1 and not outcomes.crashed
