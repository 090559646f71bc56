/* test_reclaim.c — memory that must come back, from corners found in review:
 *   late:   a thread whose other TSD destructor allocates after hakmem's own ran (a heap made then could
 *           never be abandoned): 200 such threads must not keep a segment each;
 *   trim:   pages emptied only by remote frees, never looked at by their owner again, must be released by
 *           malloc_trim / hak_collect(true).
 * Needs hakmem (hak_stats_get through dlsym); on another allocator it prints "skip" and exits 77.
 * Usage: test_reclaim late|trim */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hakmem.h"

static int (*stats_get)(struct hak_stats *);
static void (*collect)(bool);

static struct hak_stats snap(void) {
  struct hak_stats s;
  stats_get(&s);
  return s;
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

/* ---- late: a destructor that allocates in every round ------------------------------------------- */

static pthread_key_t key;

static void rearm(void *v) {
  void *p = malloc(100);
  free(v);
  pthread_setspecific(key, p); /* glibc runs the destructors again while values are set, up to 4 rounds */
}

static void *late_thread(void *arg) {
  (void)arg;
  pthread_setspecific(key, malloc(100));
  return NULL;
}

static int check_late(void) {
  pthread_key_create(&key, rearm);
  enum { THREADS = 200 };
  for (int i = 0; i < THREADS; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, late_thread, NULL) != 0) return fprintf(stderr, "pthread_create failed\n"), 1;
    pthread_join(t, NULL);
  }
  malloc_trim(0);
  struct hak_stats s = snap();
  printf("late: threads started %llu, exited %llu, mapped %.1f MiB\n", (unsigned long long)s.threads_started,
         (unsigned long long)s.threads_exited, mib(s.mapped_bytes));
  if (s.threads_started > s.threads_exited + 2) {
    fprintf(stderr, "FAIL late: %llu heaps were never given back\n",
            (unsigned long long)(s.threads_started - s.threads_exited - 1));
    return 1;
  }
  if (s.mapped_bytes > (64u << 20)) {
    fprintf(stderr, "FAIL late: %.1f MiB still mapped after %d threads\n", mib(s.mapped_bytes), THREADS);
    return 1;
  }
  return 0;
}

/* ---- trim: pages emptied by remote frees --------------------------------------------------------- */

enum { BLOCKS = 200000 };
static void **blocks;

/* Frees every other block: after the first pass every page is half free and back in its queue, so the
 * second pass empties pages their owner has no reason to look at. */
static void *free_alternate(void *arg) {
  for (size_t i = (size_t)(uintptr_t)arg; i < BLOCKS; i += 2) free(blocks[i]);
  return NULL;
}

static int check_trim(void) {
  blocks = malloc(BLOCKS * sizeof *blocks);
  for (size_t i = 0; i < BLOCKS; i++) {
    blocks[i] = malloc(64);
    memset(blocks[i], 1, 64);
  }
  struct hak_stats full = snap();
  for (uintptr_t parity = 0; parity < 2; parity++) { /* two other threads free everything */
    pthread_t t;
    pthread_create(&t, NULL, free_alternate, (void *)parity);
    pthread_join(t, NULL);
    collect(false);
  }
  malloc_trim(0);
  struct hak_stats after = snap();
  printf("trim: committed %.1f MiB with %d blocks of 64 B live, %.1f MiB after remote frees and malloc_trim\n",
         mib(full.committed_bytes), BLOCKS, mib(after.committed_bytes));
  if (after.committed_bytes * 2 > full.committed_bytes) {
    fprintf(stderr, "FAIL trim: malloc_trim kept %.1f of %.1f MiB\n", mib(after.committed_bytes),
            mib(full.committed_bytes));
    return 1;
  }
  free(blocks);
  return 0;
}

int main(int argc, char **argv) {
  stats_get = (int (*)(struct hak_stats *))dlsym(RTLD_DEFAULT, "hak_stats_get");
  collect = (void (*)(bool))dlsym(RTLD_DEFAULT, "hak_collect");
  if (stats_get == NULL || collect == NULL) {
    puts("skip: not running on hakmem");
    return 77;
  }
  if (argc == 2 && strcmp(argv[1], "late") == 0) return check_late();
  if (argc == 2 && strcmp(argv[1], "trim") == 0) return check_trim();
  fprintf(stderr, "usage: test_reclaim late|trim\n");
  return 2;
}
