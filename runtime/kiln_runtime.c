/* Kiln's native runtime library: linked into every JIT-compiled program. */
#include <stdlib.h>
#include <string.h>

#include "kiln/custom_call.h"

struct XlaCustomCallStatus_ {
  int failed;
  char* message;
};

void XlaCustomCallStatusSetSuccess(XlaCustomCallStatus* status) {
  status->failed = 0;
  free(status->message);
  status->message = NULL;
}

void XlaCustomCallStatusSetFailure(XlaCustomCallStatus* status, const char* message,
                                   size_t message_len) {
  status->failed = 1;
  free(status->message);
  status->message = (char*)malloc(message_len + 1);
  if (status->message) {
    memcpy(status->message, message, message_len);
    status->message[message_len] = '\0';
  }
}

/* Used by Kiln's Python side to create, read and release statuses around a call. */
XlaCustomCallStatus* KilnStatusCreate(void) {
  return (XlaCustomCallStatus*)calloc(1, sizeof(XlaCustomCallStatus));
}
int KilnStatusFailed(const XlaCustomCallStatus* status) { return status->failed; }
const char* KilnStatusMessage(const XlaCustomCallStatus* status) {
  return status->message ? status->message : "";
}
void KilnStatusDestroy(XlaCustomCallStatus* status) {
  if (status) free(status->message);
  free(status);
}

static KilnCustomCallRegistration* registrations = NULL;

void KilnRegisterCustomCallTarget(KilnCustomCallRegistration* registration) {
  registration->next = registrations;
  registrations = registration;
}

KilnCustomCallRegistration* KilnCustomCallRegistrations(void) { return registrations; }
