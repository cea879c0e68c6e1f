/* What the runtime's compute kernels (kiln_gemm_amx.c, kiln_gemv.c, kiln_sgemm_small.c,
 * kiln_gemm_pooled.c) share: Kiln's thread pool and OpenBLAS thread scopes (kiln_parallel.c)
 * and the CPU feature check that picks their AVX-512 paths at run time. */
#ifndef KILN_KERNELS_H
#define KILN_KERNELS_H

#include <stdint.h>

typedef void (*kiln_body)(void* ctx, int64_t begin, int64_t end);
/* body(ctx, begin, end) over [0, n), split across the pool's threads and the caller. */
void kiln_parallel_for(kiln_body body, void* ctx, int64_t n);
/* The same for small jobs a loop repeats: the workers spin for the next one after it. */
void kiln_parallel_for_then_spin(kiln_body body, void* ctx, int64_t n);
/* Each of n pieces its own chunk; the workers spin after it (back-to-back products). */
void kiln_parallel_pieces(kiln_body body, void* ctx, int64_t n);
int64_t KilnNumThreads(void);
/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t kiln_now_ns(void);
/* OpenBLAS's thread count in counted scopes: set(1) enters one, set(the returned value)
 * leaves it (kiln_parallel.c). */
int32_t kiln_blas_set_threads(int32_t threads);

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define KILN_HAVE_AVX512_CODE 1
/* A function compiled for AVX-512F, called only where kiln_has_avx512(). */
#define KILN_AVX512 __attribute__((target("avx512f")))
/* Whether this CPU runs AVX-512F code (asked once per kernel file; a benign race: every
 * thread computes the same answer). */
static inline int kiln_has_avx512(void) {
  static int known = -1;
  if (known < 0) known = __builtin_cpu_supports("avx512f") ? 1 : 0;
  return known;
}
/* The same for AVX2 with FMA (x86-64 CPUs without AVX-512: AMD before Zen 4, many Intel
 * client parts); the plain C fallbacks' float sums do not vectorize (no reassociation). */
#define KILN_AVX2 __attribute__((target("avx2,fma")))
static inline int kiln_has_avx2(void) {
  static int known = -1;
  if (known < 0)
    known = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1 : 0;
  return known;
}
#endif

#endif
