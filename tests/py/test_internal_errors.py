"""Only KilnError (and the user's own exceptions) leave Kiln: a bug in Kiln's code is an
InternalError naming a directory with the input and the traceback, and the CLI prints one line
unless asked for the traceback."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kiln
import kiln.driver.executable as executable
from kiln.errors import InternalError
from kiln.lowering.ir_util import symbol_name

PROGRAM = "func.func @main(%x: tensor<f32>) -> tensor<f32> {\n  return %x : tensor<f32>\n}"


@pytest.fixture
def kiln_bug(monkeypatch):
    """Make a Kiln function fail the way a bug does: a TypeError raised in Kiln's code."""
    monkeypatch.setattr(executable, "_result_buffer", symbol_name)


def test_a_bug_in_kiln_is_an_internal_error_with_a_report(kiln_bug):
    exe = kiln.compile(PROGRAM)
    with pytest.raises(InternalError, match="internal error: TypeError") as info:
        exe(np.float32(1))
    assert isinstance(info.value, kiln.KilnError)
    report = Path(info.value.hint.split("files in ")[1])
    assert "TypeError" in (report / "traceback.txt").read_text()


def test_a_users_exception_is_not_wrapped():
    def target(results, operands, **_):
        raise ZeroDivisionError("the user's own")

    kiln.register_custom_call("internal_errors_user", target)
    exe = kiln.compile("func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
                       "  %0 = stablehlo.custom_call @internal_errors_user(%x) : "
                       "(tensor<2xf32>) -> tensor<2xf32>\n  return %0 : tensor<2xf32>\n}")
    with pytest.raises(ZeroDivisionError, match="the user's own"):
        exe(np.ones(2, np.float32))


def test_cli_prints_one_line_and_saves_the_input(kiln_bug, tmp_path, capsys):
    from kiln.cli.main import main
    src = tmp_path / "prog.mlir"
    src.write_text(PROGRAM)
    np.save(tmp_path / "x.npy", np.float32(2))
    assert main(["run", str(src), "--inputs", str(tmp_path / "x.npy")]) == 70
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "kiln run: error: internal error: TypeError" in err
    report = Path(err.split("files in ")[1].rstrip(")\n"))
    assert (report / "prog.mlir").read_text() == PROGRAM


def test_cli_traceback_flag_shows_the_traceback(kiln_bug, tmp_path):
    from kiln.cli.main import main
    src = tmp_path / "prog.mlir"
    src.write_text(PROGRAM)
    np.save(tmp_path / "x.npy", np.float32(2))
    with pytest.raises(InternalError):
        main(["run", str(src), "--inputs", str(tmp_path / "x.npy"), "--traceback"])
