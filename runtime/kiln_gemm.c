/* Matrix products in the precisions OpenBLAS lacks, called by compiled code
 * (lowering/codegen/blas.py): bf16 x bf16 -> f32 and 8-bit x 8-bit -> int32 (signed or
 * unsigned operands), as XLA:CPU computes them (f32 / int32 accumulation; integer sums wrap).
 *
 * On a CPU with AMX the work goes to kiln_gemm_amx.c. Elsewhere, or with KILN_AMX=0 in the
 * environment (read on every call, so tests can cover both paths in one process), the plain
 * loops below compute the same result: bit-exact for integers, for bf16 the same products
 * summed in another order. The compiler routes products here only where AMX is available
 * (kiln_gemm_amx_available), so the loops are a correctness net (code compiled on an AMX
 * machine and run with KILN_AMX=0), not a fast path. */
#include <stdlib.h>
#include <string.h>

#include "kiln_gemm.h"

/* KILN_AMX=0 (or off/false/no) turns the AMX kernels off. */
static int amx_disabled(void) {
  const char* env = getenv("KILN_AMX");
  if (!env) return 0;
  return !strcmp(env, "0") || !strcmp(env, "off") || !strcmp(env, "false") || !strcmp(env, "no");
}

/* Whether products run on AMX in this process (what the compiler asks before routing). */
int32_t kiln_gemm_amx_available(void) {
  return !amx_disabled() && kiln_amx_ready();
}

#ifndef KILN_HAVE_AMX
/* built without the AMX kernels (another architecture, or a compiler without AMX) */
int kiln_amx_ready(void) { return 0; }
int kiln_amx_gemm(const gemm_problem* p) { (void)p; return 0; }
#endif

static float bf16_value(const void* base, int64_t index) {
  uint16_t bits;
  memcpy(&bits, (const uint16_t*)base + index, 2);
  uint32_t wide = (uint32_t)bits << 16;
  float f;
  memcpy(&f, &wide, 4);
  return f;
}

static int32_t int8_value(const void* base, int64_t index, int is_unsigned) {
  return is_unsigned ? ((const uint8_t*)base)[index] : ((const int8_t*)base)[index];
}

static void fallback(const gemm_problem* p) {
  int accumulate = (p->flags & KILN_GEMM_ACCUMULATE) != 0;
  int au = (p->flags & KILN_GEMM_A_UNSIGNED) != 0, bu = (p->flags & KILN_GEMM_B_UNSIGNED) != 0;
  for (int64_t i = 0; i < p->m; i++) {
    if (p->kind == KILN_GEMM_BF16) {
      float* row = (float*)p->c + i * p->ldc;
      if (!accumulate)
        for (int64_t j = 0; j < p->n; j++) row[j] = 0.0f;
      for (int64_t q = 0; q < p->k; q++) {
        float a = bf16_value(p->a, i * p->a_row + q * p->a_col);
        for (int64_t j = 0; j < p->n; j++) row[j] += a * bf16_value(p->b, q * p->b_row + j * p->b_col);
      }
    } else {
      /* unsigned arithmetic: int32 sums wrap, as the AMX instructions' do */
      uint32_t* row = (uint32_t*)p->c + i * p->ldc;
      if (!accumulate)
        for (int64_t j = 0; j < p->n; j++) row[j] = 0;
      for (int64_t q = 0; q < p->k; q++) {
        int32_t a = int8_value(p->a, i * p->a_row + q * p->a_col, au);
        for (int64_t j = 0; j < p->n; j++)
          row[j] += (uint32_t)(a * int8_value(p->b, q * p->b_row + j * p->b_col, bu));
      }
    }
  }
}

static void run(const gemm_problem* p) {
  if (p->m <= 0 || p->n <= 0) return;
  if (p->k > 0 && !amx_disabled() && kiln_amx_ready() && kiln_amx_gemm(p)) return;
  fallback(p);
}

void kiln_gemm_bf16_f32(int64_t m, int64_t n, int64_t k, const void* a, int64_t a_row,
                        int64_t a_col, const void* b, int64_t b_row, int64_t b_col, float* c,
                        int64_t ldc, int32_t flags) {
  gemm_problem p = {KILN_GEMM_BF16, m, n, k, a, a_row, a_col, b, b_row, b_col, c, ldc, flags};
  run(&p);
}

void kiln_gemm_i8_i32(int64_t m, int64_t n, int64_t k, const void* a, int64_t a_row,
                      int64_t a_col, const void* b, int64_t b_row, int64_t b_col, int32_t* c,
                      int64_t ldc, int32_t flags) {
  gemm_problem p = {KILN_GEMM_INT8, m, n, k, a, a_row, a_col, b, b_row, b_col, c, ldc, flags};
  run(&p);
}
