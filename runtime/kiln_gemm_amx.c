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
 * A tiles (tmm4-5) and two B tiles (tmm6-7) per K step; they stay in the tiles over a whole
 * pass of K steps, and C is read (when accumulating) and written once per pass.
 *
 * Blocking: N is cut into chunks whose B panel (all of K, packed in a per-thread buffer)
 * stays in L2; a thread packs a chunk's panel once and then runs the chunk's 32-row M blocks
 * one after the other, each as a few passes over K whose A panel (packed per pass, into a
 * per-thread buffer that stays in L1) serves every N block of the chunk. The threads share
 * the (chunk, M block) items as described at schedule_body; each loads the tile
 * configuration itself (it is per-thread state) once per call and releases it after.
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

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* ---- the problem in tiles ------------------------------------------------------------- */

typedef struct {
  const gemm_problem* p;
  int elem;                  /* operand element bytes: 2 (bf16) or 1 (int8) */
  int64_t kstep;             /* K elements per tile row: 64 / elem */
  int64_t kt;                /* K tiles (the last zero-padded where kstep does not divide K) */
  int64_t m_blocks, n_blocks;   /* 32-row and 32-column blocks of C */
  int64_t chunk_blocks;      /* N blocks per chunk: the columns one packed B panel covers */
  int64_t chunks, parts;     /* work items: chunks x parts (M cut into `parts` ranges) */
  int64_t k_block;           /* K tiles per pass over a block (its A tiles stay in L1) */
} amx_job;

/* ---- the VNNI layout ----------------------------------------------------------------- */

/* The layout the dot-product instructions read B in: tile row r, column c holds the `group`
 * (2 bf16 or 4 int8) K-consecutive elements B[k0 + r*group + g][j0 + c].
 *
 * From a matrix stored by K rows (`row_bytes` apart, unit column stride), one K tile of 64
 * bytes' worth of columns (64 int8 or 32 bf16: 4 or 2 tiles): per tile row, `group` rows
 * are loaded whole and interleaved in registers. Columns past `cols` and rows past `kn` are
 * zero. `tiles[t]` is the destination of tile t (NULL: not wanted). */
static void pack_vnni(const amx_job* job, const uint8_t* src, int64_t row_bytes, int64_t kn,
                      int64_t cols, uint8_t* const tiles[4]) {
  const __m512i lanes_lo = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
  const __m512i lanes_hi = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
  const __m512i zero = _mm512_setzero_si512();
  if (job->elem == 1) {
    const __mmask64 mask = cols >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << cols) - 1);
    for (int64_t r = 0; r < 16; r++) {
      __m512i v[4];
      for (int g = 0; g < 4; g++)
        v[g] = 4 * r + g < kn ? _mm512_maskz_loadu_epi8(mask, src + (4 * r + g) * row_bytes) : zero;
      /* bytes of rows 0/1 and 2/3 paired, then the pairs paired: per 128-bit lane L, q0..q3
       * hold the quads of columns 16L+0..3, 4..7, 8..11, 12..15 */
      __m512i a = _mm512_unpacklo_epi8(v[0], v[1]), b = _mm512_unpackhi_epi8(v[0], v[1]);
      __m512i c = _mm512_unpacklo_epi8(v[2], v[3]), d = _mm512_unpackhi_epi8(v[2], v[3]);
      __m512i q0 = _mm512_unpacklo_epi16(a, c), q1 = _mm512_unpackhi_epi16(a, c);
      __m512i q2 = _mm512_unpacklo_epi16(b, d), q3 = _mm512_unpackhi_epi16(b, d);
      /* 4 x 4 transpose of the 128-bit lanes: N tile L = (q0.L, q1.L, q2.L, q3.L) */
      __m512i t0 = _mm512_permutex2var_epi64(q0, lanes_lo, q1);
      __m512i t1 = _mm512_permutex2var_epi64(q0, lanes_hi, q1);
      __m512i t2 = _mm512_permutex2var_epi64(q2, lanes_lo, q3);
      __m512i t3 = _mm512_permutex2var_epi64(q2, lanes_hi, q3);
      __m512i out[4] = {_mm512_shuffle_i32x4(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)),
                        _mm512_shuffle_i32x4(t0, t2, _MM_SHUFFLE(3, 2, 3, 2)),
                        _mm512_shuffle_i32x4(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)),
                        _mm512_shuffle_i32x4(t1, t3, _MM_SHUFFLE(3, 2, 3, 2))};
      for (int t = 0; t < 4; t++)
        if (tiles[t]) _mm512_store_si512((__m512i*)(tiles[t] + r * 64), out[t]);
    }
  } else {
    const __mmask32 mask = cols >= 32 ? ~(__mmask32)0 : (((__mmask32)1 << cols) - 1);
    for (int64_t r = 0; r < 16; r++) {
      __m512i v0 = 2 * r < kn ? _mm512_maskz_loadu_epi16(mask, src + 2 * r * row_bytes) : zero;
      __m512i v1 = 2 * r + 1 < kn ? _mm512_maskz_loadu_epi16(mask, src + (2 * r + 1) * row_bytes)
                                  : zero;
      /* per 128-bit lane L: lo = pairs of columns 8L+0..3, hi = 8L+4..7 */
      __m512i lo = _mm512_unpacklo_epi16(v0, v1), hi = _mm512_unpackhi_epi16(v0, v1);
      __m512i out[2] = {_mm512_permutex2var_epi64(lo, lanes_lo, hi),
                        _mm512_permutex2var_epi64(lo, lanes_hi, hi)};
      for (int t = 0; t < 2; t++)
        if (tiles[t]) _mm512_store_si512((__m512i*)(tiles[t] + r * 64), out[t]);
    }
  }
}

/* ---- packing A ------------------------------------------------------------------------ */

/* 16 x 16 32-bit words, rows 64 bytes apart, transposed (src and dst 64-byte aligned). */
static void transpose_words_16x16(const uint8_t* src, uint8_t* dst) {
  __m512i r[16], a[16], b[16];
  for (int i = 0; i < 16; i++) r[i] = _mm512_load_si512((const __m512i*)(src + i * 64));
  for (int i = 0; i < 8; i++) {
    a[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  /* b[4i + j], 128-bit lane L: column 4L + j of rows 4i..4i+3 */
  for (int i = 0; i < 4; i++) {
    b[4 * i] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
    b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
  }
  /* row 4L + j of the result: lane L of b[j], b[4 + j], b[8 + j], b[12 + j] */
  for (int j = 0; j < 4; j++) {
    enum { even = _MM_SHUFFLE(2, 0, 2, 0), odd = _MM_SHUFFLE(3, 1, 3, 1) };
    __m512i c0 = _mm512_shuffle_i32x4(b[j], b[4 + j], even);     /* lanes 0, 2 of both */
    __m512i c1 = _mm512_shuffle_i32x4(b[j], b[4 + j], odd);      /* lanes 1, 3 */
    __m512i d0 = _mm512_shuffle_i32x4(b[8 + j], b[12 + j], even);
    __m512i d1 = _mm512_shuffle_i32x4(b[8 + j], b[12 + j], odd);
    _mm512_store_si512((__m512i*)(dst + j * 64), _mm512_shuffle_i32x4(c0, d0, even));
    _mm512_store_si512((__m512i*)(dst + (4 + j) * 64), _mm512_shuffle_i32x4(c1, d1, even));
    _mm512_store_si512((__m512i*)(dst + (8 + j) * 64), _mm512_shuffle_i32x4(c0, d0, odd));
    _mm512_store_si512((__m512i*)(dst + (12 + j) * 64), _mm512_shuffle_i32x4(c1, d1, odd));
  }
}

/* pack_a_panel for A stored transposed (M contiguous, K rows a_col apart): read as a K x M
 * matrix, the block's 32 columns go into the VNNI layout (one 32-bit word: the pair/quad of
 * K-consecutive elements of one row of A), and each A tile is the word transpose of that. */
static void pack_a_panel_transposed(const amx_job* job, int64_t mb, int64_t kt_from,
                                    int64_t kt_to, uint8_t* dst) {
  const gemm_problem* p = job->p;
  const int64_t tiles = kt_to - kt_from, i0 = mb * 32;
  const int64_t rows = p->m - i0 < 32 ? p->m - i0 : 32;
  uint8_t vnni[2 * TILE_BYTES] __attribute__((aligned(64)));
  uint8_t* const parts[4] = {vnni, vnni + TILE_BYTES, NULL, NULL};
  for (int64_t kt = kt_from; kt < kt_to; kt++) {
    int64_t k0 = kt * job->kstep, kn = p->k - k0 < job->kstep ? p->k - k0 : job->kstep;
    pack_vnni(job, (const uint8_t*)p->a + (i0 + k0 * p->a_col) * job->elem,
              p->a_col * job->elem, kn, rows, parts);
    for (int t = 0; t < 2; t++)
      transpose_words_16x16(vnni + t * TILE_BYTES, dst + (t * tiles + kt - kt_from) * TILE_BYTES);
  }
}

/* K tiles kt_from..kt_to-1 of the two A tiles of M block mb (rows mb*32..), into `dst`:
 * tile (t, kt) at dst + (t * (kt_to - kt_from) + kt - kt_from) KiB; rows past M are zero. */
static void pack_a_panel(const amx_job* job, int64_t mb, int64_t kt_from, int64_t kt_to,
                         uint8_t* dst) {
  const gemm_problem* p = job->p;
  const int elem = job->elem;
  const int64_t tiles = kt_to - kt_from;
  if (p->a_row == 1 && p->a_col != 1) {
    pack_a_panel_transposed(job, mb, kt_from, kt_to, dst);
    return;
  }
  for (int t = 0; t < 2; t++) {
    for (int64_t kt = kt_from; kt < kt_to; kt++) {
      uint8_t* tile = dst + (t * tiles + kt - kt_from) * TILE_BYTES;
      int64_t k0 = kt * job->kstep, kn = p->k - k0 < job->kstep ? p->k - k0 : job->kstep;
      for (int64_t r = 0; r < 16; r++) {
        uint8_t* row = tile + r * 64;
        int64_t i = mb * 32 + t * 16 + r;
        if (i >= p->m) {
          _mm512_store_si512((__m512i*)row, _mm512_setzero_si512());
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
}

/* ---- packing B ------------------------------------------------------------------------ */

/* Any other layout, one tile (K tile kt, columns j0..j0+15). */
static void pack_b_tile(const amx_job* job, uint8_t* tile, int64_t kt, int64_t j0) {
  const gemm_problem* p = job->p;
  const int elem = job->elem, group = 4 / elem;
  int64_t k0 = kt * job->kstep;
  int64_t kn = p->k - k0 < job->kstep ? p->k - k0 : job->kstep;
  int64_t jn = p->n - j0 < 16 ? p->n - j0 : 16;
  if (jn <= 0) {
    memset(tile, 0, TILE_BYTES);
  } else if (p->b_row == 1) {
    /* B stored transposed (K contiguous): column j0 + c's K tile is one 64-byte row whose
     * pairs/quads are 32-bit words already; the tile is the word transpose of those rows */
    uint8_t rows[TILE_BYTES] __attribute__((aligned(64)));
    const __mmask64 bytes = kn * elem >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (kn * elem)) - 1);
    for (int64_t c = 0; c < 16; c++) {
      const uint8_t* src = (const uint8_t*)p->b + ((j0 + c) * p->b_col + k0) * elem;
      _mm512_store_si512((__m512i*)(rows + c * 64),
                         c < jn ? _mm512_maskz_loadu_epi8(bytes, src) : _mm512_setzero_si512());
    }
    transpose_words_16x16(rows, tile);
  } else {
    memset(tile, 0, TILE_BYTES);
    for (int64_t q = 0; q < kn; q++) {
      const uint8_t* src = (const uint8_t*)p->b + ((k0 + q) * p->b_row + j0 * p->b_col) * elem;
      uint8_t* dst = tile + (q / group) * 64 + (q % group) * elem;
      for (int64_t c = 0; c < jn; c++) memcpy(dst + c * 4, src + c * p->b_col * elem, elem);
    }
  }
}

/* The B panel of chunk `chunk` (its 2 * chunk_blocks N tiles over all of K) into `dst`:
 * tile (t, kt) at dst + (t * job->kt + kt) KiB; columns past N are zero. */
static void pack_b_chunk(const amx_job* job, int64_t chunk, uint8_t* dst) {
  const gemm_problem* p = job->p;
  const int64_t tiles = 2 * job->chunk_blocks, j0 = chunk * job->chunk_blocks * 32;
  for (int64_t kt = 0; kt < job->kt; kt++) {
    if (p->b_col == 1) {
      const int64_t k0 = kt * job->kstep;
      const int64_t kn = p->k - k0 < job->kstep ? p->k - k0 : job->kstep;
      const int64_t per = 4 / job->elem;   /* N tiles per 64-byte row of B */
      for (int64_t t = 0; t < tiles; t += per) {
        uint8_t* dsts[4] = {NULL, NULL, NULL, NULL};
        for (int64_t u = 0; u < per && t + u < tiles; u++)
          dsts[u] = dst + ((t + u) * job->kt + kt) * TILE_BYTES;
        int64_t j = j0 + t * 16, cols = p->n - j;
        if (cols <= 0) {   /* past N: zero tiles (the kernel reads them) */
          for (int64_t u = 0; u < per; u++)
            if (dsts[u]) memset(dsts[u], 0, TILE_BYTES);
          continue;
        }
        pack_vnni(job, (const uint8_t*)p->b + (k0 * p->b_row + j) * job->elem,
                  p->b_row * job->elem, kn, cols, dsts);
      }
    } else {
      for (int64_t t = 0; t < tiles; t++)
        pack_b_tile(job, dst + (t * job->kt + kt) * TILE_BYTES, kt, j0 + t * 16);
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

/* One kernel per dot-product instruction (it must be named at compile time): the 32 x 32
 * block of C at (i0, j0) over `nk` K tiles, its four accumulators kept in tiles 0-3 from the
 * first K tile to the last, starting from C (`from_c`) or zero, and stored once at the end.
 * a0/a1 and b0/b1: the block's packed A tile rows and B tile columns, K tile kt at +kt KiB. */
#define DEFINE_BLOCK(name, DOT)                                                            \
  static void name(const amx_job* job, const uint8_t* a0, const uint8_t* a1,              \
                   const uint8_t* b0, const uint8_t* b1, int64_t nk, int64_t i0,           \
                   int64_t j0, int from_c) {                                               \
    const gemm_problem* p = job->p;                                                        \
    uint32_t scratch[256] __attribute__((aligned(64)));                                    \
    LOAD_TILE(0, i0, j0);                                                                  \
    LOAD_TILE(1, i0, j0 + 16);                                                             \
    LOAD_TILE(2, i0 + 16, j0);                                                             \
    LOAD_TILE(3, i0 + 16, j0 + 16);                                                        \
    for (int64_t kt = 0; kt < nk; kt++) {                                                  \
      const int64_t at = kt * TILE_BYTES;                                                  \
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

typedef void (*block_fn)(const amx_job*, const uint8_t*, const uint8_t*, const uint8_t*,
                         const uint8_t*, int64_t, int64_t, int64_t, int);

static block_fn block_for(const gemm_problem* p) {
  if (p->kind == KILN_GEMM_BF16) return block_bf16;
  int au = (p->flags & KILN_GEMM_A_UNSIGNED) != 0, bu = (p->flags & KILN_GEMM_B_UNSIGNED) != 0;
  return au ? (bu ? block_uu : block_us) : (bu ? block_su : block_ss);
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

/* ---- scheduling ---------------------------------------------------------------------- */

/* Work items: (chunk, M part), chunk-major; a part is one M block (more only for very tall
 * products). Each thread owns a contiguous range of items, so it packs each chunk's B panel
 * once, and when its range is done takes items from the far end of the others' ranges: a
 * pool thread that starts late (its wake-up takes tens of microseconds, far more when the
 * machine is busy) or runs slowly does less, and nobody waits for it. (Measured: the former
 * scheme, a packing phase shared by all threads and then a barrier, ran 2x slower when the
 * pool thread woke late.) A range is one 64-bit word, front << 32 | end, so that the owner
 * (taking from the front) and the others (from the end) agree with one compare-and-swap. */
#define MAX_THREADS 64

typedef struct {
  const amx_job* job;
  block_fn block;
  size_t a_bytes, b_bytes;   /* per-thread buffers: an A panel, a B panel */
  int64_t threads;
  _Atomic uint64_t range[MAX_THREADS];
} schedule;

static int64_t take_front(_Atomic uint64_t* range) {
  uint64_t r = atomic_load_explicit(range, memory_order_relaxed);
  for (;;) {
    uint64_t front = r >> 32, end = r & 0xffffffffu;
    if (front >= end) return -1;
    if (atomic_compare_exchange_weak(range, &r, ((front + 1) << 32) | end)) return (int64_t)front;
  }
}

static int64_t take_back(_Atomic uint64_t* range) {
  uint64_t r = atomic_load_explicit(range, memory_order_relaxed);
  for (;;) {
    uint64_t front = r >> 32, end = r & 0xffffffffu;
    if (front >= end) return -1;
    if (atomic_compare_exchange_weak(range, &r, (front << 32) | (end - 1))) return (int64_t)end - 1;
  }
}

typedef struct {
  uint8_t *a_buf, *b_buf;
  int64_t b_chunk;   /* the chunk whose B panel b_buf holds, or -1 */
} thread_state;

static void run_item(const amx_job* job, block_fn block, int64_t item, thread_state* ts) {
  const gemm_problem* p = job->p;
  const int64_t chunk = item / job->parts, part = item % job->parts;
  if (ts->b_chunk != chunk) {
    pack_b_chunk(job, chunk, ts->b_buf);
    ts->b_chunk = chunk;
  }
  const int64_t mb0 = job->m_blocks * part / job->parts;
  const int64_t mb1 = job->m_blocks * (part + 1) / job->parts;
  const int64_t nb0 = chunk * job->chunk_blocks;
  const int64_t nb1 = nb0 + job->chunk_blocks < job->n_blocks ? nb0 + job->chunk_blocks
                                                               : job->n_blocks;
  const int accumulate = (p->flags & KILN_GEMM_ACCUMULATE) != 0;
  for (int64_t mb = mb0; mb < mb1; mb++) {
    for (int64_t k0 = 0; k0 < job->kt; k0 += job->k_block) {
      const int64_t k1 = k0 + job->k_block < job->kt ? k0 + job->k_block : job->kt;
      pack_a_panel(job, mb, k0, k1, ts->a_buf);
      const uint8_t* a1 = ts->a_buf + (k1 - k0) * TILE_BYTES;
      for (int64_t nb = nb0; nb < nb1; nb++) {
        const uint8_t* b0 = ts->b_buf + (2 * (nb - nb0) * job->kt + k0) * TILE_BYTES;
        block(job, ts->a_buf, a1, b0, b0 + job->kt * TILE_BYTES, k1 - k0, mb * 32, nb * 32,
              accumulate || k0 > 0);
      }
    }
  }
}

static void schedule_body(void* ctx, int64_t begin, int64_t end) {
  schedule* sc = ctx;
  thread_state ts;
  ts.a_buf = thread_buffer(sc->a_bytes + sc->b_bytes);
  if (!ts.a_buf) return;   /* this thread sits out: the others take its range */
  ts.b_buf = ts.a_buf + sc->a_bytes;
  ts.b_chunk = -1;
  configure_tiles();
  /* its own range(s) first (several when the pool ran the body serially), then the others' */
  for (int64_t t = begin; t < end; t++)
    for (int64_t item; (item = take_front(&sc->range[t])) >= 0;)
      run_item(sc->job, sc->block, item, &ts);
  for (int64_t i = 1; i < sc->threads; i++) {
    _Atomic uint64_t* victim = &sc->range[(end - 1 + i) % sc->threads];
    for (int64_t item; (item = take_back(victim)) >= 0;)
      run_item(sc->job, sc->block, item, &ts);
  }
  _tile_release();
}

/* ---- entry ---------------------------------------------------------------------------- */

/* Products below this many multiply-adds (about 320^3) run on the calling thread: the
 * pool's hand-off (waking a thread) costs more than it saves. (Measured on 2 cores, with a
 * former pool whose caller also waited for the woken thread: one thread was as fast as two
 * up to 384^3 on a busy machine; 2^21 was the former threshold. The pool no longer waits
 * for a worker to wake (kiln_parallel.c); this limit has not been measured again since.) */
#define PARALLEL_MACS (1 << 25)
/* The most K tiles per pass over a block, so that its A panel (2 KiB per K tile) stays in
 * L1 while the chunk's N blocks use it (measured at 768^3: 12 for 8-bit, 8 for bf16). */
#define K_BLOCK_INT8 12
#define K_BLOCK_BF16 8
/* The most bytes of one chunk's packed B panel: it stays in L2 (2 MiB a core on Sapphire
 * Rapids) while the chunk's M blocks stream past it. */
#define B_PANEL_BYTES (1024 * 1024)
/* Caps on chunks and M parts, which keeps the item count well inside a range's 32 bits. */
#define MAX_CHUNKS 4096
#define MAX_PARTS 4096

int kiln_amx_gemm(const gemm_problem* p) {
  amx_job job;
  job.p = p;
  job.elem = p->kind == KILN_GEMM_BF16 ? 2 : 1;
  job.kstep = 64 / job.elem;
  job.kt = ceil_div(p->k, job.kstep);
  job.m_blocks = ceil_div(p->m, 32);
  job.n_blocks = ceil_div(p->n, 32);
  int64_t k_most = p->kind == KILN_GEMM_BF16 ? K_BLOCK_BF16 : K_BLOCK_INT8;
  job.k_block = ceil_div(job.kt, ceil_div(job.kt, k_most));   /* passes of equal length */
  int64_t threads = p->m * p->n * p->k >= PARALLEL_MACS ? KilnNumThreads() : 1;
  if (threads > MAX_THREADS) threads = MAX_THREADS;
  if (threads < 1) threads = 1;
  /* chunks: as few as the B panel's size allows, a multiple of the threads, equal widths */
  int64_t per_block = 2 * job.kt * TILE_BYTES;
  int64_t widest = B_PANEL_BYTES / per_block > 1 ? B_PANEL_BYTES / per_block : 1;
  int64_t chunks = ceil_div(job.n_blocks, widest);
  chunks = ceil_div(chunks, threads) * threads;
  if (chunks > job.n_blocks) chunks = job.n_blocks;
  if (chunks > MAX_CHUNKS) chunks = MAX_CHUNKS;
  job.chunk_blocks = ceil_div(job.n_blocks, chunks);
  job.chunks = ceil_div(job.n_blocks, job.chunk_blocks);
  /* one M block per item: the finest grain, so that the threads end together */
  job.parts = job.m_blocks < MAX_PARTS ? job.m_blocks : MAX_PARTS;
  schedule sc;
  sc.job = &job;
  sc.block = block_for(p);
  sc.a_bytes = (size_t)(2 * job.k_block) * TILE_BYTES;
  sc.b_bytes = (size_t)(2 * job.chunk_blocks * job.kt) * TILE_BYTES;
  sc.threads = threads;
  if (!thread_buffer(sc.a_bytes + sc.b_bytes)) return 0;   /* the caller falls back */
  int64_t items = job.chunks * job.parts;
  for (int64_t t = 0; t < threads; t++)
    atomic_init(&sc.range[t], ((uint64_t)(items * t / threads) << 32)
                                  | (uint64_t)(items * (t + 1) / threads));
  if (threads > 1)
    kiln_parallel_for(schedule_body, &sc, threads);
  else
    schedule_body(&sc, 0, 1);
  return 1;
}
