"""Zero-element slices, gathers and pads (kiln-fold-empty-values, lowering/empty_values.py):
valid per the StableHLO spec wherever a start lies in [0, dim], the end included, and once
refused by upstream's lowering ("offset 1 is out-of-bounds: 4 >= 4")."""
from __future__ import annotations

import numpy as np
import pytest

import kiln

X = np.arange(8, dtype=np.float32).reshape(2, 4)


def test_static_slice_that_starts_at_the_end():
    src = """func.func @main(%x: tensor<2x4xf32>) -> tensor<1x0xf32> {
      %s = "stablehlo.slice"(%x) {start_indices = array<i64: 1, 4>,
          limit_indices = array<i64: 2, 4>, strides = array<i64: 1, 1>}
          : (tensor<2x4xf32>) -> tensor<1x0xf32>
      return %s : tensor<1x0xf32>
    }"""
    (out,) = kiln.compile(src)(X)
    assert out.shape == (1, 0) and out.dtype == np.float32


def test_empty_slices_beside_values_that_are_not_empty():
    # Empty in either dimension or both, strided, and concatenated to a value with elements.
    src = """func.func @main(%x: tensor<2x4xf32>)
        -> (tensor<0x4xf32>, tensor<2x0xf32>, tensor<0x0xf32>, tensor<2x4xf32>) {
      %a = stablehlo.slice %x [2:2, 0:4] : (tensor<2x4xf32>) -> tensor<0x4xf32>
      %b = stablehlo.slice %x [0:2, 4:4:2] : (tensor<2x4xf32>) -> tensor<2x0xf32>
      %c = stablehlo.slice %x [2:2, 4:4] : (tensor<2x4xf32>) -> tensor<0x0xf32>
      %d = stablehlo.concatenate %x, %b, dim = 1 : (tensor<2x4xf32>, tensor<2x0xf32>) -> tensor<2x4xf32>
      return %a, %b, %c, %d : tensor<0x4xf32>, tensor<2x0xf32>, tensor<0x0xf32>, tensor<2x4xf32>
    }"""
    a, b, c, d = kiln.compile(src)(X)
    assert (a.shape, b.shape, c.shape) == ((0, 4), (2, 0), (0, 0))
    np.testing.assert_array_equal(d, X)


def test_real_dynamic_slice_with_constant_bounds_at_the_end():
    # Canonicalization makes this a static slice [1:2, 4:4].
    src = """func.func @main(%x: tensor<2x4xf32>) -> tensor<1x0xf32> {
      %s = stablehlo.constant dense<[1, 4]> : tensor<2xi64>
      %l = stablehlo.constant dense<[2, 4]> : tensor<2xi64>
      %st = stablehlo.constant dense<1> : tensor<2xi64>
      %r = stablehlo.real_dynamic_slice %x, %s, %l, %st
          : (tensor<2x4xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<1x0xf32>
      return %r : tensor<1x0xf32>
    }"""
    (out,) = kiln.compile(src)(X)
    assert out.shape == (1, 0)


RUN_TIME_BOUNDS = """func.func @main(%x: tensor<2x4xf32>, %s: tensor<2xi64>, %l: tensor<2xi64>)
    -> tensor<1x0xf32> {
  %st = stablehlo.constant dense<1> : tensor<2xi64>
  %r = stablehlo.real_dynamic_slice %x, %s, %l, %st
      : (tensor<2x4xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<1x0xf32>
  return %r : tensor<1x0xf32>
}"""


def test_run_time_bounds_still_checked_where_the_slice_is_folded():
    exe = kiln.compile(RUN_TIME_BOUNDS)
    (out,) = exe(X, np.array([1, 4]), np.array([2, 4]))
    assert out.shape == (1, 0)
    with pytest.raises(kiln.KilnError, match="start, limit or stride out of range"):
        exe(X, np.array([1, 5]), np.array([2, 5]))


@pytest.mark.parametrize("start", [0, 4, 9])
def test_dynamic_slice_of_size_zero(start):
    # Starts are clamped to [0, dim - size] = [0, 4]: any start is valid.
    src = """func.func @main(%x: tensor<2x4xf32>, %i: tensor<i32>) -> tensor<1x0xf32> {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %s = stablehlo.dynamic_slice %x, %one, %i, sizes = [1, 0]
          : (tensor<2x4xf32>, tensor<i32>, tensor<i32>) -> tensor<1x0xf32>
      return %s : tensor<1x0xf32>
    }"""
    (out,) = kiln.compile(src)(X, np.int32(start))
    assert out.shape == (1, 0)


def test_negative_padding_to_nothing_and_an_empty_gather():
    src = """func.func @main(%x: tensor<2x4xf32>, %i: tensor<3x1xi32>)
        -> (tensor<2x0xf32>, tensor<0x4xf32>, tensor<3x0xf32>) {
      %z = stablehlo.constant dense<0.0> : tensor<f32>
      %p = stablehlo.pad %x, %z, low = [0, -4], high = [0, 0], interior = [0, 0]
          : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x0xf32>
      %q = stablehlo.pad %x, %z, low = [-1, 0], high = [-1, 0], interior = [0, 0]
          : (tensor<2x4xf32>, tensor<f32>) -> tensor<0x4xf32>
      %g = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1],
          collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>,
          indices_are_sorted = false, slice_sizes = array<i64: 1, 0>}>
          : (tensor<2x4xf32>, tensor<3x1xi32>) -> tensor<3x0xf32>
      return %p, %q, %g : tensor<2x0xf32>, tensor<0x4xf32>, tensor<3x0xf32>
    }"""
    p, q, g = kiln.compile(src)(X, np.array([[0], [1], [5]], np.int32))
    assert (p.shape, q.shape, g.shape) == ((2, 0), (0, 4), (3, 0))


def test_jax_empty_slice_at_the_end():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    def program(x):
        empty = x[1:2, 4:4]
        return jnp.concatenate([x[1:2], empty], axis=1) * 2, empty

    text = jax.jit(program).lower(X).as_text()
    got_rows, got_empty = kiln.compile(text)(X)
    want_rows, want_empty = jax.jit(program)(X)
    np.testing.assert_array_equal(got_rows, np.asarray(want_rows))
    assert got_empty.shape == np.asarray(want_empty).shape == (1, 0)


def test_empty_value_used_twice_and_returned_beside_its_negation():
    # Fuzz finding F7 (seed 20261127 #32): with the empty slice folded to a tensor.empty,
    # bufferization wrote the negation in place into the empty value's buffer, the entry
    # returned that buffer twice and buffer-results-to-out-params crashed (SIGSEGV). Compiled
    # in a separate process (the default), a return of the crash fails here as a KilnError.
    src = """func.func @main(%x: tensor<2x1xf32>, %a: tensor<i8>, %b: tensor<i8>,
                         %c: tensor<ui32>, %e: tensor<ui32>)
        -> (tensor<0x0xf32>, tensor<0x0xf32>) {
      %v2 = "stablehlo.dynamic_slice"(%x, %a, %b) {slice_sizes = array<i64: 0, 0>}
          : (tensor<2x1xf32>, tensor<i8>, tensor<i8>) -> tensor<0x0xf32>
      %v3 = "stablehlo.negate"(%v2) : (tensor<0x0xf32>) -> tensor<0x0xf32>
      %v4 = "stablehlo.dynamic_slice"(%v2, %c, %e) {slice_sizes = array<i64: 0, 0>}
          : (tensor<0x0xf32>, tensor<ui32>, tensor<ui32>) -> tensor<0x0xf32>
      return %v4, %v3 : tensor<0x0xf32>, tensor<0x0xf32>
    }"""
    v4, v3 = kiln.compile(src)(np.ones((2, 1), np.float32), np.int8(1), np.int8(0),
                               np.uint32(3), np.uint32(4))
    assert v4.shape == v3.shape == (0, 0) and v4.dtype == v3.dtype == np.float32


def test_empty_slices_of_other_element_types():
    # The fold builds a `dense<>` constant of the result type, complex included (the Python
    # bindings cannot hold a complex dense attribute, so the pass parses it as text).
    src = """func.func @main(%u: tensor<4xui8>, %b: tensor<2x2xi1>, %c: tensor<2x2xcomplex<f32>>)
        -> (tensor<0xui8>, tensor<2x0xi1>, tensor<0x2xcomplex<f32>>, tensor<2x2xcomplex<f32>>) {
      %0 = stablehlo.slice %u [4:4] : (tensor<4xui8>) -> tensor<0xui8>
      %1 = stablehlo.slice %b [0:2, 2:2] : (tensor<2x2xi1>) -> tensor<2x0xi1>
      %2 = stablehlo.slice %c [2:2, 0:2] : (tensor<2x2xcomplex<f32>>) -> tensor<0x2xcomplex<f32>>
      %3 = stablehlo.concatenate %c, %2, dim = 0
          : (tensor<2x2xcomplex<f32>>, tensor<0x2xcomplex<f32>>) -> tensor<2x2xcomplex<f32>>
      return %0, %1, %2, %3 : tensor<0xui8>, tensor<2x0xi1>, tensor<0x2xcomplex<f32>>,
          tensor<2x2xcomplex<f32>>
    }"""
    c = np.array([[1 + 2j, 3 - 4j], [5j, -6]], np.complex64)
    u, b, e, whole = kiln.compile(src)(np.arange(4, dtype=np.uint8),
                                       np.ones((2, 2), np.bool_), c)
    assert (u.shape, u.dtype) == ((0,), np.uint8)
    assert (b.shape, b.dtype) == ((2, 0), np.bool_)
    assert (e.shape, e.dtype) == ((0, 2), np.complex64)
    np.testing.assert_array_equal(whole, c)


def test_pad_of_an_empty_operand_is_all_padding():
    # The operand places nothing, so every element is the padding value; upstream's lowering
    # inserted the empty operand at offset 2 of a dimension of size 2 (generated fuzz, 2027).
    src = """func.func @main(%x: tensor<1x0xf32>, %p: tensor<f32>) -> tensor<2x2xf32> {
      %r = "stablehlo.pad"(%x, %p) {edge_padding_low = array<i64: 0, 2>,
          edge_padding_high = array<i64: 1, 0>, interior_padding = array<i64: 1, 2>}
          : (tensor<1x0xf32>, tensor<f32>) -> tensor<2x2xf32>
      return %r : tensor<2x2xf32>
    }"""
    (out,) = kiln.compile(src)(np.zeros((1, 0), np.float32), np.float32(7))
    np.testing.assert_array_equal(out, np.full((2, 2), 7, np.float32))


@pytest.mark.parametrize("init,body,expected", [
    (0, "stablehlo.add", 0),          # a window of 2x2 padding elements, each the init value
    (3, "stablehlo.add", 15),         # ...so a non-identity init counts once per element, and
                                      # once more as the reduction's start (the spec's schedule)
    (5, "stablehlo.maximum", 5),
])
def test_reduce_window_over_only_padding(init, body, expected):
    src = f"""func.func @main(%x: tensor<3x0xi32>) -> tensor<4x1xi32> {{
      %init = stablehlo.constant dense<{init}> : tensor<i32>
      %r = "stablehlo.reduce_window"(%x, %init) ({{
      ^bb0(%a: tensor<i32>, %b: tensor<i32>):
        %s = "{body}"(%a, %b) : (tensor<i32>, tensor<i32>) -> tensor<i32>
        "stablehlo.return"(%s) : (tensor<i32>) -> ()
      }}) {{window_dimensions = array<i64: 2, 2>, base_dilations = array<i64: 2, 2>,
           padding = dense<[[0, 0], [1, 1]]> : tensor<2x2xi64>}}
          : (tensor<3x0xi32>, tensor<i32>) -> tensor<4x1xi32>
      return %r : tensor<4x1xi32>
    }}"""
    (out,) = kiln.compile(src)(np.zeros((3, 0), np.int32))
    np.testing.assert_array_equal(out, np.full((4, 1), expected, np.int32))


def test_empty_results_of_pure_ops_returned_together():
    # Upstream made the empty reshape a tensor.empty, the maximum wrote into it in place, and
    # the entry returned one buffer twice: buffer-results-to-out-params crashed (fuzz, 2028).
    src = """func.func @main(%x: tensor<1x0xf16>, %y: tensor<0x4xf16>)
        -> (tensor<1x0xf16>, tensor<1x0xf16>) {
      %r = stablehlo.reshape %y : (tensor<0x4xf16>) -> tensor<1x0xf16>
      %m = stablehlo.maximum %x, %r : tensor<1x0xf16>
      return %r, %m : tensor<1x0xf16>, tensor<1x0xf16>
    }"""
    r, m = kiln.compile(src)(np.zeros((1, 0), np.float16), np.zeros((0, 4), np.float16))
    assert r.shape == m.shape == (1, 0) and r.dtype == m.dtype == np.float16
