/* Matrix products on Intel AMX (Sapphire Rapids and later): bf16 x bf16 -> f32 and
 * 8-bit x 8-bit -> i32, the precisions OpenBLAS lacks (XLA:CPU gets them from oneDNN).
 *
 * This file alone is compiled with the AMX/AVX-512 flags (CMakeLists.txt); nothing here runs
 * unless kiln_amx_ready() said yes (CPUID and the kernel's permission), so the runtime still
 * loads and works on any x86-64. The entry points and the portable fallback are in
 * kiln_gemm.c.
 *
 * Scheme: both operands are packed, zero-padded, into 1 KiB tiles of 16 rows x 64 bytes:
 *   A tile (mt, kt): rows mt*16.. of A, 64 bytes of K (32 bf16 / 64 int8) each;
 *   B tile (nt, kt): the "VNNI" layout the dot-product instructions read: row r holds, for
 *     each of 16 columns, the K-consecutive pair (bf16) or quad (int8) starting at K = 2r/4r.
 * Padding makes every edge (M, N, K of any size, 1 included) a full tile whose extra
 * products are zero. Each 32 x 32 block of C is four accumulator tiles (tmm0-3) fed by two
 * A tiles (tmm4-5) and two B tiles (tmm6-7) per K step. The blocks, and the packing of the
 * panels they read, are shared out over the runtime's thread pool; each thread loads the tile
 * configuration itself (it is per-thread state) and releases it after.
 *
 * Numerics: int8 products and their int32 sums are exact (sums wrap, as XLA's do). bf16
 * products are exact in f32 and summed in f32, in another order than a loop's; the
 * instruction treats bf16 subnormal inputs and f32 subnormal results as zero. */
#define _GNU_SOURCE   /* syscall() */
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kiln_gemm.h"

#define TILE_BYTES 1024
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

#include "kiln_kernels.h"

/* ---- availability ------------------------------------------------------------------- */

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int amx_usable;

static void probe(void) {
  unsigned eax, ebx, ecx, edx;
  /* (the packing uses AVX-512 F/BW/VL, which every AMX CPU has) */
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw")
      || !__builtin_cpu_supports("avx512vl"))
    return;
  if (__get_cpuid_max(0, 0) < 7) return;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  int tile = (edx >> 24) & 1, bf16 = (edx >> 22) & 1, int8 = (edx >> 25) & 1;
  if (!(tile && bf16 && int8)) return;
  /* Linux hands out the 8 KiB tile state only to processes that ask (once per process). */
  if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) return;
  amx_usable = 1;
}

int kiln_amx_ready(void) {
  pthread_once(&probe_once, probe);
  return amx_usable;
}

/* ---- tile configuration --------------------------------------------------------------- */

typedef struct {
  uint8_t palette;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} __attribute__((packed, aligned(64))) tile_config;

static void configure_tiles(void) {
  tile_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int t = 0; t < 8; t++) {   /* every tile 16 rows x 64 bytes */
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  _tile_loadconfig(&cfg);
}

/* ---- packing -------------------------------------------------------------------------- */

typedef struct {
  const gemm_problem* p;
  int elem;                 /* operand element bytes: 2 (bf16) or 1 (int8) */
  int64_t kstep;            /* K elements per tile row: 64 / elem */
  int64_t mt, nt, kt;       /* tile counts (mt and nt even: blocks of 2 x 2 tiles) */
  uint8_t* a_packed;
  uint8_t* b_packed;
} amx_job;

/* A tile row-block mt: 16 rows x K, each row cut into 64-byte tiles. */
static void pack_a(const amx_job* job, int64_t mt) {
  const gemm_problem* p = job->p;
  const int elem = job->elem;
  for (int64_t kt = 0; kt < job->kt; kt++) {
    uint8_t* tile = job->a_packed + (mt * job->kt + kt) * TILE_BYTES;
    int64_t k0 = kt * job->kstep, kn = p->k - k0 < job->kstep ? p->k - k0 : job->kstep;
    for (int64_t r = 0; r < 16; r++) {
      uint8_t* row = tile + r * 64;
      int64_t i = mt * 16 + r;
      if (i >= p->m) {
        memset(row, 0, 64);
        continue;
      }
      const uint8_t* src = (const uint8_t*)p->a + (i * p->a_row + k0 * p->a_col) * elem;
      if (p->a_col == 1) {   /* one (masked) 64-byte copy */
        __mmask64 bytes = kn * elem >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (kn * elem)) - 1);
        _mm512_store_si512((__m512i*)row, _mm512_maskz_loadu_epi8(bytes, src));
      } else {
        memset(row, 0, 64);
        for (int64_t q = 0; q < kn; q++) memcpy(row + q * elem, src + q * p->a_col * elem, elem);
      }
    }
  }
}

/* B tile column-block nt in the VNNI layout: tile row r, column c = the `group` (2 or 4)
 * elements B[kt*kstep + r*group + g][nt*16 + c], g = 0..group-1. */
static void pack_b_rows(const amx_job* job, uint8_t* tile, int64_t k0, int64_t kn, int64_t j0,
                        int64_t jn) {
  /* B row-major (unit column stride): each tile row interleaves `group` rows of B, zero
   * extended into 32-bit lanes and shifted into place. */
  const gemm_problem* p = job->p;
  const int elem = job->elem, group = 4 / elem;
  const __mmask16 cols = (__mmask16)((1u << jn) - 1);
  for (int64_t r = 0; r * group < kn; r++) {
    __m512i row = _mm512_setzero_si512();
    for (int g = 0; g < group && r * group + g < kn; g++) {
      const uint8_t* src = (const uint8_t*)p->b + ((k0 + r * group + g) * p->b_row + j0) * elem;
      __m512i wide = elem == 2
          ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(cols, src))
          : _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(cols, src));
      row = _mm512_or_si512(row, _mm512_slli_epi32(wide, 8 * elem * g));
    }
    _mm512_store_si512((__m512i*)(tile + r * 64), row);
  }
}

static void pack_b(const amx_job* job, int64_t nt) {
  const gemm_problem* p = job->p;
  const int elem = job->elem, group = 4 / elem;
  for (int64_t kt = 0; kt < job->kt; kt++) {
    uint8_t* tile = job->b_packed + (nt * job->kt + kt) * TILE_BYTES;
    memset(tile, 0, TILE_BYTES);
    int64_t k0 = kt * job->kstep;
    int64_t kn = p->k - k0 < job->kstep ? p->k - k0 : job->kstep;
    int64_t j0 = nt * 16, jn = p->n - j0 < 16 ? p->n - j0 : 16;
    if (jn <= 0) continue;
    if (p->b_col == 1) {
      pack_b_rows(job, tile, k0, kn, j0, jn);
    } else if (p->b_row == 1 && kn == job->kstep) {
      /* B stored transposed (K contiguous): each pair/quad is one 32-bit word already */
      for (int64_t c = 0; c < jn; c++) {
        const uint8_t* src = (const uint8_t*)p->b + ((j0 + c) * p->b_col + k0) * elem;
        for (int64_t r = 0; r < 16; r++) memcpy(tile + r * 64 + c * 4, src + r * 4, 4);
      }
    } else {
      for (int64_t q = 0; q < kn; q++) {
        const uint8_t* src = (const uint8_t*)p->b + ((k0 + q) * p->b_row + j0 * p->b_col) * elem;
        uint8_t* dst = tile + (q / group) * 64 + (q % group) * elem;
        for (int64_t c = 0; c < jn; c++) memcpy(dst + c * 4, src + c * p->b_col * elem, elem);
      }
    }
  }
}

/* ---- the 32 x 32 block kernels -------------------------------------------------------- */

/* Accumulator tile `t` (rows i0.., columns j0..) into C: stored straight into C when the
 * tile lies inside it, through a scratch tile on the edges. */
#define STORE_TILE(t, i0, j0)                                                              \
  do {                                                                                     \
    int64_t rows_ = p->m - (i0) < 16 ? p->m - (i0) : 16;                                   \
    int64_t cols_ = p->n - (j0) < 16 ? p->n - (j0) : 16;                                   \
    if (rows_ > 0 && cols_ > 0) {                                                          \
      uint32_t* c_ = (uint32_t*)p->c + (i0) * p->ldc + (j0);                               \
      if (rows_ == 16 && cols_ == 16) {                                                    \
        _tile_stored(t, c_, p->ldc * 4);                                                   \
      } else {                                                                             \
        _tile_stored(t, scratch, 64);                                                      \
        for (int64_t r_ = 0; r_ < rows_; r_++)                                             \
          memcpy(c_ + r_ * p->ldc, scratch + r_ * 16, (size_t)cols_ * 4);                  \
      }                                                                                    \
    }                                                                                      \
  } while (0)

/* Accumulator tile `t` starts from C (`from_c`) or zero. */
#define LOAD_TILE(t, i0, j0)                                                               \
  do {                                                                                     \
    int64_t rows_ = p->m - (i0) < 16 ? p->m - (i0) : 16;                                   \
    int64_t cols_ = p->n - (j0) < 16 ? p->n - (j0) : 16;                                   \
    if (!from_c || rows_ <= 0 || cols_ <= 0) {                                             \
      _tile_zero(t);                                                                       \
    } else {                                                                               \
      const uint32_t* c_ = (const uint32_t*)p->c + (i0) * p->ldc + (j0);                   \
      if (rows_ == 16 && cols_ == 16) {                                                    \
        _tile_loadd(t, c_, p->ldc * 4);                                                    \
      } else {                                                                             \
        memset(scratch, 0, sizeof(uint32_t) * 256);                                        \
        for (int64_t r_ = 0; r_ < rows_; r_++)                                             \
          memcpy(scratch + r_ * 16, c_ + r_ * p->ldc, (size_t)cols_ * 4);                  \
        _tile_loadd(t, scratch, 64);                                                       \
      }                                                                                    \
    }                                                                                      \
  } while (0)

/* One kernel per dot-product instruction (it must be named at compile time): the block
 * (mb, nb) of C over the whole of K. */
#define DEFINE_BLOCK(name, DOT)                                                            \
  static void name(const amx_job* job, int64_t mb, int64_t nb) {                           \
    const gemm_problem* p = job->p;                                                        \
    uint32_t scratch[256] __attribute__((aligned(64)));                                    \
    int from_c = (p->flags & KILN_GEMM_ACCUMULATE) != 0;                                   \
    int64_t i0 = mb * 32, j0 = nb * 32;                                                    \
    LOAD_TILE(0, i0, j0);                                                                  \
    LOAD_TILE(1, i0, j0 + 16);                                                             \
    LOAD_TILE(2, i0 + 16, j0);                                                             \
    LOAD_TILE(3, i0 + 16, j0 + 16);                                                        \
    const uint8_t* a0 = job->a_packed + (2 * mb) * job->kt * TILE_BYTES;                   \
    const uint8_t* a1 = a0 + job->kt * TILE_BYTES;                                         \
    const uint8_t* b0 = job->b_packed + (2 * nb) * job->kt * TILE_BYTES;                   \
    const uint8_t* b1 = b0 + job->kt * TILE_BYTES;                                         \
    for (int64_t kt = 0; kt < job->kt; kt++) {                                             \
      int64_t at = kt * TILE_BYTES;                                                        \
      _tile_loadd(4, a0 + at, 64);                                                         \
      _tile_loadd(6, b0 + at, 64);                                                         \
      _tile_loadd(7, b1 + at, 64);                                                         \
      DOT(0, 4, 6);                                                                        \
      DOT(1, 4, 7);                                                                        \
      _tile_loadd(5, a1 + at, 64);                                                         \
      DOT(2, 5, 6);                                                                        \
      DOT(3, 5, 7);                                                                        \
    }                                                                                      \
    STORE_TILE(0, i0, j0);                                                                 \
    STORE_TILE(1, i0, j0 + 16);                                                            \
    STORE_TILE(2, i0 + 16, j0);                                                            \
    STORE_TILE(3, i0 + 16, j0 + 16);                                                       \
  }

/* (the int8 instructions name the signedness of A then B: s = signed, u = unsigned) */
#define DOT_BF16(c, a, b) _tile_dpbf16ps(c, a, b)
#define DOT_SS(c, a, b) _tile_dpbssd(c, a, b)
#define DOT_SU(c, a, b) _tile_dpbsud(c, a, b)
#define DOT_US(c, a, b) _tile_dpbusd(c, a, b)
#define DOT_UU(c, a, b) _tile_dpbuud(c, a, b)
DEFINE_BLOCK(block_bf16, DOT_BF16)
DEFINE_BLOCK(block_ss, DOT_SS)
DEFINE_BLOCK(block_su, DOT_SU)
DEFINE_BLOCK(block_us, DOT_US)
DEFINE_BLOCK(block_uu, DOT_UU)

typedef void (*block_fn)(const amx_job*, int64_t, int64_t);

static block_fn block_for(const gemm_problem* p) {
  if (p->kind == KILN_GEMM_BF16) return block_bf16;
  int au = (p->flags & KILN_GEMM_A_UNSIGNED) != 0, bu = (p->flags & KILN_GEMM_B_UNSIGNED) != 0;
  return au ? (bu ? block_uu : block_us) : (bu ? block_su : block_ss);
}

/* ---- scheduling ---------------------------------------------------------------------- */

/* Two phases, each handed out a few items at a time from a shared counter rather than split
 * in equal parts up front: on a busy machine a pool thread may start late, and the threads
 * already running then do its share instead of waiting for it. First the packing (one M or N
 * tile's panel per item); when every panel is packed, the 32 x 32 blocks of C, N-block-major
 * (a thread's consecutive blocks share their B panel).
 * (Measured: packing each panel when a block first needs it instead was 7-10% slower; blocking
 * K so that the B panel stays in L1 made no difference; nor did reading A's tiles from A
 * itself instead of a packed copy: the products read it slower by what the copy saved.) */
#define CHUNK 4

typedef struct {
  const amx_job* job;
  block_fn block;
  int64_t m_blocks, blocks, panels;
  _Atomic int64_t next_panel, packed, next_block;
} schedule;

static void schedule_body(void* ctx, int64_t begin, int64_t end) {
  (void)begin, (void)end;   /* one call per thread: the counters hand out the work */
  schedule* sc = ctx;
  const amx_job* job = sc->job;
  for (int64_t t; (t = atomic_fetch_add(&sc->next_panel, 1)) < sc->panels;) {
    if (t < job->mt) pack_a(job, t);
    else pack_b(job, t - job->mt);
    atomic_fetch_add_explicit(&sc->packed, 1, memory_order_release);
  }
  while (atomic_load_explicit(&sc->packed, memory_order_acquire) < sc->panels) _mm_pause();
  configure_tiles();
  for (int64_t first; (first = atomic_fetch_add(&sc->next_block, CHUNK)) < sc->blocks;) {
    int64_t last = first + CHUNK < sc->blocks ? first + CHUNK : sc->blocks;
    for (int64_t item = first; item < last; item++)
      sc->block(job, item % sc->m_blocks, item / sc->m_blocks);
  }
  _tile_release();
}

/* ---- per-thread packing buffers ------------------------------------------------------- */

/* Kept between calls (a program calls the same product again and again; fresh pages would be
 * faulted in every time), one per calling thread, freed when the thread ends. */
typedef struct {
  void* data;
  size_t bytes;
} scratch_buffer;

static pthread_key_t buffer_key;
static pthread_once_t buffer_once = PTHREAD_ONCE_INIT;

static void free_buffer(void* buffer) {
  scratch_buffer* b = buffer;
  free(b->data);
  free(b);
}

static void make_key(void) { pthread_key_create(&buffer_key, free_buffer); }

static void* thread_buffer(size_t bytes) {
  pthread_once(&buffer_once, make_key);
  scratch_buffer* b = pthread_getspecific(buffer_key);
  if (!b) {
    b = calloc(1, sizeof *b);
    if (!b) return NULL;
    pthread_setspecific(buffer_key, b);
  }
  if (b->bytes < bytes) {
    free(b->data);
    b->data = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    b->bytes = b->data ? bytes : 0;
  }
  return b->data;
}

/* ---- entry ---------------------------------------------------------------------------- */

/* Products below this many multiply-adds run on the calling thread: the pool's hand-off
 * costs more than it saves. */
#define PARALLEL_MACS (1 << 21)

int kiln_amx_gemm(const gemm_problem* p) {
  amx_job job;
  job.p = p;
  job.elem = p->kind == KILN_GEMM_BF16 ? 2 : 1;
  job.kstep = 64 / job.elem;
  job.mt = ((p->m + 31) / 32) * 2;
  job.nt = ((p->n + 31) / 32) * 2;
  job.kt = (p->k + job.kstep - 1) / job.kstep;
  size_t a_bytes = (size_t)(job.mt * job.kt) * TILE_BYTES;
  size_t b_bytes = (size_t)(job.nt * job.kt) * TILE_BYTES;
  uint8_t* buffer = thread_buffer(a_bytes + b_bytes);
  if (!buffer) return 0;   /* the caller falls back */
  job.a_packed = buffer;
  job.b_packed = buffer + a_bytes;
  schedule sc;
  sc.job = &job;
  sc.block = block_for(p);
  sc.m_blocks = job.mt / 2;
  sc.blocks = (job.mt / 2) * (job.nt / 2);
  sc.panels = job.mt + job.nt;
  atomic_init(&sc.next_panel, 0);
  atomic_init(&sc.packed, 0);
  atomic_init(&sc.next_block, 0);
  if (p->m * p->n * p->k >= PARALLEL_MACS)
    kiln_parallel_for(schedule_body, &sc, KilnNumThreads());
  else
    schedule_body(&sc, 0, 1);
  return 1;
}
