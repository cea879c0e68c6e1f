/* XLA's typed FFI (custom calls with api_version 4) in Kiln's runtime.
 *
 * Handlers are written against jaxlib's headers (xla/ffi/api/ffi.h: XLA_FFI_DEFINE_HANDLER_SYMBOL,
 * ffi::Buffer, attributes decoded by type, ffi::Error) and registered with
 * kiln.register_custom_call(name, jax.ffi.pycapsule(handler), api_version=4), with
 * kiln.register_custom_call_library(path, symbols=...), or from the library itself with
 * XLA_FFI_REGISTER_HANDLER (libkiln_runtime exports XLA_FFI_GetApi). Kiln's runtime provides
 * the XLA_FFI_Api those headers call (runtime/kiln_ffi.c).
 *
 * Stages: instantiate runs once per call site when the program is loaded (its state lives as
 * long as the site); prepare, initialize and execute run in turn at every call (the states
 * prepare and initialize set, and scratch memory still allocated, are released after it).
 * On the CPU a handler gets no stream (PlatformStream decoding fails with "no stream") and no
 * thread pool; the GPU target passes its stream, and its device allocator for scratch memory,
 * to kiln_ffi_call_on_device.
 *
 * Kiln-internal below: used by Kiln's Python side and its dispatcher. */
#ifndef KILN_FFI_H_
#define KILN_FFI_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/custom_call.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A handler bundle registered through XLA_FFI_Api's XLA_FFI_Handler_Register. */
typedef struct KilnFfiRegistration {
  char* name;
  char* platform;
  void* instantiate;
  void* prepare;
  void* initialize;
  void* execute;
  uint32_t traits;
  struct KilnFfiRegistration* next;
} KilnFfiRegistration;

/* The head of the list (newest first). */
KilnFfiRegistration* KilnFfiRegistrations(void);

typedef struct KilnFfiSite KilnFfiSite;

/* `dtypes`/`ranks` describe the args then the rets (XLA_FFI_DataType numbers), `dims` all
 * their dimensions in that order; `attributes` is the encoded attribute dictionary
 * (kiln/runtime/custom_call.py: encode_ffi_attributes). NULL when out of memory or malformed. */
KilnFfiSite* KilnFfiSiteCreate(const char* name, void* instantiate, void* prepare,
                               void* initialize, void* execute, int64_t num_args,
                               int64_t num_rets, const int32_t* dtypes, const int64_t* ranks,
                               const int64_t* dims, const void* attributes,
                               size_t attributes_len);
/* Runs the instantiate stage: NULL, or why it failed. */
const char* KilnFfiSiteInstantiate(KilnFfiSite* site);
/* Makes `site` (a KilnCallSite with api_version 4) call `ffi` through the typed FFI. */
void KilnCallSiteSetFfi(KilnCallSite* site, KilnFfiSite* ffi);
/* One call: `leaves` are the args' then the rets' data pointers; `stream` is the device stream
 * (NULL on the CPU). A failure is recorded in `status` with the handler's message. */
void kiln_ffi_call(KilnFfiSite* site, void** leaves, void* stream, XlaCustomCallStatus* status);

/* Device memory for a handler's ScratchAllocator on a GPU: the signatures of the CUDA driver's
 * cuMemAlloc_v2 and cuMemFree_v2 (0 is success), so the GPU target passes those. */
typedef int (*KilnFfiDeviceAlloc)(void** data, size_t size);
typedef int (*KilnFfiDeviceFree)(void* data);
/* kiln_ffi_call whose scratch memory comes from `alloc` and goes back through `free` (both
 * NULL: host memory, as kiln_ffi_call). */
void kiln_ffi_call_on_device(KilnFfiSite* site, void** leaves, void* stream,
                             KilnFfiDeviceAlloc alloc, KilnFfiDeviceFree free_,
                             XlaCustomCallStatus* status);

#ifdef __cplusplus
}
#endif

#endif /* KILN_FFI_H_ */
