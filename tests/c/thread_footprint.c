/* thread_footprint.c — what a live thread that keeps a few small blocks costs in resident memory.
 * Each of N threads (64 KiB stacks) allocates one block of each of 8 sizes, 16 B to 2 KiB, writes it and
 * waits at a barrier with all of them live; the main thread reads its RSS there and prints the growth per
 * thread over the RSS before the threads started. Per-thread pages cost at least an OS page per class;
 * carving 16 KiB of each class's first page cost 150 KiB per thread (glibc about 14).
 * With `mlock`, the program first locks its memory (mlockall(MCL_CURRENT | MCL_FUTURE)), after which the
 * kernel populates every new writable mapping whole: a segment mapped writable for each thread cost 4 MiB
 * per thread (glibc about 84 KiB, its 64 KiB stack included).
 * With `medium`, each thread instead writes and frees one block of each of 10 medium sizes, 16-384 KiB,
 * in 3 rounds 10 ms apart, then waits idle; the main thread reads its RSS a second later (the purge delay
 * and then some): a thread's emptied first pages of those classes, which it kept for good, cost 1.4 MiB
 * per thread (src/heap.c, EMPTY_HEAD_BYTES). `medium-burst`: the same rounds with no pause between them.
 * With `blocks` (medium modes only, 1-16, default 1) each round holds that many blocks of a size at once
 * before freeing them and going on to the next size.
 * Usage: thread_footprint [threads] [max_kib_per_thread] [mlock|medium|medium-burst] [blocks]
 * (defaults 400, 0 = only print, 1).
 * Exit status 0 when the growth per thread is at most the limit, 77 when mlockall is not allowed. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "process_memory.h"

enum { CLASSES = 8 };

static pthread_barrier_t all_allocated, may_free;
static long round_gap_ms = 10;
enum { MAX_BLOCKS = 16 };
static int blocks_per_size = 1;

static void *hold_blocks(void *arg) {
  void *block[CLASSES];
  for (int i = 0; i < CLASSES; i++) {
    size_t size = (size_t)16 << i;
    block[i] = malloc(size);
    if (block[i] == NULL) {
      fprintf(stderr, "FAIL: malloc(%zu) in a thread\n", size);
      exit(1);
    }
    memset(block[i], 0x5a, size);
  }
  pthread_barrier_wait(&all_allocated);
  pthread_barrier_wait(&may_free);
  for (int i = 0; i < CLASSES; i++) {
    const unsigned char *bytes = block[i];
    if (bytes[0] != 0x5a || bytes[((size_t)16 << i) - 1] != 0x5a) {
      fprintf(stderr, "FAIL: block of %zu bytes changed while held\n", (size_t)16 << i);
      exit(1);
    }
    free(block[i]);
  }
  return arg;
}

enum { MEDIUM_SIZES = 10, MEDIUM_ROUNDS = 3 };

/* Rounds of medium blocks, then idle until the main thread has read its RSS. */
static void *use_medium_classes(void *arg) {
  static const size_t sizes[MEDIUM_SIZES] = {16 << 10, 24 << 10, 32 << 10, 48 << 10, 64 << 10,
                                             96 << 10, 128 << 10, 192 << 10, 256 << 10, 384 << 10};
  unsigned char *block[MAX_BLOCKS];
  for (int round = 0; round < MEDIUM_ROUNDS; round++) {
    if (round > 0 && round_gap_ms > 0) sleep_ms(round_gap_ms);
    for (int i = 0; i < MEDIUM_SIZES; i++) {
      for (int k = 0; k < blocks_per_size; k++) {
        block[k] = malloc(sizes[i]);
        if (block[k] == NULL) {
          fprintf(stderr, "FAIL: malloc(%zu) in a thread\n", sizes[i]);
          exit(1);
        }
        memset(block[k], 0x5a + k, sizes[i]);
      }
      for (int k = 0; k < blocks_per_size; k++) {
        if (block[k][0] != 0x5a + k || block[k][sizes[i] / 2] != 0x5a + k || block[k][sizes[i] - 1] != 0x5a + k) {
          fprintf(stderr, "FAIL: block of %zu bytes changed while held\n", sizes[i]);
          exit(1);
        }
        free(block[k]);
      }
    }
  }
  pthread_barrier_wait(&all_allocated);
  pthread_barrier_wait(&may_free);
  return arg;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 400;
  long limit_kib = argc > 2 ? atol(argv[2]) : 0;
  bool lock = argc > 3 && strcmp(argv[3], "mlock") == 0;
  bool burst = argc > 3 && strcmp(argv[3], "medium-burst") == 0;
  bool medium = burst || (argc > 3 && strcmp(argv[3], "medium") == 0);
  if (burst) round_gap_ms = 0;
  if (argc > 4) blocks_per_size = atoi(argv[4]);
  if (threads < 1 || threads > 10000 || limit_kib < 0 || (argc > 3 && !lock && !medium) ||
      blocks_per_size < 1 || blocks_per_size > MAX_BLOCKS || (argc > 4 && !medium)) {
    fprintf(stderr, "usage: thread_footprint [threads 1-10000] [max_kib_per_thread] [mlock|medium|medium-burst] [blocks 1-16]\n");
    return 2;
  }
  if (lock && mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
    printf("thread_footprint: skip (mlockall failed: not allowed to lock memory here)\n");
    return 77;
  }
  pthread_t *tid = malloc((size_t)threads * sizeof *tid);
  if (tid == NULL) return fprintf(stderr, "FAIL: malloc of the thread table\n"), 1;
  pthread_barrier_init(&all_allocated, NULL, (unsigned)threads + 1);
  pthread_barrier_init(&may_free, NULL, (unsigned)threads + 1);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 << 10);
  /* Medium modes: until hakmem holds 32 MiB (HAK_PURGER_START_BYTES) its purger does not cover an idle
   * program, and threads keep their emptied first pages (src/heap.c, head_emptied); the first threads of
   * the run did, or not, as the scheduler interleaved them. A block of 48 MiB, never touched, makes every
   * thread's rounds follow the same rule. */
  void *ballast = medium ? malloc((size_t)48 << 20) : NULL;
  if (medium && ballast == NULL) return fprintf(stderr, "FAIL: malloc of the 48 MiB block\n"), 1;
  long before = rss_kib();
  for (int i = 0; i < threads; i++) {
    if (pthread_create(&tid[i], &attr, medium ? use_medium_classes : hold_blocks, NULL) != 0) {
      fprintf(stderr, "FAIL: pthread_create %d\n", i);
      return 1;
    }
  }
  pthread_barrier_wait(&all_allocated);
  if (medium) sleep_ms(1000);
  long during = rss_kib();
  pthread_barrier_wait(&may_free);
  for (int i = 0; i < threads; i++) pthread_join(tid[i], NULL);
  free(tid);
  free(ballast);
  if (before < 0 || during < 0) return fprintf(stderr, "FAIL: RSS unreadable\n"), 1;
  double per_thread = (double)(during - before) / threads;
  char what[80] = "";
  if (lock) snprintf(what, sizeof what, " under mlockall");
  if (medium)
    snprintf(what, sizeof what, " idle after %smedium blocks (%d of a size at once)", burst ? "a burst of " : "",
             blocks_per_size);
  printf("thread_footprint: %d threads%s, rss %ld -> %ld KiB, %.1f KiB per thread (limit %ld)\n", threads, what,
         before,
         during, per_thread, limit_kib);
  if (limit_kib > 0 && per_thread > (double)limit_kib) {
    fprintf(stderr, "FAIL: %.1f KiB per thread, over %ld\n", per_thread, limit_kib);
    return 1;
  }
  return 0;
}
