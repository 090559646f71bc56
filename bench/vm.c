/* vm.c — workload 5, the "VM scenario": allocate a 2 MiB block, write one byte in every 4 KiB page, free
 * it; repeated. One operation is the whole malloc + touch + free; its latency is reported in ns.
 * usage: vm [cycles] [size]   (defaults 20000, 2M) */
#include "common.h"

#include <stdlib.h>

int main(int argc, char **argv) {
  bench_init("vm", argc, argv, 1, "vm [cycles] [size]");
  uint64_t cycles = bench_arg(0, 20000);
  uint64_t size = bench_arg(1, 2 << 20);
  if (size == 0) bench_die("size must be positive");

  struct hist *h = bench_hist_new();
  uint64_t limit = bench_limit(cycles), i = 0;
  bench_start();
  while (i < limit) {
    BENCH_TIMED(h, {
      char *p = malloc((size_t)size);
      if (p == NULL) bench_die("malloc(%llu) failed", (unsigned long long)size);
      for (uint64_t off = 0; off < size; off += 4096) p[off] = (char)off;
      p[size - 1] = 1;
      free(p);
    });
    if ((++i & 15) == 0 && bench_tick(16)) break;
  }
  bench_stop();
  bench_hist_merge(h);
  bench_report(i, "size=%llu pages_touched=%llu", (unsigned long long)size, (unsigned long long)((size + 4095) / 4096));
  return 0;
}
