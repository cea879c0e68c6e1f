"""Arguments are checked against the signature, with errors naming the argument."""
import numpy as np
import pytest

import kiln
from conftest import binary


@pytest.fixture(scope="module")
def exe():
    return kiln.compile(binary("stablehlo.add", "tensor<2x3xf32>"))


def test_wrong_dtype_names_argument_and_fix(exe):
    with pytest.raises(kiln.KilnError, match=r"argument 1 of @main must be tensor<2x3xf32>, got float64\[2, 3\].*astype\('float32'\)"):
        exe(np.zeros((2, 3), np.float32), np.zeros((2, 3)))


def test_wrong_shape(exe):
    with pytest.raises(kiln.KilnError, match=r"argument 0 of @main must be tensor<2x3xf32>, got shape \[3, 2\]"):
        exe(np.zeros((3, 2), np.float32), np.zeros((2, 3), np.float32))


def test_wrong_rank(exe):
    with pytest.raises(kiln.KilnError, match=r"argument 0 .* got shape \[6\]"):
        exe(np.zeros(6, np.float32), np.zeros((2, 3), np.float32))


def test_wrong_count(exe):
    with pytest.raises(kiln.KilnError, match=r"@main takes 2 argument\(s\), got 1"):
        exe(np.zeros((2, 3), np.float32))


def test_python_scalars_take_the_parameter_dtype():
    exe = kiln.compile(binary("stablehlo.multiply", "tensor<i32>"))
    (z,) = exe(6, 7)
    assert z.dtype == np.int32 and z == 42


def test_unknown_entry():
    with pytest.raises(kiln.KilnError, match=r"no function named 'nope'.*main"):
        kiln.compile(binary("stablehlo.add", "tensor<f32>"), entry="nope")


def test_unknown_target():
    with pytest.raises(kiln.KilnError, match=r"unknown target 'tpu'.*cpu"):
        kiln.compile(binary("stablehlo.add", "tensor<f32>"), target="tpu")


def test_parse_error_is_located():
    with pytest.raises(kiln.KilnError, match=r"<string>:2:\d+: cannot parse MLIR"):
        kiln.compile("func.func @main() {\n  %0 = stablehlo.bogus : tensor<f32>\n}")


def test_missing_file():
    with pytest.raises(kiln.KilnError, match=r"cannot read 'no/such/file.mlir'"):
        kiln.compile("no/such/file.mlir")
