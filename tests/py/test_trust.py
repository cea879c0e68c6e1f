"""The trust boundary (lowering/trust.py): an untrusted program never reaches native code that
Kiln did not put there, in any input form."""
from __future__ import annotations

import dataclasses
import io

import numpy as np
import pytest
from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo

import kiln
from kiln.context import make_context
from kiln.lowering.trust import check_lowered


def _system_program(marker) -> str:
    """A program that would run `touch MARKER` through libc's system() if the JIT resolved it."""
    command = list(f"touch {marker}".encode()) + [0]
    n = len(command)
    return (f"func.func private @system(tensor<{n}xi8>) -> tensor<i32>\n"
            f"func.func @main() -> tensor<i32> {{\n"
            f"  %c = stablehlo.constant dense<{command}> : tensor<{n}xi8>\n"
            f"  %r = call @system(%c) : (tensor<{n}xi8>) -> tensor<i32>\n"
            f"  return %r : tensor<i32>\n}}")


def _bytecode(text: str) -> bytes:
    with make_context():
        module = ir.Module.parse(text)
        buf = io.BytesIO()
        module.operation.write_bytecode(buf)
    return buf.getvalue()


def _portable_artifact(text: str) -> bytes:
    return _stablehlo.serialize_portable_artifact_str(text, _stablehlo.get_current_version())


def _jax_export(text: str) -> bytes:
    """A serialized jax.export whose module is replaced by `text` (as a downloaded export
    could be)."""
    jax = pytest.importorskip("jax")
    exported = jax.export.export(jax.jit(lambda: np.int32(0)))()
    forged = dataclasses.replace(exported, mlir_module_serialized=_portable_artifact(text),
                                 in_avals=(), out_avals=(jax.core.ShapedArray((), np.int32),))
    return bytes(forged.serialize())


@pytest.mark.parametrize("form", ["text", "bytecode", "portable", "jax"])
def test_system_call_is_rejected_in_every_form(tmp_path, form):
    marker = tmp_path / "pwned"
    text = _system_program(marker)
    source = {"text": lambda: text, "bytecode": lambda: _bytecode(text),
              "portable": lambda: _portable_artifact(text), "jax": lambda: _jax_export(text)}[form]()
    with pytest.raises(kiln.KilnError, match="@system is declared without a body"):
        kiln.compile(source)()
    assert not marker.exists()


@pytest.mark.parametrize("declaration, call", [
    ("func.func private @getpid() -> tensor<i32>", "call @getpid() : () -> tensor<i32>"),
    ("func.func private @abort() -> tensor<i32>", "call @abort() : () -> tensor<i32>"),
    # A forged call into Kiln's own custom-call dispatcher with made-up addresses.
    ("func.func private @kiln_custom_call(tensor<i64>, tensor<i64>) -> tensor<i32>",
     "call @kiln_custom_call(%c, %c) : (tensor<i64>, tensor<i64>) -> tensor<i32>"),
])
def test_external_declarations_are_rejected(declaration, call):
    src = (f"{declaration}\nfunc.func @main() -> tensor<i32> {{\n"
           f"  %c = stablehlo.constant dense<4096> : tensor<i64>\n"
           f"  %r = {call}\n  return %r : tensor<i32>\n}}")
    with pytest.raises(kiln.KilnError, match="declared without a body") as info:
        kiln.compile(src, filename="evil.mlir")
    assert info.value.location == "evil.mlir:1:1"


def test_llvm_ops_are_rejected_with_their_location():
    src = ("func.func @main() -> tensor<i32> {\n"
           "  %a = llvm.mlir.constant(4096 : i64) : i64\n"
           "  %p = llvm.inttoptr %a : i64 to !llvm.ptr\n"
           "  %v = llvm.mlir.constant(7 : i32) : i32\n"
           "  llvm.store %v, %p : i32, !llvm.ptr\n"
           "  %c = stablehlo.constant dense<1> : tensor<i32>\n"
           "  return %c : tensor<i32>\n}")
    with pytest.raises(kiln.KilnError, match="'llvm.mlir.constant' is not allowed") as info:
        kiln.compile(src, filename="evil.mlir")
    assert info.value.location == "evil.mlir:2:8"


@pytest.mark.parametrize("body", [
    "%i = arith.constant 100000 : index\n  %v = tensor.extract %t[%i] : tensor<4xi32>",
    "%m = memref.alloc() : memref<4xi32>",
])
def test_lower_level_dialects_are_rejected(body):
    # tensor.extract/insert and memref ops carry no bounds checks: out-of-range indices would
    # read or write arbitrary memory, so only StableHLO (whose indexing is clamped) is admitted.
    src = (f"func.func @main(%t: tensor<4xi32>) -> tensor<4xi32> {{\n  {body}\n"
           "  return %t : tensor<4xi32>\n}")
    with pytest.raises(kiln.KilnError, match="is not allowed in an input program"):
        kiln.compile(src)


@pytest.mark.parametrize("attribute", ["llvm.emit_c_interface", "kiln.custom_call_site = 7 : i64",
                                       "kiln.checks = []"])
def test_code_steering_attributes_are_rejected(attribute):
    src = (f"func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> attributes {{{attribute}}} {{\n"
           "  return %x : tensor<2xf32>\n}")
    with pytest.raises(kiln.KilnError, match="is not allowed in an input program"):
        kiln.compile(src)


def test_public_function_shadowing_the_allocator_is_rejected():
    src = ("func.func @free(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
           "  return %x : tensor<2xf32>\n}")
    with pytest.raises(kiln.KilnError, match="would shadow a symbol"):
        kiln.compile(src)


def test_private_function_named_like_libm_is_renamed_and_runs():
    # JAX names a helper after the Python function it traced; `exp` must not become libm's.
    src = ("func.func private @exp(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
           "  %0 = stablehlo.exponential %x : tensor<2xf32>\n"
           "  %1 = stablehlo.add %0, %x : tensor<2xf32>\n"
           "  return %1 : tensor<2xf32>\n}\n"
           "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
           "  %0 = call @exp(%x) : (tensor<2xf32>) -> tensor<2xf32>\n"
           "  return %0 : tensor<2xf32>\n}")
    x = np.array([0.5, -1.0], np.float32)
    (y,) = kiln.compile(src)(x)
    np.testing.assert_allclose(y, np.exp(x) + x, rtol=1e-6)


def test_lowered_module_may_declare_only_kiln_symbols():
    with make_context():
        module = ir.Module.parse("llvm.func @system(!llvm.ptr) -> i32\n"
                                 "llvm.func @expf(f32) -> f32\n")
        with pytest.raises(kiln.KilnError, match="external function @system"):
            check_lowered(module)
        check_lowered(ir.Module.parse("llvm.func @expf(f32) -> f32\n"
                                      "llvm.func @kiln_custom_call(i64, i64)\n"))


def test_f64_to_half_precision_rounds_once(rng):
    # __truncdfhf2/__truncdfbf2 come from Kiln's runtime (runtime/kiln_softfloat.c): LLVM calls
    # them and the process may not have them. Bit-exact against numpy/ml_dtypes.
    import ml_dtypes
    n = 4096
    x = rng.standard_normal(n) * np.exp(rng.uniform(-40, 40, n))
    x[:8] = [np.inf, -np.inf, 0.0, -0.0, 65520.0, 2.0 ** -25, 2.0 ** -24 * 1.5, 1e300]
    src = (f"func.func @main(%x: tensor<{n}xf64>) -> (tensor<{n}xf16>, tensor<{n}xbf16>) {{\n"
           f"  %a = stablehlo.convert %x : (tensor<{n}xf64>) -> tensor<{n}xf16>\n"
           f"  %b = stablehlo.convert %x : (tensor<{n}xf64>) -> tensor<{n}xbf16>\n"
           f"  return %a, %b : tensor<{n}xf16>, tensor<{n}xbf16>\n}}")
    half, bf16 = kiln.compile(src)(x)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(half.view(np.uint16), x.astype(np.float16).view(np.uint16))
        np.testing.assert_array_equal(bf16.view(np.uint16),
                                      x.astype(ml_dtypes.bfloat16).view(np.uint16))
