/* Seed 004's GPU calling convention, declared and registered for the "CUDA" platform. No
 * CUDA code runs here (Kiln has no GPU target yet): the test checks the header compiles this
 * signature and that the registration lands on the CUDA platform, not the CPU. */
#include "kiln/custom_call.h"

void gpu_do_custom_call(KilnCuStream stream, void** buffers, const char* opaque,
                        size_t opaque_len, XlaCustomCallStatus* status) {
  (void)stream; (void)buffers; (void)opaque; (void)opaque_len; (void)status;
}
XLA_REGISTER_CUSTOM_CALL_TARGET(gpu_do_custom_call, "CUDA");

/* The function-pointer types the GPU dispatcher will call through. */
static KilnGpuCustomCallV2 const kiln_check_v2 = gpu_do_custom_call;
void* gpu_convention_v2(void) { return (void*)kiln_check_v2; }
