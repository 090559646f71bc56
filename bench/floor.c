/* floor.c — the physical floor: a thread-local intrusive singly linked free list, no malloc at all. One
 * operation is a pop followed by a push of the same node, the least any allocator's malloc + free pair
 * can cost; the lab divides `pair` results by this.
 * usage: floor [cycles] [nodes]   (defaults 200M, 64) */
#include "common.h"

#include <stdlib.h>

struct node {
  struct node *next;
  char payload[8];
};

static _Thread_local struct node *free_list;

static inline struct node *pop(void) {
  struct node *n = free_list;
  free_list = n->next;
  return n;
}

static inline void push(struct node *n) {
  n->next = free_list;
  free_list = n;
}

int main(int argc, char **argv) {
  bench_init("floor", argc, argv, 1, "floor [cycles] [nodes]");
  uint64_t cycles = bench_arg(0, 200000000);
  uint64_t nodes = bench_arg(1, 64);
  if (nodes == 0 || nodes > 1 << 20) bench_die("nodes must be 1..1M");
  static struct node pool[1 << 20];
  for (uint64_t i = 0; i < nodes; i++) push(&pool[i]);

  struct hist *h = bench_hist_new();
  uint64_t limit = bench_limit(cycles), i = 0;
  bench_start();
  while (i < limit) {
    BENCH_TIMED(h, {
      struct node *n = pop();
      bench_escape(n);
      n->payload[0] = (char)i;
      push(n);
    });
    if ((++i & 4095) == 0 && bench_tick(4096)) break;
  }
  bench_stop();
  bench_hist_merge(h);
  bench_report(i, "nodes=%llu", (unsigned long long)nodes);
  return 0;
}
