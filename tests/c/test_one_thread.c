/* test_one_thread.c — a single-threaded program stays single-threaded under hakmem, and its freed memory
 * is bounded anyway (tests/test_one_thread.py runs it).
 *
 * Cases:
 *   auto:  with HAKMEM_BACKGROUND_PURGE=auto (the default) a burst of large blocks (245 MiB) and one of
 *          small blocks (200 MB), each freed, start no thread: glibc's __libc_single_threaded stays set
 *          (stdio skips its locks, unshare(CLONE_NEWUSER) works). Right after the frees, with no sleep,
 *          the large cache holds at most 32 MiB resident beyond the most recently freed block, and the
 *          free slices at most 32 MiB. Then the program starts and joins one thread: the same bursts,
 *          freed, are now cached in full and come back while the program sleeps (the background purger,
 *          started by the next allocation).
 *   first-thread: the same bursts allocated while alone, then a thread created that makes no call, then
 *          every block freed without another allocation: the purger waits for an allocation to start, so
 *          those frees must trim (they kept all 200 MB for good once).
 *   phases: 50 cycles of six 8 MiB blocks, then 50 of 40,000 blocks of 1000 bytes, each cycle written and
 *          all freed: the trims learn that the memory comes back within the purge delay and stop (at
 *          32 MiB each tier purged in every cycle, and the program faulted its memory in again: 16 s for
 *          2000 large cycles against 0.24).
 *   learn: 20 cycles of 200 blocks of 1 MiB (large tier), then 20 of 800 of 256 KiB (slices), each written
 *          and all freed: the first cycle's frees trim (the bound starts at 32 MiB), and the second cycle's
 *          mallocs, taking back what those trims purged, raise the bound by it, so from the third cycle on
 *          nothing is faulted in again (doubled once per trim, the bound took three or four cycles, each
 *          faulting in 70-170 MiB again).
 *   slow-refill: cycles of 1,500 blocks of 4-256 KiB (200 MB), each written and all freed, whose
 *          allocations take the trimmed memory back over longer than a purge delay: counted as long as it
 *          goes on coming back, the trims stop (counted only within a delay of the last trim, the bound grew
 *          by a fraction a cycle: every cycle faulted in again; a program cycling 520 MB took 3-4x
 *          tcmalloc's time);
 *   cut-down: a 512 MiB and a 64 MiB block written and freed (trimmed), two 2 MiB blocks taken from those
 *          mappings (cut down), then 900 blocks of 1 MiB written and freed: the bound grows by the 4 MiB
 *          taken back, not by the mappings' sizes (counted whole, it kept 550 MiB resident after the
 *          burst, for good once the program went idle).
 *          (Grown also twofold at each trim's first refault, it kept 72 MiB.)
 *   sparse: 12 cycles of 20,000 blocks of 100 bytes aligned to 64 KiB, each written and all freed: every
 *          block takes a 64 KiB slice and touches one OS page of it. The trims count what the slices hold
 *          resident (80 MB), not their size (1.25 GiB, above the bound's 1 GiB ceiling), so they stop
 *          purging after a cycle or two (counted whole, every cycle purged 305 runs and faulted them in
 *          again: 5x mimalloc's time).
 *   off:   the large burst starts no thread where the environment turns idle purging off (the option, the
 *          fast profile, a purge delay of 0 or -1).
 *   on:    with HAKMEM_BACKGROUND_PURGE=on the large burst starts the purger in a single-threaded program.
 * Needs hakmem (hak_stats_get_sized through dlsym); on another allocator it prints "skip" and exits 77.
 *   unrelated-reuse DELAY_MS: bursts never reused, with a small block reused between them whose mapping
 *          its deadline purged: that reuse must not raise the trims' bound (it once did, doubling it at
 *          every burst: 405 MiB resident once the program went idle).
 * Usage: test_one_thread auto|first-thread|phases|learn|slow-refill|cut-down|sparse|off|on|unrelated-reuse DELAY_MS */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <time.h>
#include <unistd.h>

#include "hakmem.h"
#include "process_memory.h"

enum { BUDGET_KIB = 32 << 10, SMALL = SMALL_BURST };

/* Allocate `size` bytes, write them and free them; 0 on success. */
static int touch_and_free(size_t size) {
  char *p = malloc(size);
  if (p == NULL) return fprintf(stderr, "FAIL: malloc of %zu bytes\n", size), 1;
  memset(p, 1, size);
  free(p);
  return 0;
}

static void *nothing(void *arg) { return arg; }

static int check_auto(void) {
  long start = rss_kib();
  if (large_burst() != 0) return 1;
  long after_large = rss_kib();
  if (small_burst(true) != 0) return 1;
  long after_small = rss_kib();
  printf("auto: alone: %ld KiB resident at the start, %ld after the large burst's frees, %ld after the small "
         "one's; threads %d, single-threaded flag %d\n",
         start, after_large, after_small, thread_count(), (int)__libc_single_threaded);
  if (thread_count() != 1 || !__libc_single_threaded)
    return fprintf(stderr, "FAIL auto: a single-threaded program got a second thread\n"), 1;
  if (after_large - start > BUDGET_KIB + 1024)
    return fprintf(stderr, "FAIL auto: the large cache kept more than 32 MiB resident\n"), 1;
  if (after_small - after_large > BUDGET_KIB + 4096)
    return fprintf(stderr, "FAIL auto: the freed small blocks kept more than 32 MiB resident\n"), 1;

  pthread_t t;
  if (pthread_create(&t, NULL, nothing, NULL) != 0 || pthread_join(t, NULL) != 0)
    return fprintf(stderr, "FAIL auto: thread\n"), 1;
  long before = rss_kib();
  if (large_burst() != 0) return 1;
  long cached = rss_kib();
  int threads = thread_count(); /* the purger ends once it has nothing left to wait for: count it now */
  long asleep = sleep_until_rss(before + BUDGET_KIB / 4, 3000);
  printf("auto: threaded: %ld KiB before the large burst, %ld after its frees, %ld asleep; threads %d after the "
         "frees\n", before, cached, asleep, threads);
  if (cached - before < 200 << 10)
    return fprintf(stderr, "FAIL auto: with a thread, freed large blocks were not cached (proves nothing)\n"), 1;
  if (threads != 2) return fprintf(stderr, "FAIL auto: no purger once the program had a thread\n"), 1;
  if (asleep > before + BUDGET_KIB / 4)
    return fprintf(stderr, "FAIL auto: with a thread, freed memory stayed resident while the program slept\n"), 1;
  return 0;
}

static int blocker[2];

static void *wait_for_word(void *arg) {
  char c;
  return read(blocker[0], &c, 1) == 1 ? arg : NULL;
}

static int check_first_thread(void) {
  /* every small class gets a page now, so that pthread_create's own allocations find free blocks and do
   * not start the purger themselves (the case this checks is a program whose allocations are all done) */
  for (size_t size = 16; size <= 4096; size += 16) free(malloc(size));
  long start = rss_kib();
  static char *large[10], *small[SMALL];
  for (int i = 0; i < 10; i++) {
    large[i] = malloc(10 << 20);
    if (large[i] == NULL) return fprintf(stderr, "FAIL first-thread: malloc\n"), 1;
    memset(large[i], 1, 10 << 20);
  }
  for (int i = 0; i < SMALL; i++) {
    small[i] = malloc(1000);
    if (small[i] == NULL) return fprintf(stderr, "FAIL first-thread: malloc\n"), 1;
    memset(small[i], 2, 1000);
  }
  pthread_t t;
  if (pipe(blocker) != 0 || pthread_create(&t, NULL, wait_for_word, NULL) != 0)
    return fprintf(stderr, "FAIL first-thread: thread\n"), 1;
  long held = rss_kib();
  for (int i = 0; i < 10; i++) free(large[i]);
  for (int i = 0; i < SMALL; i++) free(small[i]);
  long freed = rss_kib();
  int threads = thread_count();
  long asleep = sleep_until_rss(start + 2 * BUDGET_KIB + 8192, 3000);
  printf("first-thread: %ld KiB at the start, %ld with the blocks live, %ld after their frees, %ld asleep; "
         "threads %d\n", start, held, freed, asleep, threads);
  if (held - start < 180 << 10) return fprintf(stderr, "FAIL first-thread: the blocks were not resident\n"), 1;
  /* two threads: the purger did not start, so the frees must have trimmed (a C library whose
   * pthread_create allocates on a slow path starts it: then it must give the memory back while asleep) */
  if (threads == 2 && freed - start > 2 * BUDGET_KIB + 8192)
    return fprintf(stderr, "FAIL first-thread: frees before the purger started kept more than the bounds\n"), 1;
  if (asleep - start > 2 * BUDGET_KIB + 8192)
    return fprintf(stderr, "FAIL first-thread: freed memory stayed resident while the program slept\n"), 1;
  if (write(blocker[1], "x", 1) != 1 || pthread_join(t, NULL) != 0)
    return fprintf(stderr, "FAIL first-thread: join\n"), 1;
  return 0;
}

static struct hak_stats stats_now(void) {
  int (*get)(struct hak_stats *, size_t) = (int (*)(struct hak_stats *, size_t))dlsym(RTLD_DEFAULT,
                                                                                     "hak_stats_get_sized");
  struct hak_stats st;
  memset(&st, 0, sizeof st);
  get(&st, sizeof st);
  return st;
}

static uint64_t madvise_calls(void) { return stats_now().madvise_calls; }

/* `cycles` cycles of `count` blocks of `size` bytes, written and all freed; the madvise calls made in the
 * last `tail` cycles. */
static uint64_t cycles_then_madvise(int cycles, int tail, int count, size_t size) {
  static char *blocks[40000];
  uint64_t before = 0;
  for (int c = 0; c < cycles; c++) {
    if (c == cycles - tail) before = madvise_calls();
    for (int i = 0; i < count; i++) {
      blocks[i] = malloc(size);
      if (blocks[i] == NULL) exit((fprintf(stderr, "FAIL phases: malloc\n"), 1));
      memset(blocks[i], 3, size);
    }
    for (int i = 0; i < count; i++) free(blocks[i]);
  }
  return madvise_calls() - before;
}

static int check_phases(void) {
  uint64_t large = cycles_then_madvise(50, 40, 6, (size_t)8 << 20);
  uint64_t small = cycles_then_madvise(50, 40, 40000, 1000);
  printf("phases: madvise calls in the last 40 of 50 cycles: %llu of six 8 MiB blocks, %llu of 40,000 of 1000 "
         "bytes; threads %d\n", (unsigned long long)large, (unsigned long long)small, thread_count());
  if (thread_count() != 1) return fprintf(stderr, "FAIL phases: a thread started\n"), 1;
  if (large > 4 || small > 4)
    return fprintf(stderr, "FAIL phases: the trims purged memory that every cycle needed again\n"), 1;
  return 0;
}

/* `cycles` cycles of `count` blocks of `size` bytes, written and all freed; the page faults taken in the
 * last `tail` cycles. */
static uint64_t cycles_then_faults(int cycles, int tail, int count, size_t size) {
  static char *blocks[1000];
  uint64_t before = 0;
  for (int c = 0; c < cycles; c++) {
    if (c == cycles - tail) before = stats_now().minor_faults;
    for (int i = 0; i < count; i++) {
      blocks[i] = malloc(size);
      if (blocks[i] == NULL) exit((fprintf(stderr, "FAIL learn: malloc\n"), 1));
      memset(blocks[i], 3, size);
    }
    for (int i = 0; i < count; i++) free(blocks[i]);
  }
  return stats_now().minor_faults - before;
}

static int check_learn(void) {
  /* a cycle writes 51,200 OS pages; each cycle that the trims purge faults 30,000-45,000 of them in again */
  enum { CYCLES = 20, TAIL = 18, MOST = 5000 };
  uint64_t large = cycles_then_faults(CYCLES, TAIL, 200, (size_t)1 << 20);
  uint64_t medium = cycles_then_faults(CYCLES, TAIL, 800, (size_t)256 << 10);
  printf("learn: page faults in the last %d of %d cycles: %llu of 200 blocks of 1 MiB, %llu of 800 of 256 KiB; "
         "threads %d\n", TAIL, CYCLES, (unsigned long long)large, (unsigned long long)medium, thread_count());
  if (thread_count() != 1) return fprintf(stderr, "FAIL learn: a thread started\n"), 1;
  if (large > MOST || medium > MOST)
    return fprintf(stderr, "FAIL learn: the trims kept purging memory after the first cycle's came back\n"), 1;
  return 0;
}

/* slow-refill: cycles of 1,500 blocks of 4-256 KiB (about 200 MB), each written and all freed: each cycle's
 * frees trim, and its allocations take the trimmed memory back over longer than a purge delay (run with a
 * delay of 50 ms; about 150 ms on the AMD VM type). */
enum { REFILL_BLOCKS = 1500, REFILL_CYCLES = 8, REFILL_TAIL = 4 };

static int check_slow_refill(void) {
  static char *blocks[REFILL_BLOCKS];
  static size_t sizes[REFILL_BLOCKS];
  uint64_t seed = 7, pages = 0, before = 0;
  for (int i = 0; i < REFILL_BLOCKS; i++) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    sizes[i] = ((size_t)4 << 10) + seed % ((size_t)252 << 10);
    pages += (sizes[i] + 4095) / 4096;
  }
  for (int c = 0; c < REFILL_CYCLES; c++) {
    if (c == REFILL_CYCLES - REFILL_TAIL) before = stats_now().minor_faults;
    for (int i = 0; i < REFILL_BLOCKS; i++) {
      blocks[i] = malloc(sizes[i]);
      if (blocks[i] == NULL) return fprintf(stderr, "FAIL slow-refill: malloc\n"), 1;
      memset(blocks[i], 5, sizes[i]);
    }
    for (int i = 0; i < REFILL_BLOCKS; i++) free(blocks[i]);
  }
  uint64_t faults = stats_now().minor_faults - before;
  printf("slow-refill: page faults in the last %d of %d cycles: %llu (a cycle writes %llu pages); threads %d\n",
         REFILL_TAIL, REFILL_CYCLES, (unsigned long long)faults, (unsigned long long)pages, thread_count());
  if (thread_count() != 1) return fprintf(stderr, "FAIL slow-refill: a thread started\n"), 1;
  if (faults > pages / 4)
    return fprintf(stderr, "FAIL slow-refill: the trims kept purging memory that every cycle took back\n"), 1;
  return 0;
}

static int check_cut_down(void) {
  enum { BURST = 900 };
  static char *burst[BURST];
  long start = rss_kib();
  char *a = malloc((size_t)512 << 20), *b = malloc((size_t)64 << 20);
  if (a == NULL || b == NULL) return fprintf(stderr, "FAIL cut-down: malloc\n"), 1;
  memset(a, 1, (size_t)512 << 20);
  memset(b, 1, (size_t)64 << 20);
  free(a);
  free(b);
  char *k1 = malloc(2 << 20), *k2 = malloc(2 << 20);
  if (k1 == NULL || k2 == NULL) return fprintf(stderr, "FAIL cut-down: malloc\n"), 1;
  memset(k1, 2, 2 << 20);
  memset(k2, 2, 2 << 20);
  for (int i = 0; i < BURST; i++) {
    burst[i] = malloc(1 << 20);
    if (burst[i] == NULL) return fprintf(stderr, "FAIL cut-down: malloc\n"), 1;
    memset(burst[i], 3, 1 << 20);
  }
  for (int i = 0; i < BURST; i++) free(burst[i]);
  long after = rss_kib();
  printf("cut-down: %ld KiB more resident than at the start after the burst's frees; threads %d\n", after - start,
         thread_count());
  free(k1);
  free(k2);
  if (thread_count() != 1) return fprintf(stderr, "FAIL cut-down: a thread started\n"), 1;
  /* the two kept blocks (4 MiB), the newest burst block, and a bound of 32 MiB plus the 4 MiB taken back */
  if (after - start > (4 + 1 + 32 + 4) * 1024 + 8192)
    return fprintf(stderr, "FAIL cut-down: taking back a few MiB of trimmed mappings raised the bound by "
                           "their whole size\n"), 1;
  return 0;
}

static int check_sparse(void) {
  enum { CYCLES = 12, TAIL = 8, COUNT = 20000 };
  static void *blocks[COUNT];
  struct hak_stats before = {0};
  for (int c = 0; c < CYCLES; c++) {
    if (c == CYCLES - TAIL) before = stats_now();
    for (int i = 0; i < COUNT; i++) {
      if (posix_memalign(&blocks[i], 64 << 10, 100) != 0) return fprintf(stderr, "FAIL sparse: posix_memalign\n"), 1;
      memset(blocks[i], 5, 100);
    }
    for (int i = 0; i < COUNT; i++) free(blocks[i]);
  }
  struct hak_stats after = stats_now();
  uint64_t calls = after.madvise_calls - before.madvise_calls, measures = after.mincore_calls - before.mincore_calls;
  printf("sparse: in the last %d of %d cycles of %d blocks of 100 bytes aligned to 64 KiB: %llu madvise calls, "
         "%llu mincore; threads %d\n", TAIL, CYCLES, COUNT, (unsigned long long)calls, (unsigned long long)measures,
         thread_count());
  if (thread_count() != 1) return fprintf(stderr, "FAIL sparse: a thread started\n"), 1;
  if (calls > 4) return fprintf(stderr, "FAIL sparse: the trims purged slices that hold one page each\n"), 1;
  /* the trims measure each segment about once a cycle (313 segments: about 310 calls); a measure per freed
   * block would be 20,000 */
  if (measures == 0 || measures > TAIL * COUNT / 10)
    return fprintf(stderr, "FAIL sparse: %llu mincore calls: the trims did not measure, or measured at every free\n",
                   (unsigned long long)measures), 1;
  return 0;
}

/* Bursts of ten 40 MiB blocks, written and freed, never reused; between them a 4 MiB block is allocated
 * and freed, its cached mapping purged by its deadline (the bursts come a purge delay and a half apart).
 * `delay_ms` is the purge delay in force. */
static int check_unrelated_reuse(long delay_ms) {
  long start = rss_kib(), worst = 0;
  if (touch_and_free(4 << 20) != 0) return 1;
  for (int round = 0; round < 6; round++) {
    sleep_ms(delay_ms * 3 / 2);
    char *p[10];
    for (int i = 0; i < 10; i++) {
      p[i] = malloc(40 << 20);
      if (p[i] == NULL) return fprintf(stderr, "FAIL unrelated-reuse: malloc\n"), 1;
      memset(p[i], 2, 40 << 20);
    }
    for (int i = 0; i < 10; i++) free(p[i]);
    long rss = rss_kib();
    if (rss - start > worst) worst = rss - start;
    if (touch_and_free(4 << 20) != 0) return 1;
  }
  printf("unrelated-reuse: at most %ld KiB more resident than at the start after a burst's frees; threads %d\n",
         worst, thread_count());
  /* the bound (32 MiB) plus the newest block (40 MiB), which always stays */
  if (worst > BUDGET_KIB + (40 << 10) + 8192)
    return fprintf(stderr, "FAIL unrelated-reuse: reuse of memory no trim purged raised the bound\n"), 1;
  return 0;
}

static int check_off(void) {
  if (large_burst() != 0) return 1;
  sleep_ms(300);
  printf("off: threads %d after a 245 MiB burst\n", thread_count());
  if (thread_count() != 1) return fprintf(stderr, "FAIL off: a thread started\n"), 1;
  return 0;
}

static int check_on(void) {
  if (large_burst() != 0) return 1;
  if (touch_and_free(1 << 20) != 0) return 1; /* the purger starts on an allocation path */
  printf("on: threads %d after a 245 MiB burst\n", thread_count());
  if (thread_count() != 2) return fprintf(stderr, "FAIL on: no purger in a single-threaded program\n"), 1;
  return 0;
}

int main(int argc, char **argv) {
  if (dlsym(RTLD_DEFAULT, "hak_stats_get_sized") == NULL) {
    puts("skip: not running on hakmem");
    return 77;
  }
  if (argc == 2 && strcmp(argv[1], "auto") == 0) return check_auto();
  if (argc == 2 && strcmp(argv[1], "first-thread") == 0) return check_first_thread();
  if (argc == 2 && strcmp(argv[1], "phases") == 0) return check_phases();
  if (argc == 2 && strcmp(argv[1], "learn") == 0) return check_learn();
  if (argc == 2 && strcmp(argv[1], "slow-refill") == 0) return check_slow_refill();
  if (argc == 2 && strcmp(argv[1], "cut-down") == 0) return check_cut_down();
  if (argc == 2 && strcmp(argv[1], "sparse") == 0) return check_sparse();
  if (argc == 3 && strcmp(argv[1], "unrelated-reuse") == 0) return check_unrelated_reuse(atol(argv[2]));
  if (argc == 2 && strcmp(argv[1], "off") == 0) return check_off();
  if (argc == 2 && strcmp(argv[1], "on") == 0) return check_on();
  fprintf(stderr, "usage: test_one_thread auto|first-thread|phases|learn|slow-refill|cut-down|sparse|off|on|unrelated-reuse DELAY_MS\n");
  return 2;
}
