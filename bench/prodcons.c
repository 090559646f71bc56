/* prodcons.c — workload 6: producer threads allocate blocks and pass them through single-producer rings to
 * consumer threads that free them, so every free is remote (the worst case for thread caches).
 * -t N gives (N+1)/2 producers and max(1, N - producers) consumers; `objects` is per producer.
 * usage: prodcons [-t N] [objects] [min] [max] [seed]   (defaults 2 threads, 2M, 16, 512, 5) */
#include "common.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#define RING 4096 /* power of two */
#define PUBLISH 32 /* the producer makes its pushes visible in groups of this many */

struct ring {
  _Alignas(64) _Atomic uint64_t head; /* written by the producer */
  _Alignas(64) _Atomic uint64_t tail; /* written by the consumer */
  _Alignas(64) void *slot[RING];
};

struct producer {
  pthread_t tid;
  struct ring *ring;
  uint64_t objects, min, max, rng, made;
  uint64_t head, tail_seen; /* private copies: next slot to fill, last tail read */
  struct hist *h;
};

struct consumer {
  pthread_t tid;
  struct ring **rings;
  int nrings;
  uint64_t freed;
  struct hist *h;
};

static pthread_barrier_t go;
static void *const END = (void *)1; /* sentinel: this producer is done */

/* Wait politely: yield a few times, then sleep, so an oversubscribed run (more threads than cores) does not
 * burn the time slice its peer needs. */
static void backoff(unsigned *spins) {
  if (++*spins < 16) {
    sched_yield();
  } else {
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
  }
}

static void ring_publish(struct producer *pr) {
  atomic_store_explicit(&pr->ring->head, pr->head, memory_order_release);
}

/* Queue p; the consumer sees it at the next publication (every PUBLISH pushes, or when the ring is full). */
static void ring_push(struct producer *pr, void *p) {
  struct ring *r = pr->ring;
  if (pr->head - pr->tail_seen == RING) {
    ring_publish(pr);
    unsigned spins = 0;
    while (pr->head - (pr->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire)) == RING) backoff(&spins);
  }
  r->slot[pr->head & (RING - 1)] = p;
  if (++pr->head % PUBLISH == 0) ring_publish(pr);
}

static void *producer_main(void *arg) {
  struct producer *pr = arg;
  struct hist *h = pr->h;
  pthread_barrier_wait(&go);
  uint64_t i = 0;
  while (i < pr->objects) {
    size_t size = (size_t)rng_range(&pr->rng, pr->min, pr->max);
    char *p;
    BENCH_TIMED(h, p = malloc(size));
    if (p == NULL) bench_die("malloc(%zu) failed", size);
    p[0] = (char)i;
    p[size - 1] = (char)size;
    ring_push(pr, p);
    if ((++i & 1023) == 0 && bench_tick(2048)) break; /* 1024 mallocs and, soon, their frees */
  }
  pr->made = i;
  ring_push(pr, END);
  ring_publish(pr);
  return NULL;
}

static void *consumer_main(void *arg) {
  struct consumer *c = arg;
  struct hist *h = c->h;
  int open = c->nrings;
  uint64_t freed = 0;
  unsigned spins = 0;
  pthread_barrier_wait(&go);
  while (open > 0) {
    bool got = false;
    for (int i = 0; i < c->nrings; i++) {
      struct ring *r = c->rings[i];
      if (r == NULL) continue;
      uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
      uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
      for (; tail != head; tail++) {
        void *p = r->slot[tail & (RING - 1)];
        if (p == END) {
          c->rings[i] = NULL;
          open--;
          tail++;
          break;
        }
        BENCH_TIMED(h, free(p));
        freed++;
        got = true;
      }
      atomic_store_explicit(&r->tail, tail, memory_order_release);
    }
    if (got) spins = 0;
    else backoff(&spins);
  }
  c->freed = freed;
  return NULL;
}

int main(int argc, char **argv) {
  bench_init("prodcons", argc, argv, 2, "prodcons [-t N] [objects] [min] [max] [seed]");
  uint64_t objects = bench_arg(0, 2000000);
  uint64_t min = bench_arg(1, 16);
  uint64_t max = bench_arg(2, 512);
  uint64_t seed = bench_arg(3, 5);
  if (min == 0 || min > max) bench_die("need 0 < min <= max");

  int np = (bench.threads + 1) / 2;
  int nc = bench.threads - np > 0 ? bench.threads - np : 1;
  struct producer *pr = calloc((size_t)np, sizeof *pr);
  struct consumer *co = calloc((size_t)nc, sizeof *co);
  struct ring *rings = aligned_alloc(64, sizeof(struct ring) * (size_t)np);
  if (pr == NULL || co == NULL || rings == NULL) bench_die("out of memory");
  pthread_barrier_init(&go, NULL, (unsigned)(np + nc + 1));
  for (int c = 0; c < nc; c++) {
    co[c].rings = calloc((size_t)np, sizeof *co[c].rings);
    if (co[c].rings == NULL) bench_die("out of memory");
    co[c].h = bench_hist_new();
  }
  for (int i = 0; i < np; i++) {
    atomic_init(&rings[i].head, 0);
    atomic_init(&rings[i].tail, 0);
    struct consumer *c = &co[i % nc];
    c->rings[c->nrings++] = &rings[i];
    pr[i] = (struct producer){.ring = &rings[i], .objects = bench_limit(objects), .min = min, .max = max,
                              .rng = seed * 104729u + (uint64_t)i, .h = bench_hist_new()};
  }
  for (int c = 0; c < nc; c++)
    if (pthread_create(&co[c].tid, NULL, consumer_main, &co[c]) != 0) bench_die("pthread_create failed");
  for (int i = 0; i < np; i++)
    if (pthread_create(&pr[i].tid, NULL, producer_main, &pr[i]) != 0) bench_die("pthread_create failed");
  pthread_barrier_wait(&go);
  bench_start();
  uint64_t made = 0, freed = 0;
  for (int i = 0; i < np; i++) {
    pthread_join(pr[i].tid, NULL);
    made += pr[i].made;
  }
  for (int c = 0; c < nc; c++) {
    pthread_join(co[c].tid, NULL);
    freed += co[c].freed;
  }
  bench_stop();
  if (made != freed) bench_die("lost blocks: %llu made, %llu freed", (unsigned long long)made, (unsigned long long)freed);
  for (int i = 0; i < np; i++) bench_hist_merge(pr[i].h);
  for (int c = 0; c < nc; c++) {
    bench_hist_merge(co[c].h);
    free(co[c].rings);
  }
  bench_report(made + freed, "producers=%d consumers=%d min=%llu max=%llu", np, nc, (unsigned long long)min,
               (unsigned long long)max);
  free(rings);
  free(pr);
  free(co);
  return 0;
}
