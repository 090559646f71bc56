/* pair.c — the hot single-thread malloc + free pair: for each size, `cycles` times p = malloc(size), write
 * one byte, free(p). One operation is one pair; compare its ns/op with the `floor` program's.
 * usage: pair [cycles] [sizes]   (defaults 50M per size, 16,64,256,1024) */
#include "common.h"

#include <stdlib.h>

#define MAX_SIZES 32

int main(int argc, char **argv) {
  bench_init("pair", argc, argv, 1, "pair [cycles] [sizes]");
  uint64_t cycles = bench_arg(0, 50000000);
  uint64_t size[MAX_SIZES];
  int nsizes = bench_arg_list(1, "16,64,256,1024", size, MAX_SIZES);
  for (int s = 0; s < nsizes; s++)
    if (size[s] == 0) bench_die("sizes must be positive");

  struct hist *h = bench_hist_new();
  uint64_t ops[MAX_SIZES] = {0}, ns[MAX_SIZES] = {0}, total = 0;
  bench_start();
  do {
    for (int s = 0; s < nsizes && !bench_stopping(); s++) {
      size_t sz = (size_t)size[s];
      uint64_t t0 = bench_now_ns(), i = 0;
      while (i < cycles) {
        BENCH_TIMED(h, {
          char *p = malloc(sz);
          if (p == NULL) bench_die("malloc(%zu) failed", sz);
          p[0] = (char)i;
          bench_escape(p);
          free(p);
        });
        if ((++i & 4095) == 0 && bench_tick(4096)) break;
      }
      ns[s] += bench_now_ns() - t0;
      ops[s] += i;
    }
  } while (bench.duration_s > 0 && !bench_stopping());
  bench_stop();

  for (int s = 0; s < nsizes; s++) {
    total += ops[s];
    bench_result("ns_per_op_%llu=%.3f ops_per_sec_%llu=%.1f", (unsigned long long)size[s],
                 ops[s] ? (double)ns[s] / (double)ops[s] : 0.0, (unsigned long long)size[s],
                 ns[s] ? (double)ops[s] * 1e9 / (double)ns[s] : 0.0);
  }
  bench_hist_merge(h);
  bench_report(total, "sizes=%d", nsizes);
  return 0;
}
