/* Narrowing float conversions that LLVM lowers to compiler-rt calls on x86-64 but that the
 * process may not provide (libgcc 12 has no __truncdfbf2, and a process without libgcc_s has
 * no __truncdfhf2). Each rounds once, to nearest even, straight from the wider format: going
 * through f32 would round twice and can be off by one ulp.
 *
 * LLVM passes and returns half and bfloat16 in the low 16 bits of xmm0, which is where a C
 * `_Float16` return value goes, so both return their bits through a _Float16. */
#include <stdint.h>
#include <string.h>

/* The bits of `x` rounded to a binary format with `exp_bits` exponent and `mant` fraction bits. */
static uint32_t round_double(double x, int exp_bits, int mant) {
  uint64_t a;
  memcpy(&a, &x, sizeof a);
  const uint32_t sign = (uint32_t)(a >> 63) << (exp_bits + mant);
  a &= ~(1ULL << 63);
  const uint32_t inf = ((1u << exp_bits) - 1) << mant;
  if (a >= 0x7FF0000000000000ULL) {
    if (a == 0x7FF0000000000000ULL) return sign | inf;
    /* NaN: keep it quiet, and keep the top of its payload. */
    return sign | inf | (1u << (mant - 1)) | (uint32_t)((a >> (52 - mant)) & ((1u << mant) - 1));
  }
  const int e = (int)(a >> 52);
  if (e == 0) return sign; /* f64 subnormals lie far below half's and bfloat16's smallest value */
  const uint64_t sig = (a & ((1ULL << 52) - 1)) | (1ULL << 52);
  const int bias = (1 << (exp_bits - 1)) - 1;
  int target_exp = e - 1023 + bias;
  int shift = 52 - mant;
  if (target_exp <= 0) { /* a subnormal result: drop the bits below its last place too */
    shift += 1 - target_exp;
    target_exp = 0;
  }
  if (shift > 63) return sign; /* below half the smallest subnormal */
  uint64_t kept = sig >> shift;
  const uint64_t rest = sig & ((1ULL << shift) - 1), halfway = 1ULL << (shift - 1);
  if (rest > halfway || (rest == halfway && (kept & 1))) kept++;
  /* `kept` holds the implicit bit of a normal result, so adding it to the exponent one below
   * lets a rounding carry move into the exponent (and up to infinity) by itself. */
  const uint64_t bits = target_exp > 0 ? ((uint64_t)(target_exp - 1) << mant) + kept : kept;
  return sign | (bits >= inf ? inf : (uint32_t)bits);
}

static _Float16 as_half_register(uint32_t bits) {
  uint16_t b = (uint16_t)bits;
  _Float16 out;
  memcpy(&out, &b, sizeof out);
  return out;
}

_Float16 __truncdfhf2(double x) { return as_half_register(round_double(x, 5, 10)); }
_Float16 __truncdfbf2(double x) { return as_half_register(round_double(x, 8, 7)); }
/* f32 -> f64 is exact, so this rounds once too. */
_Float16 __truncsfbf2(float x) { return as_half_register(round_double((double)x, 8, 7)); }
