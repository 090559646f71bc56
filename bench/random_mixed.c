/* random_mixed.c — workload 1: one thread, a working set of `ws` slots; each step picks a random slot and
 * frees it when full or fills it with a block of a random size in [min, max].
 * usage: random_mixed [cycles] [ws] [seed] [min] [max]   (defaults 10M 8192 42 16 1040) */
#include "common.h"

#include <stdlib.h>

int main(int argc, char **argv) {
  bench_init("random_mixed", argc, argv, 1, "random_mixed [cycles] [ws] [seed] [min] [max]");
  uint64_t cycles = bench_arg(0, 10000000);
  uint64_t ws = bench_arg(1, 8192);
  uint64_t seed = bench_arg(2, 42);
  uint64_t min = bench_arg(3, 16);
  uint64_t max = bench_arg(4, 1040);
  if (ws == 0 || min == 0 || min > max) bench_die("need ws > 0 and 0 < min <= max");

  void **slot = calloc(ws, sizeof *slot);
  if (slot == NULL) bench_die("out of memory for %llu slots", (unsigned long long)ws);
  struct hist *h = bench_hist_new();
  uint64_t rng = seed, limit = bench_limit(cycles), i = 0;

  bench_start();
  while (i < limit) {
    uint64_t k = rng_below(&rng, ws);
    if (slot[k] != NULL) {
      BENCH_TIMED(h, free(slot[k]));
      slot[k] = NULL;
    } else {
      size_t size = (size_t)rng_range(&rng, min, max);
      char *p;
      BENCH_TIMED(h, p = malloc(size));
      if (p == NULL) bench_die("malloc(%zu) failed", size);
      p[0] = (char)i;
      p[size - 1] = (char)k;
      slot[k] = p;
    }
    if ((++i & 1023) == 0 && bench_tick(1024)) break;
  }
  bench_stop();

  uint64_t live = 0;
  for (uint64_t k = 0; k < ws; k++) {
    live += slot[k] != NULL;
    free(slot[k]);
  }
  bench_hist_merge(h);
  bench_report(i, "ws=%llu seed=%llu min=%llu max=%llu live_at_end=%llu", (unsigned long long)ws,
               (unsigned long long)seed, (unsigned long long)min, (unsigned long long)max,
               (unsigned long long)live);
  free(slot);
  return 0;
}
