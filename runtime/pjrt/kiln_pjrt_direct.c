/* The plugin's execute path without Python: most programs JAX sends (one device, static
 * shapes, row-major arrays, no checks) are a call of the compiled entry with the arguments'
 * data and fresh result buffers. Going through Kiln's Python for that cost ~100 us a call
 * against XLA:CPU's ~25 us; here it is a few descriptors on the stack, the result
 * allocations, and KilnInvoke, without the GIL (so JAX's threads run programs side by
 * side).
 *
 * The plan is bridge.Program.native_call (python/kiln/pjrt/bridge.py), read once at compile
 * under the GIL and immutable after. Every execute checks each argument buffer's element type
 * and dimensions against it; a buffer that differs takes the Python path, which explains. A
 * program KilnInvoke stops early (a failed custom call, memory, a run-time bound, Ctrl-C) gets
 * its error from Python (Program.stopped), on this thread, where a Python target's exception
 * waits. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_pjrt_direct.h"

typedef int (*InvokeFn)(void (*entry)(void **), void **packed, void *status);
typedef void *(*StatusCreateFn)(void);
typedef const char *(*StatusMessageFn)(const void *status);
typedef void (*StatusDestroyFn)(void *status);

/* An array the entry takes: element type, rank and dims (in the shared dims array). */
typedef struct {
  PJRT_Buffer_Type type;
  size_t rank;
  const int64_t *dims;
} Spec;

struct KilnDirectCall {
  void (*entry)(void **);
  InvokeFn invoke;
  StatusCreateFn status_create;
  StatusMessageFn status_message;
  StatusDestroyFn status_destroy;
  size_t num_args, num_buffers, num_outputs;
  Spec *specs;      /* the arguments, then the result buffers */
  size_t *sources;  /* the result buffer of each output */
  size_t words;     /* int64 words of every memref descriptor together */
  int64_t *dims;    /* what the specs' dims point into */
};

void kiln_pjrt_direct_free(KilnDirectCall *call) {
  if (call == NULL) return;
  free(call->specs);
  free(call->sources);
  free(call->dims);
  free(call);
}

static void *address_of(PyObject *item) { return PyLong_AsVoidPtr(item); }

/* Reads (element type, dims) pairs into specs[at...] and their dims; false with a Python
 * error set. */
static bool read_specs(PyObject *list, KilnDirectCall *call, size_t at, size_t *dims_used) {
  PyObject *fast = PySequence_Fast(list, "native_call specs");
  if (fast == NULL) return false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *type, *shape;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "OO", &type, &shape)) break;
    PyObject *dims = PySequence_Fast(shape, "native_call dims");
    if (dims == NULL) break;
    Spec *spec = &call->specs[at + (size_t)i];
    spec->type = (PJRT_Buffer_Type)PyLong_AsLong(type);
    spec->rank = (size_t)PySequence_Fast_GET_SIZE(dims);
    spec->dims = call->dims + *dims_used; /* the array is sized before anything is read */
    for (size_t d = 0; d < spec->rank; d++)
      call->dims[(*dims_used)++] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(dims, d));
    Py_DECREF(dims);
    call->words += 3 + 2 * spec->rank;
    if (PyErr_Occurred()) break;
    if (kiln_pjrt_element_size(spec->type) == 0 || kiln_pjrt_element_count(spec->dims,
                                                                           spec->rank) < 0) {
      PyErr_SetString(PyExc_ValueError, "native_call: an array PJRT cannot hold");
      break;
    }
  }
  Py_DECREF(fast);
  return !PyErr_Occurred();
}

static size_t total_rank(PyObject *list) {
  size_t total = 0;
  PyObject *fast = PySequence_Fast(list, "native_call specs");
  if (fast == NULL) return 0;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); i++) {
    PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
    PyObject *shape = PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 2
                          ? PyTuple_GET_ITEM(item, 1) : NULL;
    Py_ssize_t rank = shape ? PySequence_Size(shape) : -1;
    if (rank > 0) total += (size_t)rank;
  }
  Py_DECREF(fast);
  PyErr_Clear();
  return total;
}

KilnDirectCall *kiln_pjrt_direct_read(PyObject *program, size_t num_outputs) {
  PyObject *plan = PyObject_GetAttrString(program, "native_call");
  KilnDirectCall *call = NULL;
  PyObject *entry, *functions, *arguments, *buffers, *sources;
  PyObject *invoke, *create, *message, *destroy;
  if (plan == NULL || plan == Py_None) goto done;
  if (!PyArg_ParseTuple(plan, "OOOOO", &entry, &functions, &arguments, &buffers, &sources) ||
      !PyArg_ParseTuple(functions, "OOOO", &invoke, &create, &message, &destroy))
    goto done;
  call = calloc(1, sizeof *call);
  if (call == NULL) goto done;
  call->entry = (void (*)(void **))address_of(entry);
  call->invoke = (InvokeFn)address_of(invoke);
  call->status_create = (StatusCreateFn)address_of(create);
  call->status_message = (StatusMessageFn)address_of(message);
  call->status_destroy = (StatusDestroyFn)address_of(destroy);
  call->num_args = (size_t)PySequence_Size(arguments);
  call->num_buffers = (size_t)PySequence_Size(buffers);
  call->num_outputs = (size_t)PySequence_Size(sources);
  if (PyErr_Occurred() || call->num_outputs != num_outputs) goto fail;
  size_t ranks = total_rank(arguments) + total_rank(buffers);
  size_t n = call->num_args + call->num_buffers;
  call->specs = calloc(n ? n : 1, sizeof *call->specs);
  call->dims = calloc(ranks ? ranks : 1, sizeof *call->dims);
  call->sources = calloc(num_outputs ? num_outputs : 1, sizeof *call->sources);
  if (!call->specs || !call->dims || !call->sources) goto fail;
  size_t dims_used = 0;
  if (!read_specs(arguments, call, 0, &dims_used) ||
      !read_specs(buffers, call, call->num_args, &dims_used) || dims_used != ranks)
    goto fail;
  for (size_t o = 0; o < num_outputs; o++) {
    PyObject *item = PySequence_GetItem(sources, (Py_ssize_t)o);
    size_t source = item ? PyLong_AsSize_t(item) : (size_t)-1;
    Py_XDECREF(item);
    if (PyErr_Occurred() || source >= call->num_buffers) goto fail;
    call->sources[o] = source;
  }
  if (!call->entry || !call->invoke || !call->status_create || !call->status_message ||
      !call->status_destroy)
    goto fail;
  goto done;
fail:
  kiln_pjrt_direct_free(call);
  call = NULL;
done:
  /* No plan, or one this reader cannot follow: every execute takes the Python path. */
  PyErr_Clear();
  Py_XDECREF(plan);
  return call;
}

static bool matches(const Spec *spec, const PJRT_Buffer *buffer) {
  return buffer->type == spec->type && buffer->rank == spec->rank &&
         (spec->rank == 0 || !memcmp(buffer->dims, spec->dims, spec->rank * sizeof(int64_t)));
}

/* Writes a row-major memref descriptor {allocated, aligned, offset, sizes, strides} of
 * `data` at `words`; returns the next free word. */
static int64_t *describe(int64_t *words, const Spec *spec, void *data) {
  words[0] = words[1] = (int64_t)(intptr_t)data;
  words[2] = 0;
  int64_t stride = 1;
  for (size_t d = spec->rank; d-- > 0;) {
    words[3 + d] = spec->dims[d];
    words[3 + spec->rank + d] = stride;
    stride *= spec->dims[d];
  }
  return words + 3 + 2 * spec->rank;
}

/* The error for a run KilnInvoke stopped: Program.stopped says which (under the GIL). */
static PJRT_Error *stopped(PyObject *program, int reason, const char *message) {
  if (!kiln_pjrt_python_usable()) /* a queued run ending during shutdown */
    return kiln_pjrt_error(PJRT_Error_Code_INTERNAL, "Kiln: the program stopped: %s", message);
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject *result = PyObject_CallMethod(program, "stopped", "iy", reason, message);
  PJRT_Error *error = result ? kiln_pjrt_failure(result) : kiln_pjrt_python_error("execute");
  if (error == NULL)
    error = kiln_pjrt_error(PJRT_Error_Code_INTERNAL, "Kiln: the program stopped: %s", message);
  Py_XDECREF(result);
  PyGILState_Release(gil);
  return error;
}

/* A run being set up or under way: the result buffers, the descriptors over them and the
 * arguments, and which results the outputs took. */
struct KilnDirectRun {
  const KilnDirectCall *call;
  PJRT_Buffer **results; /* num_buffers */
  bool *taken;           /* num_buffers: handed to the framework as outputs */
  void **packed;
  char *scratch;
};

KilnDirectRun *kiln_pjrt_direct_prepare(const KilnDirectCall *call, PJRT_Device *device,
                                        PJRT_Buffer *const *arguments, size_t num_args,
                                        PJRT_Buffer **outputs, PJRT_Error **error) {
  *error = NULL;
  if (num_args != call->num_args) return NULL;
  for (size_t a = 0; a < num_args; a++)
    if (!matches(&call->specs[a], arguments[a])) return NULL;
  size_t n = call->num_args + call->num_buffers;
  /* One allocation for the descriptors, the packed pointers, the result buffers and which
   * results were taken. */
  size_t bytes = call->words * sizeof(int64_t) + 2 * n * sizeof(void *) +
                 call->num_buffers * (sizeof(PJRT_Buffer *) + sizeof(bool));
  KilnDirectRun *run = calloc(1, sizeof *run);
  char *scratch = run ? calloc(1, bytes ? bytes : 1) : NULL;
  if (scratch == NULL) {
    free(run);
    *error = kiln_pjrt_out_of_memory("PJRT_LoadedExecutable_Execute");
    return NULL;
  }
  int64_t *words = (int64_t *)scratch;
  void **descriptors = (void **)(words + call->words);
  void **packed = descriptors + n;
  PJRT_Buffer **results = (PJRT_Buffer **)(packed + n);
  *run = (KilnDirectRun){call, results, (bool *)(results + call->num_buffers), packed, scratch};
  for (size_t made = 0; made < call->num_buffers; made++) {
    const Spec *spec = &call->specs[call->num_args + made];
    results[made] = kiln_pjrt_buffer_new(device, spec->type, spec->dims, spec->rank);
    if (results[made] == NULL) {
      kiln_pjrt_direct_finish(run, false);
      *error = kiln_pjrt_out_of_memory("PJRT_LoadedExecutable_Execute");
      return NULL;
    }
  }
  int64_t *at = words;
  for (size_t i = 0; i < n; i++) {
    void *data = i < num_args ? arguments[i]->data : results[i - num_args]->data;
    descriptors[i] = at;
    packed[i] = &descriptors[i]; /* the packed entry takes a pointer to each argument */
    at = describe(at, &call->specs[i], data);
  }
  for (size_t o = 0; o < call->num_outputs; o++) {
    outputs[o] = results[call->sources[o]];
    run->taken[call->sources[o]] = true;
  }
  return run;
}

PJRT_Error *kiln_pjrt_direct_run(KilnDirectRun *run, PyObject *program) {
  const KilnDirectCall *call = run->call;
  void *status = call->status_create();
  if (status == NULL) return kiln_pjrt_out_of_memory("PJRT_LoadedExecutable_Execute");
  PJRT_Error *error = NULL;
  int reason = call->invoke(call->entry, run->packed, status);
  if (reason) {
    char *message = strdup(call->status_message(status));
    error = stopped(program, reason, message ? message : "");
    free(message);
  }
  call->status_destroy(status);
  return error;
}

void kiln_pjrt_direct_finish(KilnDirectRun *run, bool handed_out) {
  if (run == NULL) return;
  for (size_t b = 0; b < run->call->num_buffers; b++)
    if (run->results[b] != NULL && !(handed_out && run->taken[b]))
      kiln_pjrt_buffer_free(run->results[b]);
  free(run->scratch);
  free(run);
}
