"""bf16 and 8-bit matrix products through the runtime's own kernels (runtime/kiln_gemm.c,
runtime/kiln_gemm_amx.c): AMX where the CPU has it, plain loops under KILN_AMX=0; and the
compiler's routing of products to them (lowering/codegen/products.py, blas.py).

Every test asserts the same results on either path, so it holds on a CPU without AMX too;
where the CPU has AMX (this project's machines) both paths run."""
from __future__ import annotations

import ctypes
import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import kiln
from product_calls import product_calls
from kiln.native import runtime_library
from kiln.runtime.libraries import amx_products

ACCUMULATE, A_UNSIGNED, B_UNSIGNED = 1, 2, 4   # runtime/kiln_gemm.h
SIZES = [1, 15, 17, 33, 100]


@pytest.fixture(scope="module")
def runtime():
    lib = ctypes.CDLL(str(runtime_library()))
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    for f in (lib.kiln_gemm_bf16_f32, lib.kiln_gemm_i8_i32):
        f.argtypes = [i64, i64, i64, p, i64, i64, p, i64, i64, p, i64, ctypes.c_int32]
        f.restype = None
    lib.kiln_gemm_amx_available.restype = ctypes.c_int32
    return lib


@pytest.fixture(params=["amx", "loops"])
def path(request, monkeypatch):
    """Both of the runtime's paths (KILN_AMX is read on every call)."""
    if request.param == "loops":
        monkeypatch.setenv("KILN_AMX", "0")
    else:
        monkeypatch.delenv("KILN_AMX", raising=False)
    return request.param


def call(runtime, a, b, c, ta=False, tb=False, flags=0):
    """C (+)= op(A) op(B) through the runtime; a transposed operand is passed as stored."""
    m, k = (a.shape[1], a.shape[0]) if ta else a.shape
    n = b.shape[0] if tb else b.shape[1]
    a_row, a_col = (1, a.shape[1]) if ta else (a.shape[1], 1)
    b_row, b_col = (1, b.shape[1]) if tb else (b.shape[1], 1)
    f = runtime.kiln_gemm_bf16_f32 if c.dtype == np.float32 else runtime.kiln_gemm_i8_i32
    f(m, n, k, a.ctypes.data, a_row, a_col, b.ctypes.data, b_row, b_col, c.ctypes.data,
      c.shape[1], flags)


def operand(rng, shape, dtype):
    if dtype == ml_dtypes.bfloat16:
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)
    x.flat[0] = info.min   # the extreme values too
    x.flat[-1] = info.max
    return x


def test_amx_is_used_where_the_cpu_has_it(runtime, monkeypatch):
    monkeypatch.delenv("KILN_AMX", raising=False)
    flags = Path("/proc/cpuinfo").read_text().split()
    has_amx = all(f in flags for f in ("amx_tile", "amx_bf16", "amx_int8"))
    assert runtime.kiln_gemm_amx_available() == has_amx
    assert amx_products() == has_amx
    monkeypatch.setenv("KILN_AMX", "0")
    assert runtime.kiln_gemm_amx_available() == 0
    assert not amx_products()


@pytest.mark.parametrize("m,n,k", [(m, n, k) for m in SIZES for n in SIZES[1:] for k in (1, 33, 100)]
                         + [(64, 64, 64), (5, 300, 1000)])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, True)])
def test_int8_kernel_is_bit_exact(runtime, path, m, n, k, ta, tb, rng):
    for types in [(np.int8, np.int8), (np.uint8, np.int8), (np.int8, np.uint8), (np.uint8, np.uint8)]:
        a = operand(rng, (k, m) if ta else (m, k), types[0])
        b = operand(rng, (n, k) if tb else (k, n), types[1])
        flags = (A_UNSIGNED if types[0] == np.uint8 else 0) | (B_UNSIGNED if types[1] == np.uint8 else 0)
        want = (a.T if ta else a).astype(np.int64) @ (b.T if tb else b).astype(np.int64)
        c = np.full((m, n), -7, np.int32)
        call(runtime, a, b, c, ta, tb, flags)
        np.testing.assert_array_equal(c, want)
        call(runtime, a, b, c, ta, tb, flags | ACCUMULATE)   # C += A B
        np.testing.assert_array_equal(c, 2 * want)


def test_int8_sums_wrap_like_int32_accumulation(runtime, path):
    # 255 * 255 * 40000 passes 2^31: the sum wraps, as XLA's int32 accumulation does
    k = 40000
    a, b = np.full((16, k), 255, np.uint8), np.full((k, 16), 255, np.uint8)
    c = np.zeros((16, 16), np.int32)
    call(runtime, a, b, c, flags=A_UNSIGNED | B_UNSIGNED)
    assert (c == np.int64(255 * 255 * k).astype(np.int32)).all()


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (15, 17, 33), (17, 15, 100), (33, 100, 17),
                                   (100, 33, 200), (5, 300, 1000)])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_bf16_kernel_accumulates_in_f32(runtime, path, m, n, k, ta, tb, rng):
    _check_bf16_product(runtime, m, n, k, ta, tb, rng)


def _check_bf16_product(runtime, m, n, k, ta, tb, rng):
    a = operand(rng, (k, m) if ta else (m, k), ml_dtypes.bfloat16)
    b = operand(rng, (n, k) if tb else (k, n), ml_dtypes.bfloat16)
    want = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    c = np.full((m, n), 3.0, np.float32)
    call(runtime, a, b, c, ta, tb)
    # products of bf16 are exact in f32: only the order of the f32 sums differs
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5 * np.sqrt(k))
    call(runtime, a, b, c, ta, tb, ACCUMULATE)
    np.testing.assert_allclose(c, 2 * want, rtol=1e-5, atol=2e-5 * np.sqrt(k))


def test_large_products_split_over_threads_agree_with_numpy(runtime, rng):
    a, b = operand(rng, (768, 768), np.int8), operand(rng, (768, 768), np.int8)
    c = np.zeros((768, 768), np.int32)
    call(runtime, a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))
    x, y = operand(rng, (768, 768), ml_dtypes.bfloat16), operand(rng, (768, 768), ml_dtypes.bfloat16)
    z = np.zeros((768, 768), np.float32)
    call(runtime, x, y, z, tb=True)
    np.testing.assert_allclose(z, x.astype(np.float64) @ y.astype(np.float64).T, rtol=1e-5, atol=1e-3)


# Shapes that cross the kernels' blocking: chunks of N (one packed B panel each), passes over
# K (8-bit: 12 K tiles of 64, bf16: 8 of 32), 32 x 32 blocks and 16-wide tiles with ragged
# edges, K = 1, tiny and tall or wide products; four are big enough for the thread pool
# (kiln_gemm_amx.c's PARALLEL_MACS).
BLOCKING_SHAPES = [(16001, 33, 65), (33, 16001, 65), (257, 1001, 129), (130, 700, 1601),
                   (2100, 1000, 1), (3, 5000, 200), (40, 2100, 2100), (31, 17, 1)]
ALL_LAYOUTS = [(False, False), (True, False), (False, True), (True, True)]


@pytest.mark.parametrize("m,n,k", BLOCKING_SHAPES)
@pytest.mark.parametrize("ta,tb", ALL_LAYOUTS)
def test_int8_kernel_is_bit_exact_across_blocking_edges(runtime, m, n, k, ta, tb, rng):
    for types in [(np.int8, np.int8), (np.uint8, np.uint8)]:
        a = operand(rng, (k, m) if ta else (m, k), types[0])
        b = operand(rng, (n, k) if tb else (k, n), types[1])
        flags = (A_UNSIGNED | B_UNSIGNED) if types[0] == np.uint8 else 0
        # float64 sums of these products are exact (|sum| < 2^31), and BLAS-fast
        want = ((a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64))
        want = want.astype(np.int64)
        c = np.full((m, n), -7, np.int32)
        call(runtime, a, b, c, ta, tb, flags)
        np.testing.assert_array_equal(c, want)
    call(runtime, a, b, c, ta, tb, flags | ACCUMULATE)   # C += A B over every K pass
    np.testing.assert_array_equal(c, 2 * want)


@pytest.mark.parametrize("m,n,k", BLOCKING_SHAPES)
@pytest.mark.parametrize("ta,tb", ALL_LAYOUTS)
def test_bf16_kernel_matches_f64_across_blocking_edges(runtime, m, n, k, ta, tb, rng):
    _check_bf16_product(runtime, m, n, k, ta, tb, rng)


def test_products_into_a_wider_c_leave_the_columns_past_n_alone(runtime, rng):
    # ldc > N (C a column slice of a wider array): the padded tiles must not spill over
    a, b = operand(rng, (100, 300), np.int8), operand(rng, (300, 70), np.int8)
    wide = np.full((100, 96), 5, np.int32)
    runtime.kiln_gemm_i8_i32(100, 70, 300, a.ctypes.data, 300, 1, b.ctypes.data, 70, 1,
                             wide.ctypes.data, 96, 0)
    np.testing.assert_array_equal(wide[:, :70], a.astype(np.int64) @ b.astype(np.int64))
    assert (wide[:, 70:] == 5).all()


# ---- compiled programs -------------------------------------------------------------------

KERNELS = {"bf16": "kiln_gemm_bf16_f32", "i8": "kiln_gemm_i8_i32"}


def called(exe) -> set[str]:
    return {c for c in product_calls(exe.ir("codegen"),
                                     r"(kiln_(?:gemm_[a-z0-9]+_[a-z0-9]+|blas_\w+))")
            if not re.fullmatch(r"kiln_gemm_\d+", c)}


def expected_route(kind: str, widened: str = "kiln_blas_sgemm") -> set[str]:
    return {KERNELS[kind]} if amx_products() else {widened}


def shape(dims, et):
    return "tensor<" + "x".join(map(str, dims)) + f"x{et}>"


def dot_general(lhs, rhs, out, dims, a_type, b_type, out_type):
    a, b, o = shape(lhs, a_type), shape(rhs, b_type), shape(out, out_type)
    return (f"func.func @main(%a: {a}, %b: {b}) -> {o} {{\n"
            f"  %0 = stablehlo.dot_general %a, %b, {dims} : ({a}, {b}) -> {o}\n"
            f"  return %0 : {o}\n}}")


LAYOUTS = [
    ((100, 70), (70, 33), (100, 33), "contracting_dims = [1] x [0]", "mk,kn->mn"),
    ((70, 100), (33, 70), (100, 33), "contracting_dims = [0] x [1]", "km,nk->mn"),
    ((17, 768), (15, 768), (17, 15), "contracting_dims = [1] x [1]", "mk,nk->mn"),
    ((3, 33, 64), (3, 64, 17), (3, 33, 17),
     "batching_dims = [0] x [0], contracting_dims = [2] x [1]", "bmk,bkn->bmn"),
    ((2, 3, 64, 40), (2, 3, 64, 24), (2, 3, 40, 24),
     "batching_dims = [0, 1] x [0, 1], contracting_dims = [2] x [2]", "abkm,abkn->abmn"),
    # ragged sizes past one 32 x 32 block and one K pass, batched and transposed
    ((2, 301, 130), (2, 97, 301), (2, 130, 97),
     "batching_dims = [0] x [0], contracting_dims = [1] x [2]", "bkm,bnk->bmn"),
    ((130, 1100), (1100, 97), (130, 97), "contracting_dims = [1] x [0]", "mk,kn->mn"),
]
INTS = {"i8": np.int8, "ui8": np.uint8}


def widened_integer_route(lhs, dims: str, a_type: str, b_type: str) -> str:
    """Where an 8-bit product goes without AMX (lowering/codegen/products.py): sgemm when every
    partial sum stays an exact f32 (|sum| <= 2^24), in one pass or in K chunks of at least 256
    (at most 16), else dgemm. uint8 reaches 255, int8 128."""
    depth = lhs[int(re.search(r"contracting_dims = \[(\d+)\]", dims).group(1))]
    per_step = (255 if a_type == "ui8" else 128) * (255 if b_type == "ui8" else 128)
    chunks = -(-depth // ((1 << 24) // per_step))
    fits = chunks == 1 or (depth // chunks >= 256 and chunks <= 16)
    return "kiln_blas_sgemm" if fits else "kiln_blas_dgemm"


@pytest.mark.parametrize("lhs,rhs,out,dims,spec", LAYOUTS)
def test_bf16_products_with_f32_results(lhs, rhs, out, dims, spec, rng):
    exe = kiln.compile(dot_general(lhs, rhs, out, dims, "bf16", "bf16", "f32"))
    assert called(exe) == expected_route("bf16")
    a, b = operand(rng, lhs, ml_dtypes.bfloat16), operand(rng, rhs, ml_dtypes.bfloat16)
    (got,) = exe(a, b)
    assert got.dtype == np.float32
    want = np.einsum(spec, a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("lhs,rhs,out,dims,spec", LAYOUTS)
@pytest.mark.parametrize("a_type,b_type", [("i8", "i8"), ("ui8", "i8"), ("i8", "ui8"),
                                           ("ui8", "ui8")])
def test_8bit_products_with_int32_results_are_exact(lhs, rhs, out, dims, spec, a_type, b_type,
                                                     rng):
    exe = kiln.compile(dot_general(lhs, rhs, out, dims, a_type, b_type, "i32"))
    assert called(exe) == expected_route("i8", widened_integer_route(lhs, dims, a_type, b_type))
    a, b = operand(rng, lhs, INTS[a_type]), operand(rng, rhs, INTS[b_type])
    (got,) = exe(a, b)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.einsum(spec, a.astype(np.int64), b.astype(np.int64)))


def test_bf16_product_with_a_bf16_result_accumulates_in_f32(rng):
    # the front end writes it as an f32 product of widened operands, rounded once at the end
    exe = kiln.compile(dot_general((96, 200), (200, 80), (96, 80), "contracting_dims = [1] x [0]",
                                   "bf16", "bf16", "bf16"))
    assert called(exe) == expected_route("bf16")
    a, b = operand(rng, (96, 200), ml_dtypes.bfloat16), operand(rng, (200, 80), ml_dtypes.bfloat16)
    (got,) = exe(a, b)
    assert got.dtype == ml_dtypes.bfloat16
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2 ** -8, atol=1e-6)


def test_astype_int32_operands_are_read_narrow_by_the_kernel(rng):
    src = """
func.func @main(%a: tensor<64x300xi8>, %b: tensor<300x48xui8>) -> tensor<64x48xi32> {
  %0 = stablehlo.convert %a : (tensor<64x300xi8>) -> tensor<64x300xi32>
  %1 = stablehlo.convert %b : (tensor<300x48xui8>) -> tensor<300x48xi32>
  %2 = stablehlo.dot_general %0, %1, contracting_dims = [1] x [0] : (tensor<64x300xi32>, tensor<300x48xi32>) -> tensor<64x48xi32>
  return %2 : tensor<64x48xi32>
}"""
    exe = kiln.compile(src)
    assert called(exe) == expected_route("i8")
    a, b = operand(rng, (64, 300), np.int8), operand(rng, (300, 48), np.uint8)
    np.testing.assert_array_equal(exe(a, b)[0], a.astype(np.int64) @ b.astype(np.int64))


def test_compiled_kernel_calls_fall_back_at_run_time(monkeypatch, rng):
    # code compiled for AMX, run with KILN_AMX=0: the runtime's loops give the same bits
    exe = kiln.compile(dot_general((40, 130), (130, 24), (40, 24), "contracting_dims = [1] x [0]",
                                   "ui8", "i8", "i32"))
    a, b = operand(rng, (40, 130), np.uint8), operand(rng, (130, 24), np.int8)
    (on,) = exe(a, b)
    monkeypatch.setenv("KILN_AMX", "0")
    (off,) = exe(a, b)
    np.testing.assert_array_equal(on, off)
    np.testing.assert_array_equal(off, a.astype(np.int64) @ b.astype(np.int64))


def test_kiln_amx_0_routes_products_through_the_float_library(monkeypatch, rng):
    # read when compiling: compile here, uncached
    monkeypatch.setenv("KILN_AMX", "0")
    monkeypatch.setenv("KILN_CACHE", "0")
    monkeypatch.setenv("KILN_COMPILE_IN_PROCESS", "1")
    exe = kiln.compile(dot_general((64, 256), (256, 48), (64, 48), "contracting_dims = [1] x [0]",
                                   "i8", "i8", "i32"))
    assert called(exe) == {"kiln_blas_sgemm"}
    a, b = operand(rng, (64, 256), np.int8), operand(rng, (256, 48), np.int8)
    np.testing.assert_array_equal(exe(a, b)[0], a.astype(np.int64) @ b.astype(np.int64))


def test_matrix_vector_products_keep_their_routes(rng):
    # one side 1: widened for gemv (vector-matrix) as before, not padded to AMX tiles
    exe = kiln.compile(dot_general((1, 512), (512, 256), (1, 256), "contracting_dims = [1] x [0]",
                                   "i8", "i8", "i32"))
    assert not called(exe) & set(KERNELS.values())
    a, b = operand(rng, (1, 512), np.int8), operand(rng, (512, 256), np.int8)
    np.testing.assert_array_equal(exe(a, b)[0], a.astype(np.int64) @ b.astype(np.int64))


def test_transposed_result_swaps_the_operands_and_their_signedness(rng):
    # transpose(A B) folds into the product's output map; the call computes C^T = B^T A^T,
    # so the unsigned operand moves to the kernel's other side
    src = """
func.func @main(%a: tensor<48x200xui8>, %b: tensor<200x40xi8>) -> tensor<40x48xi32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<48x200xui8>, tensor<200x40xi8>) -> tensor<48x40xi32>
  %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<48x40xi32>) -> tensor<40x48xi32>
  return %1 : tensor<40x48xi32>
}"""
    exe = kiln.compile(src)
    assert called(exe) == expected_route("i8")
    a, b = operand(rng, (48, 200), np.uint8), operand(rng, (200, 40), np.int8)
    np.testing.assert_array_equal(exe(a, b)[0], (a.astype(np.int64) @ b.astype(np.int64)).T)
