"""Size arithmetic (issue 25, class 4): a shape whose byte size overflows 64 bits or exceeds
KILN_MAX_BUFFER_BYTES is a located KilnError before anything is allocated, at compile time for
static shapes and at run time for sizes the program computes. The reproducers that wrote past
a heap block run in a child process, so a regression shows as the signal."""
from __future__ import annotations

import numpy as np
import pytest

import kiln
from kiln.lowering.size_limits import LIMIT_ENV, byte_size, max_buffer_bytes, physical_memory
from test_runtime_bounds import _isolated


def _iota_sum(shape: str) -> str:
    return (f"func.func @main() -> tensor<f32> {{\n"
            f"  %r = stablehlo.iota dim = 0 : tensor<{shape}xf32>\n"
            f"  %z = stablehlo.constant dense<0.0> : tensor<f32>\n"
            f"  %s = stablehlo.reduce(%r init: %z) applies stablehlo.add across dimensions = "
            f"[0, 1] : (tensor<{shape}xf32>, tensor<f32>) -> tensor<f32>\n"
            f"  return %s : tensor<f32>\n}}")


@pytest.mark.parametrize("shape, words", [
    ("2147483648x2147483648", "more than a 64-bit size"),   # wrapped to 0 bytes: SIGSEGV before
    ("9223372036854775807x1", "more than a 64-bit size"),   # a dimension of 2^63 - 1
    ("4611686018427387904x1", "more than a 64-bit size"),   # 2^62 x 4 bytes = 2^64
])
def test_static_sizes_that_wrap_are_located_errors(shape, words):
    outcome = _isolated(_iota_sum(shape))
    assert outcome.get("error") == "KilnError", outcome
    assert "<string>:2:8" in outcome["message"] and "stablehlo.iota" in outcome["message"]
    assert words in outcome["message"] and f"tensor<{shape}xf32>" in outcome["message"]


def test_limit_from_the_environment(monkeypatch):
    monkeypatch.setenv(LIMIT_ENV, "4096")
    with pytest.raises(kiln.KilnError, match="4096-byte limit"):
        kiln.compile(_iota_sum("32x33"))     # 4224 bytes
    (out,) = kiln.compile(_iota_sum("16x16"))()   # a 1024-byte temporary
    assert out == sum(range(16)) * 16


@pytest.mark.parametrize("text", ["lots", "-1", "0"])
def test_bad_limit_is_reported(monkeypatch, text):
    monkeypatch.setenv(LIMIT_ENV, text)
    with pytest.raises(kiln.KilnError, match=LIMIT_ENV):
        max_buffer_bytes()


def test_default_limit_is_physical_memory(monkeypatch):
    monkeypatch.delenv(LIMIT_ENV, raising=False)
    assert max_buffer_bytes() == physical_memory() > 0


def test_byte_sizes_are_exact():
    from torch_mlir import ir
    from kiln.context import make_context
    with make_context():
        assert byte_size(ir.Type.parse("tensor<2147483648x2147483648xf32>")) == 1 << 64
        assert byte_size(ir.Type.parse("tensor<3x?xcomplex<f64>>")) == 48
        assert byte_size(ir.Type.parse("memref<5xi1>")) == 5
        assert byte_size(ir.Type.parse("tuple<tensor<2xf32>, tensor<3xi8>>")) == 11
        assert byte_size(ir.Type.parse("!stablehlo.token")) is None


def test_an_argument_type_too_large_is_refused():
    src = ("func.func @main(%x: tensor<3037000500x3037000500xf64>) -> tensor<3037000500x3037000500xf64> {\n"
           "  return %x : tensor<3037000500x3037000500xf64>\n}")
    with pytest.raises(kiln.KilnError, match="64-bit size"):
        kiln.compile(src)


def test_hlo_text_shapes_are_checked_too():
    hlo = ("HloModule m\n\nENTRY main {\n"
           "  i = f32[2147483648,2147483648]{1,0} iota(), iota_dimension=0\n"
           "  z = f32[] constant(0)\n"
           "  ROOT r = f32[] reduce(i, z), dimensions={0,1}, to_apply=add\n}\n\n"
           "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
           "  ROOT s = f32[] add(a, b)\n}\n")
    outcome = _isolated(hlo)
    assert outcome.get("error") == "KilnError" and "64-bit size" in outcome["message"], outcome


DYNAMIC_IOTA = (
    "func.func @main(%n: tensor<1xi64>) -> tensor<f32> {\n"
    "  %r = stablehlo.dynamic_iota %n, dim = 0 : (tensor<1xi64>) -> tensor<?xf32>\n"
    "  %z = stablehlo.constant dense<0.0> : tensor<f32>\n"
    "  %s = stablehlo.reduce(%r init: %z) applies stablehlo.add across dimensions = [0]"
    " : (tensor<?xf32>, tensor<f32>) -> tensor<f32>\n  return %s : tensor<f32>\n}")


@pytest.mark.parametrize("n", [1 << 62, (1 << 63) - 1, (1 << 61) + 1])
def test_run_time_sizes_that_wrap_are_errors(n):
    outcome = _isolated(DYNAMIC_IOTA, [np.array([n], np.int64)])   # SIGSEGV before
    assert outcome.get("error") == "KilnError", outcome
    assert "dynamic_iota" in outcome["message"] and "64 bits" in outcome["message"]


def test_run_time_limit_from_the_environment():
    # The runtime's allocator applies the limit of the process that runs the code, whatever
    # the limit was where it was compiled (the compile cache may hold it from before).
    outcome = _isolated(DYNAMIC_IOTA, [np.array([2048], np.int64)], env={LIMIT_ENV: "4096"})
    assert outcome.get("error") == "KilnError", outcome
    assert "exceeds KILN_MAX_BUFFER_BYTES (4096 bytes" in outcome["message"]
    outcome = _isolated(DYNAMIC_IOTA, [np.array([512], np.int64)], env={LIMIT_ENV: "4096"})
    assert outcome.get("result") == [float(sum(range(512)))], outcome


def test_two_dynamic_sizes_whose_product_wraps():
    src = ("func.func @main(%n: tensor<2xi64>) -> tensor<f32> {\n"
           "  %r = stablehlo.dynamic_iota %n, dim = 0 : (tensor<2xi64>) -> tensor<?x?xf32>\n"
           "  %z = stablehlo.constant dense<0.0> : tensor<f32>\n"
           "  %s = stablehlo.reduce(%r init: %z) applies stablehlo.add across dimensions = [0, 1]"
           " : (tensor<?x?xf32>, tensor<f32>) -> tensor<f32>\n  return %s : tensor<f32>\n}")
    outcome = _isolated(src, [np.array([1 << 32, 1 << 30], np.int64)])
    assert outcome.get("error") == "KilnError", outcome
    outcome = _isolated(src, [np.array([3, 4], np.int64)])
    assert outcome.get("result") == [float((0 + 1 + 2) * 4)], outcome   # iota along dim 0
