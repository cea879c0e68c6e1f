/* What the runtime's translation units share about one running program (KilnInvoke): where
 * to jump when it must stop, and the temporaries it still holds, so that stopping it early
 * (a failed custom call, an allocation that cannot be met, Ctrl-C) frees them. Internal to
 * libkiln_runtime; not installed. */
#ifndef KILN_INVOCATION_H_
#define KILN_INVOCATION_H_

#include <setjmp.h>
#include <stddef.h>

#include "kiln/custom_call.h"

/* KilnInvoke's results besides 0 (finished). */
enum { KILN_STOPPED_BY_CUSTOM_CALL = 1, KILN_STOPPED_OUT_OF_MEMORY = 2,
       KILN_STOPPED_BY_INTERRUPT = 3, KILN_STOPPED_BY_RUNTIME_CHECK = 4,
       KILN_STOPPED_BY_TIME_LIMIT = 5 };

typedef struct KilnInvocation {
  jmp_buf jump;
  XlaCustomCallStatus* status;
  int reason;        /* why it stopped: one of the KILN_STOPPED_* values */
  void* allocations; /* the pool's list of blocks this invocation allocated and still holds */
  double deadline;   /* CLOCK_MONOTONIC seconds after which it stops; 0: no limit */
} KilnInvocation;

/* The innermost invocation of the calling thread, or NULL (e.g. on a parallel-for worker). */
KilnInvocation* kiln_current_invocation(void);
/* Record `message` in the invocation's status and jump back to its KilnInvoke. */
_Noreturn void kiln_invocation_stop(KilnInvocation* invocation, int reason, const char* message);
/* Nonzero while the calling thread runs a chunk of a parallel-for (kiln_parallel.c). */
extern _Thread_local int kiln_in_parallel_for;
/* Free every block still on an invocation's list (kiln_parallel.c). */
void kiln_pool_release(void** allocations);

#endif /* KILN_INVOCATION_H_ */
