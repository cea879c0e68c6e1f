/* Large f32/f64 matrix products that keep their speed when the cores are shared
 * (lowering/codegen/blas.py routes every real product of at least PARALLEL_MACS
 * multiply-adds here instead of calling the BLAS library directly).
 *
 * The library's own threads split a product statically and hand work over by spinning. With
 * another process on the cores, a spinning thread and the one it waits for share a core and
 * every product waits for its slowest piece; and even alone, a thread spinning after a product
 * keeps Kiln's pool off its core for the elementwise work that follows. So the product is cut
 * into about two pieces per thread, claimed one at a time from Kiln's pool (kiln_parallel.c,
 * whose idle workers sleep), each the library's one-thread kernel: a thread the system takes
 * off its core holds up one piece, and the others take the rest (a flax transformer's
 * training step on the 2-core VM: 12.5 -> 8.3 ms alone, 24.1 -> 16.9 ms beside a busy
 * process). Only very large products on an idle machine (LIBRARY_THREADS_MACS; nothing else
 * ran lately, cores_shared) go to the library's threads, whose shared packing wins there.
 * KILN_SHARED_CORES=1 or 0 fixes the answer of cores_shared.
 *
 * Pieces are blocks of C, each the same cblas_?gemm call on sub-matrices; each packs its rows
 * of A and its columns of B again, which is why the grid packs the least it can and a piece
 * keeps at least MIN_PIECE_MACS multiply-adds and MIN_PIECE_SIDE rows and columns.
 *
 * Interface: cblas_?gemm's, row-major only (order 101), sizes as int64:
 *   C = alpha op(A) op(B) + beta C,  op(X) = X (111) or X^T (112).
 * The library's functions are bound by KilnBindBlasGemm (runtime/libraries.py) before any
 * compiled code runs; its integer width (LP64 or ILP64) is bound with them. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "kiln_kernels.h"

enum { ROW_MAJOR = 101, NO_TRANS = 111 };

#define MIN_PIECE_MACS (1 << 18)   /* below this a piece's packing overhead shows (~5%) */
#define MIN_PIECE_SIDE 64          /* rows and columns of C per piece, at least */
#define PIECES_PER_THREAD 2        /* a preempted thread holds up half its share */
/* On an idle machine, products this large go to the library's threads, whose shared packing
 * wins there (1024^3: 13 ms against 16-20 ms in pieces on the 2-core VM); smaller ones run in
 * pieces even then, since the library's threads spin after each product and keep Kiln's pool
 * off a core for the elementwise work that follows (a training step 12.5 -> 8.3 ms). */
#define LIBRARY_THREADS_MACS (1ll << 29)


typedef void (*sgemm32)(int32_t, int32_t, int32_t, int32_t, int32_t, int32_t, float,
                        const float*, int32_t, const float*, int32_t, float, float*, int32_t);
typedef void (*sgemm64)(int32_t, int32_t, int32_t, int64_t, int64_t, int64_t, float,
                        const float*, int64_t, const float*, int64_t, float, float*, int64_t);
typedef void (*dgemm32)(int32_t, int32_t, int32_t, int32_t, int32_t, int32_t, double,
                        const double*, int32_t, const double*, int32_t, double, double*, int32_t);
typedef void (*dgemm64)(int32_t, int32_t, int32_t, int64_t, int64_t, int64_t, double,
                        const double*, int64_t, const double*, int64_t, double, double*, int64_t);

static void* library_sgemm;
static void* library_dgemm;
static int library_ilp64;

void KilnBindBlasGemm(void* sgemm, void* dgemm, int32_t ilp64) {
  library_sgemm = sgemm;
  library_dgemm = dgemm;
  library_ilp64 = ilp64;
}

typedef struct {
  int is_double;
  int32_t ta, tb;
  int64_t M, N, K, lda, ldb, ldc;
  double alpha, beta;
  const char *A, *B;
  char* C;
  int64_t rows, cols;   /* the grid of pieces: rows x cols blocks of C */
} gemm_job;

/* One call of the library on C[r0:r1, c0:c1] (rows and columns of C). */
static void library_call(const gemm_job* j, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  int64_t size = j->is_double ? 8 : 4;
  /* op(A) rows r0..: A advances by rows (no transpose) or by columns (A stored K x M) */
  const char* a = j->A + size * r0 * (j->ta == NO_TRANS ? j->lda : 1);
  /* op(B) columns c0..: B advances by columns (no transpose) or by rows (B stored N x K) */
  const char* b = j->B + size * c0 * (j->tb == NO_TRANS ? 1 : j->ldb);
  char* c = j->C + size * (r0 * j->ldc + c0);
  int64_t m = r1 - r0, n = c1 - c0;
  if (j->is_double) {
    if (library_ilp64)
      ((dgemm64)library_dgemm)(ROW_MAJOR, j->ta, j->tb, m, n, j->K, j->alpha, (const double*)a,
                               j->lda, (const double*)b, j->ldb, j->beta, (double*)c, j->ldc);
    else
      ((dgemm32)library_dgemm)(ROW_MAJOR, j->ta, j->tb, (int32_t)m, (int32_t)n, (int32_t)j->K,
                               j->alpha, (const double*)a, (int32_t)j->lda, (const double*)b,
                               (int32_t)j->ldb, j->beta, (double*)c, (int32_t)j->ldc);
  } else {
    if (library_ilp64)
      ((sgemm64)library_sgemm)(ROW_MAJOR, j->ta, j->tb, m, n, j->K, (float)j->alpha,
                               (const float*)a, j->lda, (const float*)b, j->ldb,
                               (float)j->beta, (float*)c, j->ldc);
    else
      ((sgemm32)library_sgemm)(ROW_MAJOR, j->ta, j->tb, (int32_t)m, (int32_t)n, (int32_t)j->K,
                               (float)j->alpha, (const float*)a, (int32_t)j->lda,
                               (const float*)b, (int32_t)j->ldb, (float)j->beta, (float*)c,
                               (int32_t)j->ldc);
  }
}

/* Piece i of `pieces` along a side of `extent`: [*lo, *hi), cut on multiples of 16 where
 * the side allows, so the library's register tiles stay whole. */
static void cut(int64_t extent, int64_t pieces, int64_t i, int64_t* lo, int64_t* hi) {
  *lo = i == 0 ? 0 : (extent * i / pieces) & ~(int64_t)15;
  *hi = i + 1 == pieces ? extent : (extent * (i + 1) / pieces) & ~(int64_t)15;
}

/* Pieces [begin, end) of the grid, row-major over it. */
static void pieces_body(void* ctx, int64_t begin, int64_t end) {
  const gemm_job* j = (const gemm_job*)ctx;
  int32_t saved = kiln_blas_set_threads(1);
  for (int64_t p = begin; p < end; p++) {
    int64_t r0, r1, c0, c1;
    cut(j->M, j->rows, p / j->cols, &r0, &r1);
    cut(j->N, j->cols, p % j->cols, &c0, &c1);
    if (r0 < r1 && c0 < c1) library_call(j, r0, r1, c0, c1);
  }
  kiln_blas_set_threads(saved);
}

/* The grid of about `target` pieces that packs the least: each piece packs its rows of A and
 * its columns of B, so a rows x cols grid packs A cols times and B rows times. */
static void choose_grid(gemm_job* j, int64_t target) {
  j->rows = j->cols = 1;
  int64_t best = -1;
  for (int64_t rows = 1; rows <= target; rows++) {
    int64_t cols = target / rows;
    if (j->M / rows < MIN_PIECE_SIDE || j->N / cols < MIN_PIECE_SIDE) continue;
    int64_t packed = cols * j->M + rows * j->N;   /* times K */
    if (best < 0 || packed < best) {
      best = packed;
      j->rows = rows;
      j->cols = cols;
    }
  }
}

/* Whether other processes have kept the cores busy lately: the CPU time all cores spent
 * busy (/proc/stat) less this process's own (getrusage), over the last SAMPLE_NS or more,
 * above OTHERS_BUSY of a core. Sampled at most every SAMPLE_NS (a file read, ~20 us); between
 * samples, and while another thread samples, the last answer stands. Where /proc/stat cannot
 * be read, the answer is "busy": the pieces are never wrong, only slower on an idle machine. */
#define SAMPLE_NS 200000000ull   /* 200 ms: 20 clock ticks per core at 100 Hz */
#define OTHERS_BUSY 0.25

/* All cores' busy time and this process's CPU time, in seconds; 0 if unreadable. */
static int cpu_times(double* all_busy, double* own) {
  FILE* f = fopen("/proc/stat", "r");
  if (!f) return 0;
  unsigned long long user, nice, system, idle, iowait, irq, softirq, steal;
  int read = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &system,
                    &idle, &iowait, &irq, &softirq, &steal);
  fclose(f);
  if (read != 8) return 0;
  long ticks = sysconf(_SC_CLK_TCK);
  struct rusage usage;
  if (ticks <= 0 || getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  /* steal: time the host gave another machine, as unavailable to us as another process's */
  *all_busy = (double)(user + nice + system + irq + softirq + steal) / (double)ticks;
  *own = (double)(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
         + (double)(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
  return 1;
}

static int cores_shared(void) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static _Atomic uint64_t sampled_ns;         /* read without the lock, written under it */
  static double sampled_busy, sampled_own;    /* under the lock */
  static _Atomic int shared;
  static _Atomic int fixed = -1;   /* KILN_SHARED_CORES: 1 or 0 fixes the answer; -2: unset */
  int setting = atomic_load_explicit(&fixed, memory_order_relaxed);
  if (setting == -1) {   /* first call (racing first calls agree) */
    const char* env = getenv("KILN_SHARED_CORES");
    setting = env && (env[0] == '0' || env[0] == '1') && !env[1] ? env[0] - '0' : -2;
    atomic_store_explicit(&fixed, setting, memory_order_relaxed);
  }
  if (setting >= 0) return setting;
  if (kiln_now_ns() - atomic_load(&sampled_ns) < SAMPLE_NS || pthread_mutex_trylock(&lock) != 0)
    return atomic_load_explicit(&shared, memory_order_relaxed);
  /* the clock again under the lock: a thread that sampled meanwhile wrote a later time than
   * the one read above, and the difference must not wrap */
  uint64_t now = kiln_now_ns(), last = atomic_load(&sampled_ns);
  if (now - last >= SAMPLE_NS) {
    double busy = 0, own = 0;
    if (!cpu_times(&busy, &own)) {
      atomic_store_explicit(&shared, 1, memory_order_relaxed);
    } else if (last) {
      double others = (busy - sampled_busy) - (own - sampled_own);
      double seconds = (double)(now - last) * 1e-9;
      atomic_store_explicit(&shared, others > OTHERS_BUSY * seconds, memory_order_relaxed);
    }
    atomic_store(&sampled_ns, now);
    sampled_busy = busy;
    sampled_own = own;
  }
  pthread_mutex_unlock(&lock);
  return atomic_load_explicit(&shared, memory_order_relaxed);
}

/* How many products went to the library's threads, and how many ran in pieces. */
static _Atomic int64_t on_library_threads, in_pieces;

void KilnPooledProductStats(int64_t* stats) {
  stats[0] = atomic_load_explicit(&on_library_threads, memory_order_relaxed);
  stats[1] = atomic_load_explicit(&in_pieces, memory_order_relaxed);
}

static void pooled(gemm_job* j) {
  /* (MNK)^2 = (MK)(KN)(MN), three buffers of under 2^40 elements each: no overflow */
  int64_t macs = j->M * j->N * j->K;
  if (macs >= LIBRARY_THREADS_MACS && !cores_shared()) {
    atomic_fetch_add_explicit(&on_library_threads, 1, memory_order_relaxed);
    library_call(j, 0, j->M, 0, j->N);
    return;
  }
  int64_t threads = KilnNumThreads();
  int64_t target = threads * PIECES_PER_THREAD;
  if (target > macs / MIN_PIECE_MACS) target = macs / MIN_PIECE_MACS;
  if (threads >= 2 && target >= 2) choose_grid(j, target);   /* else the 1 x 1 grid */
  if (j->rows * j->cols < 2) {
    pieces_body(j, 0, 1);
    return;
  }
  atomic_fetch_add_explicit(&in_pieces, 1, memory_order_relaxed);
  kiln_parallel_pieces(pieces_body, j, j->rows * j->cols);
}

void kiln_sgemm_pooled(int32_t order, int32_t ta, int32_t tb, int64_t M, int64_t N, int64_t K,
                       float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
                       float beta, float* C, int64_t ldc) {
  (void)order;   /* row-major: the only order generated code passes */
  gemm_job j = {0, ta, tb, M, N, K, lda, ldb, ldc, alpha, beta,
                (const char*)A, (const char*)B, (char*)C, 1, 1};
  pooled(&j);
}

void kiln_dgemm_pooled(int32_t order, int32_t ta, int32_t tb, int64_t M, int64_t N, int64_t K,
                       double alpha, const double* A, int64_t lda, const double* B, int64_t ldb,
                       double beta, double* C, int64_t ldc) {
  (void)order;
  gemm_job j = {1, ta, tb, M, N, K, lda, ldb, ldc, alpha, beta,
                (const char*)A, (const char*)B, (char*)C, 1, 1};
  pooled(&j);
}
