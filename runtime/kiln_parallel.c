/* Kiln's buffer pool for compiled programs' temporaries (XLA: buffer assignment's role).
 *
 * Generated code allocates its temporary buffers with memref.alloc; lowered with
 * `finalize-memref-to-llvm{use-generic-functions}` those become calls to the two functions
 * below instead of malloc/free. Large blocks (>= KILN_POOL_MIN bytes) are kept on free after
 * use and handed out again to the next request of a fitting size, so that a program called
 * repeatedly stops mapping and faulting in fresh pages on every call (measured: 8-10% of a
 * training step's time went to the kernel clearing pages), and, within one call, a buffer
 * whose last use has passed (its dealloc) is reused by a later allocation: memory is reused
 * by liveness, at run time. The pool also counts live bytes and their peak, which
 * `kiln bench` reports. Thread-safe (one mutex; calls are few and large).
 *
 * Every block handed out while a program runs is also on its invocation's list
 * (kiln_invocation.h), so a program stopped early (failed custom call, Ctrl-C) leaves no
 * temporary behind; an allocation that cannot be met stops the program instead of handing
 * compiled code a NULL to write through.
 *
 * Environment: KILN_POOL_MB caps the bytes kept cached (default 512; 0 disables caching).
 * KILN_MAX_BUFFER_BYTES caps one buffer (default: physical memory): a larger request stops
 * the program like one that cannot be met (lowering/size_limits.py checks static shapes
 * against the same limit at compile time). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln_invocation.h"
#include "kiln_kernels.h"

#define KILN_POOL_MIN (64u * 1024u)
#define KILN_POOL_SLOTS 64
#define KILN_HEADER 64                      /* keeps the user pointer cache-line aligned */
#define KILN_MAGIC 0x6b696c6e706f6f6cULL  /* "kilnpool" */

typedef struct kiln_block {
  size_t capacity;                   /* usable bytes after the header */
  struct kiln_block *prev, *next;    /* on an invocation's list while handed out */
  void** owner;                      /* that list's head, or NULL */
  uint64_t magic;                    /* last 8 bytes before the user pointer */
} kiln_block;

_Static_assert(sizeof(kiln_block) <= KILN_HEADER, "the block header must fit before the data");

/* List operations: under pool_lock. */
static void link_block(kiln_block* h, void** owner) {
  h->owner = owner;
  h->prev = NULL;
  h->next = owner ? (kiln_block*)*owner : NULL;
  if (!owner) return;
  if (h->next) h->next->prev = h;
  *owner = h;
}

static void unlink_block(kiln_block* h) {
  if (!h->owner) return;
  if (h->prev) h->prev->next = h->next;
  else *h->owner = h->next;
  if (h->next) h->next->prev = h->prev;
  h->owner = NULL;
}

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static void* cached[KILN_POOL_SLOTS]; /* user pointers of free blocks */
static size_t cached_bytes, live_bytes, peak_bytes;
static long long cache_limit = -1;

static kiln_block* header_of(void* user) {
  return (kiln_block*)((char*)user - sizeof(kiln_block));
}

static size_t limit_bytes(void) {
  if (cache_limit < 0) {
    const char* env = getenv("KILN_POOL_MB");
    long long mb = env ? atoll(env) : 512;
    cache_limit = mb < 0 ? 0 : mb * 1024 * 1024;
  }
  return (size_t)cache_limit;
}

/* KILN_MAX_BUFFER_BYTES, else physical memory; read once (racing first reads agree). */
static size_t max_buffer_bytes(void) {
  static size_t limit = 0;
  if (limit == 0) {
    const char* env = getenv("KILN_MAX_BUFFER_BYTES");
    long long value = env ? atoll(env) : 0;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t physical = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : (size_t)1 << 62;
    limit = value > 0 ? (size_t)value : physical;
    if (limit > ((size_t)1 << 62)) limit = (size_t)1 << 62; /* keeps the rounding below exact */
  }
  return limit;
}

void* _mlir_memref_to_llvm_alloc(size_t size) {
  KilnInvocation* invocation = kiln_current_invocation();
  void** owner = invocation ? &invocation->allocations : NULL;
  if (size > max_buffer_bytes()) {
    char message[200];
    snprintf(message, sizeof message,
             "out of memory: a temporary buffer of %zu bytes exceeds KILN_MAX_BUFFER_BYTES "
             "(%zu bytes; default: physical memory)", size, max_buffer_bytes());
    if (invocation) kiln_invocation_stop(invocation, KILN_STOPPED_OUT_OF_MEMORY, message);
    fprintf(stderr, "kiln: %s (on a worker thread)\n", message);
    abort(); /* a parallel-for worker cannot unwind the program; never write past a block */
  }
  size_t capacity = size < KILN_POOL_MIN ? size : (size + 4095) & ~(size_t)4095;
  void* user = NULL;
  pthread_mutex_lock(&pool_lock);
  if (size >= KILN_POOL_MIN) {
    /* smallest cached block that fits without wasting more than a quarter */
    int best = -1;
    for (int i = 0; i < KILN_POOL_SLOTS; i++) {
      if (!cached[i]) continue;
      size_t c = header_of(cached[i])->capacity;
      if (c >= size && c - size <= size / 4 &&
          (best < 0 || c < header_of(cached[best])->capacity))
        best = i;
    }
    if (best >= 0) {
      user = cached[best];
      cached[best] = NULL;
      cached_bytes -= header_of(user)->capacity;
    }
  }
  if (user) {
    capacity = header_of(user)->capacity;
  } else {
    pthread_mutex_unlock(&pool_lock);
    char* raw = (char*)aligned_alloc(KILN_HEADER, KILN_HEADER + ((capacity + 63) & ~(size_t)63));
    if (!raw) {
      char message[160];
      snprintf(message, sizeof message,
               "out of memory: a temporary buffer of %zu bytes could not be allocated", size);
      if (invocation) kiln_invocation_stop(invocation, KILN_STOPPED_OUT_OF_MEMORY, message);
      fprintf(stderr, "kiln: %s (on a worker thread)\n", message);
      abort(); /* a parallel-for worker cannot unwind the program; never write through NULL */
    }
    user = raw + KILN_HEADER;
    header_of(user)->capacity = capacity;
    header_of(user)->magic = KILN_MAGIC;
    pthread_mutex_lock(&pool_lock);
  }
  live_bytes += capacity;
  if (live_bytes > peak_bytes) peak_bytes = live_bytes;
  link_block(header_of(user), owner);
  pthread_mutex_unlock(&pool_lock);
  return user;
}

void _mlir_memref_to_llvm_free(void* user) {
  if (!user) return;
  kiln_block* h = header_of(user);
  if (h->magic != KILN_MAGIC) { /* not ours (e.g. a library's malloc): plain free */
    free(user);
    return;
  }
  size_t capacity = h->capacity;
  pthread_mutex_lock(&pool_lock);
  unlink_block(h);
  live_bytes -= capacity;
  if (capacity >= KILN_POOL_MIN && cached_bytes + capacity <= limit_bytes()) {
    for (int i = 0; i < KILN_POOL_SLOTS; i++) {
      if (!cached[i]) {
        cached[i] = user;
        cached_bytes += capacity;
        pthread_mutex_unlock(&pool_lock);
        return;
      }
    }
  }
  pthread_mutex_unlock(&pool_lock);
  free((char*)user - KILN_HEADER);
}

void kiln_pool_release(void** allocations) {
  for (;;) {
    pthread_mutex_lock(&pool_lock);
    kiln_block* h = (kiln_block*)*allocations;
    pthread_mutex_unlock(&pool_lock);
    if (!h) return;
    _mlir_memref_to_llvm_free((char*)h + sizeof(kiln_block)); /* unlinks it */
  }
}

/* stats[0..2] = live bytes, peak live bytes since the last reset, bytes cached free. */
void KilnPoolStats(int64_t* stats) {
  pthread_mutex_lock(&pool_lock);
  stats[0] = (int64_t)live_bytes;
  stats[1] = (int64_t)peak_bytes;
  stats[2] = (int64_t)cached_bytes;
  pthread_mutex_unlock(&pool_lock);
}

void KilnPoolResetPeak(void) {
  pthread_mutex_lock(&pool_lock);
  peak_bytes = live_bytes;
  pthread_mutex_unlock(&pool_lock);
}

/* Return every cached block to the system. */
void KilnPoolTrim(void) {
  pthread_mutex_lock(&pool_lock);
  for (int i = 0; i < KILN_POOL_SLOTS; i++) {
    if (cached[i]) {
      free((char*)cached[i] - KILN_HEADER);
      cached[i] = NULL;
    }
  }
  cached_bytes = 0;
  pthread_mutex_unlock(&pool_lock);
}

/* ---------------------------------------------------------------------------------------
 * Parallel-for for compiled programs: a large elementwise or row-wise linalg op is outlined
 * into body(ctx, begin, end) over its outermost dimension (kiln.passes.codegen.parallel)
 * and run here on all cores, in up to CHUNKS_PER_THREAD chunks per thread. KILN_NUM_THREADS
 * overrides the core count; workers start on first use.
 *
 * Chunks are claimed, not assigned: the caller runs chunk 0, then claims whatever chunk no
 * worker has claimed yet, and waits only for chunks a worker is actually running. A worker
 * that wakes after the caller took its chunk claims nothing and touches nothing of the
 * caller's (ctx may be gone). Before, the caller waited for every worker to wake even when
 * it had done all the work: 80-100 us per call on the shared VM, more than a small product
 * takes alone, so products inside loops (an RNN's step) stayed on one core.
 *
 * After a job started by kiln_parallel_for_then_spin (the small products of a loop's step,
 * kiln_sgemm_small.c) a worker spins for SPIN_NS before it sleeps on the condition variable,
 * so the loop's next product finds it awake (a scan's steps are tens of microseconds apart;
 * waking a sleeper costs as much as such a product). After other jobs it sleeps at once:
 * a worker spinning after a large elementwise op kept OpenBLAS's thread off its core for
 * the product that follows (transformer, 2 cores: 1.15x -> 1.0x XLA). The caller spins for
 * a worker's chunk to finish before it sleeps too. Spinning is bounded and pauses the core
 * (the machine is shared); KILN_SPIN_US overrides the window (0: sleep at once). */
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

typedef void (*kiln_body)(void* ctx, int64_t begin, int64_t end);

#define KILN_MAX_THREADS 64
#define CHUNKS_PER_THREAD 4
#define MAX_CHUNKS 0xFFFF   /* the ticket's chunk field */
#define SPIN_NS 200000   /* 200 us: the gaps between an RNN step's products, with margin */

static pthread_mutex_t par_lock = PTHREAD_MUTEX_INITIALIZER;   /* one parallel-for at a time */
static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t job_ready = PTHREAD_COND_INITIALIZER;
static pthread_cond_t job_done = PTHREAD_COND_INITIALIZER;
static int n_threads = 0;           /* including the caller; 0 until initialised */
static int64_t spin_ns = -1;
/* The job, one word: epoch (bits 32-63, new per job), chunk count (16-31), next unclaimed
 * chunk (0-15). A claim is a compare-and-swap on it, so a claim for a finished job fails. */
static _Atomic uint64_t job_ticket;
static _Atomic int64_t job_finished;   /* chunks run to the end */
static kiln_body job_body;            /* these three: written before the ticket is published */
static void* job_ctx;
static int64_t job_n;
static _Atomic int job_spin;          /* workers spin after this job (see above) */
static int sleepers;                  /* workers waiting on job_ready (under job_lock) */
static int caller_sleeping;           /* the caller waits on job_done (under job_lock) */

static uint32_t epoch_of(uint64_t ticket) { return (uint32_t)(ticket >> 32); }
static int64_t chunks_of(uint64_t ticket) { return (int64_t)((ticket >> 16) & 0xFFFF); }

uint64_t kiln_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void pause_core(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Spin until `done(arg)` holds or the spin window has passed; returns whether it holds. */
static int spin_until(int (*done)(const void*), const void* arg) {
  uint64_t start = 0;
  for (uint32_t i = 0;; i++) {
    if (done(arg)) return 1;
    if ((i & 31) == 0) {   /* the clock every 32 pauses: about a microsecond */
      uint64_t t = kiln_now_ns();
      if (!start) start = t;
      else if (t - start >= (uint64_t)spin_ns) return done(arg);
    }
    pause_core();
  }
}

/* The next unclaimed chunk of job `epoch`, or -1 (none left, or a later job). */
static int64_t claim(uint32_t epoch, int64_t* chunks) {
  uint64_t t = atomic_load_explicit(&job_ticket, memory_order_acquire);
  for (;;) {
    int64_t next = (int64_t)(t & 0xFFFF);
    if (epoch_of(t) != epoch || next >= chunks_of(t)) return -1;
    if (atomic_compare_exchange_weak_explicit(&job_ticket, &t, t + 1, memory_order_acq_rel,
                                              memory_order_acquire)) {
      *chunks = chunks_of(t);
      return next;
    }
  }
}

static void run_chunk(int64_t chunk, int64_t chunks) {
  int64_t begin = job_n * chunk / chunks, end = job_n * (chunk + 1) / chunks;
  if (begin < end) job_body(job_ctx, begin, end);
}

/* A chunk is done; the last one wakes the caller if it sleeps. */
static void finish_chunk(int64_t chunks) {
  if (atomic_fetch_add_explicit(&job_finished, 1, memory_order_acq_rel) + 1 < chunks) return;
  pthread_mutex_lock(&job_lock);
  if (caller_sleeping) pthread_cond_signal(&job_done);
  pthread_mutex_unlock(&job_lock);
}

static int epoch_moved(const void* seen) {
  return epoch_of(atomic_load_explicit(&job_ticket, memory_order_acquire)) != *(const uint32_t*)seen;
}

static void* worker(void* arg) {
  (void)arg;
  uint32_t seen = 0;
  int spin = 0;
  for (;;) {
    if (!spin || !spin_until(epoch_moved, &seen)) {
      pthread_mutex_lock(&job_lock);
      sleepers++;
      while (!epoch_moved(&seen)) pthread_cond_wait(&job_ready, &job_lock);
      sleepers--;
      pthread_mutex_unlock(&job_lock);
    }
    seen = epoch_of(atomic_load_explicit(&job_ticket, memory_order_acquire));
    int64_t chunk, chunks;
    while ((chunk = claim(seen, &chunks)) >= 0) {
      run_chunk(chunk, chunks);
      finish_chunk(chunks);
    }
    spin = atomic_load_explicit(&job_spin, memory_order_relaxed);
  }
  return NULL;
}

static void start_pool(void) {
  const char* env = getenv("KILN_NUM_THREADS");
  long n = env ? atol(env) : sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) n = 1;
  if (n > KILN_MAX_THREADS) n = KILN_MAX_THREADS;
  const char* spin = getenv("KILN_SPIN_US");
  spin_ns = spin ? (atoll(spin) > 0 ? atoll(spin) * 1000 : 0) : SPIN_NS;
  n_threads = 1;
  for (long i = 1; i < n; i++) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, worker, (void*)(intptr_t)i) == 0) n_threads++;
    pthread_attr_destroy(&attr);
  }
}

int64_t KilnNumThreads(void) {
  pthread_mutex_lock(&par_lock);
  if (!n_threads) start_pool();
  int64_t n = n_threads;
  pthread_mutex_unlock(&par_lock);
  return n;
}

/* Set while this thread runs a parallel-for: kiln_check_interrupt must not jump out of it
 * while workers still run chunks of the same body. */
_Thread_local int kiln_in_parallel_for = 0;

static void run_body(kiln_body body, void* ctx, int64_t begin, int64_t end) {
  kiln_in_parallel_for++;
  body(ctx, begin, end);
  kiln_in_parallel_for--;
}

static int all_finished(const void* chunks) {
  return atomic_load_explicit(&job_finished, memory_order_acquire) >= *(const int64_t*)chunks;
}

/* per_thread: at most that many chunks per thread; 0: each of the n items its own chunk. */
static void parallel_for(kiln_body body, void* ctx, int64_t n, int spin_after,
                         int64_t per_thread) {
  if (n <= 0) return;
  /* A parallel-for already running (another thread, or nested): run serially. */
  if (pthread_mutex_trylock(&par_lock) != 0) {
    run_body(body, ctx, 0, n);
    return;
  }
  if (!n_threads) start_pool();
  /* More chunks than threads (but for a loop's small products, which come back soon): a
   * thread the system takes off its core mid-chunk holds up only that chunk, the others
   * claim the rest (on a shared machine the difference is 2-3x; see kiln_gemm_pooled.c). */
  int64_t most = per_thread ? n_threads * per_thread : MAX_CHUNKS;
  int64_t chunks = n < most ? n : most;
  if (chunks <= 1) {
    pthread_mutex_unlock(&par_lock);
    run_body(body, ctx, 0, n);
    return;
  }
  /* Publish the job with chunk 0 already claimed by the caller. */
  pthread_mutex_lock(&job_lock);
  job_body = body;
  job_ctx = ctx;
  job_n = n;
  atomic_store_explicit(&job_spin, spin_after, memory_order_relaxed);
  atomic_store_explicit(&job_finished, 0, memory_order_relaxed);
  uint32_t epoch = epoch_of(atomic_load_explicit(&job_ticket, memory_order_relaxed)) + 1;
  if (epoch == 0) epoch = 1;   /* workers start having seen epoch 0 */
  atomic_store_explicit(&job_ticket, ((uint64_t)epoch << 32) | ((uint64_t)chunks << 16) | 1,
                        memory_order_release);
  if (sleepers) pthread_cond_broadcast(&job_ready);
  pthread_mutex_unlock(&job_lock);
  kiln_in_parallel_for++;
  run_chunk(0, chunks);
  atomic_fetch_add_explicit(&job_finished, 1, memory_order_acq_rel);
  int64_t chunk, claimed_chunks;
  while ((chunk = claim(epoch, &claimed_chunks)) >= 0) {   /* what no worker has taken */
    run_chunk(chunk, chunks);
    atomic_fetch_add_explicit(&job_finished, 1, memory_order_acq_rel);
  }
  kiln_in_parallel_for--;
  if (!spin_until(all_finished, &chunks)) {
    pthread_mutex_lock(&job_lock);
    caller_sleeping = 1;
    while (!all_finished(&chunks)) pthread_cond_wait(&job_done, &job_lock);
    caller_sleeping = 0;
    pthread_mutex_unlock(&job_lock);
  }
  pthread_mutex_unlock(&par_lock);
}

void kiln_parallel_for(kiln_body body, void* ctx, int64_t n) {
  parallel_for(body, ctx, n, 0, CHUNKS_PER_THREAD);
}

/* The same, for small jobs that come back soon (a loop's products): workers spin after it. */
void kiln_parallel_for_then_spin(kiln_body body, void* ctx, int64_t n) {
  parallel_for(body, ctx, n, 1, 1);
}

/* Each of n pieces its own chunk (up to MAX_CHUNKS), and the workers spin after it: a
 * program's products come back to back (kiln_gemm_pooled.c). */
void kiln_parallel_pieces(kiln_body body, void* ctx, int64_t n) {
  parallel_for(body, ctx, n, 1, 0);
}

/* ---------------------------------------------------------------------------------------
 * OpenBLAS on the calling thread only, for the BLAS calls Kiln's generated code keeps off
 * OpenBLAS's own threads (small products; each chunk of a convolution plan on Kiln's pool).
 * Generated code calls `prev = kiln_blas_set_threads(1)` before and
 * `kiln_blas_set_threads(prev)` after. `openblas_set_num_threads_local` changes the
 * process-wide count in the OpenBLAS that numpy bundles, so pool chunks or device threads
 * saving and restoring it each on their own race, and left it at 1 for the whole process
 * (a transformer ran 44 -> 62 ms after a conv net had run). Here the scopes are counted:
 * the first to enter saves the count, every one sets 1 (the setting may be per thread), the
 * last to leave restores it. Entering returns KILN_BLAS_LEAVE, which leaves when passed back. */
typedef int (*kiln_blas_threads_fn)(int);
static kiln_blas_threads_fn blas_set_threads_local;   /* bound by KilnBindBlasThreads */
static pthread_mutex_t blas_threads_lock = PTHREAD_MUTEX_INITIALIZER;
static int blas_scopes = 0, blas_saved_threads = 0;
#define KILN_BLAS_LEAVE (-1)

void KilnBindBlasThreads(void* set_num_threads_local) {
  blas_set_threads_local = (kiln_blas_threads_fn)set_num_threads_local;
}

int32_t kiln_blas_set_threads(int32_t threads) {
  if (!blas_set_threads_local) return KILN_BLAS_LEAVE;
  pthread_mutex_lock(&blas_threads_lock);
  if (threads == KILN_BLAS_LEAVE) {
    if (blas_scopes > 0 && --blas_scopes == 0) blas_set_threads_local(blas_saved_threads);
  } else {
    int previous = blas_set_threads_local(threads);
    if (blas_scopes++ == 0) blas_saved_threads = previous;
  }
  pthread_mutex_unlock(&blas_threads_lock);
  return KILN_BLAS_LEAVE;
}
