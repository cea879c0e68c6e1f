/* f32 products with few rows, for compiled code (lowering/codegen/blas.py routes them here):
 * C (M x N, row-major) (+)= A (M x K, any strides) B (K x N, row-major), M at most 64 and B at
 * most 2^18 elements. A recurrent network's step (32 x 256 @ 256 x 256, 200 times in a loop)
 * is the case: OpenBLAS packs both operands on every call and hands the halves to its
 * threads by spinning, together half of such a call's time; here nothing is packed (B's rows
 * are read in place: a 32-column panel of B, K x 128 bytes, stays in L1 while every row block
 * of A goes past it) and the column panels are shared out over Kiln's pool.
 *
 * Register block: 8 rows x 32 columns of C in 16 AVX-512 accumulators; per step of K, two
 * loads of B's row and 8 broadcasts of A. CPUs without AVX-512 take plain loops.
 * Numerics: each element is a sum of f32 products in f32, in K order (fused multiply-adds). */
#include <stdatomic.h>
#include <stdint.h>

#include "kiln_kernels.h"

/* Below this many multiply-adds one thread finishes before a pool worker could help. An
 * RNN step's 32 x 256 @ 256 x 256 (2^21) took 35 us alone and about 120 us shared when the
 * caller had to wait for a worker to wake (2^23 then); since the pool's chunks are claimed
 * and its workers spin after these products (kiln_parallel.c), the caller never waits for a
 * sleeper and a loop's next product finds the worker awake, so a step's products (2^20,
 * 2^21) share: rnn_scan 13.4 -> 11.1 ms (XLA 11.5). */
#define PARALLEL_MACS (1 << 20)
#define PANEL 32   /* columns of C per work item */

typedef struct {
  int64_t m, n, k;
  const float* a;
  int64_t a_row, a_col;
  const float* b;
  int64_t ldb;
  float* c;
  int64_t ldc;
  int accumulate;
  int64_t panels;
  _Atomic int64_t next_panel;   /* handed out one at a time (see shared_body) */
} small_job;

static void panel_plain(const small_job* j, int64_t j0, int64_t j1) {
  for (int64_t i = 0; i < j->m; i++) {
    float* row = j->c + i * j->ldc;
    if (!j->accumulate)
      for (int64_t c = j0; c < j1; c++) row[c] = 0.0f;
    for (int64_t p = 0; p < j->k; p++) {
      float a = j->a[i * j->a_row + p * j->a_col];
      const float* b = j->b + p * j->ldb;
      for (int64_t c = j0; c < j1; c++) row[c] += a * b[c];
    }
  }
}

#ifdef KILN_HAVE_AVX512_CODE

/* C[i0..i0+R) x [j0..j0+32) over all of K, columns past `lo`/`hi`'s masks left alone. R is a
 * constant at every call (the function is inlined), so the accumulators live in registers. */
KILN_AVX512 static inline __attribute__((always_inline)) void block(const small_job* j, int64_t i0,
                                                               int64_t j0, __mmask16 lo,
                                                               __mmask16 hi, const int R) {
  __m512 c_lo[8], c_hi[8];
  const float* a[8];
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) {
    a[r] = j->a + (i0 + r) * j->a_row;
    float* row = j->c + (i0 + r) * j->ldc + j0;
    c_lo[r] = j->accumulate ? _mm512_maskz_loadu_ps(lo, row) : _mm512_setzero_ps();
    c_hi[r] = j->accumulate ? _mm512_maskz_loadu_ps(hi, row + 16) : _mm512_setzero_ps();
  }
  const float* b = j->b + j0;
  const int64_t a_col = j->a_col;
  for (int64_t p = 0; p < j->k; p++, b += j->ldb) {
    __m512 b_lo = _mm512_maskz_loadu_ps(lo, b), b_hi = _mm512_maskz_loadu_ps(hi, b + 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      __m512 x = _mm512_set1_ps(a[r][p * a_col]);
      c_lo[r] = _mm512_fmadd_ps(x, b_lo, c_lo[r]);
      c_hi[r] = _mm512_fmadd_ps(x, b_hi, c_hi[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) {
    float* row = j->c + (i0 + r) * j->ldc + j0;
    _mm512_mask_storeu_ps(row, lo, c_lo[r]);
    _mm512_mask_storeu_ps(row + 16, hi, c_hi[r]);
  }
}

KILN_AVX512 static void panel_avx512(const small_job* j, int64_t j0, int64_t j1) {
  int64_t width = j1 - j0;   /* 1..32 */
  __mmask16 lo = width >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << width) - 1);
  __mmask16 hi = width >= 32 ? (__mmask16)0xffff
                 : width > 16 ? (__mmask16)((1u << (width - 16)) - 1) : (__mmask16)0;
  int64_t i = 0;
  for (; i + 8 <= j->m; i += 8) block(j, i, j0, lo, hi, 8);
  if (j->m - i >= 4) { block(j, i, j0, lo, hi, 4); i += 4; }
  if (j->m - i >= 2) { block(j, i, j0, lo, hi, 2); i += 2; }
  if (j->m - i >= 1) block(j, i, j0, lo, hi, 1);
}
#endif

#ifdef KILN_HAVE_AVX512_CODE
/* Lane masks for _mm256_maskload_ps/_mm256_maskstore_ps: the first `width` (0..8) lanes. */
KILN_AVX2 static __m256i first_lanes(int64_t width) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)width), lanes);
}

/* C[i0..i0+R) x [c0..c0+16) over all of K (R at most 4: 8 accumulators, 2 loads of B and a
 * broadcast of A stay within the 16 ymm registers), columns past the masks left alone. */
KILN_AVX2 static inline __attribute__((always_inline)) void block_avx2(
    const small_job* j, int64_t i0, int64_t c0, __m256i lo, __m256i hi, const int R) {
  __m256 c_lo[4], c_hi[4];
  const float* a[4];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) {
    a[r] = j->a + (i0 + r) * j->a_row;
    float* row = j->c + (i0 + r) * j->ldc + c0;
    c_lo[r] = j->accumulate ? _mm256_maskload_ps(row, lo) : _mm256_setzero_ps();
    c_hi[r] = j->accumulate ? _mm256_maskload_ps(row + 8, hi) : _mm256_setzero_ps();
  }
  const float* b = j->b + c0;
  const int64_t a_col = j->a_col;
  for (int64_t p = 0; p < j->k; p++, b += j->ldb) {
    __m256 b_lo = _mm256_maskload_ps(b, lo), b_hi = _mm256_maskload_ps(b + 8, hi);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      __m256 x = _mm256_set1_ps(a[r][p * a_col]);
      c_lo[r] = _mm256_fmadd_ps(x, b_lo, c_lo[r]);
      c_hi[r] = _mm256_fmadd_ps(x, b_hi, c_hi[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) {
    float* row = j->c + (i0 + r) * j->ldc + c0;
    _mm256_maskstore_ps(row, lo, c_lo[r]);
    _mm256_maskstore_ps(row + 8, hi, c_hi[r]);
  }
}

KILN_AVX2 static void panel_avx2(const small_job* j, int64_t j0, int64_t j1) {
  for (int64_t c0 = j0; c0 < j1; c0 += 16) {
    int64_t width = j1 - c0 < 16 ? j1 - c0 : 16;
    __m256i lo = first_lanes(width < 8 ? width : 8), hi = first_lanes(width > 8 ? width - 8 : 0);
    int64_t i = 0;
    for (; i + 4 <= j->m; i += 4) block_avx2(j, i, c0, lo, hi, 4);
    if (j->m - i >= 2) { block_avx2(j, i, c0, lo, hi, 2); i += 2; }
    if (j->m - i >= 1) block_avx2(j, i, c0, lo, hi, 1);
  }
}
#endif

/* Columns [index * PANEL, +PANEL) of C. */
static void panel(const small_job* j, int64_t index) {
  int64_t j0 = index * PANEL, j1 = j0 + PANEL < j->n ? j0 + PANEL : j->n;
#ifdef KILN_HAVE_AVX512_CODE
  if (kiln_has_avx512()) {
    panel_avx512(j, j0, j1);
    return;
  }
  if (kiln_has_avx2()) {
    panel_avx2(j, j0, j1);
    return;
  }
#endif
  panel_plain(j, j0, j1);
}

/* One call per thread; the panels go to whichever thread asks next, so that a pool worker
 * that wakes late (tens of microseconds on a busy machine, as long as the whole product) does
 * fewer of them instead of the caller waiting for its fixed share. */
static void shared_body(void* ctx, int64_t begin, int64_t end) {
  (void)begin, (void)end;
  small_job* j = ctx;
  for (int64_t p; (p = atomic_fetch_add(&j->next_panel, 1)) < j->panels;) panel(j, p);
}

/* C = A B (C += A B with `accumulate`); strides in elements. */
void kiln_sgemm_small(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row,
                      int64_t a_col, const float* b, int64_t ldb, float* c, int64_t ldc,
                      int32_t accumulate) {
  if (m <= 0 || n <= 0) return;
  small_job job = {m, n, k, a, a_row, a_col, b, ldb, c, ldc, accumulate != 0,
                   (n + PANEL - 1) / PANEL, 0};
  if (m * n * k >= PARALLEL_MACS && job.panels > 1)
    kiln_parallel_for_then_spin(shared_body, &job, KilnNumThreads());   /* loops call again */
  else
    shared_body(&job, 0, 1);
}
