/* larson.c — workload 2, a larson-style server: each of -t lineages owns `slots` live objects of 8..1000
 * bytes and replaces random ones (free + malloc); after each round of `ops` replacements the lineage hands
 * all its live objects to a freshly created thread and the old thread exits.
 * usage: larson [-t N] [rounds] [ops] [slots] [min] [max] [seed]   (defaults 2 lineages, 20 100000 1000 8 1000 7) */
#include "common.h"

#include <pthread.h>
#include <stdlib.h>

struct lineage {
  void **slot;
  uint64_t nslots, rounds_left, ops_per_round, min, max, rng;
  uint64_t ops, threads_created;
  struct hist *h;
};

static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static int running;

static void lineage_finished(void) {
  pthread_mutex_lock(&done_lock);
  running--;
  pthread_cond_signal(&done_cond);
  pthread_mutex_unlock(&done_lock);
}

static void *round_main(void *arg) {
  struct lineage *l = arg;
  struct hist *h = l->h;
  uint64_t n = 0;
  for (; n < l->ops_per_round; n++) {
    uint64_t k = rng_below(&l->rng, l->nslots);
    size_t size = (size_t)rng_range(&l->rng, l->min, l->max);
    char *p;
    BENCH_TIMED(h, free(l->slot[k]));
    BENCH_TIMED(h, p = malloc(size));
    if (p == NULL) bench_die("malloc(%zu) failed", size);
    p[0] = (char)n;
    p[size - 1] = (char)k;
    l->slot[k] = p;
    if ((n & 511) == 511 && bench_tick(1024)) {
      n++;
      break;
    }
  }
  l->ops += 2 * n;
  if (--l->rounds_left == 0 || bench_stopping()) {
    lineage_finished();
    return NULL;
  }
  pthread_attr_t attr;
  pthread_t next;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  l->threads_created++;
  if (pthread_create(&next, &attr, round_main, l) != 0) bench_die("pthread_create failed");
  pthread_attr_destroy(&attr);
  return NULL;
}

int main(int argc, char **argv) {
  bench_init("larson", argc, argv, 2, "larson [-t N] [rounds] [ops] [slots] [min] [max] [seed]");
  uint64_t rounds = bench_arg(0, 20);
  uint64_t ops = bench_arg(1, 100000);
  uint64_t slots = bench_arg(2, 1000);
  uint64_t min = bench_arg(3, 8);
  uint64_t max = bench_arg(4, 1000);
  uint64_t seed = bench_arg(5, 7);
  if (rounds == 0 || ops == 0 || slots == 0 || min == 0 || min > max) bench_die("bad arguments");
  rounds = bench_limit(rounds);

  int t = bench.threads;
  struct lineage *lin = calloc((size_t)t, sizeof *lin);
  if (lin == NULL) bench_die("out of memory");
  for (int i = 0; i < t; i++) {
    struct lineage *l = &lin[i];
    *l = (struct lineage){.nslots = slots, .rounds_left = rounds, .ops_per_round = ops, .min = min, .max = max,
                          .rng = seed * 1000003u + (uint64_t)i, .h = bench_hist_new()};
    l->slot = calloc(slots, sizeof *l->slot);
    if (l->slot == NULL) bench_die("out of memory");
    for (uint64_t k = 0; k < slots; k++) {
      l->slot[k] = malloc((size_t)rng_range(&l->rng, min, max));
      if (l->slot[k] == NULL) bench_die("malloc failed");
    }
  }

  running = t;
  bench_start();
  for (int i = 0; i < t; i++) {
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    lin[i].threads_created = 1;
    if (pthread_create(&th, &attr, round_main, &lin[i]) != 0) bench_die("pthread_create failed");
    pthread_attr_destroy(&attr);
  }
  pthread_mutex_lock(&done_lock);
  while (running > 0) pthread_cond_wait(&done_cond, &done_lock);
  pthread_mutex_unlock(&done_lock);
  bench_stop();

  uint64_t total = 0, threads = 0;
  for (int i = 0; i < t; i++) {
    total += lin[i].ops;
    threads += lin[i].threads_created;
    for (uint64_t k = 0; k < slots; k++) free(lin[i].slot[k]);
    free(lin[i].slot);
    bench_hist_merge(lin[i].h);
  }
  bench_report(total, "slots=%llu min=%llu max=%llu threads_created=%llu", (unsigned long long)slots,
               (unsigned long long)min, (unsigned long long)max, (unsigned long long)threads);
  free(lin);
  return 0;
}
