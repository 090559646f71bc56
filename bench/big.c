/* big.c — workload 8: blocks of 5..25 MiB, at most `live` of them at once; each cycle replaces a random one
 * (free, then malloc) and writes one byte every `stride` bytes of the new block.
 * usage: big [cycles] [live] [min] [max] [stride] [seed]   (defaults 2000, 20, 5M, 25M, 64K, 3) */
#include "common.h"

#include <stdlib.h>

int main(int argc, char **argv) {
  bench_init("big", argc, argv, 1, "big [cycles] [live] [min] [max] [stride] [seed]");
  uint64_t cycles = bench_arg(0, 2000);
  uint64_t live = bench_arg(1, 20);
  uint64_t min = bench_arg(2, 5 << 20);
  uint64_t max = bench_arg(3, 25 << 20);
  uint64_t stride = bench_arg(4, 64 << 10);
  uint64_t seed = bench_arg(5, 3);
  if (live == 0 || min == 0 || min > max || stride == 0) bench_die("need live > 0, 0 < min <= max, stride > 0");

  char **slot = calloc(live, sizeof *slot);
  if (slot == NULL) bench_die("out of memory");
  struct hist *h = bench_hist_new();
  uint64_t rng = seed, limit = bench_limit(cycles), i = 0, ops = 0, bytes = 0;
  bench_start();
  while (i < limit) {
    uint64_t k = rng_below(&rng, live);
    size_t size = (size_t)rng_range(&rng, min, max);
    if (slot[k] != NULL) {
      BENCH_TIMED(h, free(slot[k]));
      ops++;
    }
    char *p;
    BENCH_TIMED(h, p = malloc(size));
    if (p == NULL) bench_die("malloc(%zu) failed", size);
    for (size_t off = 0; off < size; off += stride) p[off] = (char)off;
    p[size - 1] = 1;
    slot[k] = p;
    ops++;
    bytes += size;
    if ((++i & 7) == 0 && bench_tick(16)) break;
  }
  bench_stop();
  for (uint64_t k = 0; k < live; k++) free(slot[k]);
  bench_hist_merge(h);
  bench_report(ops, "cycles=%llu live=%llu min=%llu max=%llu stride=%llu mib_allocated=%llu", (unsigned long long)i,
               (unsigned long long)live, (unsigned long long)min, (unsigned long long)max,
               (unsigned long long)stride, (unsigned long long)(bytes >> 20));
  free(slot);
  return 0;
}
