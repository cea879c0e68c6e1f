"""Matrix products through numpy's bundled OpenBLAS (kiln.lowering.codegen.blas): every operand layout
the pass accepts, against numpy in float64, and the IR showing the library call was taken."""
import json
import re

import ml_dtypes
import numpy as np
import pytest

import kiln
from product_calls import calls_library_gemm, product_calls
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
    assert calls_library_gemm(exe.ir("codegen"), "s" if et == "f32" else "d")
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
    assert calls_library_gemm(exe.ir("codegen"))
    x = rng.standard_normal((128, 256)).astype(np.float32)
    w = (rng.standard_normal((256, 64)) / 16).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    (got,) = exe(x, w, b)
    np.testing.assert_allclose(got, np.tanh(x.astype(np.float64) @ w + b), rtol=1e-5, atol=1e-5)


def test_a_flattened_input_does_not_pull_its_producer_into_the_product(rng):
    """torch_xla writes a Linear layer as a product of its input flattened to 2-D. Upstream
    propagated that reshape through the (named) product, making it a generic that elementwise
    fusion reached: the GELU before it was computed once per output column (torch_xla's
    ConvNeXt-Tiny: 11.5 s a call, XLA 0.4 s). The product stays whole and calls the library."""
    src = """
func.func @main(%x: tensor<1x28x28x96xf32>, %w: tensor<96x64xf32>) -> tensor<784x64xf32> {
  %h = stablehlo.custom_call @mhlo.erf(%x) {mhlo.attributes = {}, mhlo.version = 1 : i64} : (tensor<1x28x28x96xf32>) -> tensor<1x28x28x96xf32>
  %g = stablehlo.multiply %x, %h : tensor<1x28x28x96xf32>
  %f = stablehlo.reshape %g : (tensor<1x28x28x96xf32>) -> tensor<784x96xf32>
  %0 = stablehlo.dot_general %f, %w, contracting_dims = [1] x [0] : (tensor<784x96xf32>, tensor<96x64xf32>) -> tensor<784x64xf32>
  return %0 : tensor<784x64xf32>
}"""
    exe = kiln.compile(src)
    assert calls_library_gemm(exe.ir("codegen"))
    fused = exe.ir("fuse")
    generics = re.findall(r"linalg\.generic .*?linalg\.yield", fused, re.S)
    with_erf = [g for g in generics if "math.erf" in g]
    assert with_erf and all("reduction" not in g.split("\n", 1)[0] for g in with_erf)
    from scipy.special import erf
    x = rng.standard_normal((1, 28, 28, 96)).astype(np.float32)
    w = (rng.standard_normal((96, 64)) / 10).astype(np.float32)
    (got,) = exe(x, w)
    want = (x * erf(x)).reshape(784, 96).astype(np.float64) @ w
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


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
    assert calls_library_gemm(exe.ir("codegen"))
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
    assert calls_library_gemm(exe.ir("codegen"))
    fused = exe.ir("fuse")
    assert ("linalg.generic" in fused) == (both or not folds)  # the transposing copy is gone
    a = rng.standard_normal(A).astype(np.float32)
    b = rng.standard_normal(B).astype(np.float32)
    out = exe(a, b)
    want = np.einsum(spec, a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(out[0], want, rtol=2e-5, atol=1e-4)
    if both:  # the product itself, untransposed
        np.testing.assert_allclose(np.transpose(out[1], json.loads(perm)), want, rtol=2e-5, atol=1e-4)


# ---------------------------------------------------------------------------------------------
# products in the precisions the library lacks (kiln.lowering.codegen.products), vectors (gemv)
# and complex (cgemm/zgemm)


def general(lhs, rhs, out, dims, a_type, b_type, out_type):
    t = lambda s, et: f"tensor<{'x'.join(map(str, s))}x{et}>"  # noqa: E731
    return (f"func.func @main(%a: {t(lhs, a_type)}, %b: {t(rhs, b_type)}) -> {t(out, out_type)} {{\n"
            f"  %0 = stablehlo.dot_general %a, %b, {dims} : ({t(lhs, a_type)}, {t(rhs, b_type)})"
            f" -> {t(out, out_type)}\n  return %0 : {t(out, out_type)}\n}}")


def call_list(exe) -> list[str]:
    """The BLAS routines the program calls, one entry per call site (thread control aside)."""
    return product_calls(exe.ir("codegen"), r"(kiln_blas_\w+)")


def calls(exe) -> set[str]:
    return set(call_list(exe))


NARROW_FLOATS = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}


@pytest.fixture
def float_library_route(monkeypatch):
    """bf16 and 8-bit products through the float library even where the runtime's AMX kernels
    would take them (test_amx_products.py covers those): KILN_AMX=0 is read when compiling,
    so compile here, uncached."""
    monkeypatch.setenv("KILN_AMX", "0")
    monkeypatch.setenv("KILN_CACHE", "0")
    monkeypatch.setenv("KILN_COMPILE_IN_PROCESS", "1")


@pytest.mark.usefixtures("float_library_route")
@pytest.mark.parametrize("et", ["bf16", "f16"])
@pytest.mark.parametrize("lhs,rhs,out,dims,spec", [CASES[0], CASES[3], CASES[5]])
def test_half_precision_products_accumulate_in_f32_through_sgemm(et, lhs, rhs, out, dims, spec, rng):
    # preferred_element_type=f32: widened exactly, so sgemm sees the very values XLA multiplies
    exe = kiln.compile(general(lhs, rhs, out, dims, et, et, "f32"))
    assert calls(exe) == {"kiln_blas_sgemm"}
    a = rng.standard_normal(lhs).astype(NARROW_FLOATS[et])
    b = rng.standard_normal(rhs).astype(NARROW_FLOATS[et])
    (got,) = exe(a, b)
    assert got.dtype == np.float32
    want = np.einsum(spec, a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-4)


def int_dot(m, k, n, a_type, out_type, b_type=None, transposed=False):
    dims = "contracting_dims = [1] x [1]" if transposed else "contracting_dims = [1] x [0]"
    return general((m, k), (n, k) if transposed else (k, n), (m, n), dims, a_type,
                   b_type or a_type, out_type)


def wrapped(a, b, dtype, transposed=False):
    """The exact product, wrapped to `dtype` as accumulating in it does."""
    exact = a.astype(np.int64) @ (b.T if transposed else b).astype(np.int64)
    return exact.astype(dtype)   # numpy's int64 -> narrower cast keeps the low bits


@pytest.mark.usefixtures("float_library_route")
@pytest.mark.parametrize("k,sgemms", [(1024, 1), (1025, 2), (4000, 4)])
@pytest.mark.parametrize("transposed", [False, True])
def test_int8_products_are_bit_exact_through_the_float_library(k, sgemms, transposed, rng):
    # K * 128 * 128 <= 2^24 keeps every partial sum an exact f32; a deeper product is split
    # into chunks of at most 1024 that each do. All -128 is the worst case: a sum reaches
    # exactly K * 2^14.
    exe = kiln.compile(int_dot(32, k, 40, "i8", "i32", transposed=transposed))
    assert call_list(exe) == ["kiln_blas_sgemm"] * sgemms
    a = rng.integers(-128, 128, (32, k), dtype=np.int8)
    b = rng.integers(-128, 128, (40, k) if transposed else (k, 40), dtype=np.int8)
    a[:4] = -128
    b[..., :5] = -128
    b[:5] = -128
    (got,) = exe(a, b)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, wrapped(a, b, np.int32, transposed))
    assert np.abs(wrapped(a, b, np.int64, transposed)).max() == k << 14   # the bound is reached


@pytest.mark.usefixtures("float_library_route")
@pytest.mark.parametrize("a_type,b_type,out_type,np_a,np_b,np_out,k,routines", [
    # zero-extended: |x| <= 255, chunks of at most 258
    ("ui8", "ui8", "i32", np.uint8, np.uint8, np.int32, 256, ["sgemm"]),
    ("ui8", "ui8", "i32", np.uint8, np.uint8, np.int32, 768, ["sgemm"] * 3),
    ("ui8", "ui8", "i32", np.uint8, np.uint8, np.int32, 4700, ["dgemm"]),   # > 16 chunks
    ("i8", "ui8", "i32", np.int8, np.uint8, np.int32, 512, ["sgemm"]),
    ("i16", "i16", "i32", np.int16, np.int16, np.int32, 512, ["dgemm"]),  # sums past 2^31 wrap
    ("i8", "i8", "i8", np.int8, np.int8, np.int8, 512, ["sgemm"]),        # XLA's int8 dot wraps
    ("i8", "i8", "i64", np.int8, np.int8, np.int64, 512, ["sgemm"]),
])
def test_integer_products_of_every_width_are_bit_exact(a_type, b_type, out_type, np_a, np_b,
                                                       np_out, k, routines, rng):
    exe = kiln.compile(int_dot(48, k, 40, a_type, out_type, b_type))
    assert call_list(exe) == ["kiln_blas_" + r for r in routines]
    lo = lambda t: np.iinfo(t).min  # noqa: E731
    hi = lambda t: np.iinfo(t).max  # noqa: E731
    a = rng.integers(lo(np_a), int(hi(np_a)) + 1, (48, k)).astype(np_a)
    b = rng.integers(lo(np_b), int(hi(np_b)) + 1, (k, 40)).astype(np_b)
    a[0], b[:, 0] = hi(np_a), hi(np_b)            # the largest magnitudes, too
    a[1], b[:, 1] = lo(np_a), lo(np_b)
    (got,) = exe(a, b)
    assert got.dtype == np_out
    np.testing.assert_array_equal(got, wrapped(a, b, np_out))


@pytest.mark.usefixtures("float_library_route")
def test_astype_int32_operands_are_read_narrow(rng):
    # jnp.int8 arrays .astype(int32) @ ...: the product reads the int8 tensors (their range
    # keeps sgemm exact) rather than stay an int32 loop nest
    src = """
func.func @main(%a: tensor<64x512xi8>, %b: tensor<512x64xi8>) -> tensor<64x64xi32> {
  %0 = stablehlo.convert %a : (tensor<64x512xi8>) -> tensor<64x512xi32>
  %1 = stablehlo.convert %b : (tensor<512x64xi8>) -> tensor<512x64xi32>
  %2 = stablehlo.dot_general %0, %1, contracting_dims = [1] x [0] : (tensor<64x512xi32>, tensor<512x64xi32>) -> tensor<64x64xi32>
  return %2 : tensor<64x64xi32>
}"""
    exe = kiln.compile(src)
    assert calls(exe) == {"kiln_blas_sgemm"}
    a = rng.integers(-128, 128, (64, 512), dtype=np.int8)
    b = rng.integers(-128, 128, (512, 64), dtype=np.int8)
    np.testing.assert_array_equal(exe(a, b)[0], wrapped(a, b, np.int32))


def test_unsigned_convolution_is_zero_extended(rng):
    # kiln-fix-semantics: upstream read uint8 operands of an int32 convolution as signed
    src = """
func.func @main(%x: tensor<1x8x8x4xui8>, %w: tensor<3x3x4x5xui8>) -> tensor<1x6x6x5xi32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
       window = {stride = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
       : (tensor<1x8x8x4xui8>, tensor<3x3x4x5xui8>) -> tensor<1x6x6x5xi32>
  return %0 : tensor<1x6x6x5xi32>
}"""
    x = rng.integers(0, 256, (1, 8, 8, 4), dtype=np.uint8)
    w = rng.integers(0, 256, (3, 3, 4, 5), dtype=np.uint8)
    (got,) = kiln.compile(src)(x, w)
    want = np.zeros((1, 6, 6, 5), np.int64)
    for i in range(3):
        for j in range(3):
            want += np.einsum("bhwc,cf->bhwf", x[:, i:i + 6, j:j + 6].astype(np.int64), w[i, j])
    np.testing.assert_array_equal(got, want.astype(np.int32))


def test_matrix_vector_products_with_one_use_per_element_stay_unwidened(rng):
    # copying a bf16 matrix to f32 would cost as much as the product itself
    exe = kiln.compile(general((512, 256), (256,), (512,), "contracting_dims = [1] x [0]",
                               "bf16", "bf16", "f32"))
    assert not calls(exe)
    a = rng.standard_normal((512, 256)).astype(ml_dtypes.bfloat16)
    x = rng.standard_normal(256).astype(ml_dtypes.bfloat16)
    want = a.astype(np.float64) @ x.astype(np.float64)
    np.testing.assert_allclose(exe(a, x)[0], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("et,out_type,np_type", [("bf16", "f32", ml_dtypes.bfloat16),
                                                  ("i8", "i32", np.int8)])
def test_vector_matrix_products_are_widened(et, out_type, np_type, rng):
    # a batch-1 layer: its loops would read the matrix across its rows, far slower than a
    # widened copy and gemv
    exe = kiln.compile(general((1, 512), (512, 256), (1, 256), "contracting_dims = [1] x [0]",
                               et, et, out_type))
    assert calls(exe) == {"kiln_blas_sgemv"}
    x = rng.integers(-128, 128, (1, 512)).astype(np_type)
    w = rng.integers(-128, 128, (512, 256)).astype(np_type)
    want = x.astype(np.int64) @ w.astype(np.int64)   # exact in f32 too: at most 2^23
    np.testing.assert_array_equal(exe(x, w)[0], want.astype(np.float32 if et == "bf16" else np.int32))


@pytest.mark.parametrize("et,dtype,rtol", [("f32", np.float32, 2e-5), ("f64", np.float64, 1e-12),
                                           ("complex<f32>", np.complex64, 2e-5),
                                           ("complex<f64>", np.complex128, 1e-12)])
@pytest.mark.parametrize("lhs,rhs,out,dims,spec", [
    ((300, 200), (200,), (300,), "contracting_dims = [1] x [0]", "mk,k->m"),
    ((200, 300), (200,), (300,), "contracting_dims = [0] x [0]", "km,k->m"),      # A^T x
    ((1, 200), (200, 300), (1, 300), "contracting_dims = [1] x [0]", "mk,kn->mn"),  # batch-1 layer
    ((1, 200), (300, 200), (1, 300), "contracting_dims = [1] x [1]", "mk,nk->mn"),
    ((200,), (200, 300), (300,), "contracting_dims = [0] x [0]", "k,kn->n"),
    ((4, 128, 96), (4, 96), (4, 128), "batching_dims = [0] x [0], contracting_dims = [2] x [1]",
     "bmk,bk->bm"),
])
def test_vector_products_call_gemv(lhs, rhs, out, dims, spec, et, dtype, rtol, rng):
    letter = {"f32": "s", "f64": "d", "complex<f32>": "c", "complex<f64>": "z"}[et]
    exe = kiln.compile(general(lhs, rhs, out, dims, et, et, et))
    assert calls(exe) == {f"kiln_blas_{letter}gemv"}
    make = lambda s: (rng.standard_normal(s) + (1j * rng.standard_normal(s)  # noqa: E731
                                                if "complex" in et else 0)).astype(dtype)
    a, b = make(lhs), make(rhs)
    (got,) = exe(a, b)
    want = np.einsum(spec, a.astype(np.complex128), b.astype(np.complex128))
    np.testing.assert_allclose(got, want if "complex" in et else want.real, rtol=rtol, atol=rtol * 10)


@pytest.mark.parametrize("et,dtype,rtol", [("complex<f32>", np.complex64, 2e-5),
                                           ("complex<f64>", np.complex128, 1e-12)])
@pytest.mark.parametrize("lhs,rhs,out,dims,spec", CASES[:6])
def test_complex_products_call_cgemm_and_zgemm(lhs, rhs, out, dims, spec, et, dtype, rtol, rng):
    exe = kiln.compile(dot(lhs, rhs, out, dims, et))
    assert calls(exe) == {"kiln_blas_cgemm" if dtype == np.complex64 else "kiln_blas_zgemm"}
    a = (rng.standard_normal(lhs) + 1j * rng.standard_normal(lhs)).astype(dtype)
    b = (rng.standard_normal(rhs) + 1j * rng.standard_normal(rhs)).astype(dtype)
    (got,) = exe(a, b)
    want = np.einsum(spec, a.astype(np.complex128), b.astype(np.complex128))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 10)


@pytest.mark.usefixtures("float_library_route")
def test_mixed_products_feed_fused_consumers(rng):
    # a quantized layer: int8 product, int32 result scaled to f32 and rectified; the
    # conversion back from the exact sum fuses with the consumers
    src = """
func.func @main(%x: tensor<64x256xi8>, %w: tensor<256x128xi8>, %s: tensor<128xf32>) -> tensor<64x128xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<64x256xi8>, tensor<256x128xi8>) -> tensor<64x128xi32>
  %1 = stablehlo.convert %0 : (tensor<64x128xi32>) -> tensor<64x128xf32>
  %2 = stablehlo.broadcast_in_dim %s, dims = [1] : (tensor<128xf32>) -> tensor<64x128xf32>
  %3 = stablehlo.multiply %1, %2 : tensor<64x128xf32>
  %z = stablehlo.constant dense<0.0> : tensor<64x128xf32>
  %4 = stablehlo.maximum %3, %z : tensor<64x128xf32>
  return %4 : tensor<64x128xf32>
}"""
    exe = kiln.compile(src)
    assert calls(exe) == {"kiln_blas_sgemm"}
    x = rng.integers(-128, 128, (64, 256), dtype=np.int8)
    w = rng.integers(-128, 128, (256, 128), dtype=np.int8)
    s = rng.random(128).astype(np.float32)
    want = np.maximum(wrapped(x, w, np.int32).astype(np.float32) * s, 0)
    np.testing.assert_array_equal(exe(x, w, s)[0], want)


def _blas_thread_count():
    import ctypes
    from kiln.runtime.libraries import blas
    lib = ctypes.CDLL(blas().path)
    getter = next(getattr(lib, n) for n in ("openblas_get_num_threads",
                                            "scipy_openblas_get_num_threads64_",
                                            "openblas_get_num_threads64_") if hasattr(lib, n))
    return getter()


def test_one_thread_blas_scopes_leave_the_thread_count_as_they_found_it():
    # A convolution plan runs its per-row gemms on Kiln's pool, each chunk keeping OpenBLAS
    # on its own thread. The count is process-wide in numpy's OpenBLAS: concurrent chunks
    # (and several calling threads) once left it at 1, slowing every later product.
    import threading
    import jax
    import jax.numpy as jnp
    from kiln.runtime.libraries import thread_control
    if not thread_control():
        pytest.fail("numpy's OpenBLAS exports openblas_set_num_threads_local; Kiln should bind it")

    def conv(x, w):
        return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 28, 28, 32)).astype(np.float32)
    w = rng.standard_normal((3, 3, 32, 32)).astype(np.float32)
    exe = kiln.compile(jax.jit(conv).lower(x, w).as_text())
    codegen = exe.ir("codegen")
    assert "kiln_parallel_for" in codegen and "kiln_blas_set_threads" in codegen
    before = _blas_thread_count()
    want = np.asarray(conv(x, w))
    results = []
    threads = [threading.Thread(target=lambda: results.append(exe(x, w)[0])) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    for got in results:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    assert _blas_thread_count() == before
    # The scopes themselves, through the runtime the program was loaded with: entering sets
    # one thread, and the token it returns, passed back, restores the count.
    from kiln.runtime.custom_call import runtime
    scope = runtime().kiln_blas_set_threads
    token = scope(1)
    assert _blas_thread_count() == 1
    scope(token)
    assert _blas_thread_count() == before
