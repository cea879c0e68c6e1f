/* Kiln's native runtime library: linked into every JIT-compiled program.
 *
 * It holds the custom-call status API, the registry that XLA_REGISTER_CUSTOM_CALL_TARGET
 * fills, and the dispatcher compiled code calls for each custom call. A failing call stops
 * the computation by longjmp-ing back to KilnInvoke, so no later op (and no output of the
 * failed call) runs; the Python side then raises. Compiled code is plain C-like code without
 * destructors, so unwinding it with longjmp is safe; the temporaries it allocated before
 * stopping are on the invocation's list (kiln_parallel.c) and are freed then. The same jump
 * stops a program whose allocation cannot be met and one interrupted by Ctrl-C. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln/custom_call.h"
#include "kiln/ffi.h"
#include "kiln_invocation.h"

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

/* ---- registry of library targets -------------------------------------------------------- */

static KilnCustomCallRegistration* registrations = NULL;

void KilnRegisterCustomCallTarget(KilnCustomCallRegistration* registration) {
  /* Library constructors run under the dynamic loader's lock, one at a time. */
  registration->next = registrations;
  registrations = registration;
}

KilnCustomCallRegistration* KilnCustomCallRegistrations(void) { return registrations; }

/* ---- call sites and dispatch ------------------------------------------------------------ */

struct KilnCallSite {
  int64_t id;
  void* function;
  int32_t api_version;
  int32_t python;
  char* opaque;
  size_t opaque_len;
  int32_t num_operands;
  int32_t tree_len;
  int32_t num_slots; /* pointer-array entries: `in` plus every tuple */
  int32_t* tree;
  KilnFfiSite* ffi; /* a C handler called through the typed FFI (kiln_ffi.c) */
};

void KilnCallSiteSetFfi(KilnCallSite* site, KilnFfiSite* ffi) { site->ffi = ffi; }

KilnCallSite* KilnCallSiteCreate(int64_t id, void* function, int32_t api_version, int32_t python,
                                 const char* opaque, size_t opaque_len, int32_t num_operands,
                                 const int32_t* tree, int32_t tree_len) {
  KilnCallSite* site = (KilnCallSite*)calloc(1, sizeof(KilnCallSite));
  if (!site) return NULL;
  site->id = id;
  site->function = function;
  site->api_version = api_version;
  site->python = python;
  site->opaque = (char*)malloc(opaque_len + 1);
  site->tree = (int32_t*)malloc(sizeof(int32_t) * (tree_len ? tree_len : 1));
  if (!site->opaque || !site->tree) {
    free(site->opaque);
    free(site->tree);
    free(site);
    return NULL;
  }
  if (opaque_len) memcpy(site->opaque, opaque, opaque_len);
  site->opaque[opaque_len] = '\0';
  site->opaque_len = opaque_len;
  site->num_operands = num_operands;
  if (tree_len) memcpy(site->tree, tree, sizeof(int32_t) * tree_len);
  site->tree_len = tree_len;
  site->num_slots = num_operands;
  for (int32_t i = 0; i < tree_len; ++i)
    if (tree[i] > 0) site->num_slots += tree[i];
  return site;
}

static KilnPythonDispatcher python_dispatcher = NULL;

void KilnSetPythonDispatcher(KilnPythonDispatcher dispatcher) { python_dispatcher = dispatcher; }

static _Thread_local KilnInvocation* current_invocation = NULL;

KilnInvocation* kiln_current_invocation(void) { return current_invocation; }

_Noreturn void kiln_invocation_stop(KilnInvocation* invocation, int reason, const char* message) {
  XlaCustomCallStatusSetFailure(invocation->status, message, strlen(message));
  invocation->reason = reason;
  longjmp(invocation->jump, 1);
}

/* ---- Ctrl-C ------------------------------------------------------------------------------
 * Compiled code runs inside one C call, where Python's own SIGINT handling only sets a flag
 * that is read after the call returns: a `while (true)` would never stop. While any program
 * runs, Kiln's handler also raises `interrupt_requested`, which compiled loops poll through
 * kiln_check_interrupt (the kiln-interrupt-checks pass), then chains to the previous handler
 * so Python still sees the signal. */
static volatile sig_atomic_t interrupt_requested = 0;
static pthread_mutex_t signal_lock = PTHREAD_MUTEX_INITIALIZER;
static int running_programs = 0;
static struct sigaction previous_sigint;

static volatile sig_atomic_t chaining = 0;

static void on_sigint(int signo, siginfo_t* info, void* context) {
  interrupt_requested = 1;
  /* A previous handler that raises the signal again (LLVM's does, after restoring what it
   * replaced) must not bring it back here forever. */
  if (chaining) return;
  chaining = 1;
  if (previous_sigint.sa_flags & SA_SIGINFO) {
    if (previous_sigint.sa_sigaction) previous_sigint.sa_sigaction(signo, info, context);
  } else if (previous_sigint.sa_handler != SIG_DFL && previous_sigint.sa_handler != SIG_IGN) {
    previous_sigint.sa_handler(signo);
  }
  chaining = 0;
}

/* LLVM installs handlers of its own for SIGINT, SIGTERM, SIGSEGV and more the first time it
 * writes a file (its remove-on-signal list), as the ExecutionEngine does when it hands out
 * object code. A compile in the caller's process saves the dispositions before and puts them
 * back after, so the process keeps the handlers it had (Python's, faulthandler's). */
#define KILN_SAVED_SIGNALS 32
static struct sigaction saved_signals[KILN_SAVED_SIGNALS];

void KilnSaveSignalHandlers(void) {
  for (int s = 1; s < KILN_SAVED_SIGNALS; ++s) sigaction(s, NULL, &saved_signals[s]);
}

void KilnRestoreSignalHandlers(void) {
  for (int s = 1; s < KILN_SAVED_SIGNALS; ++s)
    if (s != SIGKILL && s != SIGSTOP) sigaction(s, &saved_signals[s], NULL);
}

static void program_starts(void) {
  pthread_mutex_lock(&signal_lock);
  if (running_programs++ == 0) {
    struct sigaction mine;
    memset(&mine, 0, sizeof mine);
    mine.sa_sigaction = on_sigint;
    mine.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&mine.sa_mask);
    interrupt_requested = 0;
    sigaction(SIGINT, &mine, &previous_sigint);
  }
  pthread_mutex_unlock(&signal_lock);
}

static void program_ends(void) {
  pthread_mutex_lock(&signal_lock);
  if (--running_programs == 0) sigaction(SIGINT, &previous_sigint, NULL);
  pthread_mutex_unlock(&signal_lock);
}

/* ---- the run-time limit ---------------------------------------------------------------
 * A program may loop forever (an untrusted one on purpose): with a limit set
 * (KilnSetRunTimeLimit, from KILN_RUN_TIMEOUT), each KilnInvoke gets a deadline, and the loop
 * polls that already look for Ctrl-C also compare the clock with it. Without a limit the polls
 * read one more flag and nothing else. */
static volatile double run_time_limit = 0; /* seconds; 0: none */

void KilnSetRunTimeLimit(double seconds) { run_time_limit = seconds > 0 ? seconds : 0; }

static double monotonic_seconds(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

void kiln_check_interrupt(void) {
  /* The common case reads two globals and returns: the thread-local invocation is looked up
   * only when there is something to do. */
  if (!interrupt_requested && !(run_time_limit > 0)) return;
  KilnInvocation* invocation = current_invocation;
  /* Only the thread that called KilnInvoke may jump back to it, and not from inside a
   * parallel-for (its workers would run on): the loop polls again after it. */
  if (interrupt_requested) {
    if (invocation && !kiln_in_parallel_for)
      kiln_invocation_stop(invocation, KILN_STOPPED_BY_INTERRUPT, "interrupted");
    return;
  }
  if (invocation && invocation->deadline > 0 && !kiln_in_parallel_for &&
      monotonic_seconds() > invocation->deadline) {
    char message[160];
    snprintf(message, sizeof message,
             "the program ran past its time limit of %g s (KILN_RUN_TIMEOUT)", run_time_limit);
    kiln_invocation_stop(invocation, KILN_STOPPED_BY_TIME_LIMIT, message);
  }
}

/* A run-time guard of the generated code failed (lowering/bounds_guards.py): an index, size or
 * stride the program computed violates its op's constraint. `message` is the address of
 * `length` bytes in the object code's constants (not NUL-terminated) naming the op, its place
 * and the constraint. Guards are never inside a parallel-for (its bodies call nothing), so the
 * calling thread owns the invocation and can jump back to it. */
void kiln_runtime_check_failed(int64_t message, int64_t length) {
  char text[1024];
  size_t n = length < 0 ? 0 : (size_t)length < sizeof text - 1 ? (size_t)length : sizeof text - 1;
  if (n) memcpy(text, (const char*)(intptr_t)message, n);
  text[n] = '\0';
  KilnInvocation* invocation = current_invocation;
  if (!invocation || kiln_in_parallel_for) {
    fprintf(stderr, "kiln: run-time check failed outside KilnInvoke: %s\n", text);
    abort(); /* never continue past a violated bound */
  }
  kiln_invocation_stop(invocation, KILN_STOPPED_BY_RUNTIME_CHECK, text);
}

int KilnInvoke(void (*entry)(void**), void** packed, XlaCustomCallStatus* status) {
  KilnInvocation invocation;
  KilnInvocation* outer = current_invocation;
  invocation.status = status;
  invocation.reason = 0;
  invocation.allocations = NULL;
  double limit = run_time_limit;
  invocation.deadline = limit > 0 ? monotonic_seconds() + limit : 0;
  program_starts();
  current_invocation = &invocation;
  /* The invocation's address is published in current_invocation, so its fields live in
   * memory (not registers) across the jump. */
  if (setjmp(invocation.jump) == 0) entry(packed);
  current_invocation = outer;
  kiln_pool_release(&invocation.allocations); /* empty unless the program stopped early */
  program_ends();
  return invocation.reason;
}

/* Builds the value of tree node `*node` from the leaf pointers, using `slots` for tuples'
 * pointer arrays (the seed's memory picture: a tuple is an array of its elements' pointers). */
static void* build(const KilnCallSite* site, int32_t* node, void** leaves, int32_t* leaf,
                   void** slots, int32_t* slot) {
  int32_t kind = site->tree[(*node)++];
  if (kind < 0) return leaves[(*leaf)++];
  void** tuple = slots + *slot;
  *slot += kind;
  for (int32_t i = 0; i < kind; ++i) tuple[i] = build(site, node, leaves, leaf, slots, slot);
  return tuple;
}

static void fail(XlaCustomCallStatus* status) {
  KilnInvocation* invocation = current_invocation;
  if (!invocation) {
    fprintf(stderr, "kiln: custom call failed outside KilnInvoke: %s\n",
            status->message ? status->message : "");
    abort();
  }
  char* message = status->message;
  status->message = NULL;
  /* The status lives in kiln_custom_call's frame, which the jump abandons: copy it first. */
  XlaCustomCallStatusSetFailure(invocation->status, message ? message : "",
                                message ? strlen(message) : 0);
  free(message);
  invocation->reason = KILN_STOPPED_BY_CUSTOM_CALL;
  longjmp(invocation->jump, 1);
}

void kiln_custom_call(int64_t site_address, int64_t leaves_address) {
  const KilnCallSite* site = (const KilnCallSite*)(intptr_t)site_address;
  void** leaves = (void**)(intptr_t)leaves_address;
  XlaCustomCallStatus status = {0, NULL};
  if (site->python) {
    if (!python_dispatcher) {
      const char* msg = "no Python dispatcher is installed";
      XlaCustomCallStatusSetFailure(&status, msg, strlen(msg));
    } else {
      python_dispatcher(site->id, leaves, &status);
    }
  } else if (site->ffi) {
    kiln_ffi_call(site->ffi, leaves, NULL, &status);
  } else {
    void* slots[site->num_slots > 0 ? site->num_slots : 1];
    int32_t node = 0, leaf = 0, slot = site->num_operands;
    for (int32_t i = 0; i < site->num_operands; ++i)
      slots[i] = build(site, &node, leaves, &leaf, slots, &slot);
    void* out = build(site, &node, leaves, &leaf, slots, &slot);
    const void** in = (const void**)slots;
    switch (site->api_version) {
      case 1:
        ((KilnCpuCustomCallV1)site->function)(out, in);
        break;
      case 2:
        ((KilnCpuCustomCallV2)site->function)(out, in, &status);
        break;
      default:
        ((KilnCpuCustomCallV3)site->function)(out, in, site->opaque, site->opaque_len, &status);
        break;
    }
  }
  if (status.failed) fail(&status);
  free(status.message);
}
