/* Errors and events of Kiln's PJRT plugin.
 *
 * An error is a code and a message. Since API 0.105 the framework may read one through its
 * function table (PJRT_Error.vtable) as well as through the PJRT_Api entries; both work.
 *
 * An event completes once, successfully or with an error; callbacks registered before that run
 * when it completes (on the completing thread), later ones run at once. The mutex guards only
 * the event's own fields and is released before callbacks run. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_pjrt_internal.h"

typedef struct KilnError {
  PJRT_Error base;
  PJRT_Error_Code code;
  char *message;
} KilnError;

static void error_destroy(PJRT_Error *error) { kiln_pjrt_error_free(error); }

static void error_message(const PJRT_Error *error, const char **message, size_t *size) {
  const char *text = kiln_pjrt_error_message(error);
  *message = text;
  *size = strlen(text);
}

static PJRT_Error_Code error_get_code(const PJRT_Error *error) {
  return kiln_pjrt_error_code(error);
}

/* Kiln's errors carry no payloads: visit none (an error here would make JAX retry forever). */
static void error_for_each_payload(const PJRT_Error *error, PJRT_Error_PayloadVisitor visitor,
                                   void *user_arg) {
  (void)error, (void)visitor, (void)user_arg;
}

static const PJRT_Error_FunctionTable error_table = {
    .struct_size = sizeof(PJRT_Error_FunctionTable),
    .instance_size = sizeof(KilnError),
    .extension_start = NULL,
    .destroy = error_destroy,
    .message = error_message,
    .get_code = error_get_code,
    .for_each_payload = error_for_each_payload,
};

/* Returned when even an error cannot be allocated: static, never freed. */
static KilnError out_of_memory = {{&error_table}, PJRT_Error_Code_RESOURCE_EXHAUSTED,
                                  (char *)"Kiln PJRT plugin: out of host memory"};

PJRT_Error *kiln_pjrt_error(PJRT_Error_Code code, const char *format, ...) {
  KilnError *error = calloc(1, sizeof *error);
  if (error == NULL) return &out_of_memory.base;
  va_list args;
  va_start(args, format);
  int length = vsnprintf(NULL, 0, format, args);
  va_end(args);
  error->message = malloc(length > 0 ? (size_t)length + 1 : 1);
  if (error->message == NULL) {
    free(error);
    return &out_of_memory.base;
  }
  va_start(args, format);
  vsnprintf(error->message, (size_t)length + 1, format, args);
  va_end(args);
  error->base.vtable = &error_table;
  error->code = code;
  return &error->base;
}

PJRT_Error *kiln_pjrt_unimplemented(const char *entry) {
  return kiln_pjrt_error(PJRT_Error_Code_UNIMPLEMENTED,
                         "%s is not implemented by Kiln's PJRT plugin", entry);
}

PJRT_Error *kiln_pjrt_args_too_small(const char *entry, size_t given, size_t needed) {
  return kiln_pjrt_error(PJRT_Error_Code_INVALID_ARGUMENT,
                         "%s: argument struct too small (struct_size %zu, need %zu)", entry,
                         given, needed);
}

PJRT_Error *kiln_pjrt_missing(const char *entry, const char *argument) {
  return kiln_pjrt_error(PJRT_Error_Code_INVALID_ARGUMENT, "%s: no %s given", entry, argument);
}

PJRT_Error *kiln_pjrt_out_of_memory(const char *entry) {
  return kiln_pjrt_error(PJRT_Error_Code_RESOURCE_EXHAUSTED, "%s: out of host memory", entry);
}

PJRT_Error_Code kiln_pjrt_error_code(const PJRT_Error *error) {
  return error ? ((const KilnError *)error)->code : PJRT_Error_Code_OK;
}

const char *kiln_pjrt_error_message(const PJRT_Error *error) {
  return error ? ((const KilnError *)error)->message : "";
}

void kiln_pjrt_error_free(PJRT_Error *error) {
  if (error == NULL || error == &out_of_memory.base) return;
  KilnError *kiln = (KilnError *)error;
  free(kiln->message);
  free(kiln);
}

/* ---- PJRT_Api entries: errors ---- */
void kiln_Error_Destroy(PJRT_Error_Destroy_Args *args) {
  if (args != NULL) kiln_pjrt_error_free(args->error);
}

void kiln_Error_Message(PJRT_Error_Message_Args *args) {
  if (args == NULL) return;
  args->message = kiln_pjrt_error_message(args->error);
  args->message_size = strlen(args->message);
}

PJRT_Error *kiln_Error_GetCode(PJRT_Error_GetCode_Args *args) {
  KILN_PJRT_ARGS(Error_GetCode, args, code);
  args->code = kiln_pjrt_error_code(args->error);
  return NULL;
}

PJRT_Error *kiln_Error_ForEachPayload(PJRT_Error_ForEachPayload_Args *args) {
  KILN_PJRT_ARGS(Error_ForEachPayload, args, user_arg);
  return NULL; /* no payloads */
}

/* ---- events ---- */
typedef struct Callback {
  PJRT_Event_OnReadyCallback function;
  void *user_arg;
  struct Callback *next;
} Callback;

struct PJRT_Event {
  pthread_mutex_t mutex;
  pthread_cond_t completed;
  bool ready;
  PJRT_Error_Code code;
  char *message; /* when code != OK */
  Callback *callbacks;
};

PJRT_Event *kiln_pjrt_event_new(void) {
  PJRT_Event *event = calloc(1, sizeof *event);
  if (event == NULL) return NULL;
  pthread_mutex_init(&event->mutex, NULL);
  pthread_cond_init(&event->completed, NULL);
  return event;
}

PJRT_Event *kiln_pjrt_event_ready(PJRT_Error *error) {
  PJRT_Event *event = kiln_pjrt_event_new();
  if (event == NULL) return NULL;
  kiln_pjrt_event_set(event, kiln_pjrt_error_code(error), kiln_pjrt_error_message(error));
  kiln_pjrt_error_free(error);
  return event;
}

/* A new error holding the event's outcome, or NULL for success (the event must be ready). */
static PJRT_Error *outcome(const PJRT_Event *event) {
  if (event->code == PJRT_Error_Code_OK) return NULL;
  return kiln_pjrt_error(event->code, "%s", event->message ? event->message : "");
}

void kiln_pjrt_event_set(PJRT_Event *event, PJRT_Error_Code code, const char *message) {
  pthread_mutex_lock(&event->mutex);
  if (event->ready) { /* completes once; a second completion is ignored */
    pthread_mutex_unlock(&event->mutex);
    return;
  }
  event->ready = true;
  event->code = code;
  if (code != PJRT_Error_Code_OK) event->message = strdup(message ? message : "");
  Callback *callbacks = event->callbacks;
  event->callbacks = NULL;
  pthread_cond_broadcast(&event->completed);
  pthread_mutex_unlock(&event->mutex);
  /* Registration order, outside the lock: a callback may destroy or query the event. Each
   * gets its own copy of the error; it owns it. */
  Callback *reversed = NULL;
  while (callbacks) {
    Callback *next = callbacks->next;
    callbacks->next = reversed;
    reversed = callbacks;
    callbacks = next;
  }
  while (reversed) {
    Callback *next = reversed->next;
    PJRT_Error *error = code == PJRT_Error_Code_OK ? NULL
                        : kiln_pjrt_error(code, "%s", message ? message : "");
    reversed->function(error, reversed->user_arg);
    free(reversed);
    reversed = next;
  }
}

void kiln_pjrt_event_free(PJRT_Event *event) {
  if (event == NULL) return;
  /* Callbacks still pending are dropped with the event: the framework keeps the event alive
   * until they have run (it destroys events from their own callbacks). */
  Callback *callback = event->callbacks;
  while (callback) {
    Callback *next = callback->next;
    free(callback);
    callback = next;
  }
  pthread_mutex_destroy(&event->mutex);
  pthread_cond_destroy(&event->completed);
  free(event->message);
  free(event);
}

PJRT_Error *kiln_Event_Destroy(PJRT_Event_Destroy_Args *args) {
  KILN_PJRT_ARGS(Event_Destroy, args, event);
  kiln_pjrt_event_free(args->event);
  return NULL;
}

PJRT_Error *kiln_Event_IsReady(PJRT_Event_IsReady_Args *args) {
  KILN_PJRT_ARGS_ON(Event_IsReady, args, is_ready, event);
  pthread_mutex_lock(&args->event->mutex);
  args->is_ready = args->event->ready;
  pthread_mutex_unlock(&args->event->mutex);
  return NULL;
}

PJRT_Error *kiln_Event_Error(PJRT_Event_Error_Args *args) {
  KILN_PJRT_ARGS_ON(Event_Error, args, event, event);
  PJRT_Event *event = args->event;
  pthread_mutex_lock(&event->mutex);
  PJRT_Error *error = event->ready ? outcome(event)
                      : kiln_pjrt_error(PJRT_Error_Code_FAILED_PRECONDITION,
                                        "PJRT_Event_Error: the event is not ready");
  pthread_mutex_unlock(&event->mutex);
  return error;
}

bool kiln_pjrt_event_is_ready(PJRT_Event *event) {
  pthread_mutex_lock(&event->mutex);
  bool ready = event->ready;
  pthread_mutex_unlock(&event->mutex);
  return ready;
}

PJRT_Error *kiln_pjrt_event_wait(PJRT_Event *event) {
  pthread_mutex_lock(&event->mutex);
  if (!event->ready) {
    /* A run may need the GIL to finish (a Python custom call, or explaining a stop): a
     * caller that holds it gives it up while it waits. */
    pthread_mutex_unlock(&event->mutex);
    void *gil = kiln_pjrt_gil_release();
    pthread_mutex_lock(&event->mutex);
    while (!event->ready) pthread_cond_wait(&event->completed, &event->mutex);
    pthread_mutex_unlock(&event->mutex);
    kiln_pjrt_gil_restore(gil);
    pthread_mutex_lock(&event->mutex);
  }
  PJRT_Error *error = outcome(event);
  pthread_mutex_unlock(&event->mutex);
  return error;
}

PJRT_Error *kiln_Event_Await(PJRT_Event_Await_Args *args) {
  KILN_PJRT_ARGS_ON(Event_Await, args, event, event);
  return kiln_pjrt_event_wait(args->event);
}

bool kiln_pjrt_event_on_ready(PJRT_Event *event, PJRT_Event_OnReadyCallback function,
                              void *user_arg) {
  pthread_mutex_lock(&event->mutex);
  if (!event->ready) {
    Callback *callback = malloc(sizeof *callback);
    if (callback == NULL) {
      pthread_mutex_unlock(&event->mutex);
      return false;
    }
    *callback = (Callback){function, user_arg, event->callbacks};
    event->callbacks = callback;
    pthread_mutex_unlock(&event->mutex);
    return true;
  }
  PJRT_Error *error = outcome(event);
  pthread_mutex_unlock(&event->mutex);
  function(error, user_arg);
  return true;
}

PJRT_Error *kiln_Event_OnReady(PJRT_Event_OnReady_Args *args) {
  KILN_PJRT_ARGS_ON(Event_OnReady, args, user_arg, event);
  if (!kiln_pjrt_event_on_ready(args->event, args->callback, args->user_arg))
    return kiln_pjrt_out_of_memory("PJRT_Event_OnReady");
  return NULL;
}

PJRT_Error *kiln_Event_Create(PJRT_Event_Create_Args *args) {
  KILN_PJRT_ARGS(Event_Create, args, event);
  args->event = kiln_pjrt_event_new();
  if (args->event == NULL)
    return kiln_pjrt_out_of_memory("PJRT_Event_Create");
  return NULL;
}

PJRT_Error *kiln_Event_Set(PJRT_Event_Set_Args *args) {
  KILN_PJRT_ARGS_ON(Event_Set, args, error_message_size, event);
  /* The message is not NUL-terminated: copy it with its size. */
  char *message = NULL;
  if (args->error_code != PJRT_Error_Code_OK) {
    message = malloc(args->error_message_size + 1);
    if (message == NULL)
      return kiln_pjrt_out_of_memory("PJRT_Event_Set");
    if (args->error_message_size) memcpy(message, args->error_message, args->error_message_size);
    message[args->error_message_size] = '\0';
  }
  kiln_pjrt_event_set(args->event, args->error_code, message);
  free(message);
  return NULL;
}
