/* The objects behind Kiln's PJRT handles, shared by the plugin's source files.
 *
 * Threading: entries arrive on any thread, some holding the GIL (getters called from Python)
 * and some not (Compile and Execute, on JAX's threads). The rule that keeps this free of
 * deadlocks: C state is guarded by short mutexes that are never held while taking the GIL or
 * calling into Python; Python state is touched only under the GIL (kiln_pjrt_python.c). */
#ifndef KILN_PJRT_INTERNAL_H_
#define KILN_PJRT_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>

#include "kiln_pjrt_c_api.h"

#define KILN_PJRT_PLATFORM "kiln"
#define KILN_PJRT_MAX_DEVICES 1024

/* ---- errors (kiln_pjrt_events.c) ---- */
PJRT_Error *kiln_pjrt_error(PJRT_Error_Code code, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
/* The error for an entry Kiln does not provide. */
PJRT_Error *kiln_pjrt_unimplemented(const char *entry);
/* The checks every entry opens with, in one place.
 *
 * KILN_PJRT_ARGS(Entry, args, field): the caller's argument struct (PJRT_<Entry>_Args) reaches
 * `field`, the last field the entry reads or writes (an older caller passes a shorter struct:
 * see KILN_PJRT_HAS_FIELD). KILN_PJRT_ARGS_ON(Entry, args, field, handle) also requires the
 * handle the entry works on (args->handle) to be there. Either returns a located
 * INVALID_ARGUMENT error from the entry otherwise, instead of reading past the struct or
 * through a NULL pointer. */
#define KILN_PJRT_ARGS(entry, args, field)                                                  \
  do {                                                                                       \
    if ((args) == NULL || !KILN_PJRT_HAS_FIELD(PJRT_##entry##_Args, args, field))           \
      return kiln_pjrt_args_too_small("PJRT_" #entry, (args) ? (args)->struct_size : 0,     \
                                      KILN_PJRT_STRUCT_SIZE(PJRT_##entry##_Args, field));   \
  } while (0)
#define KILN_PJRT_ARGS_ON(entry, args, field, handle)                                       \
  do {                                                                                       \
    KILN_PJRT_ARGS(entry, args, field);                                                      \
    if ((args)->handle == NULL) return kiln_pjrt_missing("PJRT_" #entry, #handle);           \
  } while (0)
PJRT_Error *kiln_pjrt_args_too_small(const char *entry, size_t given, size_t needed);
PJRT_Error *kiln_pjrt_missing(const char *entry, const char *argument);
PJRT_Error *kiln_pjrt_out_of_memory(const char *entry);

/* Sets a (string, size) pair of output fields, `field` and `field`_size, to `value`. */
#define KILN_PJRT_SET_STRING(args, field, value) \
  do {                                           \
    (args)->field = (value);                     \
    (args)->field##_size = strlen(value);        \
  } while (0)

PJRT_Error_Code kiln_pjrt_error_code(const PJRT_Error *error);
const char *kiln_pjrt_error_message(const PJRT_Error *error);
void kiln_pjrt_error_free(PJRT_Error *error);

/* ---- events (kiln_pjrt_events.c) ---- */
/* An event that is already complete: with `error` (taken over) or successfully. */
PJRT_Event *kiln_pjrt_event_ready(PJRT_Error *error);
PJRT_Event *kiln_pjrt_event_new(void);
void kiln_pjrt_event_set(PJRT_Event *event, PJRT_Error_Code code, const char *message);
void kiln_pjrt_event_free(PJRT_Event *event);
bool kiln_pjrt_event_is_ready(PJRT_Event *event);
/* Blocks until the event completes (giving up the GIL meanwhile if this thread holds it);
 * returns its error, a new one the caller owns, or NULL. */
PJRT_Error *kiln_pjrt_event_wait(PJRT_Event *event);
/* Calls `function(error, user_arg)` once the event completes (now if it has); the callback
 * owns the error. False: out of memory, nothing registered. */
bool kiln_pjrt_event_on_ready(PJRT_Event *event, PJRT_Event_OnReadyCallback function,
                              void *user_arg);
/* Gives up the GIL if this thread holds it (kiln_pjrt_python.c); what to restore, or NULL. */
void *kiln_pjrt_gil_release(void);
void kiln_pjrt_gil_restore(void *state);

/* ---- client, devices, memories (kiln_pjrt_client.c) ---- */
typedef struct KilnMemory KilnMemory;

struct PJRT_DeviceDescription {
  int id;
  char kind[32];
  char debug_string[64];
  char to_string[64];
};

typedef struct KilnQueue KilnQueue;

struct PJRT_Device {
  PJRT_DeviceDescription description; /* first: a device is its own description */
  PJRT_Client *client;
  KilnMemory *memory; /* host memory: the device's only (and default) memory */
  KilnQueue *queue;   /* its runs in order (kiln_pjrt_queue.c), made at the first */
};

/* ---- each device's queue of runs (kiln_pjrt_queue.c) ---- */
/* Queues `work(arg)` to run on the device's thread after everything queued before it; false
 * if out of memory or threads (nothing queued). */
bool kiln_pjrt_queue_push(PJRT_Device *device, void (*work)(void *), void *arg);
/* Nothing queued or running on the device. */
bool kiln_pjrt_queue_idle(PJRT_Device *device);
/* Runs what is queued, then ends the device's thread (the client is going). */
void kiln_pjrt_queue_close(PJRT_Device *device);

struct PJRT_TopologyDescription {
  PJRT_Client *client;
};

struct PJRT_Client {
  int num_devices;
  PJRT_Device **devices;
  PJRT_DeviceDescription **descriptions;
  PJRT_Memory **memories;
  PJRT_TopologyDescription topology;
};

PJRT_Memory *kiln_pjrt_device_memory(PJRT_Device *device);

/* ---- buffers (kiln_pjrt_buffers.c) ---- */
struct PJRT_Buffer {
  PJRT_Device *device;
  PJRT_Buffer_Type type;
  size_t rank;
  int64_t *dims;
  void *data;
  size_t size_bytes;
  void *owner;     /* non-NULL: a Python object owns `data` (a result), see python.c */
  atomic_int holds; /* the handle, each external reference, each run using it */
  atomic_bool deleted;
  /* NULL: the data is there. Else completes when the run writing it ends (with its error if
   * it failed); owned by the buffer. */
  PJRT_Event *pending;
};

/* Bytes per element of `type` in host memory, 0 for types Kiln does not hold. Sub-byte
 * integers take a byte each, as numpy (ml_dtypes) stores them. */
size_t kiln_pjrt_element_size(PJRT_Buffer_Type type);
/* The element count of `dims`, or -1 on a negative dimension or overflow. */
int64_t kiln_pjrt_element_count(const int64_t *dims, size_t rank);
PJRT_Buffer *kiln_pjrt_buffer_new(PJRT_Device *device, PJRT_Buffer_Type type,
                                  const int64_t *dims, size_t rank);
/* A buffer over `data`, which Python object `owner` keeps alive (released with the buffer). */
PJRT_Buffer *kiln_pjrt_buffer_adopt(PJRT_Device *device, PJRT_Buffer_Type type,
                                    const int64_t *dims, size_t rank, void *data, void *owner);

/* Frees a buffer that was never handed to the framework. */
void kiln_pjrt_buffer_free(PJRT_Buffer *buffer);
/* A hold on the buffer's memory (a run reading or writing it), and its release. */
void kiln_pjrt_buffer_hold(PJRT_Buffer *buffer);
void kiln_pjrt_buffer_release(PJRT_Buffer *buffer);
/* Waits until the buffer's data is written; the error of the run that failed to write it (a
 * new one, the caller's), or NULL. */
PJRT_Error *kiln_pjrt_buffer_wait(PJRT_Buffer *buffer);

/* ---- executables and the calls into Kiln's Python (kiln_pjrt_python.c) ---- */
typedef struct KilnProgram KilnProgram;

struct PJRT_LoadedExecutable {
  KilnProgram *program;
  PJRT_Client *client;
  atomic_bool deleted;
};

struct PJRT_Executable {
  KilnProgram *program;
};

void kiln_pjrt_program_retain(KilnProgram *program);
void kiln_pjrt_program_release(KilnProgram *program);
PJRT_Error *kiln_pjrt_compile(PJRT_Client *client, const PJRT_Program *program,
                              const char *options, size_t options_size,
                              PJRT_LoadedExecutable **out);
PJRT_Error *kiln_pjrt_execute(PJRT_LoadedExecutable_Execute_Args *args);
/* A program as signed bytes, and back (python/kiln/pjrt/serialized.py: the signature is
 * checked before anything of the bytes is parsed). */
PJRT_Error *kiln_pjrt_serialize(KilnProgram *program, PJRT_Executable_Serialize_Args *args);
PJRT_Error *kiln_pjrt_deserialize(PJRT_Client *client, const char *data, size_t size,
                                  const char *options, size_t options_size,
                                  PJRT_LoadedExecutable **out);
/* Drops a result buffer's Python owner (safe during interpreter shutdown). */
void kiln_pjrt_release_owner(void *owner);
/* The StableHLO versions Kiln reads, asked of Kiln's Python once: [major, minor, patch]. */
void kiln_pjrt_stablehlo_versions(int64_t current[3], int64_t minimum[3]);

/* Program metadata, read by the executable entries (kiln_pjrt_executable.c). */
const char *kiln_program_name(const KilnProgram *program);
const char *kiln_program_fingerprint(const KilnProgram *program);
size_t kiln_program_num_outputs(const KilnProgram *program);
size_t kiln_program_num_replicas(const KilnProgram *program);
size_t kiln_program_num_partitions(const KilnProgram *program);
PJRT_Buffer_Type *kiln_program_output_types(KilnProgram *program);
const int64_t *kiln_program_output_dims(const KilnProgram *program);
const size_t *kiln_program_output_ranks(const KilnProgram *program);
const char *const *kiln_program_memory_kinds(const KilnProgram *program);
const size_t *kiln_program_memory_kind_sizes(const KilnProgram *program);
const char *kiln_program_device_assignment(const KilnProgram *program, size_t *size);
size_t kiln_program_num_addressable(const KilnProgram *program);
PJRT_Device *const *kiln_program_devices(const KilnProgram *program);
const PJRT_LogicalDeviceIds *kiln_program_logical_ids(const KilnProgram *program);
int64_t kiln_program_code_size(const KilnProgram *program);
/* One serialized xla.OpSharding per value; bytes NULL: the program reports none. */
typedef struct KilnShardings {
  size_t count;
  const char *const *bytes;
  const size_t *sizes;
} KilnShardings;
const KilnShardings *kiln_program_parameter_shardings(const KilnProgram *program);
const KilnShardings *kiln_program_output_shardings(const KilnProgram *program);
/* The Shardings extension, first in the table's extension list (kiln_pjrt_executable.c). */
extern PJRT_Shardings_Extension kiln_pjrt_shardings_extension;

#endif /* KILN_PJRT_INTERNAL_H_ */
