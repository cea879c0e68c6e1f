"""Dynamic shapes: specialised per call shapes, JAX's dimension arguments fixed from them."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import kiln
from kiln.conformance import _generated_inputs
from kiln.reference import evaluate

from conftest import shared_file

# JAX's form: the dimension variable %b is a leading scalar parameter, shapes built from it.
BROADCAST_ADD = """
func.func public @main(%arg0: tensor<i64>, %arg1: tensor<?x4xf32>, %arg2: tensor<2x?x4xf32>) -> tensor<2x?x4xf32> {
  %c2 = stablehlo.constant dense<2> : tensor<1xi32>
  %c4 = stablehlo.constant dense<4> : tensor<1xi32>
  %1 = stablehlo.convert %arg0 : (tensor<i64>) -> tensor<i32>
  %2 = stablehlo.reshape %1 : (tensor<i32>) -> tensor<1xi32>
  %4 = stablehlo.concatenate %c2, %2, %c4, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
  %5 = stablehlo.dynamic_broadcast_in_dim %arg1, %4, dims = [1, 2] : (tensor<?x4xf32>, tensor<3xi32>) -> tensor<2x?x4xf32>
  %12 = stablehlo.add %5, %arg2 : tensor<2x?x4xf32>
  return %12 : tensor<2x?x4xf32>
}
"""


@pytest.mark.parametrize("b", [1, 3, 5])
def test_dimension_argument_specialised_per_shape(b, rng):
    exe = kiln.compile(BROADCAST_ADD)
    x = rng.standard_normal((b, 4)).astype(np.float32)
    y = rng.standard_normal((2, b, 4)).astype(np.float32)
    (got,) = exe(np.array(b, np.int64), x, y)
    np.testing.assert_array_equal(got, x[None] + y)


def test_each_shape_compiles_once(rng):
    exe = kiln.compile(BROADCAST_ADD)
    for b in (2, 3, 2):
        exe(np.array(b, np.int64), np.ones((b, 4), np.float32), np.ones((2, b, 4), np.float32))
    assert len(exe._cache) == 2


def test_empty_dimension():
    exe = kiln.compile(BROADCAST_ADD)
    (got,) = exe(np.array(0, np.int64), np.ones((0, 4), np.float32), np.ones((2, 0, 4), np.float32))
    assert got.shape == (2, 0, 4)


def test_ambiguous_dimension_arguments_rejected():
    # Two variables used only elementwise: sizes 2 and 3 fit either way round.
    src = ("func.func @main(%a: tensor<i64>, %b: tensor<i64>, %x: tensor<?xf32>, %y: tensor<?xf32>)"
           " -> (tensor<?xf32>, tensor<?xf32>) {\n"
           "  %0 = stablehlo.negate %x : tensor<?xf32>\n  %1 = stablehlo.negate %y : tensor<?xf32>\n"
           "  return %0, %1 : tensor<?xf32>, tensor<?xf32>\n}")
    exe = kiln.compile(src)
    with pytest.raises(kiln.KilnError, match="dimension arguments"):
        exe(np.array(2, np.int64), np.array(3, np.int64), np.ones(2, np.float32), np.ones(3, np.float32))


@pytest.mark.parametrize("name", ["add_dynamic.mlir", "collapse_dynamic.mlir", "re2_dynamic.mlir",
                                  "vmap_acosh_bfloat16_20_20_dynamic.mlir"])
def test_conformance_dynamic_matches_reference(name):
    from kiln.conformance import run_file
    result = run_file(str(shared_file(name)))
    assert result.passed, result.detail


def test_generated_inputs_are_consistent():
    exe = kiln.compile(shared_file("collapse_dynamic.mlir"))
    inputs = _generated_inputs(exe)
    dims = {d for a in inputs[3:] for d in a.shape}
    assert all(int(a) in dims for a in inputs[:3])
    (out,) = exe(*inputs)
    assert out.shape == (3, 45, 7)


def test_reference_reads_bf16_and_complex():
    bf = "tensor<3xbf16>"
    src = (f"func.func @main(%a: {bf}, %c: tensor<2xcomplex<f64>>) -> ({bf}, tensor<2xcomplex<f64>>) {{\n"
           f"  %0 = stablehlo.add %a, %a : {bf}\n"
           f"  %1 = stablehlo.multiply %c, %c : tensor<2xcomplex<f64>>\n"
           f"  return %0, %1 : {bf}, tensor<2xcomplex<f64>>\n}}")
    a = np.array([1.5, -0.0, np.nan], ml_dtypes.bfloat16)
    c = np.array([1 + 2j, -3j], np.complex128)
    got_a, got_c = evaluate(src, [a, c], [bf, "tensor<2xcomplex<f64>>"])
    assert got_a.dtype == ml_dtypes.bfloat16 and got_c.dtype == np.complex128
    np.testing.assert_array_equal(got_a.astype(np.float32), (a + a).astype(np.float32))
    np.testing.assert_array_equal(got_c, c * c)


def _fold(body: str, result_type: str) -> str:
    from torch_mlir import ir

    from kiln.context import make_context
    from kiln.lowering.shapes import fold_shape_arithmetic
    with make_context():
        module = ir.Module.parse(f"func.func @f() -> {result_type} {{\n{body}\n}}")
        fold_shape_arithmetic(module)
        return str(module)


@pytest.mark.parametrize("op, a, b, want", [
    ("divide", -7, 2, -3),           # truncates toward zero
    ("remainder", -7, 2, -1),        # takes the dividend's sign
    ("remainder", 7, -2, 1),
    ("add", 2147483647, 1, -2147483648),  # wraps
    ("multiply", 65536, 65536, 0),
])
def test_fold_integer_semantics(op, a, b, want):
    text = _fold(f"  %a = stablehlo.constant dense<{a}> : tensor<i32>\n"
                 f"  %b = stablehlo.constant dense<{b}> : tensor<i32>\n"
                 f"  %0 = stablehlo.{op} %a, %b : tensor<i32>\n  return %0 : tensor<i32>", "tensor<i32>")
    assert f"stablehlo.{op}" not in text
    assert f"dense<{want}> : tensor<i32>" in text


@pytest.mark.parametrize("a, b", [(5, 0), (-2147483648, -1)])
def test_fold_leaves_undefined_division_alone(a, b):
    text = _fold(f"  %a = stablehlo.constant dense<{a}> : tensor<i32>\n"
                 f"  %b = stablehlo.constant dense<{b}> : tensor<i32>\n"
                 f"  %0 = stablehlo.divide %a, %b : tensor<i32>\n  return %0 : tensor<i32>", "tensor<i32>")
    assert "stablehlo.divide" in text


def test_fold_compare_select_concatenate():
    text = _fold("  %a = stablehlo.constant dense<3> : tensor<i64>\n"
                 "  %z = stablehlo.constant dense<0> : tensor<i64>\n"
                 "  %p = stablehlo.compare LT, %a, %z, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>\n"
                 "  %n = stablehlo.negate %a : tensor<i64>\n"
                 "  %s = stablehlo.select %p, %n, %a : tensor<i1>, tensor<i64>\n"
                 "  %r = stablehlo.reshape %s : (tensor<i64>) -> tensor<1xi64>\n"
                 "  %c = stablehlo.concatenate %r, %r, dim = 0 : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>\n"
                 "  return %c : tensor<2xi64>", "tensor<2xi64>")
    assert "select" not in text and "concatenate" not in text
    assert "dense<3> : tensor<2xi64>" in text


def test_fold_ignores_floats():
    text = _fold("  %a = stablehlo.constant dense<1.5> : tensor<f32>\n"
                 "  %0 = stablehlo.add %a, %a : tensor<f32>\n  return %0 : tensor<f32>", "tensor<f32>")
    assert "stablehlo.add" in text


def test_roll_dynamic_folds_to_static():
    from kiln.conformance import run_file
    result = run_file(str(shared_file("roll_dynamic.mlir")))
    assert result.passed, result.detail


def test_reference_crash_is_an_error():
    # The interpreter aborts on dynamic result types; Kiln reports it instead of dying.
    src = ("func.func @main(%x: tensor<3xf32>, %n: tensor<1xi32>) -> tensor<?xf32> {\n"
           "  %z = stablehlo.constant dense<0> : tensor<1xi32>\n"
           "  %o = stablehlo.constant dense<1> : tensor<1xi32>\n"
           "  %0 = stablehlo.real_dynamic_slice %x, %z, %n, %o : (tensor<3xf32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<?xf32>\n"
           "  return %0 : tensor<?xf32>\n}")
    with pytest.raises(kiln.KilnError, match="reference interpreter crashed"):
        evaluate(src, [np.ones(3, np.float32), np.array([2], np.int32)], ["tensor<3xf32>", "tensor<1xi32>"])


def test_dimension_argument_that_disagrees_with_the_shapes_is_an_error():
    import kiln
    exe = kiln.compile("""func.func @main(%n: tensor<i64>, %x: tensor<?x4xf32>) -> tensor<?x4xf32> {
      %0 = stablehlo.negate %x : tensor<?x4xf32>
      return %0 : tensor<?x4xf32>
    }""")
    x = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(exe(np.int64(3), x)[0], -x)
    with pytest.raises(kiln.KilnError, match=r"argument 0 of @main is 5, but as a dimension argument"):
        exe(np.int64(5), x)


def test_real_dynamic_slice_with_offset_limits_becomes_static():
    # What jax emits for lax.dynamic_slice(x, (i, j), (b, 2)) with a symbolic b: the limits
    # are start + sizes, so the result shape is static once b is known.
    exe = kiln.compile("""func.func @main(%b: tensor<i64>, %x: tensor<?x4xf32>, %s: tensor<2xi32>) -> tensor<?x2xf32> {
      %bi = stablehlo.convert %b : (tensor<i64>) -> tensor<i32>
      %b1 = stablehlo.reshape %bi : (tensor<i32>) -> tensor<1xi32>
      %two = stablehlo.constant dense<2> : tensor<1xi32>
      %sizes = stablehlo.concatenate %b1, %two, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
      %limit = stablehlo.add %s, %sizes : tensor<2xi32>
      %one = stablehlo.constant dense<1> : tensor<2xi32>
      %0 = stablehlo.real_dynamic_slice %x, %s, %limit, %one : (tensor<?x4xf32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) -> tensor<?x2xf32>
      return %0 : tensor<?x2xf32>
    }""")
    x = np.arange(20, dtype=np.float32).reshape(5, 4)
    (y,) = exe(np.int64(5), x, np.array([0, 1], np.int32))
    np.testing.assert_array_equal(y, x[:, 1:3])


NEGATED_SIZE = """func.func @main(%n: tensor<i64>, %x: tensor<?xf32>) -> tensor<f32> {
  %m1 = stablehlo.constant dense<-1> : tensor<i64>
  %neg = stablehlo.multiply %n, %m1 : tensor<i64>
  %s = stablehlo.reshape %neg : (tensor<i64>) -> tensor<1xi64>
  %iota = stablehlo.dynamic_iota %s, dim = 0 : (tensor<1xi64>) -> tensor<?xf32>
  %init = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %max = stablehlo.reduce(%iota init: %init) applies stablehlo.maximum across dimensions = [0] : (tensor<?xf32>, tensor<f32>) -> tensor<f32>
  return %max : tensor<f32>
}"""


def test_leading_scalars_that_no_size_fits_are_data():
    """Read as a dimension argument, %n = 3 (the size of %x) makes the iota's size -3 and the
    compile failed (the generating fuzzer, seed 1128); as data, the call runs, and a negative
    size is the run-time check's located error. Compiled in a worker, where pass managers are
    reused: the try on a copy and the compile both run stablehlo-refine-arguments, whose
    reused manager refined its arguments twice over ("4 vs 2") and failed."""
    exe = kiln.compile(NEGATED_SIZE, isolate=True)
    x = np.ones(3, np.float32)
    with pytest.raises(kiln.KilnError, match="dynamic_iota: a negative size"):
        exe(np.int64(4), x)
    assert exe(np.int64(-4), x)[0] == 3.0

