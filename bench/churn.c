/* churn.c — workload 9: generations of short-lived threads. In each generation -t threads are created; thread
 * i frees the survivors that thread i of the previous generation left behind (their owner has exited),
 * allocates `objects` new blocks, frees half of them at once and leaves the other half to survive it.
 * usage: churn [-t N] [generations] [objects] [min] [max] [seed]   (defaults 2 threads, 300, 4000, 16, 2048, 9) */
#include "common.h"

#include <pthread.h>
#include <stdlib.h>

struct lane {
  pthread_t tid;
  void **survivor; /* objects / 2 blocks left by the previous generation */
  uint64_t objects, min, max, rng, ops;
  void **fresh;    /* scratch array of `objects` pointers */
  struct hist *h;
};

static void *generation_main(void *arg) {
  struct lane *l = arg;
  struct hist *h = l->h;
  uint64_t keep = l->objects / 2;
  for (uint64_t k = 0; k < keep; k++) {
    if (l->survivor[k] == NULL) continue;
    BENCH_TIMED(h, free(l->survivor[k]));
    l->ops++;
  }
  for (uint64_t k = 0; k < l->objects; k++) {
    size_t size = (size_t)rng_range(&l->rng, l->min, l->max);
    char *p;
    BENCH_TIMED(h, p = malloc(size));
    if (p == NULL) bench_die("malloc(%zu) failed", size);
    p[0] = (char)k;
    l->fresh[k] = p;
  }
  /* Free the odd ones now, keep the even ones for the next generation. */
  for (uint64_t k = 0; k < l->objects; k++) {
    if (k & 1) BENCH_TIMED(h, free(l->fresh[k]));
    else if (k / 2 < keep) l->survivor[k / 2] = l->fresh[k];
    else BENCH_TIMED(h, free(l->fresh[k]));
  }
  l->ops += 2 * l->objects - keep;
  bench_tick(2 * l->objects);
  return NULL;
}

int main(int argc, char **argv) {
  bench_init("churn", argc, argv, 2, "churn [-t N] [generations] [objects] [min] [max] [seed]");
  uint64_t generations = bench_arg(0, 300);
  uint64_t objects = bench_arg(1, 4000);
  uint64_t min = bench_arg(2, 16);
  uint64_t max = bench_arg(3, 2048);
  uint64_t seed = bench_arg(4, 9);
  if (objects < 2 || min == 0 || min > max) bench_die("need objects >= 2 and 0 < min <= max");

  int t = bench.threads;
  struct lane *lane = calloc((size_t)t, sizeof *lane);
  if (lane == NULL) bench_die("out of memory");
  for (int i = 0; i < t; i++) {
    lane[i] = (struct lane){.objects = objects, .min = min, .max = max, .rng = seed * 65537u + (uint64_t)i,
                            .h = bench_hist_new()};
    lane[i].survivor = calloc(objects / 2, sizeof(void *));
    lane[i].fresh = calloc(objects, sizeof(void *));
    if (lane[i].survivor == NULL || lane[i].fresh == NULL) bench_die("out of memory");
  }
  uint64_t limit = bench_limit(generations), g = 0;
  bench_start();
  while (g < limit && !bench_stopping()) {
    for (int i = 0; i < t; i++)
      if (pthread_create(&lane[i].tid, NULL, generation_main, &lane[i]) != 0) bench_die("pthread_create failed");
    for (int i = 0; i < t; i++) pthread_join(lane[i].tid, NULL);
    g++;
  }
  bench_stop();
  uint64_t total = 0;
  for (int i = 0; i < t; i++) {
    total += lane[i].ops;
    for (uint64_t k = 0; k < objects / 2; k++) free(lane[i].survivor[k]);
    free(lane[i].survivor);
    free(lane[i].fresh);
    bench_hist_merge(lane[i].h);
  }
  bench_report(total, "generations=%llu objects=%llu threads_created=%llu min=%llu max=%llu", (unsigned long long)g,
               (unsigned long long)objects, (unsigned long long)(g * (uint64_t)t), (unsigned long long)min,
               (unsigned long long)max);
  free(lane);
  return 0;
}
