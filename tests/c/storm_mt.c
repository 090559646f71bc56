/* storm_mt.c — a multithreaded mix with every handoff an allocator must get right: worker threads allocate
 * with each allocation function, fill every byte, and mail blocks to each other (so frees and reallocs
 * are mostly remote); a churn thread keeps starting short-lived threads that allocate, mail and exit
 * (their heaps are abandoned); a maintenance thread collects and reads statistics concurrently. Every
 * block is verified byte by byte by its receiver. Exit 0 when nothing was damaged or lost.
 *
 * Built two ways: normally (tests/Makefile) it uses the standard names and runs under hakmem and glibc;
 * with -DSTORM_HAK_API it calls the hak_* functions directly, which is how tests/test_tsan.py builds it
 * together with the hakmem sources under ThreadSanitizer. Usage: storm_mt [ROUNDS] (default 100000). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef STORM_HAK_API
#include "hakmem.h"
#define A_MALLOC hak_malloc
#define A_CALLOC hak_calloc
#define A_REALLOC hak_realloc
#define A_FREE hak_free
#define A_ALIGNED_ALLOC hak_aligned_alloc
#define A_POSIX_MEMALIGN hak_posix_memalign
#define A_USABLE_SIZE hak_usable_size
static void maintenance_step(void) {
  struct hak_stats st;
  hak_collect(true);
  hak_stats_get(&st);
  hak_collect(false);
}
#else
#include <malloc.h>
#define A_MALLOC malloc
#define A_CALLOC calloc
#define A_REALLOC realloc
#define A_FREE free
#define A_ALIGNED_ALLOC aligned_alloc
#define A_POSIX_MEMALIGN posix_memalign
#define A_USABLE_SIZE malloc_usable_size
static void maintenance_step(void) { malloc_trim(0); }
#endif

#define WORKERS 4
#define INBOX 256

/* A block starts with this header; the rest is filled with `fill`. */
struct block {
  size_t size;
  unsigned char fill;
};

struct inbox {
  pthread_mutex_t lock;
  struct block *items[INBOX];
  int count;
};

static struct inbox inboxes[WORKERS];
static atomic_long damaged, failed, sent, received;
static atomic_int workers_left = WORKERS;

static uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static size_t pick_size(uint64_t *rng) {
  uint64_t r = next_rand(rng) % 1000;
  if (r < 700) return sizeof(struct block) + next_rand(rng) % 1000;
  if (r < 995) return 1024 + next_rand(rng) % 60000;
  return 600000 + next_rand(rng) % 400000;
}

static void fill_block(struct block *b, size_t size, unsigned char fill) {
  b->size = size;
  b->fill = fill;
  memset((unsigned char *)b + sizeof *b, fill, size - sizeof *b);
}

static struct block *new_block(uint64_t *rng) {
  size_t size = pick_size(rng);
  void *p = NULL;
  switch (next_rand(rng) % 4) {
  case 0: p = A_MALLOC(size); break;
  case 1: p = A_CALLOC(1, size); break;
  case 2: p = A_ALIGNED_ALLOC((size_t)64 << (next_rand(rng) % 8), size); break;
  case 3:
    if (A_POSIX_MEMALIGN(&p, (size_t)16 << (next_rand(rng) % 10), size) != 0) p = NULL;
    break;
  }
  if (!p) {
    atomic_fetch_add(&failed, 1);
    return NULL;
  }
  if (A_USABLE_SIZE(p) < size) atomic_fetch_add(&damaged, 1);
  fill_block(p, size, (unsigned char)next_rand(rng));
  return p;
}

static int block_ok(const struct block *b) {
  const unsigned char *bytes = (const unsigned char *)b;
  for (size_t i = sizeof *b; i < b->size; i++)
    if (bytes[i] != b->fill) return 0;
  return 1;
}

static void mail(struct block *b, int to) {
  struct inbox *box = &inboxes[to];
  pthread_mutex_lock(&box->lock);
  if (box->count < INBOX) {
    box->items[box->count++] = b;
    b = NULL;
  }
  pthread_mutex_unlock(&box->lock);
  if (b) A_FREE(b); /* inbox full: free it here */
  else atomic_fetch_add(&sent, 1);
}

static struct block *take(int from) {
  struct inbox *box = &inboxes[from];
  struct block *b = NULL;
  pthread_mutex_lock(&box->lock);
  if (box->count > 0) b = box->items[--box->count];
  pthread_mutex_unlock(&box->lock);
  return b;
}

/* Check a received block, then free it or resize it and mail it on. */
static void consume(struct block *b, uint64_t *rng) {
  atomic_fetch_add(&received, 1);
  if (!block_ok(b)) atomic_fetch_add(&damaged, 1);
  if (next_rand(rng) % 3 != 0) {
    A_FREE(b);
    return;
  }
  size_t size = pick_size(rng);
  size_t keep = size < b->size ? size : b->size;
  unsigned char fill = b->fill;
  struct block *r = A_REALLOC(b, size);
  if (!r) {
    atomic_fetch_add(&failed, 1);
    A_FREE(b);
    return;
  }
  const unsigned char *bytes = (const unsigned char *)r;
  for (size_t i = sizeof *r; i < keep; i++)
    if (bytes[i] != fill) {
      atomic_fetch_add(&damaged, 1);
      break;
    }
  fill_block(r, size, fill);
  mail(r, (int)(next_rand(rng) % WORKERS));
}

static long rounds;

static void *worker(void *arg) {
  int me = (int)(intptr_t)arg;
  uint64_t rng = 0xdeadbeefull + (uint64_t)me * 7919;
  for (long i = 0; i < rounds; i++) {
    struct block *b = new_block(&rng);
    if (b) mail(b, (int)(next_rand(&rng) % WORKERS));
    for (int n = 1 + (int)(next_rand(&rng) % 2); n > 0 && (b = take(me)) != NULL; n--) consume(b, &rng);
  }
  atomic_fetch_sub(&workers_left, 1);
  return NULL;
}

static void *short_lived(void *arg) {
  uint64_t rng = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;
  for (int i = 0; i < 16; i++) {
    struct block *b = new_block(&rng);
    if (b) mail(b, (int)(next_rand(&rng) % WORKERS));
  }
  return NULL;
}

static void *churn(void *arg) {
  long started = 0;
  while (atomic_load(&workers_left) > 0) {
    pthread_t t;
    if (pthread_create(&t, NULL, short_lived, (void *)(uintptr_t)++started) != 0) break;
    pthread_join(t, NULL);
  }
  *(long *)arg = started;
  return NULL;
}

static void *maintenance(void *arg) {
  long passes = 0;
  while (atomic_load(&workers_left) > 0) {
    maintenance_step();
    passes++;
    nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
  }
  *(long *)arg = passes;
  return NULL;
}

int main(int argc, char **argv) {
  rounds = argc > 1 ? atol(argv[1]) : 100000;
  pthread_t workers[WORKERS], churner, maintainer;
  long short_threads = 0, maintenance_passes = 0;
  for (int i = 0; i < WORKERS; i++) pthread_mutex_init(&inboxes[i].lock, NULL);
  /* Large blocks while this is the only thread, which the large tier handles without its lock: the
   * workers must then find the cache it left consistent. */
  void *early[8];
  for (int i = 0; i < 8; i++) early[i] = A_MALLOC((size_t)(600 + 100 * i) << 10);
  for (int i = 0; i < 8; i++) A_FREE(early[i]);
  for (int i = 0; i < WORKERS; i++) pthread_create(&workers[i], NULL, worker, (void *)(intptr_t)i);
  pthread_create(&churner, NULL, churn, &short_threads);
  pthread_create(&maintainer, NULL, maintenance, &maintenance_passes);
  for (int i = 0; i < WORKERS; i++) pthread_join(workers[i], NULL);
  pthread_join(churner, NULL);
  pthread_join(maintainer, NULL);
  for (int i = 0; i < WORKERS; i++) {
    struct block *b;
    while ((b = take(i)) != NULL) {
      if (!block_ok(b)) atomic_fetch_add(&damaged, 1);
      A_FREE(b);
    }
  }
  printf("rounds=%ld sent=%ld received=%ld short_lived_threads=%ld maintenance_passes=%ld damaged=%ld failed=%ld\n",
         rounds, atomic_load(&sent), atomic_load(&received), short_threads, maintenance_passes,
         atomic_load(&damaged), atomic_load(&failed));
  return atomic_load(&damaged) || atomic_load(&failed) ? 1 : 0;
}
