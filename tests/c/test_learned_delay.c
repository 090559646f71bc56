/* test_learned_delay.c — the large tier's purge delay learns from blocks reused soon after their deadline
 * purged them (src/large.c), and only from those (tests/test_learned_delay.py runs it with
 * HAKMEM_PURGE_MODE=dontneed and the purge delay given).
 *
 * Cases (each creates and joins a thread first, so that the background purger runs):
 *   periodic DELAY_MS: a 64 MiB block written and freed every 3 delays, 8 rounds: the purger purges it
 *          between the first rounds, the next malloc takes it back and the delay learns that interval, so
 *          at most one of the last five rounds faults its pages in again (before: every round did).
 *   sparse DELAY_MS: the same every 40 delays, 5 rounds: beyond what the delay may learn (32 of it), so
 *          the block is purged between every two rounds, as the option says.
 * Needs hakmem (hak_stats_get_sized through dlsym); on another allocator it prints "skip" and exits 77.
 * Usage: test_learned_delay periodic|sparse DELAY_MS */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "hakmem.h"
#include "process_memory.h"

enum { BLOCK_MIB = 64, BLOCK_PAGES = (BLOCK_MIB << 20) / 4096 };

static void *nothing(void *arg) { return arg; }

static long minor_faults(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* `rounds` rounds of a 64 MiB block written and freed, `period_ms` apart; the page faults of each round,
 * and the resident KiB read just before each round's malloc. */
static int rounds_of(int rounds, long period_ms, long *faults, long *rss_before) {
  for (int r = 0; r < rounds; r++) {
    rss_before[r] = rss_kib();
    long f0 = minor_faults();
    char *p = malloc((size_t)BLOCK_MIB << 20);
    if (p == NULL) return fprintf(stderr, "FAIL: malloc of %d MiB\n", BLOCK_MIB), 1;
    memset(p, r + 1, (size_t)BLOCK_MIB << 20);
    free(p);
    faults[r] = minor_faults() - f0;
    sleep_ms(period_ms);
  }
  return 0;
}

/* A round faulted its block in again: over half of its pages (a kernel that faults 64 KiB at a time
 * still counts 1024 for a fresh block; one kept counts none). */
static bool refaulted(long faults) { return faults > BLOCK_PAGES / 32; }

static int check_periodic(long delay_ms) {
  enum { ROUNDS = 8, LAST = 5 };
  long faults[ROUNDS], rss[ROUNDS];
  if (rounds_of(ROUNDS, 3 * delay_ms, faults, rss) != 0) return 1;
  int again = 0;
  printf("periodic: faults per round");
  for (int r = 0; r < ROUNDS; r++) printf(" %ld", faults[r]);
  for (int r = ROUNDS - LAST; r < ROUNDS; r++) again += refaulted(faults[r]);
  printf("; %d of the last %d rounds faulted the block in again\n", again, LAST);
  if (!refaulted(faults[0])) return fprintf(stderr, "FAIL periodic: the first round faulted nothing in\n"), 1;
  if (again > 1)
    return fprintf(stderr, "FAIL periodic: a block reused every 3 purge delays was purged between rounds\n"), 1;
  return 0;
}

static int check_sparse(long delay_ms) {
  enum { ROUNDS = 5 };
  long faults[ROUNDS], rss[ROUNDS];
  long start = rss_kib();
  if (rounds_of(ROUNDS, 40 * delay_ms, faults, rss) != 0) return 1;
  int kept = 0;
  printf("sparse: faults per round");
  for (int r = 0; r < ROUNDS; r++) printf(" %ld", faults[r]);
  printf("; resident before each round (KiB above the start)");
  for (int r = 0; r < ROUNDS; r++) printf(" %ld", rss[r] - start);
  for (int r = 1; r < ROUNDS; r++) kept += !refaulted(faults[r]) || rss[r] - start > (BLOCK_MIB << 10) / 2;
  printf("; kept %d times\n", kept);
  if (kept > 0)
    return fprintf(stderr, "FAIL sparse: a block reused only every 40 purge delays stayed resident\n"), 1;
  return 0;
}

int main(int argc, char **argv) {
  if (dlsym(RTLD_DEFAULT, "hak_stats_get_sized") == NULL) {
    printf("skip: not running on hakmem\n");
    return 77;
  }
  if (argc != 3 || atol(argv[2]) <= 0) {
    fprintf(stderr, "usage: test_learned_delay periodic|sparse DELAY_MS\n");
    return 2;
  }
  pthread_t t;
  if (pthread_create(&t, NULL, nothing, NULL) != 0 || pthread_join(t, NULL) != 0)
    return fprintf(stderr, "FAIL: thread\n"), 1;
  long delay_ms = atol(argv[2]);
  if (strcmp(argv[1], "periodic") == 0) return check_periodic(delay_ms);
  if (strcmp(argv[1], "sparse") == 0) return check_sparse(delay_ms);
  fprintf(stderr, "usage: test_learned_delay periodic|sparse DELAY_MS\n");
  return 2;
}
