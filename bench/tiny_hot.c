/* tiny_hot.c — workload 3: per size class, batches of `batch` blocks of that one size are allocated, touched
 * and freed in reverse order — the thread-cache hot path. Prints ns/op and ops/s per size.
 * usage: tiny_hot [cycles] [batch] [sizes]   (defaults 4M allocations per size, 64, 8,16,32,64,128,256,512,1024) */
#include "common.h"

#include <stdlib.h>

#define MAX_SIZES 32
#define MAX_BATCH 4096

static void *block[MAX_BATCH];

/* `n` batches of `batch` allocations of `size`; returns the operations done (mallocs + frees). */
static uint64_t run_batches(size_t size, uint64_t n, uint64_t batch, struct hist *h) {
  uint64_t ops = 0;
  for (uint64_t b = 0; b < n; b++) {
    for (uint64_t i = 0; i < batch; i++) {
      char *p;
      BENCH_TIMED(h, p = malloc(size));
      if (p == NULL) bench_die("malloc(%zu) failed", size);
      p[0] = (char)i;
      block[i] = p;
    }
    for (uint64_t i = batch; i-- > 0;) BENCH_TIMED(h, free(block[i]));
    ops += 2 * batch;
    if (bench_tick(2 * batch)) break;
  }
  return ops;
}

int main(int argc, char **argv) {
  bench_init("tiny_hot", argc, argv, 1, "tiny_hot [cycles] [batch] [sizes]");
  uint64_t cycles = bench_arg(0, 4000000);
  uint64_t batch = bench_arg(1, 64);
  uint64_t size[MAX_SIZES];
  int nsizes = bench_arg_list(2, "8,16,32,64,128,256,512,1024", size, MAX_SIZES);
  if (batch == 0 || batch > MAX_BATCH || cycles < batch) bench_die("need 0 < batch <= %d and cycles >= batch", MAX_BATCH);
  for (int s = 0; s < nsizes; s++)
    if (size[s] == 0) bench_die("sizes must be positive");

  struct hist *h = bench_hist_new();
  uint64_t ops[MAX_SIZES] = {0}, ns[MAX_SIZES] = {0}, total = 0;
  uint64_t batches = cycles / batch;
  bench_start();
  do {
    for (int s = 0; s < nsizes && !bench_stopping(); s++) {
      uint64_t t0 = bench_now_ns();
      ops[s] += run_batches((size_t)size[s], batches, batch, h);
      ns[s] += bench_now_ns() - t0;
    }
  } while (bench.duration_s > 0 && !bench_stopping());
  bench_stop();

  for (int s = 0; s < nsizes; s++) {
    total += ops[s];
    double secs = (double)ns[s] / 1e9;
    bench_result("ns_per_op_%llu=%.3f ops_per_sec_%llu=%.1f", (unsigned long long)size[s],
                 ops[s] ? (double)ns[s] / (double)ops[s] : 0.0, (unsigned long long)size[s],
                 secs > 0 ? (double)ops[s] / secs : 0.0);
  }
  bench_hist_merge(h);
  bench_report(total, "batch=%llu sizes=%d", (unsigned long long)batch, nsizes);
  return 0;
}
