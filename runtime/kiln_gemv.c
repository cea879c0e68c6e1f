/* f32 matrix-vector products for compiled code (lowering/codegen/blas.py routes every large
 * f32 gemv here instead of OpenBLAS's sgemv).
 *
 * Why not the library's: a matrix-vector product reads each matrix element once, so it runs at
 * the speed the cores can stream the matrix, and on this 2-core machine that takes both cores.
 * OpenBLAS's threads hand work over by spinning; with anything else runnable (XLA's pool in
 * the same benchmark, a second process) the spinning thread and the one it waits for share a
 * core and the call takes 2-4x longer. Here the rows (or columns) are shared out over
 * Kiln's own pool (kiln_parallel.c, whose idle workers sleep), each thread streaming its part
 * with AVX-512 FMAs where the CPU has them.
 *
 * Interface: the row-major subset of cblas_sgemv, sizes as int64:
 *   y = alpha op(A) x + beta y,  A rows x cols with leading dimension lda,
 *   op(A) = A (trans = 111) or A^T (trans = 112);  beta == 0 never reads y.
 * Numerics: each output is a sum of exact f32 products in f32, in another order than a loop's
 * (as the library's also is). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_kernels.h"

enum { NO_TRANS = 111, TRANS = 112 };

/* Below this many matrix elements one thread streams the matrix faster than the pool's
 * hand-off (a wake-up costs ~10-30 us; 2^18 floats take ~60 us on one core). */
#define PARALLEL_ELEMENTS (1 << 18)
/* Rows per work item of A x (handed out one at a time: see shared_rows_body). */
#define ROW_BLOCK 64
/* Columns per work item of A^T x: a multiple of the 16-float vector, at most 16 KiB of y. */
#define MAX_COLUMN_BLOCK 4096

typedef struct {
  int64_t rows, cols, lda;
  const float* a;
  const float* x;   /* contiguous: op(A)'s input vector */
  float* y;         /* contiguous: op(A)'s output, before alpha and beta */
  int64_t column_block;   /* A^T x: columns per work item */
  _Atomic int64_t next_rows;   /* A x: the next ROW_BLOCK to hand out */
} gemv_job;

/* ---- portable loops (any CPU) --------------------------------------------------------- */

static void rows_plain(const gemv_job* j, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i++) {
    const float* row = j->a + i * j->lda;
    float sum = 0.0f;
    for (int64_t q = 0; q < j->cols; q++) sum += row[q] * j->x[q];
    j->y[i] = sum;
  }
}

static void columns_plain(const gemv_job* j, int64_t c0, int64_t c1) {
  for (int64_t c = c0; c < c1; c++) j->y[c] = 0.0f;
  for (int64_t q = 0; q < j->rows; q++) {
    const float* row = j->a + q * j->lda;
    float xq = j->x[q];
    for (int64_t c = c0; c < c1; c++) j->y[c] += xq * row[c];
  }
}

/* ---- AVX-512 ------------------------------------------------------------------------ */

#ifdef KILN_HAVE_AVX512_CODE

/* y[i] = A[i] . x for rows i0..i1: four rows at a time share each load of x. */
KILN_AVX512 static void rows_avx512(const gemv_job* j, int64_t i0, int64_t i1) {
  const int64_t n = j->cols, full = n & ~(int64_t)15;
  const __mmask16 tail = (__mmask16)((1u << (n - full)) - 1);
  const float* x = j->x;
  int64_t i = i0;
  for (; i + 4 <= i1; i += 4) {
    const float* r0 = j->a + i * j->lda;
    const float* r1 = r0 + j->lda;
    const float* r2 = r1 + j->lda;
    const float* r3 = r2 + j->lda;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    __m512 s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    for (int64_t q = 0; q < full; q += 16) {
      __m512 v = _mm512_loadu_ps(x + q);
      s0 = _mm512_fmadd_ps(_mm512_loadu_ps(r0 + q), v, s0);
      s1 = _mm512_fmadd_ps(_mm512_loadu_ps(r1 + q), v, s1);
      s2 = _mm512_fmadd_ps(_mm512_loadu_ps(r2 + q), v, s2);
      s3 = _mm512_fmadd_ps(_mm512_loadu_ps(r3 + q), v, s3);
    }
    if (tail) {
      __m512 v = _mm512_maskz_loadu_ps(tail, x + full);
      s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, r0 + full), v, s0);
      s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, r1 + full), v, s1);
      s2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, r2 + full), v, s2);
      s3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, r3 + full), v, s3);
    }
    j->y[i] = _mm512_reduce_add_ps(s0);
    j->y[i + 1] = _mm512_reduce_add_ps(s1);
    j->y[i + 2] = _mm512_reduce_add_ps(s2);
    j->y[i + 3] = _mm512_reduce_add_ps(s3);
  }
  for (; i < i1; i++) {
    const float* r = j->a + i * j->lda;
    __m512 s = _mm512_setzero_ps();
    for (int64_t q = 0; q < full; q += 16)
      s = _mm512_fmadd_ps(_mm512_loadu_ps(r + q), _mm512_loadu_ps(x + q), s);
    if (tail)
      s = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, r + full),
                          _mm512_maskz_loadu_ps(tail, x + full), s);
    j->y[i] = _mm512_reduce_add_ps(s);
  }
}

/* y[c0..c1) = sum_q x[q] A[q][c0..c1): the output slice (at most 16 KiB) stays in L1 while
 * eight rows at a time stream past it, each read contiguously (a narrower slice, 1 KiB per row,
 * measured a third slower: every row's piece is then a new page for the prefetcher). */
KILN_AVX512 static void columns_avx512(const gemv_job* j, int64_t c0, int64_t c1) {
  float* y = j->y;
  const int64_t lda = j->lda;
  for (int64_t c = c0; c < c1; c += 16) {
    int64_t width = c1 - c < 16 ? c1 - c : 16;
    _mm512_mask_storeu_ps(y + c, (__mmask16)((1u << width) - 1), _mm512_setzero_ps());
  }
  int64_t q = 0;
  for (; q + 8 <= j->rows; q += 8) {
    const float* r = j->a + q * lda;
    __m512 xs[8];
#pragma GCC unroll 8
    for (int t = 0; t < 8; t++) xs[t] = _mm512_set1_ps(j->x[q + t]);
    for (int64_t c = c0; c < c1; c += 16) {
      int64_t width = c1 - c < 16 ? c1 - c : 16;
      __mmask16 m = (__mmask16)((1u << width) - 1);
      __m512 acc0 = _mm512_maskz_loadu_ps(m, y + c), acc1 = _mm512_setzero_ps();
#pragma GCC unroll 4
      for (int t = 0; t < 8; t += 2) {   /* two chains: half the FMA latency on the path */
        acc0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, r + t * lda + c), xs[t], acc0);
        acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, r + (t + 1) * lda + c), xs[t + 1], acc1);
      }
      _mm512_mask_storeu_ps(y + c, m, _mm512_add_ps(acc0, acc1));
    }
  }
  for (; q < j->rows; q++) {
    const float* r = j->a + q * lda;
    __m512 xq = _mm512_set1_ps(j->x[q]);
    for (int64_t c = c0; c < c1; c += 16) {
      int64_t width = c1 - c < 16 ? c1 - c : 16;
      __mmask16 m = (__mmask16)((1u << width) - 1);
      __m512 acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, r + c), xq,
                                   _mm512_maskz_loadu_ps(m, y + c));
      _mm512_mask_storeu_ps(y + c, m, acc);
    }
  }
}
#endif

#ifdef KILN_HAVE_AVX512_CODE
KILN_AVX2 static float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* rows_avx512 with 8 lanes: four rows share each load of x. */
KILN_AVX2 static void rows_avx2(const gemv_job* j, int64_t i0, int64_t i1) {
  const int64_t n = j->cols, full = n & ~(int64_t)7;
  const float* x = j->x;
  int64_t i = i0;
  for (; i + 4 <= i1; i += 4) {
    const float* r[4] = {j->a + i * j->lda, j->a + (i + 1) * j->lda, j->a + (i + 2) * j->lda,
                         j->a + (i + 3) * j->lda};
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    for (int64_t q = 0; q < full; q += 8) {
      __m256 v = _mm256_loadu_ps(x + q);
      s0 = _mm256_fmadd_ps(_mm256_loadu_ps(r[0] + q), v, s0);
      s1 = _mm256_fmadd_ps(_mm256_loadu_ps(r[1] + q), v, s1);
      s2 = _mm256_fmadd_ps(_mm256_loadu_ps(r[2] + q), v, s2);
      s3 = _mm256_fmadd_ps(_mm256_loadu_ps(r[3] + q), v, s3);
    }
    float t[4] = {sum8(s0), sum8(s1), sum8(s2), sum8(s3)};
    for (int k = 0; k < 4; k++) {
      for (int64_t q = full; q < n; q++) t[k] += r[k][q] * x[q];
      j->y[i + k] = t[k];
    }
  }
  for (; i < i1; i++) {
    const float* r = j->a + i * j->lda;
    __m256 s = _mm256_setzero_ps();
    for (int64_t q = 0; q < full; q += 8)
      s = _mm256_fmadd_ps(_mm256_loadu_ps(r + q), _mm256_loadu_ps(x + q), s);
    float t = sum8(s);
    for (int64_t q = full; q < n; q++) t += r[q] * x[q];
    j->y[i] = t;
  }
}

/* columns_avx512 with 8 lanes: four rows at a time stream past the output slice. */
KILN_AVX2 static void columns_avx2(const gemv_job* j, int64_t c0, int64_t c1) {
  float* y = j->y;
  const int64_t lda = j->lda, full = c0 + ((c1 - c0) & ~(int64_t)7);
  for (int64_t c = c0; c < c1; c++) y[c] = 0.0f;
  int64_t q = 0;
  for (; q + 4 <= j->rows; q += 4) {
    const float* r = j->a + q * lda;
    __m256 x0 = _mm256_set1_ps(j->x[q]), x1 = _mm256_set1_ps(j->x[q + 1]);
    __m256 x2 = _mm256_set1_ps(j->x[q + 2]), x3 = _mm256_set1_ps(j->x[q + 3]);
    for (int64_t c = c0; c < full; c += 8) {
      __m256 acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(r + c), x0, _mm256_loadu_ps(y + c));
      __m256 acc1 = _mm256_mul_ps(_mm256_loadu_ps(r + lda + c), x1);
      acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(r + 2 * lda + c), x2, acc0);
      acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(r + 3 * lda + c), x3, acc1);
      _mm256_storeu_ps(y + c, _mm256_add_ps(acc0, acc1));
    }
    for (int64_t c = full; c < c1; c++)
      y[c] += j->x[q] * r[c] + j->x[q + 1] * r[lda + c] + j->x[q + 2] * r[2 * lda + c]
              + j->x[q + 3] * r[3 * lda + c];
  }
  for (; q < j->rows; q++) {
    const float* r = j->a + q * lda;
    __m256 xq = _mm256_set1_ps(j->x[q]);
    for (int64_t c = c0; c < full; c += 8)
      _mm256_storeu_ps(y + c, _mm256_fmadd_ps(_mm256_loadu_ps(r + c), xq, _mm256_loadu_ps(y + c)));
    for (int64_t c = full; c < c1; c++) y[c] += j->x[q] * r[c];
  }
}
#endif

/* ---- work items ---------------------------------------------------------------------- */

static void rows_body(void* ctx, int64_t begin, int64_t end) {
  const gemv_job* j = ctx;
#ifdef KILN_HAVE_AVX512_CODE
  if (kiln_has_avx512()) {
    rows_avx512(j, begin, end);
    return;
  }
  if (kiln_has_avx2()) {
    rows_avx2(j, begin, end);
    return;
  }
#endif
  rows_plain(j, begin, end);
}

/* One call per thread; the row blocks go to whichever thread asks next, so that a pool worker
 * that starts late (on a busy machine) does fewer of them instead of the caller waiting for a
 * fixed half. */
static void shared_rows_body(void* ctx, int64_t begin, int64_t end) {
  (void)begin, (void)end;
  gemv_job* j = ctx;
  for (int64_t b; (b = atomic_fetch_add(&j->next_rows, ROW_BLOCK)) < j->rows;)
    rows_body(j, b, b + ROW_BLOCK < j->rows ? b + ROW_BLOCK : j->rows);
}

static void columns_body(void* ctx, int64_t begin, int64_t end) {
  const gemv_job* j = ctx;
  for (int64_t block = begin; block < end; block++) {
    int64_t c0 = block * j->column_block;
    int64_t c1 = c0 + j->column_block < j->cols ? c0 + j->column_block : j->cols;
#ifdef KILN_HAVE_AVX512_CODE
    if (kiln_has_avx512()) {
      columns_avx512(j, c0, c1);
      continue;
    }
    if (kiln_has_avx2()) {
      columns_avx2(j, c0, c1);
      continue;
    }
#endif
    columns_plain(j, c0, c1);
  }
}

/* A contiguous copy of a strided vector (on the stack when small). */
static const float* contiguous(const float* v, int64_t n, int64_t inc, float* stack,
                               int64_t stack_n, float** heap) {
  *heap = NULL;
  if (inc == 1) return v;
  float* out = n <= stack_n ? stack : (*heap = malloc((size_t)n * sizeof(float)));
  if (!out) return NULL;
  for (int64_t i = 0; i < n; i++) out[i] = v[i * inc];
  return out;
}

#define STACK_FLOATS 1024

void kiln_sgemv(int32_t order, int32_t trans, int64_t rows, int64_t cols, float alpha,
                const float* a, int64_t lda, const float* x, int64_t incx, float beta, float* y,
                int64_t incy) {
  (void)order;   /* row-major: the only order blas.py emits */
  int transposed = trans == TRANS;
  int64_t n_in = transposed ? rows : cols, n_out = transposed ? cols : rows;
  if (n_out <= 0) return;
  float x_stack[STACK_FLOATS], y_stack[STACK_FLOATS];
  float *x_heap, *y_heap = NULL;
  const float* xs = contiguous(x, n_in, incx, x_stack, STACK_FLOATS, &x_heap);
  float* ys = n_out <= STACK_FLOATS ? y_stack : (y_heap = malloc((size_t)n_out * sizeof(float)));
  if (!xs || !ys) abort();   /* (a few KiB: as fatal as any failed allocation in the runtime) */
  int parallel = rows * cols >= PARALLEL_ELEMENTS;
  /* A^T x: one block of columns per thread (each streams its part of every row), fewer
   * threads where that would exceed 16 KiB of y */
  int64_t threads = parallel ? KilnNumThreads() : 1;
  int64_t width = ((cols + threads - 1) / threads + 15) & ~(int64_t)15;
  if (width > MAX_COLUMN_BLOCK) width = MAX_COLUMN_BLOCK;
  gemv_job job = {rows, cols, lda, a, xs, ys, width, 0};
  if (n_in == 0) {
    memset(ys, 0, (size_t)n_out * sizeof(float));
  } else if (!transposed) {
    if (parallel) kiln_parallel_for(shared_rows_body, &job, threads);
    else rows_body(&job, 0, rows);
  } else {
    int64_t blocks = (cols + width - 1) / width;
    if (parallel && blocks > 1) kiln_parallel_for(columns_body, &job, blocks);
    else columns_body(&job, 0, blocks);
  }
  for (int64_t i = 0; i < n_out; i++) {
    float* out = y + i * incy;
    *out = beta == 0.0f ? alpha * ys[i] : alpha * ys[i] + beta * *out;
  }
  free(x_heap);
  free(y_heap);
}
