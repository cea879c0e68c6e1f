/* Each device's queue of runs: what makes Execute asynchronous. A device runs its programs in
 * the order they were enqueued, on a thread of its own started at its first queued run, so
 * that a run that reads an earlier run's results finds them written (a run waits for
 * buffers of other devices itself). The framework's thread returns as soon as a run is
 * queued; the buffers' events say when their data is there. */
#include <stdlib.h>

#include "kiln_pjrt_internal.h"

typedef struct Job {
  void (*work)(void *);
  void *arg;
  struct Job *next;
} Job;

struct KilnQueue {
  pthread_mutex_t mutex;
  pthread_cond_t wake;  /* a job arrived, or the queue is closing */
  Job *head, *tail;
  bool running; /* the worker is in a job */
  bool closing;
  bool started;
  pthread_t thread;
};

static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg) {
  KilnQueue *queue = arg;
  pthread_mutex_lock(&queue->mutex);
  for (;;) {
    while (queue->head == NULL && !queue->closing) pthread_cond_wait(&queue->wake, &queue->mutex);
    if (queue->head == NULL) break; /* closing, and nothing left */
    Job *job = queue->head;
    queue->head = job->next;
    if (queue->head == NULL) queue->tail = NULL;
    queue->running = true;
    pthread_mutex_unlock(&queue->mutex);
    job->work(job->arg);
    free(job);
    pthread_mutex_lock(&queue->mutex);
    queue->running = false;
  }
  pthread_mutex_unlock(&queue->mutex);
  return NULL;
}

static KilnQueue *queue_of(PJRT_Device *device) {
  pthread_mutex_lock(&create_lock);
  KilnQueue *queue = device->queue;
  if (queue == NULL) {
    queue = calloc(1, sizeof *queue);
    if (queue != NULL) {
      pthread_mutex_init(&queue->mutex, NULL);
      pthread_cond_init(&queue->wake, NULL);
      device->queue = queue;
    }
  }
  pthread_mutex_unlock(&create_lock);
  return queue;
}

bool kiln_pjrt_queue_push(PJRT_Device *device, void (*work)(void *), void *arg) {
  KilnQueue *queue = queue_of(device);
  Job *job = queue ? malloc(sizeof *job) : NULL;
  if (job == NULL) return false;
  *job = (Job){work, arg, NULL};
  pthread_mutex_lock(&queue->mutex);
  if (!queue->started) {
    if (pthread_create(&queue->thread, NULL, worker, queue) != 0) {
      pthread_mutex_unlock(&queue->mutex);
      free(job);
      return false;
    }
    queue->started = true;
  }
  if (queue->tail) queue->tail->next = job;
  else queue->head = job;
  queue->tail = job;
  pthread_cond_signal(&queue->wake);
  pthread_mutex_unlock(&queue->mutex);
  return true;
}

bool kiln_pjrt_queue_idle(PJRT_Device *device) {
  KilnQueue *queue = device->queue;
  if (queue == NULL) return true;
  pthread_mutex_lock(&queue->mutex);
  bool idle = queue->head == NULL && !queue->running;
  pthread_mutex_unlock(&queue->mutex);
  return idle;
}

void kiln_pjrt_queue_close(PJRT_Device *device) {
  KilnQueue *queue = device->queue;
  if (queue == NULL) return;
  void *gil = kiln_pjrt_gil_release(); /* queued runs may need it to finish */
  pthread_mutex_lock(&queue->mutex);
  queue->closing = true;
  pthread_cond_signal(&queue->wake);
  bool started = queue->started;
  pthread_mutex_unlock(&queue->mutex);
  if (started) pthread_join(queue->thread, NULL);
  kiln_pjrt_gil_restore(gil);
  pthread_mutex_destroy(&queue->mutex);
  pthread_cond_destroy(&queue->wake);
  free(queue);
  device->queue = NULL;
}
