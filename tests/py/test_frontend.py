"""Sources in every form, detected from content: text, bytecode, portable artifact, path, Module."""
import io

import numpy as np
import pytest
from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo

import kiln
from kiln.context import make_context
from kiln.frontend.detect import Format, detect

PROGRAM = """func.func @main(%x: tensor<3xi32>) -> tensor<3xi32> {
  %0 = stablehlo.multiply %x, %x : tensor<3xi32>
  return %0 : tensor<3xi32>
}"""
X = np.array([1, -2, 3], np.int32)


def check(exe):
    np.testing.assert_array_equal(exe(X)[0], X * X)


def bytecode() -> bytes:
    with make_context():
        module = ir.Module.parse(PROGRAM)
        buf = io.BytesIO()
        module.operation.write_bytecode(buf)
        return buf.getvalue()


def artifact(version=None) -> bytes:
    return _stablehlo.serialize_portable_artifact_str(PROGRAM, version or _stablehlo.get_current_version())


def test_text():
    check(kiln.compile(PROGRAM))


def test_text_bytes():
    check(kiln.compile(PROGRAM.encode()))


def test_bytecode():
    data = bytecode()
    assert detect(data) is Format.MLIR_BYTECODE
    check(kiln.compile(data))


@pytest.mark.parametrize("version", ["current", "minimum"])
def test_portable_artifact(version):
    v = _stablehlo.get_current_version() if version == "current" else _stablehlo.get_minimum_version()
    check(kiln.compile(artifact(v)))


def test_path_with_misleading_suffix(tmp_path):
    # Content decides, not the name: bytecode in a file called .mlir.
    path = tmp_path / "program.mlir"
    path.write_bytes(artifact())
    check(kiln.compile(path))
    check(kiln.compile(str(path)))


def test_ir_module():
    with make_context():
        module = ir.Module.parse(PROGRAM)
    check(kiln.compile(module))


def test_load_returns_stablehlo_module(tmp_path):
    path = tmp_path / "p.bc"
    path.write_bytes(artifact())
    module = kiln.load(path)
    assert "stablehlo.multiply" in str(module)


def test_newer_artifact_version_is_a_clear_error():
    data = artifact().replace(b"StableHLO_v" + _stablehlo.get_current_version().encode(), b"StableHLO_v9.99.0", 1)
    with pytest.raises(kiln.KilnError, match=r"written by StableHLO 9\.99\.0; this Kiln reads StableHLO .* to"):
        kiln.compile(data)


def test_detects_hlo_text():
    assert detect("HloModule m\n\nENTRY e {}") is Format.HLO_TEXT
    assert detect("// comment\nmodule {}") is Format.MLIR_TEXT


def test_ir_after_every_stage():
    exe = kiln.compile(PROGRAM)
    for stage in exe.stage_names():
        assert "func" in exe.ir(stage)
    assert "linalg.generic" in exe.ir("legalize")
    assert "llvm.func" in exe.ir("lower")
    with pytest.raises(kiln.KilnError, match="unknown stage 'nope'"):
        exe.ir("nope")


def test_corrupt_bytecode_is_a_located_error(tmp_path):
    path = tmp_path / "bad.bc"
    path.write_bytes(bytecode()[:40])
    with pytest.raises(kiln.KilnError, match=r"bad.bc: cannot"):
        kiln.compile(path)


def test_older_mlir_text_with_bit_packed_i1_constants():
    """Older MLIR printed dense i1 hex 8 elements a byte (torch_xla's get_stablehlo_text:
    Swin-T's attention masks); the bundled parser wants a byte an element."""
    src = """func.func @main(%x: tensor<10xf32>) -> tensor<10xf32> {
  %m = stablehlo.constant dense<"0x0502"> : tensor<10xi1>
  %z = stablehlo.constant dense<0.0> : tensor<10xf32>
  %0 = stablehlo.select %m, %x, %z : tensor<10xi1>, tensor<10xf32>
  return %0 : tensor<10xf32>
}"""
    x = np.arange(1, 11, dtype=np.float32)
    (got,) = kiln.compile(src)(x)
    mask = np.zeros(10, bool)
    mask[[0, 2, 9]] = True          # 0x05: elements 0 and 2; 0x02: element 8 + 1
    np.testing.assert_array_equal(got, np.where(mask, x, 0))
    # A byte an element (today's form) is read as it is.
    today = src.replace('"0x0502"', '"0x' + "".join("01" if b else "00" for b in mask) + '"')
    np.testing.assert_array_equal(kiln.compile(today)(x)[0], got)
