/* mid_large_mt.c — workload 4: -t threads, each with its own working set of `ws` slots, replace random
 * slots with blocks of 8..32 KiB (the medium tier), touching the first and last byte of each block.
 * usage: mid_large_mt [-t N] [cycles] [ws] [min] [max] [seed]   (defaults 2 threads, 1M per thread, 256, 8K, 32K, 11) */
#include "common.h"

#include <pthread.h>
#include <stdlib.h>

struct worker {
  pthread_t tid;
  uint64_t cycles, ws, min, max, rng, ops;
  struct hist *h;
};

static pthread_barrier_t go;

static void *worker_main(void *arg) {
  struct worker *w = arg;
  void **slot = calloc(w->ws, sizeof *slot);
  if (slot == NULL) bench_die("out of memory");
  struct hist *h = w->h;
  pthread_barrier_wait(&go);
  uint64_t i = 0;
  while (i < w->cycles) {
    uint64_t k = rng_below(&w->rng, w->ws);
    if (slot[k] != NULL) {
      BENCH_TIMED(h, free(slot[k]));
      slot[k] = NULL;
    } else {
      size_t size = (size_t)rng_range(&w->rng, w->min, w->max);
      char *p;
      BENCH_TIMED(h, p = malloc(size));
      if (p == NULL) bench_die("malloc(%zu) failed", size);
      p[0] = 1;
      p[size - 1] = 2;
      slot[k] = p;
    }
    if ((++i & 255) == 0 && bench_tick(256)) break;
  }
  w->ops = i;
  for (uint64_t k = 0; k < w->ws; k++) free(slot[k]);
  free(slot);
  return NULL;
}

int main(int argc, char **argv) {
  bench_init("mid_large_mt", argc, argv, 2, "mid_large_mt [-t N] [cycles] [ws] [min] [max] [seed]");
  uint64_t cycles = bench_arg(0, 1000000);
  uint64_t ws = bench_arg(1, 256);
  uint64_t min = bench_arg(2, 8 << 10);
  uint64_t max = bench_arg(3, 32 << 10);
  uint64_t seed = bench_arg(4, 11);
  if (ws == 0 || min == 0 || min > max) bench_die("need ws > 0 and 0 < min <= max");

  int t = bench.threads;
  struct worker *w = calloc((size_t)t, sizeof *w);
  if (w == NULL) bench_die("out of memory");
  pthread_barrier_init(&go, NULL, (unsigned)t + 1);
  for (int i = 0; i < t; i++) {
    w[i] = (struct worker){.cycles = bench_limit(cycles), .ws = ws, .min = min, .max = max,
                           .rng = seed * 7919u + (uint64_t)i, .h = bench_hist_new()};
    if (pthread_create(&w[i].tid, NULL, worker_main, &w[i]) != 0) bench_die("pthread_create failed");
  }
  pthread_barrier_wait(&go);
  bench_start();
  uint64_t total = 0;
  for (int i = 0; i < t; i++) {
    pthread_join(w[i].tid, NULL);
    total += w[i].ops;
  }
  bench_stop();
  for (int i = 0; i < t; i++) bench_hist_merge(w[i].h);
  bench_report(total, "ws=%llu min=%llu max=%llu", (unsigned long long)ws, (unsigned long long)min,
               (unsigned long long)max);
  free(w);
  return 0;
}
