"""Inputs that crashed the process (SIGSEGV/SIGABRT) in the baseline: each now works or is a
located KilnError. Each test runs in this process, so a regression kills the test run."""
from __future__ import annotations

import numpy as np
import pytest
from torch_mlir import ir

import kiln
from kiln.context import make_context
from kiln.lowering.guards import copies_as_loops


def test_check_eq_verdict_returned_from_main():
    # `check.eq` yields its verdict and main returns it: outlining the check used to leave
    # the return pointing at the erased op (SIGSEGV; all gather_from_take_*_qi8 files).
    src = ("func.func @main() -> tensor<i1> {\n"
           "  %a = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>\n"
           "  %b = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>\n"
           "  %0 = stablehlo.custom_call @check.eq(%a, %b) : (tensor<2xf32>, tensor<2xf32>) -> tensor<i1>\n"
           "  return %0 : tensor<i1>\n}")
    outputs, outcomes = kiln.compile(src).run_checks()
    assert outputs[0].item() is True or outputs[0].item() == 1
    assert len(outcomes) == 1 and outcomes[0].passed


def test_check_eq_verdict_failing_is_reported():
    src = ("func.func @main() -> tensor<i1> {\n"
           "  %a = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>\n"
           "  %b = stablehlo.constant dense<[1.0, 3.0]> : tensor<2xf32>\n"
           "  %0 = stablehlo.custom_call @check.eq(%a, %b) : (tensor<2xf32>, tensor<2xf32>) -> tensor<i1>\n"
           "  return %0 : tensor<i1>\n}")
    _, outcomes = kiln.compile(src).run_checks()
    assert len(outcomes) == 1 and not outcomes[0].passed


def test_identity_complex_bitcast_runs():
    t = "tensor<3xcomplex<f64>>"
    src = (f"func.func @main(%x: {t}) -> {t} {{\n"
           f"  %0 = stablehlo.bitcast_convert %x : ({t}) -> {t}\n  return %0 : {t}\n}}")
    x = np.array([1 + 2j, -0.0 - 1j, complex(np.nan, np.inf)], np.complex128)
    (got,) = kiln.compile(src)(x)
    np.testing.assert_array_equal(got.view(np.uint64), x.view(np.uint64))


def test_complex128_to_complex64_bitcast_matches_numpy_view():
    src = ("func.func @main(%x: tensor<3xcomplex<f64>>) -> tensor<3x2xcomplex<f32>> {\n"
           "  %0 = stablehlo.bitcast_convert %x : (tensor<3xcomplex<f64>>) -> tensor<3x2xcomplex<f32>>\n"
           "  return %0 : tensor<3x2xcomplex<f32>>\n}")
    x = np.array([1.5 - 2j, complex(-0.0, np.inf), complex(np.nan, 1e-310)], np.complex128)
    (got,) = kiln.compile(src)(x)
    np.testing.assert_array_equal(got.view(np.uint32), x.view(np.complex64).reshape(3, 2).view(np.uint32))


def test_complex64_to_complex128_bitcast_round_trips():
    src = ("func.func @main(%x: tensor<2x2xcomplex<f32>>) -> tensor<2xcomplex<f64>> {\n"
           "  %0 = stablehlo.bitcast_convert %x : (tensor<2x2xcomplex<f32>>) -> tensor<2xcomplex<f64>>\n"
           "  return %0 : tensor<2xcomplex<f64>>\n}")
    want = np.array([3.25 + 1e300j, complex(np.nan, -0.0)], np.complex128)
    x = want.view(np.complex64).reshape(2, 2)
    (got,) = kiln.compile(src)(x)
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))


def test_other_complex_bitcast_is_located_error():
    src = ("func.func @main(%x: tensor<2xcomplex<f32>>) -> tensor<2xi64> {\n"
           "  %0 = stablehlo.bitcast_convert %x : (tensor<2xcomplex<f32>>) -> tensor<2xi64>\n"
           "  return %0 : tensor<2xi64>\n}")
    with pytest.raises(kiln.KilnError) as err:
        kiln.compile(src, filename="cast.mlir")
    assert str(err.value).startswith("cast.mlir:2:8:") and "bitcast_convert" in str(err.value)


def test_strided_memref_copy_becomes_linalg_copy():
    # A copy into a subview lowered to a call of `memrefCopy`, which the JIT cannot resolve
    # (SIGSEGV: pad_*, slice_*, reduce_window_*, conv_general_dilated_*).
    with make_context():
        module = ir.Module.parse(
            "func.func @f(%a: memref<2x3xi8>, %b: memref<6x4xi8>) {\n"
            "  %s = memref.subview %b[1, 0] [2, 3] [2, 1] : memref<6x4xi8> to "
            "memref<2x3xi8, strided<[8, 1], offset: 4>>\n"
            "  memref.copy %a, %s : memref<2x3xi8> to memref<2x3xi8, strided<[8, 1], offset: 4>>\n"
            "  %c = memref.alloc() : memref<6x4xi8>\n"
            "  memref.copy %b, %c : memref<6x4xi8> to memref<6x4xi8>\n"
            "  return\n}")
        copies_as_loops(module)
        text = str(module)
    assert "linalg.copy" in text
    assert text.count("memref.copy") == 1  # the contiguous copy stays a memcpy


def test_pad_runs_without_crashing():
    src = ("func.func @main(%x: tensor<2x3xi8>) -> tensor<6x4xi8> {\n"
           "  %p = stablehlo.constant dense<7> : tensor<i8>\n"
           "  %0 = stablehlo.pad %x, %p, low = [1, 0], high = [2, 1], interior = [1, 0] : "
           "(tensor<2x3xi8>, tensor<i8>) -> tensor<6x4xi8>\n"
           "  return %0 : tensor<6x4xi8>\n}")
    x = np.array([[1, -2, 3], [4, 5, -128]], np.int8)
    want = np.full((6, 4), 7, np.int8)
    want[1::2][:2, :3] = x
    (got,) = kiln.compile(src)(x)
    np.testing.assert_array_equal(got, want)
