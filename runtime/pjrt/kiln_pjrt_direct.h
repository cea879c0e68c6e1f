/* The plugin's execute path without Python (kiln_pjrt_direct.c), used by kiln_pjrt_python.c,
 * and what it uses of that file. Include after Python.h. */
#ifndef KILN_PJRT_DIRECT_H_
#define KILN_PJRT_DIRECT_H_

#include "kiln_pjrt_internal.h"

typedef struct KilnDirectCall KilnDirectCall;

/* From kiln_pjrt_python.c: whether Kiln's Python can be called (initialized, not shutting
 * down); under the GIL, the PJRT error for the Python exception in flight (cleared), and for
 * a bridge.Failure (NULL for anything else). */
bool kiln_pjrt_python_usable(void);
PJRT_Error *kiln_pjrt_python_error(const char *what);
PJRT_Error *kiln_pjrt_failure(PyObject *result);

/* The plan of bridge.Program `program` (its native_call), or NULL when it has none; under the
 * GIL, leaves no Python error set. */
KilnDirectCall *kiln_pjrt_direct_read(PyObject *program, size_t num_outputs);
void kiln_pjrt_direct_free(KilnDirectCall *call);
/* A run of the plan on one device's arguments, in three steps.
 * prepare: NULL with *error NULL when the arguments are not the ones the plan was made for
 *   (nothing done; the Python path explains); NULL with *error set on failure; else the run,
 *   with `outputs` filled with its result buffers (not written yet).
 * run: calls the program without the GIL (it takes it only to explain a run that stopped
 *   early); its error or NULL.
 * finish: frees what the run made, and its result buffers too unless `handed_out` (the
 *   outputs went to the framework). */
typedef struct KilnDirectRun KilnDirectRun;
KilnDirectRun *kiln_pjrt_direct_prepare(const KilnDirectCall *call, PJRT_Device *device,
                                        PJRT_Buffer *const *arguments, size_t num_args,
                                        PJRT_Buffer **outputs, PJRT_Error **error);
PJRT_Error *kiln_pjrt_direct_run(KilnDirectRun *run, PyObject *program);
void kiln_pjrt_direct_finish(KilnDirectRun *run, bool handed_out);

#endif /* KILN_PJRT_DIRECT_H_ */
