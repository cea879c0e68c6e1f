/* Kiln's custom-call API: the names XLA's custom-call documentation uses (seed 004), so
 * existing custom-call code compiles against Kiln unchanged. */
#ifndef KILN_CUSTOM_CALL_H_
#define KILN_CUSTOM_CALL_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque to callees: set it with the two functions below. */
typedef struct XlaCustomCallStatus_ XlaCustomCallStatus;

void XlaCustomCallStatusSetSuccess(XlaCustomCallStatus* status);
/* Copies `message[0:message_len)`; the computation stops and the caller sees the message. */
void XlaCustomCallStatusSetFailure(XlaCustomCallStatus* status, const char* message,
                                   size_t message_len);

/* Registration of targets defined in a shared library: loading the library with
 * kiln.register_custom_call_library(path) registers every target declared with this macro. */
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

#ifdef __cplusplus
}
#endif

#endif /* KILN_CUSTOM_CALL_H_ */
