/* The plugin's calls into Kiln's Python (python/kiln/pjrt/bridge.py): compile and execute.
 *
 * jaxlib loads the plugin into a Python process, so the CPython API is at hand; the library is
 * not linked against libpython (the process provides its symbols). Compile and Execute arrive
 * on JAX's threads without the GIL; PyGILState_Ensure takes it (and is a no-op for a thread
 * that holds it already). No C lock is held while the GIL is taken.
 *
 * Destroying a result buffer drops its numpy owner, which needs the GIL too; during or after
 * interpreter shutdown the owner is left alone (the process is ending; touching Python then
 * would crash). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdlib.h>
#include <string.h>

#include "kiln_pjrt_direct.h"
#include "kiln_pjrt_internal.h"

struct KilnProgram {
  atomic_int refs;
  PyObject *object; /* bridge.Program */
  PJRT_Client *client;
  char *name;
  char *fingerprint;
  size_t num_replicas, num_partitions, num_outputs;
  PJRT_Buffer_Type *output_types;
  int64_t *output_dims; /* concatenated */
  size_t *output_ranks;
  const char **memory_kinds;
  size_t *memory_kind_sizes;
  char *device_assignment;
  size_t device_assignment_size;
  size_t num_addressable;
  PJRT_Device **devices;
  PJRT_LogicalDeviceIds *logical_ids;
  int64_t code_size;
  size_t num_donated;
  int64_t *donated; /* parameters whose buffers a run consumes (donated by JAX) */
  KilnDirectCall *direct; /* the execute path without Python, or NULL (kiln_pjrt_direct.c) */
  KilnShardings parameter_shardings, output_shardings; /* serialized xla.OpSharding each */
};

bool kiln_pjrt_python_usable(void) {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

void *kiln_pjrt_gil_release(void) {
  if (!kiln_pjrt_python_usable() || !PyGILState_Check()) return NULL;
  return PyEval_SaveThread();
}

void kiln_pjrt_gil_restore(void *state) {
  if (state != NULL) PyEval_RestoreThread((PyThreadState *)state);
}

/* The bridge module, imported once (under the GIL). */
static PyObject *bridge(void) {
  static PyObject *module = NULL;
  if (module == NULL) module = PyImport_ImportModule("kiln.pjrt.bridge");
  return module;
}

/* The PJRT error for the Python exception in flight (cleared), or for a bridge.Failure. */
PJRT_Error *kiln_pjrt_python_error(const char *what) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  PyObject *text = value ? PyObject_Str(value) : NULL;
  const char *message = text ? PyUnicode_AsUTF8(text) : NULL;
  const char *type_name = type ? ((PyTypeObject *)type)->tp_name : "error";
  PJRT_Error *error = kiln_pjrt_error(PJRT_Error_Code_INTERNAL,
                                      "Kiln PJRT plugin: %s failed: %s: %s", what, type_name,
                                      message ? message : "(no message)");
  PyErr_Clear();
  Py_XDECREF(text);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  return error;
}

/* A bridge.Failure (an object with pjrt_error_code) as a PJRT error, else NULL. */
PJRT_Error *kiln_pjrt_failure(PyObject *result) {
  if (!PyObject_HasAttrString(result, "pjrt_error_code")) return NULL;
  PyObject *code = PyObject_GetAttrString(result, "pjrt_error_code");
  PyObject *message = PyObject_GetAttrString(result, "message");
  long value = code ? PyLong_AsLong(code) : PJRT_Error_Code_INTERNAL;
  const char *text = message ? PyUnicode_AsUTF8(message) : NULL;
  PJRT_Error *error = kiln_pjrt_error(value > 0 && value <= 16 ? (PJRT_Error_Code)value
                                                              : PJRT_Error_Code_INTERNAL,
                                      "%s", text ? text : "Kiln: unknown failure");
  PyErr_Clear();
  Py_XDECREF(code);
  Py_XDECREF(message);
  return error;
}

void kiln_pjrt_stablehlo_versions(int64_t current[3], int64_t minimum[3]) {
  /* Kiln's floor if Python cannot be asked: the versions the framework must not exceed. */
  static int64_t cached[6] = {1, 0, 0, 0, 9, 0};
  static atomic_bool known = false;
  if (!atomic_load(&known) && kiln_pjrt_python_usable()) {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *module = bridge();
    PyObject *versions = module ? PyObject_CallMethod(module, "stablehlo_versions", NULL) : NULL;
    int64_t values[6];
    if (versions && PyArg_ParseTuple(versions, "(LLL)(LLL)", &values[0], &values[1], &values[2],
                                     &values[3], &values[4], &values[5])) {
      memcpy(cached, values, sizeof values);
      atomic_store(&known, true);
    }
    PyErr_Clear();
    Py_XDECREF(versions);
    PyGILState_Release(gil);
  }
  memcpy(current, cached, 3 * sizeof(int64_t));
  memcpy(minimum, cached + 3, 3 * sizeof(int64_t));
}

/* ---- programs ---- */
static void shardings_free(KilnShardings *shardings) {
  for (size_t i = 0; shardings->bytes && i < shardings->count; i++)
    free((void *)shardings->bytes[i]);
  free((void *)shardings->bytes);
  free((void *)shardings->sizes);
}

/* Copies the program's attribute `name`, None or a list of bytes, into `out` (under the GIL);
 * false with a Python error set. */
static bool read_shardings(PyObject *object, const char *name, KilnShardings *out) {
  PyObject *value = PyObject_GetAttrString(object, name);
  if (value == NULL) return false;
  if (value == Py_None) {
    Py_DECREF(value);
    return true;
  }
  PyObject *list = PySequence_Fast(value, name);
  Py_DECREF(value);
  if (list == NULL) return false;
  size_t n = (size_t)PySequence_Fast_GET_SIZE(list);
  const char **bytes = calloc(n ? n : 1, sizeof *bytes);
  size_t *sizes = calloc(n ? n : 1, sizeof *sizes);
  out->bytes = bytes;
  out->sizes = sizes;
  out->count = n;
  bool ok = bytes && sizes;
  if (!ok) PyErr_NoMemory();
  for (size_t i = 0; ok && i < n; i++) {
    char *data;
    Py_ssize_t size;
    ok = PyBytes_AsStringAndSize(PySequence_Fast_GET_ITEM(list, i), &data, &size) == 0;
    char *copy = ok ? malloc((size_t)size + 1) : NULL;
    if (ok && copy == NULL) {
      PyErr_NoMemory();
      ok = false;
    }
    if (ok) {
      memcpy(copy, data, (size_t)size);
      bytes[i] = copy;
      sizes[i] = (size_t)size;
    }
  }
  Py_DECREF(list);
  return ok;
}

static void program_free(KilnProgram *program) {
  if (program->object && kiln_pjrt_python_usable()) {
    PyGILState_STATE gil = PyGILState_Ensure();
    Py_DECREF(program->object);
    PyGILState_Release(gil);
  }
  free(program->name);
  free(program->fingerprint);
  free(program->output_types);
  free(program->output_dims);
  free(program->output_ranks);
  if (program->memory_kinds) free((void *)program->memory_kinds);
  free(program->memory_kind_sizes);
  free(program->device_assignment);
  free(program->devices);
  free(program->logical_ids);
  free(program->donated);
  kiln_pjrt_direct_free(program->direct);
  shardings_free(&program->parameter_shardings);
  shardings_free(&program->output_shardings);
  free(program);
}

void kiln_pjrt_program_retain(KilnProgram *program) { atomic_fetch_add(&program->refs, 1); }

void kiln_pjrt_program_release(KilnProgram *program) {
  if (program && atomic_fetch_sub(&program->refs, 1) == 1) program_free(program);
}

static char *string_attr(PyObject *object, const char *name) {
  PyObject *value = PyObject_GetAttrString(object, name);
  const char *text = value ? PyUnicode_AsUTF8(value) : NULL;
  char *copy = text ? strdup(text) : NULL;
  Py_XDECREF(value);
  return copy;
}

static bool size_attr(PyObject *object, const char *name, size_t *out) {
  PyObject *value = PyObject_GetAttrString(object, name);
  if (value == NULL) return false;
  *out = PyLong_AsSize_t(value);
  Py_DECREF(value);
  return !PyErr_Occurred();
}

/* Reads the program's metadata into C (under the GIL); false with a Python error set. */
static bool read_program(KilnProgram *program, PyObject *object) {
  PyObject *types = NULL, *dims = NULL, *devices = NULL, *assignment = NULL, *donated = NULL;
  bool ok = false;
  program->name = string_attr(object, "name");
  program->fingerprint = string_attr(object, "fingerprint");
  if (!program->name || !program->fingerprint) goto done;
  if (!size_attr(object, "num_replicas", &program->num_replicas) ||
      !size_attr(object, "num_partitions", &program->num_partitions))
    goto done;
  size_t code_size;
  if (!size_attr(object, "code_size", &code_size)) goto done;
  program->code_size = (int64_t)code_size;
  types = PySequence_Fast(PyObject_GetAttrString(object, "output_types"), "output_types");
  dims = PySequence_Fast(PyObject_GetAttrString(object, "output_dims"), "output_dims");
  devices = PySequence_Fast(PyObject_GetAttrString(object, "device_ids"), "device_ids");
  assignment = PyObject_GetAttrString(object, "device_assignment");
  if (!types || !dims || !devices || !assignment || !PyBytes_Check(assignment)) goto done;
  size_t n = (size_t)PySequence_Fast_GET_SIZE(types);
  if ((size_t)PySequence_Fast_GET_SIZE(dims) != n) {
    PyErr_SetString(PyExc_ValueError, "output_types and output_dims differ in length");
    goto done;
  }
  program->num_outputs = n;
  program->output_types = calloc(n ? n : 1, sizeof *program->output_types);
  program->output_ranks = calloc(n ? n : 1, sizeof *program->output_ranks);
  program->memory_kinds = calloc(n ? n : 1, sizeof *program->memory_kinds);
  program->memory_kind_sizes = calloc(n ? n : 1, sizeof *program->memory_kind_sizes);
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    PyObject *shape = PySequence_Fast_GET_ITEM(dims, i);
    Py_ssize_t rank = PySequence_Size(shape);
    if (rank < 0) goto done;
    total += (size_t)rank;
  }
  program->output_dims = calloc(total ? total : 1, sizeof *program->output_dims);
  if (!program->output_types || !program->output_ranks || !program->memory_kinds ||
      !program->memory_kind_sizes || !program->output_dims) {
    PyErr_NoMemory();
    goto done;
  }
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    program->output_types[i] = (PJRT_Buffer_Type)PyLong_AsLong(PySequence_Fast_GET_ITEM(types, i));
    PyObject *shape = PySequence_Fast_GET_ITEM(dims, i);
    Py_ssize_t rank = PySequence_Size(shape);
    program->output_ranks[i] = (size_t)rank;
    for (Py_ssize_t d = 0; d < rank; d++) {
      PyObject *item = PySequence_GetItem(shape, d);
      program->output_dims[at++] = item ? PyLong_AsLongLong(item) : -1;
      Py_XDECREF(item);
    }
    program->memory_kinds[i] = "device";
    program->memory_kind_sizes[i] = strlen("device");
  }
  if (PyErr_Occurred()) goto done;
  size_t count = (size_t)PySequence_Fast_GET_SIZE(devices);
  if (count != program->num_replicas * program->num_partitions) {
    PyErr_SetString(PyExc_ValueError, "device_ids must list replicas x partitions devices");
    goto done;
  }
  program->num_addressable = count;
  program->devices = calloc(count ? count : 1, sizeof *program->devices);
  program->logical_ids = calloc(count ? count : 1, sizeof *program->logical_ids);
  if (!program->devices || !program->logical_ids) {
    PyErr_NoMemory();
    goto done;
  }
  for (size_t i = 0; i < count; i++) {
    long id = PyLong_AsLong(PySequence_Fast_GET_ITEM(devices, i));
    if (id < 0 || id >= program->client->num_devices) {
      PyErr_Format(PyExc_ValueError, "device id %ld out of range", id);
      goto done;
    }
    program->devices[i] = program->client->devices[id];
    /* device_ids is replica-major: index = replica * partitions + partition */
    program->logical_ids[i].replica = (int)(i / program->num_partitions);
    program->logical_ids[i].partition = (int)(i % program->num_partitions);
  }
  donated = PySequence_Fast(PyObject_GetAttrString(object, "donated"), "donated");
  if (!donated) goto done;
  program->num_donated = (size_t)PySequence_Fast_GET_SIZE(donated);
  program->donated = calloc(program->num_donated ? program->num_donated : 1, sizeof(int64_t));
  if (!program->donated) {
    PyErr_NoMemory();
    goto done;
  }
  for (size_t i = 0; i < program->num_donated; i++)
    program->donated[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(donated, i));
  if (PyErr_Occurred()) goto done;
  program->device_assignment_size = (size_t)PyBytes_GET_SIZE(assignment);
  program->device_assignment = malloc(program->device_assignment_size + 1);
  if (!program->device_assignment) {
    PyErr_NoMemory();
    goto done;
  }
  memcpy(program->device_assignment, PyBytes_AS_STRING(assignment),
         program->device_assignment_size);
  if (!read_shardings(object, "parameter_shardings", &program->parameter_shardings) ||
      !read_shardings(object, "output_shardings", &program->output_shardings))
    goto done;
  ok = true;
done:
  Py_XDECREF(types);
  Py_XDECREF(dims);
  Py_XDECREF(devices);
  Py_XDECREF(assignment);
  Py_XDECREF(donated);
  return ok;
}

static PJRT_Error *python_missing(const char *what) {
  return kiln_pjrt_error(PJRT_Error_Code_FAILED_PRECONDITION,
                         "Kiln's PJRT plugin %s through Kiln's Python, which is not running in "
                         "this process (load the plugin from Python: jax)", what);
}

/* A loaded executable over the bridge.Program (or Failure) `result` of a bridge call, which
 * this takes over; NULL result: the call raised. Under the GIL. */
static PJRT_Error *loaded_from_python(PJRT_Client *client, PyObject *result, const char *what,
                                      PJRT_LoadedExecutable **out) {
  PJRT_Error *error = NULL;
  if (result == NULL) return kiln_pjrt_python_error(what);
  if ((error = kiln_pjrt_failure(result)) != NULL) {
    Py_DECREF(result);
    return error;
  }
  KilnProgram *program = calloc(1, sizeof *program);
  PJRT_LoadedExecutable *executable = calloc(1, sizeof *executable);
  if (!program || !executable) {
    free(program);
    free(executable);
    Py_DECREF(result);
    return kiln_pjrt_out_of_memory(what);
  }
  atomic_init(&program->refs, 1);
  program->client = client;
  program->object = result; /* the reference is the program's */
  if (!read_program(program, result)) {
    error = kiln_pjrt_python_error(what);
    /* program_free would take the GIL again: drop the object here, where it is held. */
    Py_CLEAR(program->object);
    kiln_pjrt_program_release(program);
    free(executable);
    return error;
  }
  if (program->num_addressable == 1)
    program->direct = kiln_pjrt_direct_read(result, program->num_outputs);
  executable->program = program;
  executable->client = client;
  atomic_init(&executable->deleted, false);
  *out = executable;
  return NULL;
}

PJRT_Error *kiln_pjrt_compile(PJRT_Client *client, const PJRT_Program *source,
                              const char *options, size_t options_size,
                              PJRT_LoadedExecutable **out) {
  if (!kiln_pjrt_python_usable()) return python_missing("compiles");
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject *module = bridge();
  PyObject *result = module ? PyObject_CallMethod(
      module, "compile", "y#s#y#i", source->code, (Py_ssize_t)source->code_size, source->format,
      (Py_ssize_t)source->format_size, options ? options : "", (Py_ssize_t)options_size,
      client->num_devices) : NULL;
  PJRT_Error *error = loaded_from_python(client, result, "compile", out);
  PyGILState_Release(gil);
  return error;
}

PJRT_Error *kiln_pjrt_deserialize(PJRT_Client *client, const char *data, size_t size,
                                  const char *options, size_t options_size,
                                  PJRT_LoadedExecutable **out) {
  if (!kiln_pjrt_python_usable()) return python_missing("loads executables");
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject *module = bridge();
  PyObject *result = module ? PyObject_CallMethod(
      module, "deserialize", "y#y#i", data, (Py_ssize_t)size, options ? options : "",
      (Py_ssize_t)options_size, client->num_devices) : NULL;
  PJRT_Error *error = loaded_from_python(client, result, "deserialize", out);
  PyGILState_Release(gil);
  return error;
}

struct PJRT_SerializedExecutable {
  size_t size;
  char bytes[];
};

static void free_serialized(PJRT_SerializedExecutable *serialized) { free(serialized); }

PJRT_Error *kiln_pjrt_serialize(KilnProgram *program, PJRT_Executable_Serialize_Args *args) {
  if (!kiln_pjrt_python_usable()) return python_missing("serializes executables");
  PJRT_Error *error = NULL;
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject *result = PyObject_CallMethod(program->object, "serialize", NULL);
  if (result == NULL) {
    error = kiln_pjrt_python_error("serialize");
  } else if ((error = kiln_pjrt_failure(result)) == NULL) {
    char *bytes;
    Py_ssize_t size;
    if (PyBytes_AsStringAndSize(result, &bytes, &size) != 0) {
      error = kiln_pjrt_python_error("serialize (result)");
    } else {
      PJRT_SerializedExecutable *copy = malloc(sizeof *copy + (size_t)size);
      if (copy == NULL) {
        error = kiln_pjrt_out_of_memory("PJRT_Executable_Serialize");
      } else {
        copy->size = (size_t)size;
        memcpy(copy->bytes, bytes, (size_t)size);
        args->serialized_bytes = copy->bytes;
        args->serialized_bytes_size = copy->size;
        args->serialized_executable = copy;
        args->serialized_executable_deleter = free_serialized;
      }
    }
  }
  Py_XDECREF(result);
  PyGILState_Release(gil);
  return error;
}

/* ---- execute ---- */

/* (memoryview, element type, dims) of an argument buffer: read-only, valid during the call. */
static PyObject *argument(PJRT_Buffer *buffer) {
  PyObject *view = PyMemoryView_FromMemory(buffer->data, (Py_ssize_t)buffer->size_bytes,
                                           PyBUF_READ);
  PyObject *dims = PyTuple_New((Py_ssize_t)buffer->rank);
  if (!view || !dims) goto fail;
  for (size_t d = 0; d < buffer->rank; d++) {
    PyObject *dim = PyLong_FromLongLong(buffer->dims[d]);
    if (!dim) goto fail;
    PyTuple_SET_ITEM(dims, (Py_ssize_t)d, dim);
  }
  return Py_BuildValue("(NiN)", view, (int)buffer->type, dims);
fail:
  Py_XDECREF(view);
  Py_XDECREF(dims);
  return NULL;
}

typedef struct Owner {
  PyObject *object;
  Py_buffer view;
} Owner;

void kiln_pjrt_release_owner(void *opaque) {
  Owner *owner = opaque;
  if (kiln_pjrt_python_usable()) {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyBuffer_Release(&owner->view);
    Py_DECREF(owner->object);
    PyGILState_Release(gil);
  }
  /* else: the interpreter is going away and its memory with it */
  free(owner);
}

/* The buffer of result `index` of device `device_index`, owning the numpy array `array` (a
 * contiguous byte view the bridge made), with the shape compile reported. */
static PJRT_Error *result_buffer(KilnProgram *program, PJRT_Device *device, size_t index,
                                 size_t dims_at, PyObject *array, PJRT_Buffer **out) {
  Owner *owner = calloc(1, sizeof *owner);
  if (owner == NULL) return kiln_pjrt_out_of_memory("PJRT_LoadedExecutable_Execute");
  if (PyObject_GetBuffer(array, &owner->view, PyBUF_C_CONTIGUOUS) != 0) {
    free(owner);
    return kiln_pjrt_python_error("execute (result buffer)");
  }
  PJRT_Buffer_Type type = program->output_types[index];
  const int64_t *dims = program->output_dims + dims_at;
  size_t rank = program->output_ranks[index];
  int64_t count = kiln_pjrt_element_count(dims, rank);
  Py_ssize_t got = owner->view.len;
  if (count < 0 || (size_t)got != (size_t)count * kiln_pjrt_element_size(type)) {
    PyBuffer_Release(&owner->view);
    free(owner);
    return kiln_pjrt_error(PJRT_Error_Code_INTERNAL,
                           "Kiln PJRT plugin: result %zu has %zd bytes, its shape needs %lld",
                           index, got, (long long)(count * (int64_t)kiln_pjrt_element_size(type)));
  }
  Py_INCREF(array);
  owner->object = array;
  *out = kiln_pjrt_buffer_adopt(device, type, dims, rank, owner->view.buf, owner);
  if (*out == NULL) {
    PyBuffer_Release(&owner->view);
    Py_DECREF(array);
    free(owner);
    return kiln_pjrt_out_of_memory("PJRT_LoadedExecutable_Execute");
  }
  return NULL;
}

/* Under the GIL: calls the program and fills output_lists. */
static PJRT_Error *execute_locked(KilnProgram *program, PJRT_LoadedExecutable_Execute_Args *args,
                                  PJRT_Device *const *devices) {
  PJRT_Error *error = NULL;
  PyObject *per_device = PyList_New((Py_ssize_t)args->num_devices);
  if (per_device == NULL) return kiln_pjrt_python_error("execute (arguments)");
  for (size_t d = 0; d < args->num_devices; d++) {
    PyObject *arguments = PyList_New((Py_ssize_t)args->num_args);
    if (arguments == NULL) goto python_error;
    PyList_SET_ITEM(per_device, (Py_ssize_t)d, arguments);
    for (size_t a = 0; a < args->num_args; a++) {
      PyObject *item = argument(args->argument_lists[d][a]);
      if (item == NULL) goto python_error;
      PyList_SET_ITEM(arguments, (Py_ssize_t)a, item);
    }
  }
  PyObject *results = PyObject_CallMethod(program->object, "execute", "O", per_device);
  Py_DECREF(per_device);
  per_device = NULL;
  if (results == NULL) return kiln_pjrt_python_error("execute");
  if ((error = kiln_pjrt_failure(results)) != NULL) {
    Py_DECREF(results);
    return error;
  }
  for (size_t d = 0; d < args->num_devices && error == NULL; d++) {
    PyObject *outputs = PySequence_GetItem(results, (Py_ssize_t)d);
    if (outputs == NULL || PySequence_Size(outputs) != (Py_ssize_t)program->num_outputs) {
      Py_XDECREF(outputs);
      PyErr_Clear();
      error = kiln_pjrt_error(PJRT_Error_Code_INTERNAL,
                              "Kiln PJRT plugin: device %zu returned the wrong result count", d);
      break;
    }
    size_t dims_at = 0;
    for (size_t o = 0; o < program->num_outputs; o++) {
      PyObject *array = PySequence_GetItem(outputs, (Py_ssize_t)o);
      if (array == NULL) {
        error = kiln_pjrt_python_error("execute (results)");
        break;
      }
      error = result_buffer(program, devices[d], o, dims_at, array, &args->output_lists[d][o]);
      Py_DECREF(array);
      if (error) break;
      dims_at += program->output_ranks[o];
    }
    Py_DECREF(outputs);
  }
  Py_DECREF(results);
  return error;
python_error:
  Py_XDECREF(per_device);
  return kiln_pjrt_python_error("execute (arguments)");
}

/* Whether a run consumes argument `parameter`: JAX donated it and did not ask to keep it
 * (non_donatable_input_indices). */
static bool consumes(const KilnProgram *program, const PJRT_LoadedExecutable_Execute_Args *args,
                     int64_t parameter) {
  bool donated = false;
  for (size_t i = 0; i < program->num_donated; i++) donated |= program->donated[i] == parameter;
  if (!donated || parameter < 0 || (size_t)parameter >= args->num_args) return false;
  const PJRT_ExecuteOptions *options = args->options;
  if (options != NULL && KILN_PJRT_HAS_FIELD(PJRT_ExecuteOptions, options,
                                             num_non_donatable_input_indices))
    for (size_t k = 0; k < options->num_non_donatable_input_indices; k++)
      if (options->non_donatable_input_indices[k] == parameter) return false;
  return true;
}

/* A consumed argument's buffer passed again in the same run (f(x, x) with x donated): XLA
 * refuses the run, since the run would read memory it also reuses. */
static PJRT_Error *check_donations(const KilnProgram *program,
                                   const PJRT_LoadedExecutable_Execute_Args *args) {
  for (size_t i = 0; i < program->num_donated; i++) {
    int64_t parameter = program->donated[i];
    if (!consumes(program, args, parameter)) continue;
    for (size_t d = 0; d < args->num_devices; d++)
      for (size_t a = 0; a < args->num_args; a++)
        if ((int64_t)a != parameter &&
            args->argument_lists[d][a] == args->argument_lists[d][parameter])
          return kiln_pjrt_error(PJRT_Error_Code_INVALID_ARGUMENT,
                                 "PJRT_LoadedExecutable_Execute: argument %lld is donated and "
                                 "also passed as argument %zu: a donated buffer cannot be used "
                                 "twice in one call", (long long)parameter, a);
  }
  return NULL;
}

/* Donated arguments are consumed by a run (as XLA reuses their memory): their buffers are
 * deleted for the framework. */
static void consume_donations(const KilnProgram *program,
                              const PJRT_LoadedExecutable_Execute_Args *args) {
  for (size_t i = 0; i < program->num_donated; i++) {
    int64_t parameter = program->donated[i];
    if (!consumes(program, args, parameter)) continue;
    for (size_t d = 0; d < args->num_devices; d++)
      atomic_store(&args->argument_lists[d][parameter]->deleted, true);
  }
}

/* ---- asynchronous runs ---- */
/* A run whose arguments and results come to at least this many bytes is queued on its
 * device (kiln_pjrt_queue.c) and Execute returns at once; a smaller one, whose arguments are
 * all written and whose device has nothing queued, runs on the caller's thread, where
 * handing it to another thread would cost more than the run. */
#define KILN_PJRT_ASYNC_MIN_BYTES ((size_t)1 << 20)

typedef struct {
  KilnProgram *program; /* retained until the run ends */
  KilnDirectRun *run;
  PJRT_Event *done;     /* the framework's device-complete event, or NULL */
  size_t num_args, num_outputs;
  PJRT_Buffer **buffers; /* the arguments then the outputs, each held until the run ends */
} QueuedRun;

static void run_queued(void *arg) {
  QueuedRun *job = arg;
  PJRT_Error *error = NULL;
  for (size_t a = 0; a < job->num_args && error == NULL; a++)
    error = kiln_pjrt_buffer_wait(job->buffers[a]);
  if (error == NULL) error = kiln_pjrt_direct_run(job->run, job->program->object);
  kiln_pjrt_direct_finish(job->run, true);
  PJRT_Error_Code code = kiln_pjrt_error_code(error);
  const char *message = kiln_pjrt_error_message(error);
  for (size_t o = 0; o < job->num_outputs; o++)
    kiln_pjrt_event_set(job->buffers[job->num_args + o]->pending, code, message);
  if (job->done) kiln_pjrt_event_set(job->done, code, message);
  kiln_pjrt_error_free(error);
  for (size_t b = 0; b < job->num_args + job->num_outputs; b++)
    kiln_pjrt_buffer_release(job->buffers[b]);
  kiln_pjrt_program_release(job->program);
  free(job->buffers);
  free(job);
}

/* Waits until every argument's data is written (runs still writing it end first); the error
 * of a run that failed to write one, or NULL. */
static PJRT_Error *wait_for_arguments(const PJRT_LoadedExecutable_Execute_Args *args) {
  for (size_t d = 0; d < args->num_devices; d++)
    for (size_t a = 0; a < args->num_args; a++) {
      PJRT_Error *error = kiln_pjrt_buffer_wait(args->argument_lists[d][a]);
      if (error) return error;
    }
  return NULL;
}

static bool worth_queueing(const PJRT_LoadedExecutable_Execute_Args *args, size_t num_outputs,
                           PJRT_Device *device) {
  size_t bytes = 0;
  bool written = true;
  for (size_t a = 0; a < args->num_args; a++) {
    PJRT_Buffer *buffer = args->argument_lists[0][a];
    bytes += buffer->size_bytes;
    written &= buffer->pending == NULL || kiln_pjrt_event_is_ready(buffer->pending);
  }
  for (size_t o = 0; o < num_outputs; o++) bytes += args->output_lists[0][o]->size_bytes;
  return bytes >= KILN_PJRT_ASYNC_MIN_BYTES || !written || !kiln_pjrt_queue_idle(device);
}

/* Undoes what queue_run set up for a run it could not queue. */
static bool not_queued(KilnProgram *program, PJRT_LoadedExecutable_Execute_Args *args,
                       QueuedRun *job, PJRT_Buffer **buffers, PJRT_Event *done) {
  for (size_t o = 0; o < program->num_outputs; o++) {
    PJRT_Buffer *output = args->output_lists[0][o];
    kiln_pjrt_event_free(output->pending);
    output->pending = NULL;
  }
  kiln_pjrt_event_free(done);
  free(buffers);
  free(job);
  return false;
}

/* Queues a prepared run; false (nothing queued, the run untouched) if out of memory. */
static bool queue_run(KilnProgram *program, PJRT_LoadedExecutable_Execute_Args *args,
                      PJRT_Device *device, KilnDirectRun *run) {
  size_t n = args->num_args + program->num_outputs;
  QueuedRun *job = calloc(1, sizeof *job);
  PJRT_Buffer **buffers = job ? calloc(n ? n : 1, sizeof *buffers) : NULL;
  PJRT_Event *done = buffers && args->device_complete_events ? kiln_pjrt_event_new() : NULL;
  bool ok = buffers && (done || !args->device_complete_events);
  for (size_t o = 0; ok && o < program->num_outputs; o++) {
    PJRT_Buffer *output = args->output_lists[0][o];
    if (output->pending == NULL) output->pending = kiln_pjrt_event_new();
    ok = output->pending != NULL;
  }
  if (!ok) return not_queued(program, args, job, buffers, done);
  for (size_t a = 0; a < args->num_args; a++) buffers[a] = args->argument_lists[0][a];
  for (size_t o = 0; o < program->num_outputs; o++)
    buffers[args->num_args + o] = args->output_lists[0][o];
  for (size_t b = 0; b < n; b++) kiln_pjrt_buffer_hold(buffers[b]);
  kiln_pjrt_program_retain(program);
  *job = (QueuedRun){program, run, done, args->num_args, program->num_outputs, buffers};
  if (!kiln_pjrt_queue_push(device, run_queued, job)) {
    for (size_t b = 0; b < n; b++) kiln_pjrt_buffer_release(buffers[b]);
    kiln_pjrt_program_release(program);
    return not_queued(program, args, job, buffers, done);
  }
  if (args->device_complete_events) args->device_complete_events[0] = done;
  return true;
}

/* A run of the plan without Python: queued on its device, or run here (see
 * KILN_PJRT_ASYNC_MIN_BYTES). */
static PJRT_Error *execute_direct(KilnProgram *program, PJRT_LoadedExecutable_Execute_Args *args,
                                  PJRT_Device *device, KilnDirectRun *run) {
  if (worth_queueing(args, program->num_outputs, device) &&
      queue_run(program, args, device, run)) {
    consume_donations(program, args);
    return NULL;
  }
  PJRT_Error *error = wait_for_arguments(args);
  if (error == NULL) error = kiln_pjrt_direct_run(run, program->object);
  kiln_pjrt_direct_finish(run, error == NULL);
  if (error) {
    for (size_t o = 0; o < program->num_outputs; o++) args->output_lists[0][o] = NULL;
    return error;
  }
  consume_donations(program, args);
  if (args->device_complete_events) args->device_complete_events[0] = kiln_pjrt_event_ready(NULL);
  return NULL;
}

PJRT_Error *kiln_pjrt_execute(PJRT_LoadedExecutable_Execute_Args *args) {
  PJRT_LoadedExecutable *executable = args->executable;
  KilnProgram *program = executable->program;
  if (atomic_load(&executable->deleted))
    return kiln_pjrt_error(PJRT_Error_Code_FAILED_PRECONDITION,
                           "PJRT_LoadedExecutable_Execute: the executable was deleted");
  PJRT_Device *const *devices = program->devices;
  PJRT_Device *single[1];
  if (args->execute_device != NULL) {
    if (args->num_devices != 1 || program->num_addressable != 1)
      return kiln_pjrt_error(PJRT_Error_Code_INVALID_ARGUMENT,
                             "PJRT_LoadedExecutable_Execute: execute_device needs a "
                             "single-device program and one argument list");
    single[0] = args->execute_device;
    devices = single;
  } else if (args->num_devices != program->num_addressable) {
    return kiln_pjrt_error(PJRT_Error_Code_INVALID_ARGUMENT,
                           "PJRT_LoadedExecutable_Execute: %zu argument lists for a program "
                           "on %zu devices", args->num_devices, program->num_addressable);
  }
  for (size_t d = 0; d < args->num_devices; d++)
    for (size_t a = 0; a < args->num_args; a++) {
      PJRT_Buffer *buffer = args->argument_lists[d][a];
      if (buffer == NULL || atomic_load(&buffer->deleted))
        return kiln_pjrt_error(PJRT_Error_Code_INVALID_ARGUMENT,
                               "PJRT_LoadedExecutable_Execute: argument %zu of device %zu %s", a,
                               d, buffer ? "was deleted (or donated)" : "is missing");
    }
  PJRT_Error *twice = check_donations(program, args);
  if (twice != NULL) return twice;
  if (!kiln_pjrt_python_usable())
    return kiln_pjrt_error(PJRT_Error_Code_FAILED_PRECONDITION,
                           "Kiln's PJRT plugin runs programs through Kiln's Python, which is "
                           "not running in this process");
  if (program->direct != NULL && args->num_devices == 1) {
    PJRT_Error *error = NULL;
    KilnDirectRun *run = kiln_pjrt_direct_prepare(program->direct, devices[0],
                                                  args->argument_lists[0], args->num_args,
                                                  args->output_lists[0], &error);
    if (error) return error;
    if (run) return execute_direct(program, args, devices[0], run);
  }
  /* Kiln's Python reads the arguments' data now. */
  PJRT_Error *error = wait_for_arguments(args);
  if (error) return error;
  PyGILState_STATE gil = PyGILState_Ensure();
  error = execute_locked(program, args, devices);
  PyGILState_Release(gil);
  if (error) return error;
  consume_donations(program, args);
  /* This path is synchronous: every device is done now. */
  if (args->device_complete_events)
    for (size_t d = 0; d < args->num_devices; d++)
      args->device_complete_events[d] = kiln_pjrt_event_ready(NULL);
  return NULL;
}

/* ---- metadata accessors ---- */
const char *kiln_program_name(const KilnProgram *p) { return p->name; }
const char *kiln_program_fingerprint(const KilnProgram *p) { return p->fingerprint; }
size_t kiln_program_num_outputs(const KilnProgram *p) { return p->num_outputs; }
size_t kiln_program_num_replicas(const KilnProgram *p) { return p->num_replicas; }
size_t kiln_program_num_partitions(const KilnProgram *p) { return p->num_partitions; }
PJRT_Buffer_Type *kiln_program_output_types(KilnProgram *p) { return p->output_types; }
const int64_t *kiln_program_output_dims(const KilnProgram *p) { return p->output_dims; }
const size_t *kiln_program_output_ranks(const KilnProgram *p) { return p->output_ranks; }
const char *const *kiln_program_memory_kinds(const KilnProgram *p) { return p->memory_kinds; }
const size_t *kiln_program_memory_kind_sizes(const KilnProgram *p) { return p->memory_kind_sizes; }
const char *kiln_program_device_assignment(const KilnProgram *p, size_t *size) {
  *size = p->device_assignment_size;
  return p->device_assignment;
}
size_t kiln_program_num_addressable(const KilnProgram *p) { return p->num_addressable; }
PJRT_Device *const *kiln_program_devices(const KilnProgram *p) { return p->devices; }
const PJRT_LogicalDeviceIds *kiln_program_logical_ids(const KilnProgram *p) {
  return p->logical_ids;
}
int64_t kiln_program_code_size(const KilnProgram *p) { return p->code_size; }
const KilnShardings *kiln_program_parameter_shardings(const KilnProgram *p) {
  return &p->parameter_shardings;
}
const KilnShardings *kiln_program_output_shardings(const KilnProgram *p) {
  return &p->output_shardings;
}
