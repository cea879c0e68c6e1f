/* Seed 004's CPU examples, written in C against Kiln's installed header. */
#include <stdint.h>
#include <string.h>

#include "kiln/custom_call.h"

/* A[i] = B[i % 128] + C[i] for F32[128] B and F32[2048] C (API_VERSION_ORIGINAL). */
void do_custom_call(void* out, const void** in) {
  float* out_buf = (float*)out;
  const float* in0 = (const float*)in[0];
  const float* in1 = (const float*)in[1];
  for (int i = 0; i < 2048; ++i) {
    out_buf[i] = in0[i % 128] + in1[i];
  }
}
XLA_REGISTER_CUSTOM_CALL_TARGET(do_custom_call, "Host");

/* The same with API_VERSION_STATUS_RETURNING: fails when any C[i] is negative. */
void do_custom_call_status(void* out, const void** in, XlaCustomCallStatus* status) {
  float* out_buf = (float*)out;
  const float* in0 = (const float*)in[0];
  const float* in1 = (const float*)in[1];
  for (int i = 0; i < 2048; ++i) {
    if (in1[i] < 0) {
      const char* error_message = "An error occurred: negative input";
      XlaCustomCallStatusSetFailure(status, error_message, strlen(error_message));
      return;
    }
    out_buf[i] = in0[i % 128] + in1[i];
  }
}
XLA_REGISTER_CUSTOM_CALL_TARGET(do_custom_call_status, "Host");

/* API_VERSION_STATUS_RETURNING_UNIFIED: out[i] = in[i] * k where the opaque string is "k=<k>". */
void scale_by_opaque(void* out, const void** in, const char* opaque, size_t opaque_len,
                     XlaCustomCallStatus* status) {
  if (opaque_len < 3 || strncmp(opaque, "k=", 2) != 0) {
    const char* msg = "opaque must be k=<digit>";
    XlaCustomCallStatusSetFailure(status, msg, strlen(msg));
    return;
  }
  float k = (float)(opaque[2] - '0');
  const float* x = (const float*)in[0];
  float* y = (float*)out;
  for (int i = 0; i < 16; ++i) y[i] = x[i] * k;
  XlaCustomCallStatusSetSuccess(status);
}
XLA_REGISTER_CUSTOM_CALL_TARGET(scale_by_opaque, "Host");
