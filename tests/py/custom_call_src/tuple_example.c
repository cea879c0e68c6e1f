/* Seed 004's tuple example: parameter 0 is (F32[32], (F32[64], F32[128]), F32[256]) and the
 * output is (F32[512], F32[1024]) whose element 1 is scratch memory, never read back.
 *
 * The test fills leaf k of the parameter with k * 1000 + i, so the code can check that `in`
 * and `out` have the seed's memory picture (arrays of pointers, nested for the subtuple) and
 * report a mismatch through the status (API_VERSION_STATUS_RETURNING). */
#include <stdio.h>
#include <string.h>

#include "kiln/custom_call.h"

static int check_leaf(const float* leaf, int n, int k, XlaCustomCallStatus* status) {
  for (int i = 0; i < n; ++i) {
    if (leaf[i] != (float)(k * 1000 + i)) {
      char msg[128];
      int len = snprintf(msg, sizeof msg, "leaf %d: element %d is %g, expected %d", k, i,
                         (double)leaf[i], k * 1000 + i);
      XlaCustomCallStatusSetFailure(status, msg, (size_t)len);
      return 0;
    }
  }
  return 1;
}

void tuple_call(void* out, const void** in, XlaCustomCallStatus* status) {
  /* in has one element, parameter 0: an array of 3 pointers. */
  void* const* p0 = (void* const*)in[0];
  const float* subbuf0 = (const float*)p0[0];
  void* const* subtuple = (void* const*)p0[1];
  const float* subbuf1 = (const float*)subtuple[0];
  const float* subbuf2 = (const float*)subtuple[1];
  const float* subbuf3 = (const float*)p0[2];
  if (!check_leaf(subbuf0, 32, 0, status) || !check_leaf(subbuf1, 64, 1, status) ||
      !check_leaf(subbuf2, 128, 2, status) || !check_leaf(subbuf3, 256, 3, status))
    return;

  /* out is the output tuple: an array of 2 pointers. */
  void** outs = (void**)out;
  float* result = (float*)outs[0];
  float* scratch = (float*)outs[1];
  if (result == scratch || (const void*)result == (const void*)subbuf0) {
    const char* msg = "output buffers alias";
    XlaCustomCallStatusSetFailure(status, msg, strlen(msg));
    return;
  }
  for (int i = 0; i < 1024; ++i) scratch[i] = 2.0f * subbuf3[i % 256];
  for (int j = 0; j < 512; ++j)
    result[j] = subbuf0[j % 32] + subbuf1[j % 64] + subbuf2[j % 128] + scratch[j] + scratch[j + 512];
}
XLA_REGISTER_CUSTOM_CALL_TARGET(tuple_call, "Host");
