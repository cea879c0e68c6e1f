/* Kiln's own matrix products (kiln_gemm.c: entry points and portable fallback;
 * kiln_gemm_amx.c: the AMX kernels). Internal to the runtime. */
#ifndef KILN_GEMM_H
#define KILN_GEMM_H
#include <stdint.h>

/* `flags` bits of the entry points (lowering/codegen/blas.py passes them). */
#define KILN_GEMM_ACCUMULATE 1   /* C += A B (else C = A B) */
#define KILN_GEMM_A_UNSIGNED 2   /* 8-bit A holds uint8 (else int8) */
#define KILN_GEMM_B_UNSIGNED 4

enum { KILN_GEMM_BF16 = 0, KILN_GEMM_INT8 = 1 };

/* C[i][j] (+)= sum_p A[i][p] B[p][j]; A[i][p] at a[i*a_row + p*a_col], B[p][j] at
 * b[p*b_row + j*b_col] (element strides: either layout, transposed or not), C row-major
 * with leading dimension ldc. C's elements are f32 (bf16) or int32 (int8). */
typedef struct {
  int kind;
  int64_t m, n, k;
  const void* a;
  int64_t a_row, a_col;
  const void* b;
  int64_t b_row, b_col;
  void* c;
  int64_t ldc;
  int32_t flags;
} gemm_problem;

int kiln_amx_ready(void);
/* 1 when done; 0 when it could not run (no memory for the packed operands). */
int kiln_amx_gemm(const gemm_problem* p);

#endif
