/* Kiln's custom-call API: the names XLA's custom-call documentation uses (seed 004), so
 * existing custom-call code compiles against Kiln unchanged.
 *
 * CPU calling conventions, chosen by the custom call's `api_version`:
 *   1 API_VERSION_ORIGINAL:              void f(void* out, const void** in);
 *   2 API_VERSION_STATUS_RETURNING:      void f(void* out, const void** in,
 *                                                XlaCustomCallStatus* status);
 *   3 API_VERSION_STATUS_RETURNING_UNIFIED:
 *                                        void f(void* out, const void** in, const char* opaque,
 *                                               size_t opaque_len, XlaCustomCallStatus* status);
 * `in[i]` points at operand i; `out` points at the result. A tuple (operand, result, or
 * element of either) is an array of pointers to its elements, nested tuples included. A
 * custom call with several results passes them as one tuple. `opaque` is the backend_config.
 *
 * GPU calling conventions (platform "CUDA"; registered now, run by a later GPU target):
 *   1:    void f(CUstream stream, void** buffers, const char* opaque, size_t opaque_len);
 *   2, 3: void f(CUstream stream, void** buffers, const char* opaque, size_t opaque_len,
 *                XlaCustomCallStatus* status);
 * `buffers` lists every leaf buffer of the operands then of the result, depth first.
 */
#ifndef KILN_CUSTOM_CALL_H_
#define KILN_CUSTOM_CALL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque to callees: set it with the two functions below. */
typedef struct XlaCustomCallStatus_ XlaCustomCallStatus;

void XlaCustomCallStatusSetSuccess(XlaCustomCallStatus* status);
/* Copies `message[0:message_len)`; the computation stops, no output of the failing call is
 * used, and the caller (Python) sees the message in a kiln.errors.CustomCallError. */
void XlaCustomCallStatusSetFailure(XlaCustomCallStatus* status, const char* message,
                                   size_t message_len);

/* The function types above, for casting registered pointers. */
typedef void (*KilnCpuCustomCallV1)(void* out, const void** in);
typedef void (*KilnCpuCustomCallV2)(void* out, const void** in, XlaCustomCallStatus* status);
typedef void (*KilnCpuCustomCallV3)(void* out, const void** in, const char* opaque,
                                    size_t opaque_len, XlaCustomCallStatus* status);
typedef struct CUstream_st* KilnCuStream; /* CUDA's CUstream, without including cuda.h */
typedef void (*KilnGpuCustomCallV1)(KilnCuStream stream, void** buffers, const char* opaque,
                                    size_t opaque_len);
typedef void (*KilnGpuCustomCallV2)(KilnCuStream stream, void** buffers, const char* opaque,
                                    size_t opaque_len, XlaCustomCallStatus* status);

/* Registration of targets defined in a shared library: loading the library with
 * kiln.register_custom_call_library(path) registers every target declared with this macro.
 * `platform` is "Host" (the CPU) or "CUDA". The calling convention is the call site's
 * api_version, as in XLA. */
typedef struct KilnCustomCallRegistration {
  const char* name;
  void* function;
  const char* platform;
  struct KilnCustomCallRegistration* next;
} KilnCustomCallRegistration;

void KilnRegisterCustomCallTarget(KilnCustomCallRegistration* registration);
/* The head of the list of targets registered so far in this process. */
KilnCustomCallRegistration* KilnCustomCallRegistrations(void);

#define KILN_CC_CONCAT_(a, b) a##b
#define KILN_CC_CONCAT(a, b) KILN_CC_CONCAT_(a, b)

#define XLA_REGISTER_CUSTOM_CALL_TARGET_WITH_SYM(symbol, function, platform)            \
  static KilnCustomCallRegistration KILN_CC_CONCAT(kiln_cc_reg_, __LINE__) = {          \
      symbol, (void*)(function), platform, 0};                                          \
  __attribute__((constructor)) static void KILN_CC_CONCAT(kiln_cc_ctor_, __LINE__)(void) { \
    KilnRegisterCustomCallTarget(&KILN_CC_CONCAT(kiln_cc_reg_, __LINE__));              \
  }

#define XLA_REGISTER_CUSTOM_CALL_TARGET(function, platform) \
  XLA_REGISTER_CUSTOM_CALL_TARGET_WITH_SYM(#function, function, platform)

/* ---- Kiln-internal: used by compiled programs and Kiln's Python side. ------------------ */

/* One lowered custom call: what the dispatcher needs to call its target. `tree` describes
 * the operands then the result depth first: -1 is a leaf buffer, k >= 0 a tuple of k. */
typedef struct KilnCallSite KilnCallSite;
/* Python targets run through this callback: (site id, leaf pointers, status). */
typedef void (*KilnPythonDispatcher)(int64_t site_id, void** leaves, XlaCustomCallStatus* status);

KilnCallSite* KilnCallSiteCreate(int64_t id, void* function, int32_t api_version, int32_t python,
                                 const char* opaque, size_t opaque_len, int32_t num_operands,
                                 const int32_t* tree, int32_t tree_len);
void KilnSetPythonDispatcher(KilnPythonDispatcher dispatcher);
/* Called by compiled code: `site` is a KilnCallSite*, `leaves` a void*[] of the operands'
 * then the result's leaf buffers. On failure it does not return (see KilnInvoke). */
void kiln_custom_call(int64_t site, int64_t leaves);
/* Calls a compiled entry `entry(packed)`; returns 0, or why the computation was abandoned
 * (its message is in `status`, and every temporary it held is freed): 1 a custom call
 * failed, 2 an allocation could not be met, 3 interrupted (SIGINT), 4 a run-time check
 * failed, 5 it ran past the run-time limit. */
int KilnInvoke(void (*entry)(void**), void** packed, XlaCustomCallStatus* status);
/* Polled by compiled loops: stops the running program (KilnInvoke returns 3) after SIGINT,
 * or (5) past its deadline. */
void kiln_check_interrupt(void);
/* Seconds each later KilnInvoke may run before its loops stop it; 0: no limit. */
void KilnSetRunTimeLimit(double seconds);

#ifdef __cplusplus
}
/* XLA's GPU examples spell the status type xla::XlaCustomCallStatus. */
namespace xla {
using ::XlaCustomCallStatus;
}
#endif

#endif /* KILN_CUSTOM_CALL_H_ */
