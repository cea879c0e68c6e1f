/* The plugin's execute path without Python (kiln_pjrt_direct.c), used by kiln_pjrt_python.c,
 * and what it uses of that file. Include after Python.h. */
#ifndef KILN_PJRT_DIRECT_H_
#define KILN_PJRT_DIRECT_H_

#include "kiln_pjrt_internal.h"

typedef struct KilnDirectCall KilnDirectCall;

/* From kiln_pjrt_python.c, under the GIL: the PJRT error for the Python exception in flight
 * (cleared), and for a bridge.Failure (NULL for anything else). */
PJRT_Error *kiln_pjrt_python_error(const char *what);
PJRT_Error *kiln_pjrt_failure(PyObject *result);

/* The plan of bridge.Program `program` (its native_call), or NULL when it has none; under the
 * GIL, leaves no Python error set. */
KilnDirectCall *kiln_pjrt_direct_read(PyObject *program, size_t num_outputs);
void kiln_pjrt_direct_free(KilnDirectCall *call);
/* Runs the plan on one device's arguments without the GIL (it takes it only to explain a
 * run that stopped early). False: the arguments are not the ones the plan was made for, and
 * nothing was done; true: ran, with `outputs` filled or `*error` set. */
bool kiln_pjrt_direct_execute(const KilnDirectCall *call, PyObject *program, PJRT_Device *device,
                              PJRT_Buffer *const *arguments, size_t num_args,
                              PJRT_Buffer **outputs, PJRT_Error **error);

#endif /* KILN_PJRT_DIRECT_H_ */
