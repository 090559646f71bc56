/* test_learned_delay.c — the purge delay learns from memory reused soon after its deadline purged it
 * (src/purge_delay.c: large blocks, src/large.c; free slices, src/segment.c), and only from that
 * (tests/test_learned_delay.py runs it with HAKMEM_PURGE_MODE=dontneed and the purge delay given).
 *
 * Cases (each creates and joins a thread first, so that the background purger runs):
 *   periodic DELAY_MS: a 64 MiB block written and freed every 3 delays, 8 rounds: the purger purges it
 *          between the first rounds, the next malloc takes it back and the delay learns that interval, so
 *          at most one of the last five rounds faults its pages in again (before: every round did).
 *   slices DELAY_MS: the same with 256 blocks of 256 KiB (small and medium pages: their segments' free
 *          slices, purged by their deadline, faulted in again at every round before).
 *   sparse DELAY_MS: the same every 40 delays, 5 rounds: beyond what the delay may learn (32 of it), so
 *          the block is purged between every two rounds, as the option says.
 *   share DELAY_MS: 64 MiB of 4 KiB blocks in bursts 60 delays apart, and between them a new thread's
 *          few small blocks and one medium block, which take back a few purged slices: each burst is
 *          purged within 20 delays all the same.
 *   ratchet DELAY_MS: the slices' rounds every 3 delays, one pause of 25 delays, then rounds every 3
 *          delays again: the pause taught the delay 31 delays, and the rounds after it bring it down, so
 *          the last round's memory is purged within 12 delays of its free.
 *   young DELAY_MS: 64 MiB in 256 KiB blocks; those in the lower half of each 4 MiB-aligned span (the
 *          first page of a segment) freed, and those in the upper half (its second page) 7/10 of a delay
 *          later: 13/10 of a delay after the first frees, the first are purged and the later ones still
 *          resident (a segment's deadline, its oldest slices', purged them all before), and 3 delays
 *          after, both.
 *   held DELAY_MS: a 256 MiB block written, freed, and asked for again 4 delays later: kept for its size
 *          (about 1 ms for each MiB resident, src/large.c hold_ms), it faults nothing in again; freed once
 *          more, it goes back to the OS within 3 s all the same.
 *   held-on DELAY_MS: a 480 MiB block freed (held for its size: the cache holds under half its 1 GiB
 *          cap), then 7 delays later a live 100 MiB block freed, which takes the cache past half its cap:
 *          the first block is still resident right after (the second free did not end its hold and purge
 *          it itself, as a first version did: 32-43 ms in that free), and both go back within 3 s.
 *   held-cap DELAY_MS: a 400 MiB block freed (held for its size), then 7 delays later a live 700 MiB
 *          block freed, which takes the cache past its 1 GiB cap: the first block, past the delay, is
 *          left to the purger (tests/test_learned_delay.py reads with strace that the main thread did
 *          not purge it: that took the free 41-55 ms) and goes back within 3 s. Prints its address and
 *          the process id.
 * Needs hakmem (hak_stats_get_sized through dlsym); on another allocator it prints "skip" and exits 77.
 * Usage: test_learned_delay periodic|slices|sparse|share|ratchet|young|held|held-on|held-cap DELAY_MS */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "hakmem.h"
#include "process_memory.h"

enum { BLOCK_MIB = 64, BLOCK_PAGES = (BLOCK_MIB << 20) / 4096 };

static void *nothing(void *arg) { return arg; }

static long minor_faults(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

/* `rounds` rounds of 64 MiB in `count` blocks written and freed, `period_ms` apart; the page faults of
 * each round, and the resident KiB read just before each round's mallocs. */
static int rounds_of(int rounds, long period_ms, int count, long *faults, long *rss_before) {
  static char *blocks[256];
  size_t size = ((size_t)BLOCK_MIB << 20) / (size_t)count;
  for (int r = 0; r < rounds; r++) {
    rss_before[r] = rss_kib();
    long f0 = minor_faults();
    for (int i = 0; i < count; i++) {
      blocks[i] = malloc(size);
      if (blocks[i] == NULL) return fprintf(stderr, "FAIL: malloc of %zu bytes\n", size), 1;
      memset(blocks[i], r + 1, size);
    }
    for (int i = 0; i < count; i++) free(blocks[i]);
    faults[r] = minor_faults() - f0;
    sleep_ms(period_ms);
  }
  return 0;
}

/* The first round faulted a fresh block in: 16,384 faults, or 1,024 from a kernel that faults 64 KiB at
 * a time; over half of the latter. */
static bool faulted_fresh(long faults) { return faults > BLOCK_PAGES / 32; }

/* A round faulted its block in again: over an eighth of what the first round faulted, whatever the
 * kernel's fault size. A kept block still takes a few hundred faults a round (the 256-block rounds: 448,
 * the half segment that every other round's allocations leave out and its delay purges), too close to a
 * fixed 512. */
static bool refaulted(long faults, long fresh) { return faults > fresh / 8; }

/* `name`: 64 MiB in `count` blocks every 3 delays. */
static int check_periodic(const char *name, int count, long delay_ms) {
  enum { ROUNDS = 8, LAST = 5 };
  long faults[ROUNDS], rss[ROUNDS];
  if (rounds_of(ROUNDS, 3 * delay_ms, count, faults, rss) != 0) return 1;
  int again = 0;
  printf("%s: faults per round", name);
  for (int r = 0; r < ROUNDS; r++) printf(" %ld", faults[r]);
  for (int r = ROUNDS - LAST; r < ROUNDS; r++) again += refaulted(faults[r], faults[0]);
  printf("; %d of the last %d rounds faulted the block in again\n", again, LAST);
  if (!faulted_fresh(faults[0])) return fprintf(stderr, "FAIL %s: the first round faulted nothing in\n", name), 1;
  if (again > 1)
    return fprintf(stderr, "FAIL %s: memory reused every 3 purge delays was purged between rounds\n", name), 1;
  return 0;
}

static int check_sparse(long delay_ms) {
  enum { ROUNDS = 5 };
  long faults[ROUNDS], rss[ROUNDS];
  long start = rss_kib();
  if (rounds_of(ROUNDS, 40 * delay_ms, 1, faults, rss) != 0) return 1;
  int kept = 0;
  printf("sparse: faults per round");
  for (int r = 0; r < ROUNDS; r++) printf(" %ld", faults[r]);
  printf("; resident before each round (KiB above the start)");
  for (int r = 0; r < ROUNDS; r++) printf(" %ld", rss[r] - start);
  if (!faulted_fresh(faults[0])) return fprintf(stderr, "FAIL sparse: the first round faulted nothing in\n"), 1;
  for (int r = 1; r < ROUNDS; r++) kept += !refaulted(faults[r], faults[0]) || rss[r] - start > (BLOCK_MIB << 10) / 2;
  printf("; kept %d times\n", kept);
  if (kept > 0)
    return fprintf(stderr, "FAIL sparse: a block reused only every 40 purge delays stayed resident\n"), 1;
  return 0;
}

static int check_held(long delay_ms) {
  enum { HELD_MIB = 256 };
  size_t size = (size_t)HELD_MIB << 20;
  long start = rss_kib();
  char *block = malloc(size);
  if (block == NULL) return fprintf(stderr, "FAIL held: malloc of %zu bytes\n", size), 1;
  long f0 = minor_faults();
  memset(block, 1, size);
  long fresh = minor_faults() - f0;
  free(block);
  sleep_ms(4 * delay_ms);
  block = malloc(size);
  if (block == NULL) return fprintf(stderr, "FAIL held: malloc of %zu bytes again\n", size), 1;
  f0 = minor_faults();
  memset(block, 2, size);
  long again = minor_faults() - f0;
  free(block);
  long waited = 0, above = 0;
  for (; waited < 3000; waited += 10) {
    above = rss_kib() - start;
    if (above < (HELD_MIB << 10) / 2) break;
    sleep_ms(10);
  }
  printf("held: faults %ld, then %ld after 4 delays; back to %ld KiB above the start %ld ms after the second free\n",
         fresh, again, above, waited);
  if (fresh < ((long)HELD_MIB << 8) / 32) return fprintf(stderr, "FAIL held: the first round faulted nothing in\n"), 1;
  if (refaulted(again, fresh))
    return fprintf(stderr, "FAIL held: a 256 MiB block asked for again 4 purge delays after its free was purged\n"), 1;
  if (above >= (HELD_MIB << 10) / 2)
    return fprintf(stderr, "FAIL held: a freed 256 MiB block stayed resident for 3 s\n"), 1;
  return 0;
}

/* A block of `first_mib` and one of `second_mib` written; the first freed, and the second 7 delays later.
 * Returns the KiB above the start right after the second free in *after, then waits up to 3 s for the
 * resident memory above the start to fall under `below_kib`: what it is then in *above, the ms waited in
 * *waited. Prints the first block's address and the process id first. 1 if a malloc failed. */
static int two_frees(const char *name, size_t first_mib, size_t second_mib, long delay_ms, long below_kib,
                     long *after, long *above, long *waited) {
  size_t first = first_mib << 20, second = second_mib << 20;
  long start = rss_kib();
  char *a = malloc(first), *b = malloc(second);
  if (a == NULL || b == NULL) return fprintf(stderr, "FAIL %s: malloc\n", name), 1;
  memset(a, 1, first);
  memset(b, 2, second);
  printf("%s: first block %p in process %ld\n", name, (void *)a, (long)getpid());
  fflush(stdout);
  free(a);
  sleep_ms(7 * delay_ms);
  free(b);
  *after = *above = rss_kib() - start;
  for (*waited = 0; *waited < 3000 && *above >= below_kib; *waited += 10) {
    sleep_ms(10);
    *above = rss_kib() - start;
  }
  printf("%s: %ld KiB above the start right after the second free; %ld KiB %ld ms later\n", name, *after,
         *above, *waited);
  return 0;
}

static int check_held_on(long delay_ms) {
  long after, above, waited;
  if (two_frees("held-on", 480, 100, delay_ms, 100 << 10, &after, &above, &waited) != 0) return 1;
  if (after < (480 << 10) * 9 / 10)
    return fprintf(stderr, "FAIL held-on: the second free gave back the first block, held for its size\n"), 1;
  if (above >= (100 << 10)) return fprintf(stderr, "FAIL held-on: the blocks stayed resident for 3 s\n"), 1;
  return 0;
}

static int check_held_cap(long delay_ms) {
  long after, above, waited, below = (700 << 10) + (50 << 10);
  if (two_frees("held-cap", 400, 700, delay_ms, below, &after, &above, &waited) != 0) return 1;
  if (above >= below)
    return fprintf(stderr, "FAIL held-cap: the first block stayed resident for 3 s past the cap\n"), 1;
  return 0;
}

/* A new thread's few small blocks and one medium block, 100 bytes of it written. */
static void *trickle(void *arg) {
  char *small[10];
  for (int i = 0; i < 10; i++) {
    small[i] = malloc(200);
    if (small[i] != NULL) memset(small[i], 3, 200);
  }
  char *medium = malloc(56 << 10);
  if (medium != NULL) memset(medium, 3, 100);
  for (int i = 0; i < 10; i++) free(small[i]);
  free(medium);
  return arg;
}

static int check_share(long delay_ms) {
  enum { ROUNDS = 5, COUNT = (BLOCK_MIB << 20) / 4096 };
  static char *blocks[COUNT];
  long start = rss_kib(), after[ROUNDS];
  int held = 0;
  for (int r = 0; r < ROUNDS; r++) {
    for (int i = 0; i < COUNT; i++) {
      blocks[i] = malloc(4096);
      if (blocks[i] == NULL) return fprintf(stderr, "FAIL share: malloc\n"), 1;
      memset(blocks[i], r + 1, 4096);
    }
    for (int i = 0; i < COUNT; i++) free(blocks[i]);
    sleep_ms(20 * delay_ms);
    after[r] = rss_kib() - start;
    held += after[r] > (BLOCK_MIB << 10) / 2;
    sleep_ms(10 * delay_ms);
    pthread_t t;
    if (pthread_create(&t, NULL, trickle, NULL) != 0 || pthread_join(t, NULL) != 0)
      return fprintf(stderr, "FAIL share: thread\n"), 1;
    sleep_ms(30 * delay_ms);
  }
  printf("share: resident 20 delays after each burst (KiB above the start)");
  for (int r = 0; r < ROUNDS; r++) printf(" %ld", after[r]);
  printf("; held %d times\n", held);
  if (held > 0)
    return fprintf(stderr, "FAIL share: a few small blocks taught the delay, and a burst stayed resident\n"), 1;
  return 0;
}

/* Rounds of 64 MiB in 256 blocks every 3 delays around one pause of 25; how long the last round's
 * memory stays resident after its free. */
static int check_ratchet(long delay_ms) {
  enum { BEFORE = 4, AFTER = 12, HELD_MOST = 12, WAIT_MOST = 60 };
  long faults[AFTER], rss[AFTER];
  long start = rss_kib();
  if (rounds_of(BEFORE, 3 * delay_ms, 256, faults, rss) != 0) return 1;
  if (rounds_of(1, 25 * delay_ms, 256, faults, rss) != 0) return 1;
  if (rounds_of(AFTER, 3 * delay_ms, 256, faults, rss) != 0) return 1;
  if (rounds_of(1, 0, 256, faults, rss) != 0) return 1;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long waited_ms = 0;
  while (rss_kib() - start > (BLOCK_MIB << 10) / 2 && waited_ms < WAIT_MOST * delay_ms) {
    sleep_ms(delay_ms / 4 > 0 ? delay_ms / 4 : 1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    waited_ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
  }
  printf("ratchet: the last round stayed resident %ld ms after its free (%.1f delays)\n", waited_ms,
         (double)waited_ms / (double)delay_ms);
  if (waited_ms > HELD_MOST * delay_ms)
    return fprintf(stderr, "FAIL ratchet: one pause kept the delay it taught while rounds came back every 3 "
                           "delays\n"), 1;
  return 0;
}

/* Sleep until `ms` after `t0` (CLOCK_MONOTONIC). */
static void sleep_until(const struct timespec *t0, long ms) {
  struct timespec at = {t0->tv_sec + ms / 1000, t0->tv_nsec + (ms % 1000) * 1000000L};
  if (at.tv_nsec >= 1000000000L) {
    at.tv_sec++;
    at.tv_nsec -= 1000000000L;
  }
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) != 0) {
  }
}

static int check_young(long delay_ms) {
  enum { COUNT = 256, SIZE = 256 << 10 };
  static char *blocks[COUNT];
  long start = rss_kib(), half_kib[2] = {0, 0};
  for (int i = 0; i < COUNT; i++) {
    blocks[i] = malloc(SIZE);
    if (blocks[i] == NULL) return fprintf(stderr, "FAIL young: malloc\n"), 1;
    memset(blocks[i], 5, SIZE);
    half_kib[((uintptr_t)blocks[i] >> 21) & 1] += SIZE >> 10;
  }
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int half = 0; half < 2; half++) {
    if (half == 1) sleep_until(&t0, delay_ms * 7 / 10);
    for (int i = 0; i < COUNT; i++)
      if ((((uintptr_t)blocks[i] >> 21) & 1) == (uintptr_t)half) free(blocks[i]);
  }
  sleep_until(&t0, delay_ms * 13 / 10);
  long between = rss_kib() - start;
  sleep_until(&t0, delay_ms * 3);
  long after = rss_kib() - start;
  printf("young: KiB freed first %ld, later %ld; resident above the start 13/10 delays after the first frees "
         "%ld, 3 delays after %ld\n", half_kib[0], half_kib[1], between, after);
  if (half_kib[0] < (COUNT * (SIZE >> 10)) / 4 || half_kib[1] < (COUNT * (SIZE >> 10)) / 4)
    return fprintf(stderr, "FAIL young: the blocks do not lie in both halves of their segments\n"), 1;
  if (between < half_kib[1] * 3 / 4)
    return fprintf(stderr, "FAIL young: the later frees were purged by the first ones' deadline\n"), 1;
  if (between > half_kib[1] + half_kib[0] / 4)
    return fprintf(stderr, "FAIL young: the first frees were not purged by their deadline\n"), 1;
  if (after > (half_kib[0] + half_kib[1]) / 4)
    return fprintf(stderr, "FAIL young: the later frees were not purged by their deadline\n"), 1;
  return 0;
}

int main(int argc, char **argv) {
  if (dlsym(RTLD_DEFAULT, "hak_stats_get_sized") == NULL) {
    printf("skip: not running on hakmem\n");
    return 77;
  }
  if (argc != 3 || atol(argv[2]) <= 0) {
    fprintf(stderr, "usage: test_learned_delay periodic|slices|sparse|share|ratchet|young|held|held-on|held-cap DELAY_MS\n");
    return 2;
  }
  pthread_t t;
  if (pthread_create(&t, NULL, nothing, NULL) != 0 || pthread_join(t, NULL) != 0)
    return fprintf(stderr, "FAIL: thread\n"), 1;
  long delay_ms = atol(argv[2]);
  if (strcmp(argv[1], "periodic") == 0) return check_periodic("periodic", 1, delay_ms);
  if (strcmp(argv[1], "slices") == 0) return check_periodic("slices", 256, delay_ms);
  if (strcmp(argv[1], "sparse") == 0) return check_sparse(delay_ms);
  if (strcmp(argv[1], "share") == 0) return check_share(delay_ms);
  if (strcmp(argv[1], "ratchet") == 0) return check_ratchet(delay_ms);
  if (strcmp(argv[1], "young") == 0) return check_young(delay_ms);
  if (strcmp(argv[1], "held") == 0) return check_held(delay_ms);
  if (strcmp(argv[1], "held-on") == 0) return check_held_on(delay_ms);
  if (strcmp(argv[1], "held-cap") == 0) return check_held_cap(delay_ms);
  fprintf(stderr, "usage: test_learned_delay periodic|slices|sparse|share|ratchet|young|held|held-on|held-cap DELAY_MS\n");
  return 2;
}
