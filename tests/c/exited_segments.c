/* exited_segments.c — what threads that exited leave behind, once other threads free it
 * (src/segment_purge.c, "Orphaned pages", and src/segment.c, the abandoned segments):
 *   THREADS threads run together, each allocates COUNT blocks of SIZE bytes, writes them and exits, its
 *   segment abandoned with those blocks live; the main thread checks and frees every block, then makes no
 *   call at all. Within a few purge delays the pages come back as orphans and so must the segments: their
 *   address space unmapped and no longer counted committed (each stayed mapped until some thread took it
 *   over, which a program that never allocates again never does: 500 threads, 2 GiB mapped), and the
 *   freed blocks no longer counted live. Then the main thread allocates and frees as many again, intact.
 *   With free-again, it frees the first thread's first block a second time once the segments are gone
 *   instead: hakmem must report a double free and abort (the segment is among the latest given back).
 * Needs hakmem (hak_stats_get_sized through dlsym); on another allocator it prints "skip" and exits 77.
 * Usage: exited_segments THREADS COUNT SIZE [free-again] */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hakmem.h"
#include "process_memory.h"

static int (*stats_get_sized)(struct hak_stats *, size_t);

static struct hak_stats snap(void) {
  struct hak_stats s;
  stats_get_sized(&s, sizeof s);
  return s;
}

static uint64_t live_blocks(const struct hak_stats *s) {
  return s->live_blocks[HAK_TIER_SMALL] + s->live_blocks[HAK_TIER_MEDIUM];
}

static size_t threads, count, size;
static char **blocks; /* count per thread, thread-major */
static pthread_barrier_t all_allocated;

static unsigned char pattern(size_t i) { return (unsigned char)(i * 7 % 251 + 1); }

static void *allocate_and_exit(void *arg) {
  size_t first = (size_t)(uintptr_t)arg * count;
  for (size_t i = first; i < first + count; i++) {
    blocks[i] = malloc(size);
    if (blocks[i] != NULL) memset(blocks[i], pattern(i), size);
  }
  pthread_barrier_wait(&all_allocated); /* every thread holds its segment when the first exits */
  return NULL;
}

static int check_blocks(const char *when) {
  for (size_t i = 0; i < threads * count; i++) {
    if (blocks[i] == NULL) return fprintf(stderr, "FAIL: malloc of %zu bytes (%s)\n", size, when), 1;
    unsigned char want = pattern(i);
    if ((unsigned char)blocks[i][0] != want || (unsigned char)blocks[i][size - 1] != want)
      return fprintf(stderr, "FAIL: block %zu damaged (%s)\n", i, when), 1;
  }
  return 0;
}

static double mib(uint64_t b) { return (double)b / (1 << 20); }

int main(int argc, char **argv) {
  bool again = argc == 5 && strcmp(argv[4], "free-again") == 0;
  if ((argc != 4 && !again) || (threads = strtoul(argv[1], NULL, 10)) == 0 || (count = strtoul(argv[2], NULL, 10)) == 0 ||
      (size = strtoul(argv[3], NULL, 10)) == 0)
    return fprintf(stderr, "usage: exited_segments THREADS COUNT SIZE [free-again]\n"), 2;
  stats_get_sized = (int (*)(struct hak_stats *, size_t))dlsym(RTLD_DEFAULT, "hak_stats_get_sized");
  if (stats_get_sized == NULL) return printf("skip: not running on hakmem\n"), 77;
  blocks = calloc(threads * count, sizeof *blocks);
  pthread_t *tids = calloc(threads, sizeof *tids);
  if (blocks == NULL || tids == NULL || pthread_barrier_init(&all_allocated, NULL, (unsigned)threads) != 0)
    return fprintf(stderr, "FAIL: setup\n"), 1;
  struct hak_stats before = snap();
  for (size_t t = 0; t < threads; t++)
    if (pthread_create(&tids[t], NULL, allocate_and_exit, (void *)(uintptr_t)t) != 0)
      return fprintf(stderr, "FAIL: pthread_create %zu\n", t), 1;
  for (size_t t = 0; t < threads; t++) pthread_join(tids[t], NULL);
  struct hak_stats held = snap();
  if (check_blocks("written by the threads")) return 1;
  for (size_t i = 0; i < threads * count; i++) free(blocks[i]);
  /* no call into the allocator from here: the purger alone brings it back */
  long waited = 0;
  struct hak_stats after = snap();
  for (; waited < 5000; waited += 50) {
    after = snap();
    if (after.mapped_bytes <= before.mapped_bytes + held.mapped_bytes / 4 &&
        live_blocks(&after) + threads * count <= live_blocks(&held))
      break;
    sleep_ms(50);
  }
  printf("%zu threads, %zu blocks of %zu B each, freed by the main thread after they exited: mapped %.1f -> %.1f "
         "-> %.1f MiB, committed %.1f -> %.1f -> %.1f MiB, live blocks %llu -> %llu -> %llu, orphaned pages %llu, "
         "after %ld ms\n",
         threads, count, size, mib(before.mapped_bytes), mib(held.mapped_bytes), mib(after.mapped_bytes),
         mib(before.committed_bytes), mib(held.committed_bytes), mib(after.committed_bytes),
         (unsigned long long)live_blocks(&before), (unsigned long long)live_blocks(&held),
         (unsigned long long)live_blocks(&after), (unsigned long long)(after.orphaned_pages - before.orphaned_pages),
         waited);
  uint64_t grown = held.mapped_bytes - before.mapped_bytes;
  if (grown < threads * 2 * 1024 * 1024ull)
    return fprintf(stderr, "FAIL: the threads did not map a segment each (the test proves nothing)\n"), 1;
  if (after.orphaned_pages == before.orphaned_pages) return fprintf(stderr, "FAIL: no page went back as an orphan\n"), 1;
  if (after.mapped_bytes > before.mapped_bytes + grown / 4)
    return fprintf(stderr, "FAIL: the exited threads' segments stayed mapped\n"), 1;
  if (after.committed_bytes > before.committed_bytes + (held.committed_bytes - before.committed_bytes) / 4)
    return fprintf(stderr, "FAIL: the exited threads' segments stayed committed\n"), 1;
  if (live_blocks(&after) + threads * count > live_blocks(&held))
    return fprintf(stderr, "FAIL: the freed blocks still count live\n"), 1;
  if (again) {
    printf("the segments are gone; freeing the first block again\n");
    fflush(stdout);
    char *first = blocks[0];
    free(first);
    return fprintf(stderr, "FAIL: the second free went unreported\n"), 1;
  }
  for (size_t i = 0; i < threads * count; i++) {
    blocks[i] = malloc(size);
    if (blocks[i] != NULL) memset(blocks[i], pattern(i), size);
  }
  if (check_blocks("allocated again")) return 1;
  for (size_t i = 0; i < threads * count; i++) free(blocks[i]);
  printf("exited_segments: ok\n");
  return 0;
}
