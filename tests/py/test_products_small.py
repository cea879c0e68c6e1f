"""Skinny and small matrix products: the runtime's own f32 kernels (runtime/kiln_gemv.c, which
large f32 gemv calls go to instead of OpenBLAS's sgemv, and runtime/kiln_sgemm_small.c, which
products with few rows go to), called directly and through compiled programs, and products of every precision over odd, transposed
and batched shapes, against numpy in float64 (integers bit-exact)."""
import ctypes

import ml_dtypes
import numpy as np
import pytest

import kiln
from product_calls import product_calls
from kiln.lowering.codegen import blas_library
from kiln.native import runtime_library

NO_TRANS, TRANS = 111, 112


@pytest.fixture(scope="module")
def sgemv():
    fn = ctypes.CDLL(str(runtime_library())).kiln_sgemv
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    fn.argtypes = [ctypes.c_int32, ctypes.c_int32, i64, i64, ctypes.c_float, ptr, i64, ptr, i64,
                   ctypes.c_float, ptr, i64]
    fn.restype = None
    return fn


# (rows, cols): odd sizes around the 16-float vector and the 4- and 8-row groups, one below and
# some above the size the kernel shares out over threads (2^20 elements)
SHAPES = [(1, 1), (3, 5), (17, 33), (8, 16), (300, 200), (5, 1000), (1000, 3), (1031, 1025),
          (4096, 300)]


@pytest.mark.parametrize("rows,cols", SHAPES)
@pytest.mark.parametrize("trans", [NO_TRANS, TRANS])
@pytest.mark.parametrize("incx,incy,beta", [(1, 1, 0.0), (3, 2, 1.0), (2, 1, 0.5)])
def test_sgemv_kernel_matches_numpy(sgemv, rows, cols, trans, incx, incy, beta, rng):
    lda = cols + 7   # a padded leading dimension
    a = rng.standard_normal((rows, lda)).astype(np.float32)
    n_in, n_out = (rows, cols) if trans == TRANS else (cols, rows)
    x = rng.standard_normal(n_in * incx).astype(np.float32)
    y = rng.standard_normal(n_out * incy).astype(np.float32)
    if beta == 0.0:
        y[::incy] = np.nan   # beta = 0 must not read y
    before = y.copy()
    sgemv(101, trans, rows, cols, 1.0, a.ctypes.data, lda, x.ctypes.data, incx, beta,
          y.ctypes.data, incy)
    matrix = a[:, :cols].astype(np.float64)
    product = (matrix.T if trans == TRANS else matrix) @ x[::incx].astype(np.float64)
    want = product + (beta * before[::incy] if beta else 0.0)
    np.testing.assert_allclose(y[::incy], want, rtol=1e-4, atol=1e-4 * np.sqrt(n_in))
    # elements between the strided outputs are left alone
    for gap in range(1, incy):
        np.testing.assert_array_equal(y[gap::incy], before[gap::incy])


def test_sgemv_kernel_with_empty_inner_dimension_writes_zeros(sgemv):
    y = np.full(5, np.nan, np.float32)
    a = np.zeros((5, 1), np.float32)
    x = np.zeros(1, np.float32)
    sgemv(101, NO_TRANS, 5, 0, 1.0, a.ctypes.data, 1, x.ctypes.data, 1, 0.0, y.ctypes.data, 1)
    np.testing.assert_array_equal(y, np.zeros(5, np.float32))


@pytest.fixture(scope="module")
def sgemm_small():
    fn = ctypes.CDLL(str(runtime_library())).kiln_sgemm_small
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    fn.argtypes = [i64, i64, i64, ptr, i64, i64, ptr, i64, ptr, i64, ctypes.c_int32]
    fn.restype = None
    return fn


# (M, N, K): every row-block remainder (8, 4, 2, 1 rows), partial 16- and 32-column panels,
# K of 1, and sizes above the one the kernel shares out over threads (2^19 multiply-adds)
SMALL_SHAPES = [(1, 1, 1), (3, 5, 7), (8, 32, 16), (15, 47, 29), (13, 16, 3), (7, 100, 1),
                (32, 256, 256), (64, 33, 300), (33, 1000, 64), (2, 17, 1000)]


@pytest.mark.parametrize("m,n,k", SMALL_SHAPES)
@pytest.mark.parametrize("a_transposed", [False, True])
@pytest.mark.parametrize("accumulate", [0, 1])
def test_small_gemm_kernel_matches_numpy(sgemm_small, m, n, k, a_transposed, accumulate, rng):
    a = rng.standard_normal((k, m) if a_transposed else (m, k)).astype(np.float32)
    b = rng.standard_normal((k, n + 3)).astype(np.float32)        # padded rows
    c = rng.standard_normal((m, n + 5)).astype(np.float32)
    if not accumulate:
        c[:, :n] = np.nan   # C = A B must not read C
    before = c.copy()
    a_row, a_col = (1, m) if a_transposed else (k, 1)
    sgemm_small(m, n, k, a.ctypes.data, a_row, a_col, b.ctypes.data, n + 3, c.ctypes.data,
                n + 5, accumulate)
    lhs = (a.T if a_transposed else a).astype(np.float64)
    want = lhs @ b[:, :n].astype(np.float64) + (before[:, :n] if accumulate else 0.0)
    np.testing.assert_allclose(c[:, :n], want, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    np.testing.assert_array_equal(c[:, n:], before[:, n:])   # the padding is left alone


def tensor(shape, et):
    return f"tensor<{'x'.join(map(str, shape))}x{et}>"


def dot(lhs, rhs, out, dims, a_type, b_type=None, out_type=None):
    b_type, out_type = b_type or a_type, out_type or a_type
    ta, tb, tc = tensor(lhs, a_type), tensor(rhs, b_type), tensor(out, out_type)
    return (f"func.func @main(%a: {ta}, %b: {tb}) -> {tc} {{\n"
            f"  %0 = stablehlo.dot_general %a, %b, {dims} : ({ta}, {tb}) -> {tc}\n"
            f"  return %0 : {tc}\n}}")


def callees(exe) -> set[str]:
    """The product routines the compiled program calls (thread control aside)."""
    return set(product_calls(exe.ir("codegen"),
                             r"(kiln_blas_\w+|kiln_sgemv|kiln_sgemm_small|kiln_gemm_[a-z]\w+)"))


@pytest.mark.skipif(blas_library() is None, reason="products stay loops without OpenBLAS")
@pytest.mark.parametrize("lhs,rhs,out,dims,spec", [
    ((1031, 1025), (1025,), (1031,), "contracting_dims = [1] x [0]", "mk,k->m"),
    ((1025, 1031), (1025,), (1031,), "contracting_dims = [0] x [0]", "km,k->m"),     # A^T x
    ((1, 1025), (1025, 1031), (1, 1031), "contracting_dims = [1] x [0]", "mk,kn->mn"),  # batch 1
    ((1, 1025), (1031, 1025), (1, 1031), "contracting_dims = [1] x [1]", "mk,nk->mn"),
    ((2, 1024, 1040), (2, 1040), (2, 1024),
     "batching_dims = [0] x [0], contracting_dims = [2] x [1]", "bmk,bk->bm"),
])
def test_large_f32_matrix_vector_products_call_the_runtime_kernel(lhs, rhs, out, dims, spec,
                                                                     rng):
    exe = kiln.compile(dot(lhs, rhs, out, dims, "f32"))
    assert callees(exe) == {"kiln_sgemv"}
    a = rng.standard_normal(lhs).astype(np.float32)
    b = rng.standard_normal(rhs).astype(np.float32)
    (got,) = exe(a, b)
    want = np.einsum(spec, a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.skipif(blas_library() is None, reason="products stay loops without OpenBLAS")
def test_small_f32_and_f64_matrix_vector_products_stay_with_the_library(rng):
    # below 2^20 elements one thread does it either way, and the library's kernel is as fast
    exe = kiln.compile(dot((300, 200), (200,), (300,), "contracting_dims = [1] x [0]", "f32"))
    assert callees(exe) == {"kiln_blas_sgemv"}
    exe64 = kiln.compile(dot((1031, 1025), (1025,), (1031,), "contracting_dims = [1] x [0]",
                             "f64"))
    assert callees(exe64) == {"kiln_blas_dgemv"}
    a, x = rng.standard_normal((1031, 1025)), rng.standard_normal(1025)
    np.testing.assert_allclose(exe64(a, x)[0], a @ x, rtol=1e-12, atol=1e-12)


def test_gemv_inside_a_loop_accumulates_exactly_like_numpy(rng):
    # a product whose result feeds the next iteration: each call must see the previous output
    text = """
func.func @main(%m: tensor<1024x1024xf32>, %v: tensor<1024xf32>) -> tensor<1024xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %n = stablehlo.constant dense<3> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %x = %v) : tensor<i32>, tensor<1024xf32>
    cond {
      %lt = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %y = stablehlo.dot_general %m, %x, contracting_dims = [1] x [0]
           : (tensor<1024x1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
      %j = stablehlo.add %i, %c1 : tensor<i32>
      stablehlo.return %j, %y : tensor<i32>, tensor<1024xf32>
    }
  return %r#1 : tensor<1024xf32>
}"""
    exe = kiln.compile(text)
    m = (rng.standard_normal((1024, 1024)) / 32).astype(np.float32)
    v = rng.standard_normal(1024).astype(np.float32)
    want = v.astype(np.float64)
    for _ in range(3):
        want = m.astype(np.float64) @ want
    np.testing.assert_allclose(exe(m, v)[0], want, rtol=1e-3, atol=1e-3)


def in_loop(lhs, rhs, out, dims, et="f32"):
    """@main(a, b) = the product added up over two iterations of a while loop: 2 (a . b)."""
    ta, tb, tc = tensor(lhs, et), tensor(rhs, et), tensor(out, et)
    return f"""
func.func @main(%a: {ta}, %b: {tb}) -> {tc} {{
  %zero = stablehlo.constant dense<0.0> : {tc}
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %n = stablehlo.constant dense<2> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %acc = %zero) : tensor<i32>, {tc}
    cond {{
      %lt = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    }} do {{
      %p = stablehlo.dot_general %a, %b, {dims} : ({ta}, {tb}) -> {tc}
      %s = stablehlo.add %acc, %p : {tc}
      %j = stablehlo.add %i, %c1 : tensor<i32>
      stablehlo.return %j, %s : tensor<i32>, {tc}
    }}
  return %r#1 : {tc}
}}"""


@pytest.mark.skipif(blas_library() is None, reason="products stay loops without OpenBLAS")
@pytest.mark.parametrize("lhs,rhs,out,dims,spec", [
    ((32, 256), (256, 256), (32, 256), "contracting_dims = [1] x [0]", "mk,kn->mn"),
    ((256, 33), (256, 200), (33, 200), "contracting_dims = [0] x [0]", "km,kn->mn"),  # A^T
    ((3, 41, 160), (3, 160, 257), (3, 41, 257),
     "batching_dims = [0] x [0], contracting_dims = [2] x [1]", "bmk,bkn->bmn"),
])
def test_f32_products_with_few_rows_in_loops_call_the_small_kernel(lhs, rhs, out, dims, spec,
                                                                   rng):
    exe = kiln.compile(in_loop(lhs, rhs, out, dims))
    assert callees(exe) == {"kiln_sgemm_small"}
    a = rng.standard_normal(lhs).astype(np.float32)
    b = rng.standard_normal(rhs).astype(np.float32)
    (got,) = exe(a, b)
    want = 2 * np.einsum(spec, a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.skipif(blas_library() is None, reason="products stay loops without OpenBLAS")
@pytest.mark.parametrize("lhs,rhs,out,dims", [
    ((65, 256), (256, 256), (65, 256), "contracting_dims = [1] x [0]"),    # more rows
    ((32, 256), (256, 256), (32, 256), "contracting_dims = [1] x [1]"),    # B^T
    ((32, 1024), (1024, 512), (32, 512), "contracting_dims = [1] x [0]"),  # B past L2's share
    ((32, 128), (128, 128), (32, 128), "contracting_dims = [1] x [0]"),    # one thread's work
])
def test_other_f32_products_in_loops_stay_with_the_library(lhs, rhs, out, dims):
    assert callees(kiln.compile(in_loop(lhs, rhs, out, dims))) == {"kiln_blas_sgemm"}


@pytest.mark.skipif(blas_library() is None, reason="products stay loops without OpenBLAS")
def test_products_outside_loops_stay_with_the_library():
    exe = kiln.compile(dot((32, 256), (256, 256), (32, 256), "contracting_dims = [1] x [0]",
                           "f32"))
    assert callees(exe) == {"kiln_blas_sgemm"}


def test_recurrent_step_in_a_scan_matches_numpy(rng):
    # the rnn_scan workload's shape: two small products per step, the state carried over
    import jax
    import jax.numpy as jnp

    def f(xs, w, u):
        def step(h, x):
            h = jnp.tanh(x @ w + h @ u)
            return h, h
        return jax.lax.scan(step, jnp.zeros((32, 256), np.float32), xs)[1]
    xs = rng.standard_normal((20, 32, 128)).astype(np.float32)
    w = (rng.standard_normal((128, 256)) * 0.1).astype(np.float32)
    u = (rng.standard_normal((256, 256)) * 0.06).astype(np.float32)
    exe = kiln.compile(str(jax.jit(f).lower(xs, w, u).compiler_ir("stablehlo")))
    assert "kiln_sgemm_small" in callees(exe)
    h, want = np.zeros((32, 256)), []
    for x in xs.astype(np.float64):
        h = np.tanh(x @ w + h @ u)
        want.append(h)
    np.testing.assert_allclose(exe(xs, w, u)[0], np.stack(want), rtol=1e-4, atol=1e-4)


# every precision, small and skinny shapes with odd sizes, both operand layouts and batch dims
PRECISIONS = [
    # (operand type, result type, numpy operand dtype, rtol); integers compared exactly
    ("f32", "f32", np.float32, 1e-4),
    ("f64", "f64", np.float64, 1e-12),
    ("complex<f32>", "complex<f32>", np.complex64, 1e-4),
    ("bf16", "f32", ml_dtypes.bfloat16, 1e-4),
    ("i8", "i32", np.int8, 0),
]
SKINNY = [
    ((33, 47), (47, 5), (33, 5), "contracting_dims = [1] x [0]", "mk,kn->mn"),
    ((47, 33), (5, 47), (33, 5), "contracting_dims = [0] x [1]", "km,nk->mn"),          # both T
    ((3, 130), (130, 257), (3, 257), "contracting_dims = [1] x [0]", "mk,kn->mn"),
    ((4, 17, 64), (4, 64, 31), (4, 17, 31),
     "batching_dims = [0] x [0], contracting_dims = [2] x [1]", "bmk,bkn->bmn"),
    ((65, 2, 96), (2, 33, 96), (2, 65, 33),
     "batching_dims = [1] x [0], contracting_dims = [2] x [2]", "mbk,bnk->bmn"),
]


def operand(shape, dtype, rng):
    if dtype == np.int8:
        return rng.integers(-128, 128, shape).astype(np.int8)
    values = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * rng.standard_normal(shape)
    return values.astype(dtype)


@pytest.mark.parametrize("et,out_type,dtype,rtol", PRECISIONS)
@pytest.mark.parametrize("lhs,rhs,out,dims,spec", SKINNY)
def test_skinny_products_in_every_precision(lhs, rhs, out, dims, spec, et, out_type, dtype, rtol,
                                            rng):
    exe = kiln.compile(dot(lhs, rhs, out, dims, et, et, out_type))
    a, b = operand(lhs, dtype, rng), operand(rhs, dtype, rng)
    (got,) = exe(a, b)
    if dtype == np.int8:
        want = np.einsum(spec, a.astype(np.int64), b.astype(np.int64))
        np.testing.assert_array_equal(got, want.astype(np.int32))
        return
    wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
    want = np.einsum(spec, a.astype(wide), b.astype(wide))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 10)


def test_f32_to_bf16_rounds_to_nearest_even_bit_for_bit():
    """f32 -> bf16 is integer code (kiln-lower-narrow-float-casts), not a __truncsfbf2 call per
    element: every bit pattern class (ties, carries into the exponent, overflow to infinity,
    subnormals, NaNs of both signs) as ml_dtypes rounds it."""
    import ml_dtypes
    src = """func.func @main(%x: tensor<4096xf32>) -> tensor<4096xbf16> {
      %0 = stablehlo.convert %x : (tensor<4096xf32>) -> tensor<4096xbf16>
      return %0 : tensor<4096xbf16>
    }"""
    bits = np.random.default_rng(0).integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32)
    special = [0x7F800000, 0xFF800000, 0x7FC00001, 0xFFA00000, 0x7F7FFFFF, 0xFF7FFFFF,
               0x00000001, 0x80000001, 0x3F808000, 0x3F818000, 0x3F807FFF, 0x80000000, 0]
    bits[:len(special)] = special
    x = bits.view(np.float32)
    (got,) = kiln.compile(src)(x)
    with np.errstate(invalid="ignore"):
        want = x.astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
