"""Shape and type ops that change nothing (kiln-fold-identity-ops, lowering/identity_ops.py).

Fuzz finding F4 (seed 20261127 #51): upstream's stablehlo-legalize-to-linalg crashed
(SIGSEGV, sometimes SIGABRT) on `reshape tensor<ui32> -> tensor<ui32>`, a 0-d identity reshape
of any unsigned type. The programs compile in a separate process (the default), so should the
crash return it fails here as a KilnError, not as a dead test process."""
from __future__ import annotations

import numpy as np
import pytest

import kiln

UNSIGNED = {"ui8": np.uint8, "ui16": np.uint16, "ui32": np.uint32, "ui64": np.uint64}


@pytest.mark.parametrize("name", sorted(UNSIGNED))
def test_identity_reshape_of_an_unsigned_scalar(name):
    dtype = UNSIGNED[name]
    src = f"""func.func @main(%a: tensor<{name}>) -> (tensor<{name}>, tensor<{name}>) {{
      %v = "stablehlo.reshape"(%a) : (tensor<{name}>) -> tensor<{name}>
      %w = stablehlo.add %v, %v : tensor<{name}>
      return %v, %w : tensor<{name}>, tensor<{name}>
    }}"""
    big = np.iinfo(dtype).max - 2  # the add wraps: unsigned arithmetic survives the fold
    v, w = kiln.compile(src)(dtype(big))
    assert v.dtype == w.dtype == dtype
    assert v == dtype(big) and w == (np.array(big, dtype) * 2).astype(dtype)


def test_other_identity_forms_of_unsigned_tensors():
    src = """func.func @main(%x: tensor<2x3xui16>, %s: tensor<ui32>)
        -> (tensor<2x3xui16>, tensor<2x3xui16>, tensor<2x3xui16>, tensor<ui32>, tensor<ui32>) {
      %0 = stablehlo.transpose %x, dims = [0, 1] : (tensor<2x3xui16>) -> tensor<2x3xui16>
      %1 = stablehlo.broadcast_in_dim %x, dims = [0, 1] : (tensor<2x3xui16>) -> tensor<2x3xui16>
      %2 = stablehlo.convert %x : (tensor<2x3xui16>) -> tensor<2x3xui16>
      %3 = stablehlo.bitcast_convert %s : (tensor<ui32>) -> tensor<ui32>
      %4 = stablehlo.transpose %s, dims = [] : (tensor<ui32>) -> tensor<ui32>
      return %0, %1, %2, %3, %4
          : tensor<2x3xui16>, tensor<2x3xui16>, tensor<2x3xui16>, tensor<ui32>, tensor<ui32>
    }"""
    x = np.arange(65530, 65536, dtype=np.uint16).reshape(2, 3)
    outs = kiln.compile(src)(x, np.uint32(4_000_000_000))
    for got in outs[:3]:
        np.testing.assert_array_equal(got, x)
        assert got.dtype == np.uint16
    assert outs[3] == outs[4] == np.uint32(4_000_000_000)


def test_swapping_transpose_of_a_square_tensor_is_kept():
    # Same operand and result type, but not the identity: the fold must leave it.
    src = """func.func @main(%x: tensor<2x2xui8>) -> (tensor<2x2xui8>, tensor<2x2xui8>) {
      %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<2x2xui8>) -> tensor<2x2xui8>
      %b = stablehlo.broadcast_in_dim %x, dims = [1, 0] : (tensor<2x2xui8>) -> tensor<2x2xui8>
      return %t, %b : tensor<2x2xui8>, tensor<2x2xui8>
    }"""
    x = np.array([[1, 2], [3, 4]], np.uint8)
    t, b = kiln.compile(src)(x)
    np.testing.assert_array_equal(t, x.T)
    np.testing.assert_array_equal(b, x.T)
