/* orphans_mt.c — the collection takes full pages whose blocks other threads freed while their owners take
 * them back (src/segment_purge.c, "Orphaned pages"). Producers hand batches of written blocks (64-4,063 bytes, one
 * size a batch) to consumers, which check every 61st byte and free them; every 16 batches a producer
 * pauses 4 ms, long enough, with HAKMEM_PURGE_DELAY_MS=1, for its emptied full pages to be given back
 * before it takes them again. Runs SECONDS (default 2). Exit 0 when no block was damaged and, on hakmem,
 * some page went back as an orphan (else the run proved nothing).
 *
 * Built two ways, as storm_mt.c: normally (tests/Makefile) it uses the standard names and reads hakmem's
 * counters through dlsym; with -DSTORM_HAK_API it calls the hak_* functions directly, which is how
 * tests/test_tsan.py builds it with the hakmem sources under ThreadSanitizer.
 * Usage: orphans_mt [SECONDS] */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hakmem.h"

#ifdef STORM_HAK_API
#define A_MALLOC hak_malloc
#define A_FREE hak_free
static int (*stats_get_sized)(struct hak_stats *, size_t) = hak_stats_get_sized;
#else
#define A_MALLOC malloc
#define A_FREE free
static int (*stats_get_sized)(struct hak_stats *, size_t);
#endif

enum { BATCH = 512, SLOTS = 8, PAIRS = 2 };

/* One producer's batches on their way to its consumer. */
struct lane {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  char **batches[SLOTS];
  size_t sizes[SLOTS];
  unsigned head, tail;
  bool done;
  _Atomic long damaged, checked;
};

static struct lane lanes[PAIRS];
static _Atomic bool stop;

static uint64_t orphaned_pages(void) {
  struct hak_stats s;
  return stats_get_sized != NULL && stats_get_sized(&s, sizeof s) == 0 ? s.orphaned_pages : 0;
}

static void *producer(void *arg) {
  struct lane *lane = arg;
  unsigned seed = (unsigned)(lane - lanes) + 1;
  for (unsigned round = 1; !atomic_load(&stop); round++) {
    if (round % 16 == 0) { /* its full pages empty meanwhile, and the collection takes them */
      struct timespec pause = {0, 4 * 1000000L};
      nanosleep(&pause, NULL);
    }
    seed = seed * 1103515245u + 12345u;
    size_t size = 64 + (seed >> 8) % 4000;
    char **batch = A_MALLOC(BATCH * sizeof *batch);
    if (batch == NULL) break;
    for (int i = 0; i < BATCH; i++) {
      batch[i] = A_MALLOC(size);
      if (batch[i] != NULL) memset(batch[i], (int)((size + (size_t)i) & 0xff), size);
    }
    pthread_mutex_lock(&lane->lock);
    while (lane->tail - lane->head == SLOTS && !atomic_load(&stop)) pthread_cond_wait(&lane->changed, &lane->lock);
    if (lane->tail - lane->head == SLOTS) { /* stopped with the lane full: this batch is nobody's */
      pthread_mutex_unlock(&lane->lock);
      for (int i = 0; i < BATCH; i++) A_FREE(batch[i]);
      A_FREE(batch);
      break;
    }
    lane->batches[lane->tail % SLOTS] = batch;
    lane->sizes[lane->tail % SLOTS] = size;
    lane->tail++;
    pthread_cond_broadcast(&lane->changed);
    pthread_mutex_unlock(&lane->lock);
  }
  pthread_mutex_lock(&lane->lock);
  lane->done = true;
  pthread_cond_broadcast(&lane->changed);
  pthread_mutex_unlock(&lane->lock);
  return arg;
}

static void *consumer(void *arg) {
  struct lane *lane = arg;
  for (;;) {
    pthread_mutex_lock(&lane->lock);
    while (lane->head == lane->tail && !lane->done) pthread_cond_wait(&lane->changed, &lane->lock);
    if (lane->head == lane->tail) {
      pthread_mutex_unlock(&lane->lock);
      return arg;
    }
    char **batch = lane->batches[lane->head % SLOTS];
    size_t size = lane->sizes[lane->head % SLOTS];
    lane->head++;
    pthread_cond_broadcast(&lane->changed);
    pthread_mutex_unlock(&lane->lock);
    for (int i = 0; i < BATCH; i++) {
      if (batch[i] == NULL) continue;
      unsigned char want = (unsigned char)((size + (size_t)i) & 0xff);
      for (size_t b = 0; b < size; b += 61)
        if ((unsigned char)batch[i][b] != want) {
          atomic_fetch_add(&lane->damaged, 1);
          break;
        }
      atomic_fetch_add(&lane->checked, 1);
      A_FREE(batch[i]);
    }
    A_FREE(batch);
  }
}

int main(int argc, char **argv) {
#ifndef STORM_HAK_API
  stats_get_sized = (int (*)(struct hak_stats *, size_t))dlsym(RTLD_DEFAULT, "hak_stats_get_sized");
#endif
  double seconds = argc > 1 ? atof(argv[1]) : 2.0;
  uint64_t orphans = orphaned_pages();
  pthread_t producers[PAIRS], consumers[PAIRS];
  for (int p = 0; p < PAIRS; p++) {
    pthread_mutex_init(&lanes[p].lock, NULL);
    pthread_cond_init(&lanes[p].changed, NULL);
    if (pthread_create(&producers[p], NULL, producer, &lanes[p]) != 0 ||
        pthread_create(&consumers[p], NULL, consumer, &lanes[p]) != 0)
      return fprintf(stderr, "FAIL orphans_mt: thread\n"), 1;
  }
  struct timespec run = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
  nanosleep(&run, NULL);
  atomic_store(&stop, true);
  long damaged = 0, checked = 0;
  for (int p = 0; p < PAIRS; p++) {
    pthread_mutex_lock(&lanes[p].lock);
    pthread_cond_broadcast(&lanes[p].changed);
    pthread_mutex_unlock(&lanes[p].lock);
    pthread_join(producers[p], NULL);
    pthread_join(consumers[p], NULL);
    damaged += atomic_load(&lanes[p].damaged);
    checked += atomic_load(&lanes[p].checked);
  }
  orphans = orphaned_pages() - orphans;
  printf("orphans_mt: %ld blocks checked, %ld damaged; %llu pages given back as orphans\n", checked, damaged,
         (unsigned long long)orphans);
  if (damaged != 0) return fprintf(stderr, "FAIL orphans_mt: %ld blocks damaged\n", damaged), 1;
  if (checked < 1000) return fprintf(stderr, "FAIL orphans_mt: too few blocks went through (%ld)\n", checked), 1;
  if (stats_get_sized != NULL && orphans == 0)
    return fprintf(stderr, "FAIL orphans_mt: no page went back as an orphan (the run proves nothing)\n"), 1;
  return 0;
}
