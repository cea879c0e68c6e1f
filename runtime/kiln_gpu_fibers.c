/* The GPU emulator's thread blocks: every thread of a block is a fiber on one OS thread.
 *
 * The emulator (python/kiln/runtime/gpu_emulator.py) runs the kernels' device LLVM IR on the
 * CPU. Kernels without barriers or warp collectives run their threads one after another;
 * the others call kiln_emu_run_block once per block, which runs each thread as a fiber until
 * it exits or waits at a synchronization point:
 * - kiln_emu_barrier (bar.sync / barrier0): until every live thread of the block arrived;
 * - kiln_emu_warp_shfl / kiln_emu_warp_vote / kiln_emu_warp_sync: until every live lane
 *   named in the mask arrived at the same warp operation, whose values are then exchanged.
 * Fibers switch only there, so ordinary memory accesses (atomics included) need no locking:
 * one OS thread runs them all. On every switch the scheduler writes the resumed thread's
 * special registers (tid.x/y/z, laneid) into the kernel module's state array.
 *
 * Stacks are mmap'd with a guard page below each (an overflow faults instead of corrupting a
 * neighbour) and reused across blocks and launches. Switching is a few instructions on
 * x86-64 (callee-saved registers and the stack pointer); elsewhere ucontext.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* KILN_FIBERS_UCONTEXT forces the portable switch (tests build it that way too). */
#if defined(__x86_64__) && !defined(KILN_FIBERS_UCONTEXT)
#define KILN_FIBER_ASM 1
#else
#define KILN_FIBER_ASM 0
#include <ucontext.h>
#endif

#define KILN_FIBER_STACK (128u * 1024u)
#define KILN_MAX_THREADS 1024u
#define KILN_WARP 32u

/* The kernel module's state slots the scheduler writes (gpu_emulator.py: _STATE_SLOTS). */
enum { SLOT_TID_X = 0, SLOT_TID_Y = 1, SLOT_TID_Z = 2, SLOT_LANEID = 12 };

typedef void (*kiln_emu_thread_fn)(void *params, uint32_t thread);

typedef struct {
#if KILN_FIBER_ASM
  void *sp;
#else
  ucontext_t context;
#endif
  uint32_t done;
  uint32_t warp_generation; /* warp operations this thread passed */
  int32_t registers[4];     /* tid.x, tid.y, tid.z, laneid */
} Fiber;

typedef struct {
  uint32_t values[2][KILN_WARP];  /* by generation parity: a lane may be one ahead */
  uint32_t arrived[2];            /* by parity: lanes arrived at counted_generation[p] */
  uint32_t counted_generation[2];
  uint32_t live;                  /* lanes not exited, as a mask */
} Warp;

typedef struct {
  Fiber *fibers;
  Warp warps[KILN_MAX_THREADS / KILN_WARP];
  uint32_t threads, live, current, progress;
  uint32_t block_x, block_xy;
  int32_t *state;
  kiln_emu_thread_fn fn;
  void *params;
  uint32_t barrier_arrived, barrier_generation;
#if KILN_FIBER_ASM
  void *scheduler_sp;
#else
  ucontext_t scheduler;
#endif
} Block;

/* The block being run by this OS thread (the state lives in kiln_emu_run_block's frame).
   Read on every synchronization: initial-exec TLS is one instruction, where the dynamic
   model calls __tls_get_addr; 8 bytes fit glibc's static TLS reserve for dlopen'd code. */
static __thread Block *running __attribute__((tls_model("initial-exec")));
static __thread char *stacks;            /* KILN_MAX_THREADS stacks, each after a guard page */
static __thread Fiber *fiber_pool;       /* their contexts */

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }
static size_t stride(void) { return KILN_FIBER_STACK + page_size(); }

static int ensure_stacks(void) {
  if (stacks) return 0;
  fiber_pool = calloc(KILN_MAX_THREADS, sizeof(Fiber));
  if (!fiber_pool) return -1;
  size_t total = stride() * KILN_MAX_THREADS;
  void *memory = mmap(NULL, total, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) return -1;
  for (uint32_t i = 0; i < KILN_MAX_THREADS; i++)
    mprotect((char *)memory + i * stride(), page_size(), PROT_NONE);
  stacks = memory;
  return 0;
}

static char *stack_base(uint32_t i) { return stacks + i * stride() + page_size(); }

/* ---- switching ---------------------------------------------------------------------------- */

#if KILN_FIBER_ASM
void kiln_emu_switch(void **save_sp, void *next_sp);
__asm__(".text\n"
        ".globl kiln_emu_switch\n"
        ".type kiln_emu_switch,@function\n"
        "kiln_emu_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size kiln_emu_switch, .-kiln_emu_switch\n");
#endif

static void set_registers(Block *b, uint32_t t) {
  const int32_t *r = b->fibers[t].registers;
  b->current = t;
  b->state[SLOT_TID_X] = r[0];
  b->state[SLOT_TID_Y] = r[1];
  b->state[SLOT_TID_Z] = r[2];
  b->state[SLOT_LANEID] = r[3];
}

/* Back to the scheduler; it resumes this fiber in its next round. */
static void yield(Block *b) {
  Fiber *f = &b->fibers[b->current];
#if KILN_FIBER_ASM
  kiln_emu_switch(&f->sp, b->scheduler_sp);
#else
  swapcontext(&f->context, &b->scheduler);
#endif
}

static void resume(Block *b, uint32_t t) {
  set_registers(b, t);
  Fiber *f = &b->fibers[t];
#if KILN_FIBER_ASM
  kiln_emu_switch(&b->scheduler_sp, f->sp);
#else
  swapcontext(&b->scheduler, &f->context);
#endif
}

static void thread_exit(Block *b) {
  uint32_t t = b->current;
  b->fibers[t].done = 1;
  b->live--;
  b->warps[t / KILN_WARP].live &= ~(1u << (t % KILN_WARP));
  b->progress = 1;
  /* a barrier every remaining thread already waits at is complete now */
  if (b->barrier_arrived && b->barrier_arrived == b->live) {
    b->barrier_arrived = 0;
    b->barrier_generation++;
  }
}

static void fiber_main(void) {
  Block *b = running;
  b->fn(b->params, b->current);
  thread_exit(b);
  yield(b); /* never resumed */
  __builtin_trap();
}

static void start_fiber(Block *b, uint32_t t) {
  Fiber *f = &b->fibers[t];
  f->done = 0;
  f->warp_generation = 0;
  f->registers[0] = (int32_t)(t % b->block_x);
  f->registers[1] = (int32_t)((t / b->block_x) % (b->block_xy / b->block_x));
  f->registers[2] = (int32_t)(t / b->block_xy);
  f->registers[3] = (int32_t)(t % KILN_WARP);
#if KILN_FIBER_ASM
  char *top = stack_base(t) + KILN_FIBER_STACK;
  /* as if kiln_emu_switch had been called from fiber_main's caller: six saved registers,
     then fiber_main as the return address; its own entry sees rsp % 16 == 8 */
  void **sp = (void **)(((uintptr_t)top & ~(uintptr_t)15));
  *--sp = NULL;                 /* fiber_main's return address: it never returns */
  *--sp = (void *)fiber_main;
  for (int i = 0; i < 6; i++) *--sp = NULL;
  f->sp = sp;
#else
  getcontext(&f->context);
  f->context.uc_stack.ss_sp = stack_base(t);
  f->context.uc_stack.ss_size = KILN_FIBER_STACK;
  f->context.uc_link = NULL;
  makecontext(&f->context, fiber_main, 0);
#endif
}

/* ---- the block ---------------------------------------------------------------------------- */

/* Run `threads` threads of one block (block dimensions x, y, z) as fibers: fn(params, t) for
   each linear thread index t. `state` is the kernel module's special-register array.
   0: every thread exited; 1: the threads wait for each other forever (a barrier or warp
   operation some thread never reaches); 2: no memory for the stacks; 3: too many threads. */
int kiln_emu_run_block(uint32_t x, uint32_t y, uint32_t z, int32_t *state,
                       kiln_emu_thread_fn fn, void *params) {
  uint32_t threads = x * y * z;
  if (threads == 0) return 0;
  if (threads > KILN_MAX_THREADS) return 3;
  if (ensure_stacks()) return 2;
  Block block, *b = &block;
  running = b;
  b->fibers = fiber_pool;
  b->threads = b->live = threads;
  b->block_x = x;
  b->block_xy = x * y;
  b->state = state;
  b->fn = fn;
  b->params = params;
  b->barrier_arrived = 0;
  b->barrier_generation = 0;
  for (uint32_t w = 0; w * KILN_WARP < threads; w++) {
    uint32_t lanes = threads - w * KILN_WARP;
    memset(&b->warps[w], 0, sizeof(Warp));
    b->warps[w].live = lanes >= KILN_WARP ? 0xffffffffu : ((1u << lanes) - 1u);
  }
  for (uint32_t t = 0; t < threads; t++) start_fiber(b, t);
  do {
    b->progress = 0;
    for (uint32_t t = 0; t < threads; t++)
      if (!b->fibers[t].done) resume(b, t);
  } while (b->live && b->progress);
  running = NULL;
  return b->live ? 1 : 0;
}

/* bar.sync: wait until every live thread of the block arrived. */
void kiln_emu_barrier(void) {
  Block *b = running;
  uint32_t generation = b->barrier_generation;
  b->progress = 1;
  if (++b->barrier_arrived == b->live) {
    b->barrier_arrived = 0;
    b->barrier_generation++;
    return;
  }
  while (b->barrier_generation == generation) yield(b);
  b->progress = 1;
}

/* Arrive at this lane's next warp operation with `value`; wait until every live lane of
   `mask` arrived at it. Returns the slot array holding the lanes' values. */
static uint32_t *warp_exchange(Block *b, uint32_t mask, uint32_t value) {
  uint32_t t = b->current, lane = t % KILN_WARP;
  Warp *w = &b->warps[t / KILN_WARP];
  uint32_t generation = b->fibers[t].warp_generation++, parity = generation & 1;
  uint32_t *slots = w->values[parity];
  slots[lane] = value;
  if (w->counted_generation[parity] != generation) {
    /* the first lane here: every lane left this parity's previous operation (a lane two
       operations ahead passed the one between, which needed every lane of the mask) */
    w->counted_generation[parity] = generation;
    w->arrived[parity] = 0;
  }
  w->arrived[parity] |= 1u << lane;
  b->progress = 1;
  /* wait until every live lane of the mask arrived; resumed by the scheduler to check */
  while ((w->arrived[parity] & mask & w->live) != (mask & w->live)) yield(b);
  b->progress = 1;
  return slots;
}

void kiln_emu_warp_sync(uint32_t mask) { (void)warp_exchange(running, mask, 0); }

/* shfl.sync (PTX ISA semantics): mode 0 up, 1 down, 2 bfly, 3 idx; `c` packs the clamp
   value (bits 0-4) and the segment mask (bits 8-12). *valid: whether the source lane was in
   range (else the thread's own value). */
uint32_t kiln_emu_warp_shfl(uint32_t mode, uint32_t mask, uint32_t value, uint32_t b_operand,
                            uint32_t c, uint32_t *valid) {
  Block *b = running;
  uint32_t lane = b->current % KILN_WARP;
  uint32_t *slots = warp_exchange(b, mask, value);
  uint32_t bval = b_operand & 31, clamp = c & 31, segmask = (c >> 8) & 31;
  uint32_t max_lane = (lane & segmask) | (clamp & ~segmask);
  uint32_t min_lane = lane & segmask;
  int32_t j;
  int in_range;
  switch (mode) {
  case 0: j = (int32_t)lane - (int32_t)bval; in_range = j >= (int32_t)max_lane; break;
  case 1: j = (int32_t)(lane + bval); in_range = j <= (int32_t)max_lane; break;
  case 2: j = (int32_t)(lane ^ bval); in_range = j <= (int32_t)max_lane; break;
  default: j = (int32_t)(min_lane | (bval & ~segmask)); in_range = j <= (int32_t)max_lane; break;
  }
  if (valid) *valid = (uint32_t)in_range;
  return in_range ? slots[j] : value;
}

/* vote.sync: mode 0 all, 1 any, 2 uni, 3 ballot over the live lanes of `mask`. */
uint32_t kiln_emu_warp_vote(uint32_t mode, uint32_t mask, uint32_t predicate) {
  Block *b = running;
  Warp *w = &b->warps[b->current / KILN_WARP];
  uint32_t *slots = warp_exchange(b, mask, predicate != 0);
  uint32_t need = mask & w->live, ballot = 0;
  for (uint32_t k = 0; k < KILN_WARP; k++)
    if ((need >> k & 1) && slots[k]) ballot |= 1u << k;
  switch (mode) {
  case 0: return ballot == need;
  case 1: return ballot != 0;
  case 2: return ballot == 0 || ballot == need;
  default: return ballot;
  }
}
