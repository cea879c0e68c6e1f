"""Matrix products through numpy's bundled OpenBLAS (kiln.lowering.codegen.blas): every operand layout
the pass accepts, against numpy in float64, and the IR showing the library call was taken."""
import json

import numpy as np
import pytest

import kiln
from kiln.lowering.codegen import blas_library



def test_the_numpy_wheel_openblas_is_found():
    # numpy's Linux wheels bundle it; without it every test below would silently test loops
    assert blas_library() is not None and "openblas" in blas_library()


def dot(lhs, rhs, out, dims, et="f32"):
    t = lambda s: f"tensor<{'x'.join(map(str, s))}x{et}>"  # noqa: E731
    return (f"func.func @main(%a: {t(lhs)}, %b: {t(rhs)}) -> {t(out)} {{\n"
            f"  %0 = stablehlo.dot_general %a, %b, {dims} : ({t(lhs)}, {t(rhs)}) -> {t(out)}\n"
            f"  return %0 : {t(out)}\n}}")


CASES = [
    # (lhs, rhs, out, dims, numpy einsum)
    ((96, 64), (64, 80), (96, 80), "contracting_dims = [1] x [0]", "mk,kn->mn"),
    ((64, 96), (64, 80), (96, 80), "contracting_dims = [0] x [0]", "km,kn->mn"),      # A^T
    ((96, 64), (80, 64), (96, 80), "contracting_dims = [1] x [1]", "mk,nk->mn"),      # B^T
    ((64, 96), (80, 64), (96, 80), "contracting_dims = [0] x [1]", "km,nk->mn"),      # both
    ((3, 40, 64), (64, 72), (3, 40, 72), "contracting_dims = [2] x [0]", "bmk,kn->bmn"),  # M dims merge
    ((2, 3, 48, 32), (2, 3, 48, 40), (2, 3, 32, 40),
     "batching_dims = [0, 1] x [0, 1], contracting_dims = [2] x [2]", "abkm,abkn->abmn"),
    ((48, 2, 64), (2, 64, 56), (2, 48, 56),
     "batching_dims = [1] x [0], contracting_dims = [2] x [1]", "mbk,bkn->bmn"),     # batch not outer
    ((64, 4, 16), (4, 16, 72), (64, 72), "contracting_dims = [1, 2] x [0, 1]", "mij,ijn->mn"),  # K dims merge
]


@pytest.mark.parametrize("et,dtype,rtol", [("f32", np.float32, 2e-5), ("f64", np.float64, 1e-12)])
@pytest.mark.parametrize("lhs,rhs,out,dims,spec", CASES)
def test_dot_general_layouts(lhs, rhs, out, dims, spec, et, dtype, rtol, rng):
    exe = kiln.compile(dot(lhs, rhs, out, dims, et))
    assert "kiln_blas_" + ("s" if et == "f32" else "d") + "gemm" in exe.ir("codegen")
    a = rng.standard_normal(lhs).astype(dtype)
    b = rng.standard_normal(rhs).astype(dtype)
    (got,) = exe(a, b)
    want = np.einsum(spec, a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 10)


def test_nan_and_inf_propagate(rng):
    exe = kiln.compile(dot((64, 64), (64, 64), (64, 64), "contracting_dims = [1] x [0]"))
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((64, 64)).astype(np.float32)
    a[3, 5] = np.nan
    a[7, 0] = np.inf
    b[:, 9] = 0.0
    (got,) = exe(a, b)
    with np.errstate(invalid="ignore"):
        want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))   # inf * 0 = NaN included
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=2e-5, atol=1e-4)


def test_bias_and_activation_not_fused_into_product(rng):
    src = """
func.func @main(%x: tensor<128x256xf32>, %w: tensor<256x64xf32>, %b: tensor<64xf32>) -> tensor<128x64xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<128x256xf32>, tensor<256x64xf32>) -> tensor<128x64xf32>
  %1 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<64xf32>) -> tensor<128x64xf32>
  %2 = stablehlo.add %0, %1 : tensor<128x64xf32>
  %3 = stablehlo.tanh %2 : tensor<128x64xf32>
  return %3 : tensor<128x64xf32>
}"""
    exe = kiln.compile(src)
    assert "kiln_blas_sgemm" in exe.ir("codegen")
    x = rng.standard_normal((128, 256)).astype(np.float32)
    w = (rng.standard_normal((256, 64)) / 16).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    (got,) = exe(x, w, b)
    np.testing.assert_allclose(got, np.tanh(x.astype(np.float64) @ w + b), rtol=1e-5, atol=1e-5)


def test_product_inside_loop_body_and_accumulation(rng):
    # The operand is a slice (a strided view after bufferization) and the result feeds an add
    # with the original accumulator: beta must stay 1 where no zero fill precedes the call.
    src = """
func.func @main(%x: tensor<2x64x64xf32>, %w: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %s = stablehlo.slice %x [1:2, 0:64, 0:64] : (tensor<2x64x64xf32>) -> tensor<1x64x64xf32>
  %r = stablehlo.reshape %s : (tensor<1x64x64xf32>) -> tensor<64x64xf32>
  %0 = stablehlo.dot_general %r, %w, contracting_dims = [1] x [0] : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %1 = stablehlo.add %0, %w : tensor<64x64xf32>
  return %1 : tensor<64x64xf32>
}"""
    x = rng.standard_normal((2, 64, 64)).astype(np.float32)
    w = rng.standard_normal((64, 64)).astype(np.float32)
    (got,) = kiln.compile(src)(x, w)
    np.testing.assert_allclose(got, x[1].astype(np.float64) @ w + w, rtol=2e-5, atol=1e-4)


def test_small_and_integer_products_stay_loops(rng):
    exe = kiln.compile(dot((4, 8), (8, 2), (4, 2), "contracting_dims = [1] x [0]"))
    assert "kiln_blas" not in exe.ir("codegen")
    a = rng.standard_normal((4, 8)).astype(np.float32)
    b = rng.standard_normal((8, 2)).astype(np.float32)
    np.testing.assert_allclose(exe(a, b)[0], a.astype(np.float64) @ b, rtol=1e-5, atol=1e-6)
    exe = kiln.compile(dot((64, 64), (64, 64), (64, 64), "contracting_dims = [1] x [0]", "i32"))
    assert "kiln_blas" not in exe.ir("codegen")
    ai = rng.integers(-2**31, 2**31 - 1, (64, 64), dtype=np.int32)
    (got,) = exe(ai, ai)
    np.testing.assert_array_equal(got, (ai.astype(np.int64) @ ai.astype(np.int64)).astype(np.int32))


CONV = """
func.func @main(%x: tensor<{xs}xf32>, %w: tensor<{ws}xf32>) -> tensor<{os}xf32> {{
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
       window = {{stride = [{s}, {s}], pad = [[{p}, {p}], [{p}, {p}]], rhs_dilate = [{d}, {d}]}}
       {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}}
       : (tensor<{xs}xf32>, tensor<{ws}xf32>) -> tensor<{os}xf32>
  return %0 : tensor<{os}xf32>
}}"""


@pytest.mark.parametrize("stride,pad,dilate", [(1, 1, 1), (2, 0, 1), (1, 2, 2)])
def test_conv_nhwc_as_gemms(stride, pad, dilate, rng):
    import jax
    n, h, w, c, f, k = 2, 12, 13, 32, 48, 3
    eff = (k - 1) * dilate + 1
    oh, ow = (h + 2 * pad - eff) // stride + 1, (w + 2 * pad - eff) // stride + 1
    shape = lambda *s: "x".join(map(str, s))  # noqa: E731
    exe = kiln.compile(CONV.format(xs=shape(n, h, w, c), ws=shape(k, k, c, f), os=shape(n, oh, ow, f),
                                   s=stride, p=pad, d=dilate))
    assert "kiln_blas_sgemm" in exe.ir("codegen")
    x = rng.standard_normal((n, h, w, c)).astype(np.float32)
    wt = rng.standard_normal((k, k, c, f)).astype(np.float32)
    (got,) = exe(x, wt)
    want = jax.lax.conv_general_dilated(
        x, wt, (stride, stride), [(pad, pad), (pad, pad)],
        rhs_dilation=(dilate, dilate), dimension_numbers=("NHWC", "HWIO", "NHWC"),
        precision=jax.lax.Precision.HIGHEST)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-4, atol=1e-4)


TRANSPOSED = """
func.func @main(%a: tensor<{A}xf32>, %b: tensor<{B}xf32>) -> ({R}) {{
  %0 = stablehlo.dot_general %a, %b, {dims} : (tensor<{A}xf32>, tensor<{B}xf32>) -> tensor<{C}xf32>
  %1 = stablehlo.transpose %0, dims = {perm} : (tensor<{C}xf32>) -> tensor<{T}xf32>
  {ret}
}}"""


@pytest.mark.parametrize("both", [False, True])
@pytest.mark.parametrize("A,B,C,T,dims,perm,spec,folds", [
    ((256, 96), (256, 80), (96, 80), (80, 96), "contracting_dims = [0] x [0]", "[1, 0]",
     "km,kn->nm", True),
    ((2, 40, 16), (2, 16, 48), (2, 40, 48), (40, 2, 48),
     "batching_dims = [0] x [0], contracting_dims = [2] x [1]", "[1, 0, 2]", "bmk,bkn->mbn", True),
    # batch dim innermost: no gemm could write that layout, so the transpose stays
    ((2, 40, 16), (2, 16, 48), (2, 40, 48), (48, 40, 2),
     "batching_dims = [0] x [0], contracting_dims = [2] x [1]", "[2, 1, 0]", "bmk,bkn->nmb", False),
])
def test_transposed_result_is_written_by_the_call(A, B, C, T, dims, perm, spec, folds, both, rng):
    # With one user the transpose folds into the product (C written column-major: the call
    # computes C^T = B^T A^T); with a second user of the product it must not.
    s = lambda t: "x".join(map(str, t))  # noqa: E731
    ret = (f"return %1, %0 : tensor<{s(T)}xf32>, tensor<{s(C)}xf32>" if both
           else f"return %1 : tensor<{s(T)}xf32>")
    results = f"tensor<{s(T)}xf32>" + (f", tensor<{s(C)}xf32>" if both else "")
    exe = kiln.compile(TRANSPOSED.format(A=s(A), B=s(B), C=s(C), T=s(T), dims=dims, perm=perm,
                                         R=results, ret=ret))
    assert "kiln_blas_sgemm" in exe.ir("codegen")
    fused = exe.ir("fuse")
    assert ("linalg.generic" in fused) == (both or not folds)  # the transposing copy is gone
    a = rng.standard_normal(A).astype(np.float32)
    b = rng.standard_normal(B).astype(np.float32)
    out = exe(a, b)
    want = np.einsum(spec, a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(out[0], want, rtol=2e-5, atol=1e-4)
    if both:  # the product itself, untransposed
        np.testing.assert_allclose(np.transpose(out[1], json.loads(perm)), want, rtol=2e-5, atol=1e-4)
