/* false_sharing.c — workload 7 (cache-scratch style): the main thread allocates one small object per worker,
 * back to back; each worker writes its object, frees it, and then repeatedly allocates an object of the
 * same size, writes it `writes` times and frees it. An allocator that places different threads' objects in
 * one cache line makes the writes slow. One operation is one write.
 * usage: false_sharing [-t N] [iterations] [writes] [size]   (defaults 2 threads, 20000 per thread, 1000, 8) */
#include "common.h"

#include <pthread.h>
#include <stdlib.h>

struct worker {
  pthread_t tid;
  volatile char *obj;
  uint64_t iterations, writes, size, done;
  struct hist *h;
};

static pthread_barrier_t go;

static void scribble(volatile char *p, uint64_t size, uint64_t writes) {
  for (uint64_t w = 0, j = 0; w < writes; w++) {
    p[j] += 1;
    j = j + 1 == size ? 0 : j + 1;
  }
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  struct hist *h = w->h;
  pthread_barrier_wait(&go);
  volatile char *p = w->obj;
  uint64_t i = 0;
  while (i < w->iterations) {
    scribble(p, w->size, w->writes);
    BENCH_TIMED(h, free((void *)p));
    BENCH_TIMED(h, p = malloc((size_t)w->size));
    if (p == NULL) bench_die("malloc failed");
    if ((++i & 63) == 0 && bench_tick(64 * w->writes)) break;
  }
  free((void *)p);
  w->done = i;
  return NULL;
}

int main(int argc, char **argv) {
  bench_init("false_sharing", argc, argv, 2, "false_sharing [-t N] [iterations] [writes] [size]");
  uint64_t iterations = bench_arg(0, 20000);
  uint64_t writes = bench_arg(1, 1000);
  uint64_t size = bench_arg(2, 8);
  if (size == 0 || writes == 0) bench_die("size and writes must be positive");

  int t = bench.threads;
  struct worker *w = calloc((size_t)t, sizeof *w);
  if (w == NULL) bench_die("out of memory");
  pthread_barrier_init(&go, NULL, (unsigned)t + 1);
  for (int i = 0; i < t; i++) {
    w[i] = (struct worker){.iterations = bench_limit(iterations), .writes = writes, .size = size, .h = bench_hist_new()};
    w[i].obj = malloc((size_t)size);
    if (w[i].obj == NULL) bench_die("malloc failed");
  }
  for (int i = 0; i < t; i++)
    if (pthread_create(&w[i].tid, NULL, worker_main, &w[i]) != 0) bench_die("pthread_create failed");
  pthread_barrier_wait(&go);
  bench_start();
  uint64_t total = 0;
  for (int i = 0; i < t; i++) {
    pthread_join(w[i].tid, NULL);
    total += w[i].done * writes;
  }
  bench_stop();
  for (int i = 0; i < t; i++) bench_hist_merge(w[i].h);
  bench_report(total, "iterations=%llu writes=%llu size=%llu", (unsigned long long)iterations,
               (unsigned long long)writes, (unsigned long long)size);
  free(w);
  return 0;
}
