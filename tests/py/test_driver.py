"""The driver applies the calling convention a front end returns with its module."""
from __future__ import annotations

import numpy as np
import pytest

import kiln
from kiln.context import make_context
from kiln.frontend import import_program
from kiln.frontend.convention import PLAIN

F32 = np.float32
ADD = """
func.func @main(%x: tensor<3xf32>, %y: tensor<3xf32>) -> tensor<3xf32> {
  %z = stablehlo.add %x, %y : tensor<3xf32>
  return %z : tensor<3xf32>
}
"""


def test_plain_modules_have_kilns_own_convention():
    imported = import_program(ADD, make_context(), "add.mlir")
    assert imported.convention == PLAIN and imported.filename == "add.mlir"
    exe = kiln.compile(ADD)
    assert exe.convention == PLAIN
    (z,) = exe(np.ones(3, F32), np.ones(3, F32))
    np.testing.assert_array_equal(z, [2, 2, 2])
    np.testing.assert_array_equal(exe.flat(np.ones(3, F32), np.zeros(3, F32))[0], [1, 1, 1])
    with pytest.raises(kiln.KilnError, match="positional arguments only, got 'y'"):
        exe(np.ones(3, F32), y=np.ones(3, F32))


jax = pytest.importorskip("jax")
pytest.importorskip("flatbuffers", reason="jax's Exported.serialize() needs the flatbuffers package")
from jax import export  # noqa: E402


def test_jax_exports_come_with_their_convention(tmp_path):
    f = lambda p: {"sum": p["a"] + p["b"]}  # noqa: E731
    args = {"a": np.ones(2, F32), "b": np.ones(2, F32)}
    data = bytes(export.export(jax.jit(f))(args).serialize())
    imported = import_program(data, make_context())
    convention = imported.convention
    assert convention.in_tree[0] == "tuple" and convention.out_tree[0] == "dict"
    assert not convention.infer_dimension_arguments and convention.kept_arguments == (0, 1)
    # The convention travels with the module: a module from kiln.load compiles to the same.
    path = tmp_path / "f.jax"
    path.write_bytes(data)
    for exe in (kiln.compile(data), kiln.compile(kiln.load(path))):
        assert exe.convention == convention
        got = exe({"a": np.arange(2, dtype=F32), "b": np.full(2, 3, F32)})
        np.testing.assert_array_equal(got["sum"], [3, 4])
