/* test_reclaim.c — memory that must come back, from corners found in review:
 *   late:   a thread whose other TSD destructor allocates after hakmem's own ran (a heap made then could
 *           never be abandoned): 200 such threads must not keep a segment each;
 *   round4: threads whose first allocation comes in the last round of key destructors: their heaps go
 *           back through sweeps (as the heap pool grows, and at malloc_trim);
 *   trim:   pages emptied only by remote frees, never looked at by their owner again, must be released by
 *           malloc_trim / hak_collect(true);
 *   trim-first-pages: blocks of three medium classes written and freed, each class's first page left
 *           empty (which a heap keeps): malloc_trim gives them back;
 *   medium: blocks of 8..32 KiB replaced at random, touched at both ends (the lab's mid_large_mt): pages of
 *           one class must not land on slices another class left dirty, where the old blocks' touched
 *           OS pages would stay resident between the new ones (that took 10 MiB of RSS instead of 3);
 *   regrow: 200 vectors grown by realloc, 256 B at a time, to 128 KiB: each class takes the slices the
 *           class below left, within the purge delay; they must not be purged and faulted in again;
 *   turns:  blocks of two medium sizes (45,000 and 53,000 bytes) allocated and freed by turns beside a
 *           live set of 32 KiB blocks sized so that the heap's free room holds a page of one class but not
 *           both: each class must keep its emptied page, not take the other's room at every malloc (a
 *           review of a pass that was not kept: a slow path per malloc, 29 -> 380-640 ns a round, 24 us
 *           with a purge delay of 0; docs/notes/2026-11-26-unused-classes.md);
 *   hot-head: with 40 MiB live (the purger covers idle programs, so kept first pages are bounded), twelve
 *           128 KiB blocks freed once leave their class's first page kept; a loop of 200 KB malloc+free
 *           must end up keeping its own class's first page (the class is hot; the cold page ages out at
 *           the heap's passes), not retire and take it again at every call for good (300,004 slow-path
 *           allocations in 300,000 pairs, 375-383 ns a pair, glibc 44;
 *           docs/notes/2026-11-26-cold-kept-heads.md);
 *   large:  blocks of 5..25 MiB replaced at random, one byte written every 64 KiB (the lab's big): the
 *           large cache must not pile up mappings that no request fits;
 *   many-large: cycles of 50 blocks each of 600 KiB, 1, 3 and 5 MiB, interleaved, one byte written in each,
 *           all freed: from the second cycle on every request is served by a cached mapping of its own
 *           size, without mmap, munmap or mremap (the cache held 64 mappings once: 136 of 200 unmapped
 *           and mapped again at every cycle). Then, the cache emptied each time, a freed 520 MiB mapping
 *           (a size bin past the first 64) serves an 8 MiB request, a freed 8 MiB one a 12 MiB request,
 *           and a freed 500 MiB one a 600 MiB request: the nearest mapping is found above and below,
 *           across the bins' bitmap words both ways. Last, a freed 1.17 MiB mapping behind 16 freed
 *           1 MiB ones in its bin, and a freed 100 MiB one, serve a 1.17 MiB and a 100 MiB request
 *           without mremap (a search that stopped after 16 cut the 100 MiB mapping down instead);
 *   tail:   a cached 24 MiB mapping, every page touched, reused for an 18 MiB block must give back the
 *           pages of its unused 6 MiB tail;
 *   aged:   a cached large mapping that no later request fits must still be purged by the clock while
 *           the program goes on allocating other large blocks;
 *   idle:   after a mass free, a thread that only runs a malloc+free loop (which never empties a free
 *           list, since frees go back on it) must still get its maintenance, so the freed pages are
 *           purged once the purge delay has passed;
 *   reuse:  a freed large block serves the next request of its size and goes back on hak_collect(true);
 *   emptied: a thread that frees all of an exited thread's blocks takes its segment over (after 64
 *           frees), so they count as freed and the other exited thread's blocks stay intact;
 *   pool:   an idle thread that freed one in 1,000 of an exited worker's blocks must not take its
 *           segments over: the main thread frees the rest and allocates as many again, in the same memory;
 *   deadline: pages freed, their slices taken again by new pages before the purge delay ran out, then
 *           freed again after it: the second free gets a full delay of its own (a deadline left over
 *           from the first once purged it at the next maintenance pass);
 *   asleep: a thread that frees nearly all its blocks and exits (its segments abandoned, and its exit
 *           what asks for the purger), then 60 MB of blocks an exited thread left live, freed by the main
 *           thread in a shuffled order, then a burst of large blocks and one of small blocks, all freed,
 *           each followed by no call at all: the memory comes back within a few purge delays anyway (the
 *           background purger), also in a forked child; a program that never cached much has no thread
 *           but its own;
 *   sleeper: bursts of medium blocks (48 KiB, then 200,000 bytes) written, freed in the order they were
 *           allocated, each followed by no call at all: the thread keeps empty pages of under 2 MiB and its
 *           classes' first pages, so RSS falls back to within 8 MiB of the start (the last pages a burst
 *           emptied waited to age in their queues: 30-35 MiB stayed for good);
 *   orphaned: bursts of 128 MiB (blocks of 4,000, then 100,000 bytes) that the main thread allocated and
 *           a worker freed, then no call at all: the main thread's full pages, every block of them freed
 *           by the worker, come back within a few purge delays (they waited for good in its full lists,
 *           as with every peer); the burst allocated again is intact, block by block;
 *   abandoned: a worker writes 100 MiB of blocks (256 KiB, then 1,000 bytes, of which it frees 99 in 100
 *           itself) and exits; the main thread frees the rest, fewer than 64 to a segment (too few to take
 *           it over), then makes no call: the pages come back within a few purge delays as orphans (all of
 *           the first burst stayed for good); the burst allocated again is intact;
 *   batched: a worker frees 100,003 of the main thread's 48-byte blocks and waits: all but at most 32 x 32
 *           of those remote frees are sent at once (chains of 4 KiB a page), the rest by the worker's own
 *           hak_collect(false), or by its exit in a second round; the owner then gets every block back
 *           and hands the memory out again intact;
 *   calloc: 800 callocs of 300,000 bytes, one byte written in each, leave well under 32 MiB resident (fresh
 *           memory is not written over); every calloc reads as zeroes, of fresh blocks, of blocks the
 *           program wrote and freed, of blocks another thread freed, and after a collection purged them;
 *   calloc-large: a 128 MiB calloc from a cached mapping whose last block wrote one byte a MiB faults in
 *           no other page (a memset of the whole block faulted in all of them); every large calloc reads as
 *           zeroes after full, sparse and every-other-page writes, at an odd size, from a larger mapping,
 *           and after a collection;
 *   fork-inherited, fork-inherited-threads: a worker frees 128 MiB of 256 KiB blocks and the main thread
 *           forks at once; the child allocates a small block at once and another after the purge delay
 *           (500 ms), then sleeps (the second case creates a thread first): what the parent freed is given
 *           back in the child within a few delays (its own purger starts at the second), where nothing
 *           asked for a purger before and the child kept it for good;
 *   refused: with all memory locked (mlockall) the kernel refuses every purge: the purger must retry
 *           them a delay later, not spin on them while the program sleeps;
 *   pthread-exit: the main thread leaves through pthread_exit after a worker freed enough large blocks
 *           to start the purger and a region to start the region release thread: the process must end
 *           (it lives until its last thread ends, so neither background thread may stay for good).
 *   pthread-exit-round4, pthread-exit-round4-later: the same after a thread whose first allocation came
 *           in its last round of key destructors ended, before main left or after: its heap, which no
 *           destructor gives back, must not keep the purger waiting for good;
 * Needs hakmem (hak_stats_get_sized through dlsym); on another allocator it prints "skip" and exits 77.
 * Usage: test_reclaim late|round4|trim|trim-first-pages|medium|regrow|turns|hot-head|large|many-large|tail|aged|idle|reuse|emptied|pool|deadline|asleep|sleeper|
 *        orphaned|abandoned|abandoned-double-free SIZE [mlock]|batched|calloc|fork-inherited|fork-inherited-threads|
 *        refused|pthread-exit|pthread-exit-round4|pthread-exit-round4-later|calloc-large */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hakmem.h"
#include "process_memory.h"

static int (*stats_get_sized)(struct hak_stats *, size_t);
static void (*collect)(bool);

static struct hak_stats snap(void) {
  struct hak_stats s;
  stats_get_sized(&s, sizeof s); /* the whole struct (the sizeless exported symbol fills only 0.1.0's part) */
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

/* ---- round4: a thread whose first allocation comes in glibc's last round of key destructors ----- */

/* Its heap is made after hakmem's destructor had its last chance to run, so only a sweep sees the thread
 * go. The destructor re-sets its key through three rounds and allocates in the fourth. */
static pthread_key_t round_key;
static __thread int round_no;

static void allocate_in_round4(void *v) {
  if (++round_no == 4) {
    char *volatile p = malloc(100);
    memset(p, 1, 100);
    free(p);
  } else {
    pthread_setspecific(round_key, v);
  }
}

static void *trim_thread(void *arg) {
  free(malloc(10));
  malloc_trim(0);
  return arg;
}

static void *round4_thread(void *arg) {
  pthread_setspecific(round_key, (void *)1);
  return arg;
}

static int check_round4(void) {
  enum { THREADS = 300 };
  pthread_key_create(&round_key, allocate_in_round4);
  for (int i = 0; i < THREADS; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, round4_thread, NULL) != 0) return fprintf(stderr, "pthread_create failed\n"), 1;
    pthread_join(t, NULL);
  }
  struct hak_stats s = snap();
  unsigned long long kept = s.threads_started - s.threads_exited;
  /* pthread_join returns once the kernel cleared the thread's id, which it does before it forgets the
   * thread: the sweep's probe may still find the last thread joined for a moment (a loaded CI machine saw
   * one heap left), so malloc_trim is tried again for up to a second */
  struct hak_stats t;
  for (int tries = 0; tries < 50; tries++) {
    malloc_trim(0);
    t = snap();
    if (t.threads_started - t.threads_exited <= 1) break;
    sleep_ms(20);
  }
  printf("round4: %d threads; heaps kept %llu, mapped %.1f MiB; after malloc_trim %llu and %.1f MiB\n", THREADS,
         kept, mib(s.mapped_bytes), (unsigned long long)(t.threads_started - t.threads_exited),
         mib(t.mapped_bytes));
  /* a thread that finds the heap pool empty sweeps once the heaps in use have doubled since the last
   * sweep (from 8): what vanished threads keep stays within the pool's size, 20-30 heaps here (301
   * without sweeps, with 1.2 GiB mapped) */
  if (kept > 40) return fprintf(stderr, "FAIL round4: %llu heaps kept, as if no sweep ran\n", kept), 1;
  if (t.threads_started - t.threads_exited != 1)
    return fprintf(stderr, "FAIL round4: malloc_trim's sweep left %llu heaps\n",
                   (unsigned long long)(t.threads_started - t.threads_exited - 1)), 1;
  if (t.mapped_bytes > (32u << 20)) return fprintf(stderr, "FAIL round4: %.1f MiB mapped\n", mib(t.mapped_bytes)), 1;
  /* In a forked child the main thread has a thread id of its own: another thread's sweep (malloc_trim)
   * must not take the main thread's heap for the parent's thread's. */
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    pthread_t helper;
    if (pthread_create(&helper, NULL, trim_thread, NULL) != 0) _exit(2);
    pthread_join(helper, NULL);
    struct hak_stats c = snap();
    char *volatile p = malloc(100);
    memset(p, 2, 100);
    free(p);
    _exit(c.threads_started - c.threads_exited == 1 ? 0 : 3);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return fprintf(stderr, "FAIL round4: a sweep in a forked child took a live heap (status %#x)\n", status), 1;
  return 0;
}

/* ---- late-freed: what destructors allocated late, freed by another thread ----------------------- */

enum { LATE_THREADS = 8, LATE_BLOCKS = 2000 };
static void *late_blocks[LATE_THREADS * LATE_BLOCKS];
static int late_count;

/* Runs after hakmem's own key destructor in most threads (hakmem's key is created first, at init), so
 * its blocks come from the shared late heap. */
static void allocate_late(void *v) {
  (void)v;
  for (int i = 0; i < LATE_BLOCKS; i++) {
    late_blocks[late_count] = malloc(1000);
    memset(late_blocks[late_count++], 1, 1000);
  }
}

static void *late_keyed_thread(void *arg) {
  free(malloc(10)); /* a heap of its own first */
  pthread_setspecific(key, (void *)1);
  return arg;
}

static int check_late_freed(void) {
  pthread_key_create(&key, allocate_late);
  for (int i = 0; i < LATE_THREADS; i++) { /* one at a time: the destructors share late_blocks */
    pthread_t t;
    if (pthread_create(&t, NULL, late_keyed_thread, NULL) != 0) return fprintf(stderr, "pthread_create failed\n"), 1;
    pthread_join(t, NULL);
  }
  struct hak_stats full = snap();
  for (int i = 0; i < late_count; i++) free(late_blocks[i]);
  malloc_trim(0);
  struct hak_stats after = snap();
  uint64_t live = after.live_blocks[HAK_TIER_SMALL] + after.live_blocks[HAK_TIER_MEDIUM];
  printf("late-freed: %d blocks allocated by destructors; committed %.1f MiB, then %.1f MiB and %llu live blocks "
         "after freeing them and malloc_trim\n", late_count, mib(full.committed_bytes), mib(after.committed_bytes),
         (unsigned long long)live);
  if (live > (uint64_t)late_count / 10 || after.committed_bytes * 2 > full.committed_bytes) {
    fprintf(stderr, "FAIL late-freed: malloc_trim left %llu blocks live and %.1f of %.1f MiB committed\n",
            (unsigned long long)live, mib(after.committed_bytes), mib(full.committed_bytes));
    return 1;
  }
  return 0;
}

/* ---- trim-heapless: malloc_trim by a thread that never allocated reclaims exited threads' memory --- */

enum { HL_BLOCKS = 4000, HL_PER_FREER = 50 };
static void *hl_blocks[HL_BLOCKS];

static void *hl_producer(void *arg) {
  for (int i = 0; i < HL_BLOCKS; i++) {
    hl_blocks[i] = malloc(1000);
    memset(hl_blocks[i], 3, 1000);
  }
  return arg;
}

/* Frees fewer blocks of the exited producer's segment than a takeover needs (64). */
static void *hl_freer(void *arg) {
  long k = (long)(intptr_t)arg;
  for (long i = k * HL_PER_FREER; i < (k + 1) * HL_PER_FREER; i++) free(hl_blocks[i]);
  return arg;
}

/* Calls nothing but malloc_trim: it has no heap of its own when it does. */
static void *hl_trimmer(void *arg) {
  malloc_trim(0);
  return arg;
}

static int run_thread(void *(*fn)(void *), void *arg) {
  pthread_t t;
  if (pthread_create(&t, NULL, fn, arg) != 0) return fprintf(stderr, "pthread_create failed\n"), 1;
  pthread_join(t, NULL);
  return 0;
}

static int check_trim_heapless(void) {
  if (run_thread(hl_producer, NULL)) return 1;
  for (long k = 0; k < HL_BLOCKS / HL_PER_FREER; k++)
    if (run_thread(hl_freer, (void *)(intptr_t)k)) return 1;
  struct hak_stats freed = snap();
  if (run_thread(hl_trimmer, NULL)) return 1;
  struct hak_stats after = snap();
  uint64_t live_before = freed.live_blocks[HAK_TIER_SMALL], live = after.live_blocks[HAK_TIER_SMALL];
  printf("trim-heapless: %d blocks freed by other threads; %llu then %llu small blocks live, %.1f then %.1f MiB "
         "committed after malloc_trim in a thread without a heap\n", HL_BLOCKS, (unsigned long long)live_before,
         (unsigned long long)live, mib(freed.committed_bytes), mib(after.committed_bytes));
  /* a few blocks of the C library's own (thread descriptors) may stay live */
  if (live > 64 || after.committed_bytes + (2u << 20) > freed.committed_bytes) {
    fprintf(stderr, "FAIL trim-heapless: %llu blocks still live, %.1f of %.1f MiB committed\n", (unsigned long long)live,
            mib(after.committed_bytes), mib(freed.committed_bytes));
    return 1;
  }
  return 0;
}

/* ---- refill: a big working set freed and allocated again within the delay maps nothing new -------- */

static int check_refill(void) {
  enum { SIZE = 64 << 10, COUNT = (256 << 20) / SIZE, ROUNDS = 3 };
  static void *blocks[COUNT];
  struct hak_stats first = snap(), before = first;
  for (int r = 0; r < ROUNDS; r++) {
    if (r == 1) before = snap(); /* the first round maps the segments; the next ones must find them cached */
    for (int i = 0; i < COUNT; i++) {
      blocks[i] = malloc(SIZE);
      if (blocks[i] == NULL) return fprintf(stderr, "FAIL refill: malloc failed\n"), 1;
      memset(blocks[i], r + 1, SIZE);
    }
    for (int i = 0; i < COUNT; i++) free(blocks[i]);
  }
  struct hak_stats after = snap();
  uint64_t maps = after.mmap_calls - before.mmap_calls, unmaps = after.munmap_calls - before.munmap_calls;
  printf("refill: %d rounds of %d MiB in 64 KiB blocks; the first made %llu mmap calls, the next %llu mmap and "
         "%llu munmap calls\n", ROUNDS, (COUNT * SIZE) >> 20, (unsigned long long)(before.mmap_calls - first.mmap_calls),
         (unsigned long long)maps, (unsigned long long)unmaps);
  if (maps > 4 || unmaps > 4) {
    fprintf(stderr, "FAIL refill: segments freed within the purge delay were unmapped and mapped again\n");
    return 1;
  }
  return 0;
}

/* ---- at-once: HAKMEM_PURGE_DELAY_MS=0 gives a burst of freed medium blocks back at once ----------- */

static int check_at_once(void) {
  enum { SIZE = 200000, COUNT = (200 << 20) / SIZE };
  static void *held[COUNT];
  for (int i = 0; i < COUNT; i++) {
    held[i] = malloc(SIZE);
    if (held[i] == NULL) return fprintf(stderr, "FAIL at-once: malloc returned NULL\n"), 1;
    memset(held[i], 1, SIZE);
  }
  struct hak_stats full = snap();
  for (int i = 0; i < COUNT; i++) free(held[i]);
  struct hak_stats after = snap(); /* no sleep, no collection: "at once" */
  printf("at-once: %d blocks of %d B: committed %.1f MiB, %.1f MiB right after freeing them\n", COUNT, SIZE,
         mib(full.committed_bytes), mib(after.committed_bytes));
  if (after.committed_bytes > (16u << 20)) {
    fprintf(stderr, "FAIL at-once: %.1f MiB still committed\n", mib(after.committed_bytes));
    return 1;
  }
  return 0;
}

/* ---- at-once-queue: with delay 0, a queue of a few medium blocks that empties and refills one page ---- */

static int check_at_once_queue(void) {
  enum { SIZE = 200000, LIVE = 8, STEPS = 100000 };
  static char *queue[LIVE];
  struct hak_stats before = snap();
  for (int i = 0; i < STEPS; i++) { /* each step allocates a block and frees the oldest */
    int k = i % LIVE;
    char *old = queue[k];
    queue[k] = malloc(SIZE);
    if (queue[k] == NULL) return fprintf(stderr, "FAIL at-once-queue: malloc returned NULL\n"), 1;
    queue[k][0] = queue[k][SIZE - 1] = 1;
    free(old);
  }
  struct hak_stats after = snap();
  uint64_t calls = after.madvise_calls - before.madvise_calls;
  printf("at-once-queue: %d steps of a %d-block queue of %d B: %llu madvise calls\n", STEPS, LIVE, SIZE,
         (unsigned long long)calls);
  if (calls > STEPS / 100) { /* a page purged and faulted in again at every emptying: 8,334 */
    fprintf(stderr, "FAIL at-once-queue: %llu madvise calls\n", (unsigned long long)calls);
    return 1;
  }
  for (int k = 0; k < LIVE; k++) free(queue[k]);
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

/* ---- medium: resident memory of a churning medium working set -------------------------------------- */

static double rss_mib(void) {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f == NULL || fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  if (f) fclose(f);
  return (double)resident * 4096.0 / (1024.0 * 1024.0);
}

/* ---- trim-first-pages: malloc_trim gives back the emptied first pages of medium classes ----------- */

static int check_trim_first_pages(void) {
  static const size_t size[] = {24 << 10, 200000, 300000};
  static const int count[] = {20, 1, 3};
  char *block[20];
  double start = rss_mib(), written = 0;
  for (int k = 0; k < 3; k++) {
    for (int i = 0; i < count[k]; i++) {
      block[i] = malloc(size[k]);
      memset(block[i], 7, size[k]);
    }
    for (int i = 0; i < count[k]; i++) free(block[i]);
    written += (double)size[k] * count[k] / (1024.0 * 1024.0);
  }
  double freed = rss_mib();
  malloc_trim(0);
  double trimmed = rss_mib();
  printf("trim-first-pages: %.2f MiB written and freed in 3 classes: resident above the start %.2f MiB, "
         "%.2f after malloc_trim\n", written, freed - start, trimmed - start);
  if (trimmed - start > written / 4) {
    fprintf(stderr, "FAIL trim-first-pages: malloc_trim kept the classes' emptied first pages\n");
    return 1;
  }
  return 0;
}

static int check_medium(void) {
  enum { SLOTS = 256, OPS = 3000000 };
  static char *slot[SLOTS];
  uint64_t rng = 11;
  double start = rss_mib();
  size_t live = 0, live_max = 0;
  for (int i = 0; i < OPS; i++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    size_t k = (size_t)(rng >> 33) % SLOTS;
    if (slot[k] != NULL) {
      free(slot[k]);
      slot[k] = NULL;
      live--;
    } else {
      size_t size = (8u << 10) + (size_t)(rng >> 20) % (24u << 10);
      slot[k] = malloc(size);
      if (slot[k] == NULL) return fprintf(stderr, "FAIL medium: malloc(%zu) failed\n", size), 1;
      slot[k][0] = 1;
      slot[k][size - 1] = 2;
      if (++live > live_max) live_max = live;
    }
  }
  double growth = rss_mib() - start;
  /* each live block touches 2 OS pages; free blocks in partly used pages and the page descriptors add
   * about as much again. The old placement needed 10 MiB here. */
  double allowed = 4.0 * (double)live_max * 8192.0 / (1024.0 * 1024.0) + 1.0;
  printf("medium: rss growth %.1f MiB with at most %zu blocks live (allowed %.1f MiB)\n", growth, live_max, allowed);
  for (size_t k = 0; k < SLOTS; k++) free(slot[k]);
  if (growth > allowed) {
    fprintf(stderr, "FAIL medium: rss grew by %.1f MiB, more than %.1f MiB\n", growth, allowed);
    return 1;
  }
  return 0;
}

/* ---- regrow: vectors grown by realloc, whose classes take each other's slices ----------------------- */

static int check_regrow(void) {
  enum { VECTORS = 200, STEP = 256, MAX = 128 << 10 };
  static char *vec[VECTORS];
  struct hak_stats before = snap();
  for (size_t size = STEP; size <= MAX; size += STEP) {
    for (int i = 0; i < VECTORS; i++) {
      char *p = realloc(vec[i], size);
      if (p == NULL) return fprintf(stderr, "FAIL regrow: realloc(%zu) failed\n", size), 1;
      if (size > STEP && p[size - STEP - 1] != (char)(i + size - STEP))
        return fprintf(stderr, "FAIL regrow: vector %d lost its contents at %zu bytes\n", i, size), 1;
      p[size - 1] = (char)(i + size);
      vec[i] = p;
    }
  }
  struct hak_stats after = snap();
  uint64_t calls = after.madvise_calls - before.madvise_calls;
  printf("regrow: %d vectors grown by %d B to %d KiB: %llu madvise calls\n", VECTORS, STEP, MAX >> 10,
         (unsigned long long)calls);
  for (int i = 0; i < VECTORS; i++) free(vec[i]);
  if (calls > 8) { /* each class's slices purged as the next class took them: 78 (87 hardened) */
    fprintf(stderr, "FAIL regrow: %llu madvise calls within the purge delay\n", (unsigned long long)calls);
    return 1;
  }
  return 0;
}

/* ---- turns: two medium classes used by turns, room for one page only -------------------------------- */

static int check_turns(void) {
  enum { ROUNDS = 20000, FILLERS = 33, FILLER = 32768 };
  static char *filler[FILLERS];
  for (int i = 0; i < FILLERS; i++) {
    filler[i] = malloc(FILLER);
    if (filler[i] == NULL) return fprintf(stderr, "FAIL turns: malloc(%d) failed\n", FILLER), 1;
    filler[i][0] = 1;
  }
  struct hak_stats before = snap();
  for (int r = 0; r < ROUNDS; r++) {
    size_t sizes[2] = {45000, 53000};
    for (int k = 0; k < 2; k++) {
      char *p = malloc(sizes[k]);
      if (p == NULL) return fprintf(stderr, "FAIL turns: malloc(%zu) failed\n", sizes[k]), 1;
      p[0] = p[sizes[k] - 1] = (char)r;
      free(p);
    }
  }
  struct hak_stats after = snap();
  uint64_t slow = after.slow_allocs - before.slow_allocs;
  printf("turns: %d rounds of two medium sizes: %llu slow-path allocations\n", ROUNDS, (unsigned long long)slow);
  for (int i = 0; i < FILLERS; i++) free(filler[i]);
  if (slow > 100) { /* one a malloc when each class took the other's room: 40,000 */
    fprintf(stderr, "FAIL turns: %llu slow-path allocations in %d rounds\n", (unsigned long long)slow, ROUNDS);
    return 1;
  }
  return 0;
}

/* ---- hot-head: a cold class's kept first page ages out beside a hot class ---------------------------- */

static int check_hot_head(void) {
  enum { COLD = 12, PAIRS = 100000 };
  size_t live_bytes = (size_t)40 << 20;
  char *live = malloc(live_bytes);
  if (live == NULL) return fprintf(stderr, "FAIL hot-head: malloc(40 MiB) failed\n"), 1;
  for (size_t k = 0; k < live_bytes; k += 4096) live[k] = 1;
  char *cold[COLD];
  for (int i = 0; i < COLD; i++) {
    cold[i] = malloc(128 << 10);
    if (cold[i] == NULL) return fprintf(stderr, "FAIL hot-head: malloc(128 KiB) failed\n"), 1;
    memset(cold[i], 1, 128 << 10);
  }
  for (int i = 0; i < COLD; i++) free(cold[i]);
  struct hak_stats before = snap();
  for (int i = 0; i < 2 * PAIRS; i++) { /* the second half counted: the heap's passes end a loop in the first */
    if (i == PAIRS) before = snap();
    char *p = malloc(200000);
    if (p == NULL) return fprintf(stderr, "FAIL hot-head: malloc(200000) failed\n"), 1;
    p[0] = p[199999] = (char)i;
    free(p);
  }
  struct hak_stats after = snap();
  uint64_t slow = after.slow_allocs - before.slow_allocs;
  printf("hot-head: %d pairs of 200 KB beside a cold class's kept page, after as many: %llu slow-path allocations\n", PAIRS,
         (unsigned long long)slow);
  free(live);
  if (slow > 100) {
    fprintf(stderr, "FAIL hot-head: %llu slow-path allocations in %d pairs\n", (unsigned long long)slow, PAIRS);
    return 1;
  }
  return 0;
}

/* ---- large: resident memory of a churning set of big blocks ---------------------------------------- */

static int check_large(void) {
  enum { SLOTS = 20, CYCLES = 2000, STRIDE = 64 << 10 };
  static char *slot[SLOTS];
  static size_t slot_size[SLOTS];
  uint64_t rng = 3;
  double start = rss_mib(), live_touched_max = 0;
  for (int i = 0; i < CYCLES; i++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    size_t k = (size_t)(rng >> 33) % SLOTS, size = ((size_t)5 << 20) + (size_t)(rng >> 11) % ((size_t)20 << 20);
    free(slot[k]);
    slot[k] = malloc(size);
    if (slot[k] == NULL) return fprintf(stderr, "FAIL large: malloc(%zu) failed\n", size), 1;
    for (size_t off = 0; off < size; off += STRIDE) slot[k][off] = 1;
    slot_size[k] = size;
    double touched = 0;
    for (size_t j = 0; j < SLOTS; j++) touched += (double)(slot_size[j] / STRIDE + 1) * 4096.0 / (1024.0 * 1024.0);
    if (touched > live_touched_max) live_touched_max = touched;
  }
  double growth = rss_mib() - start;
  /* the cache may keep half as much again as the live blocks have touched; the cache that served only
   * requests it fitted without a resize kept 80 % more here (36 MiB) */
  double allowed = 1.5 * live_touched_max;
  printf("large: rss growth %.1f MiB, live blocks touched at most %.1f MiB (allowed %.1f MiB)\n", growth,
         live_touched_max, allowed);
  for (size_t k = 0; k < SLOTS; k++) free(slot[k]);
  if (growth > allowed) {
    fprintf(stderr, "FAIL large: rss grew by %.1f MiB, more than %.1f MiB\n", growth, allowed);
    return 1;
  }
  return 0;
}

/* ---- tail: a cached mapping reused for a smaller block keeps no pages past the new block --------- */

static int check_tail(void) {
  const size_t big = (size_t)24 << 20, smaller = (size_t)18 << 20;
  char *p = malloc(big);
  if (p == NULL) return fprintf(stderr, "FAIL tail: malloc(24 MiB) failed\n"), 1;
  memset(p, 1, big);
  double touched = rss_mib();
  free(p); /* cached: the purge delay outlasts the test */
  struct hak_stats cached, reused;
  stats_get_sized(&cached, sizeof cached);
  char *q = malloc(smaller);
  if (q == NULL) return fprintf(stderr, "FAIL tail: malloc(18 MiB) failed\n"), 1;
  double after = rss_mib();
  stats_get_sized(&reused, sizeof reused);
  double uncommitted = ((double)cached.committed_bytes - (double)reused.committed_bytes) / (1 << 20);
  printf("tail: committed bytes fell by %.1f MiB\n", uncommitted);
  if (uncommitted < 5.9 || uncommitted > 6.1) {
    fprintf(stderr, "FAIL tail: committed bytes fell by %.1f MiB, not by the 6 MiB given back\n", uncommitted);
    return 1;
  }
  printf("tail: rss %.1f MiB with 24 MiB touched, %.1f MiB once an 18 MiB block reuses the mapping (%s)\n", touched,
         after, q == p ? "same address" : "another address");
  free(q);
  if (q != p) return fprintf(stderr, "FAIL tail: the cached mapping was not reused\n"), 1;
  if (touched - after < 5.0) {
    fprintf(stderr, "FAIL tail: only %.1f MiB of the 6 MiB past the new block went back\n", touched - after);
    return 1;
  }
  /* the tail past 18 MiB is released and no block touched it since: reusing the mapping again for the
   * same size needs no system call */
  struct hak_stats before, later;
  stats_get_sized(&before, sizeof before);
  for (int i = 0; i < 3; i++) {
    char *r = malloc(smaller);
    if (r != p) return fprintf(stderr, "FAIL tail: round %d did not reuse the cached mapping\n", i), 1;
    memset(r, 2, smaller);
    free(r);
  }
  stats_get_sized(&later, sizeof later);
  if (later.committed_bytes != reused.committed_bytes) {
    fprintf(stderr, "FAIL tail: committed bytes moved by %lld in reuses of the same size\n",
            (long long)(later.committed_bytes - reused.committed_bytes));
    return 1;
  }
  printf("tail: %llu madvise calls in 3 reuses of the released mapping\n",
         (unsigned long long)(later.madvise_calls - before.madvise_calls));
  char *whole = malloc(big); /* the full size again: the released tail counts as committed once more */
  struct hak_stats regrown;
  stats_get_sized(&regrown, sizeof regrown);
  free(whole);
  double recommitted = ((double)regrown.committed_bytes - (double)later.committed_bytes) / (1 << 20);
  if (whole != p || recommitted < 5.9 || recommitted > 6.1) {
    fprintf(stderr, "FAIL tail: a 24 MiB block on the mapping (%s) recommitted %.1f MiB, not 6\n",
            whole == p ? "reused" : "not reused", recommitted);
    return 1;
  }
  /* a program may write all of malloc_usable_size: those pages go back too at the next smaller reuse */
  char *u = malloc(smaller);
  size_t usable = malloc_usable_size(u);
  memset(u, 3, usable);
  free(u);
  char *v = malloc(smaller);
  double reused_rss = rss_mib();
  free(v);
  printf("tail: rss %.1f MiB after a block filled to its usable size (%.1f MiB) was freed and reused\n", reused_rss,
         (double)usable / (1 << 20));
  if (u != p || v != p || reused_rss > after + 1.0) {
    fprintf(stderr, "FAIL tail: %.1f MiB resident after reuse, %.1f before the usable-size fill\n", reused_rss, after);
    return 1;
  }
  if (later.madvise_calls != before.madvise_calls) {
    fprintf(stderr, "FAIL tail: reusing a mapping whose tail is already released made %llu madvise calls\n",
            (unsigned long long)(later.madvise_calls - before.madvise_calls));
    return 1;
  }
  return 0;
}

/* ---- aged: a cached large mapping no request fits is purged once the purge delay has passed ------- */

static int check_aged(void) {
  const size_t parked = (size_t)8 << 20, busy = (size_t)20 << 20;
  char *p = malloc(parked);
  if (p == NULL) return fprintf(stderr, "FAIL aged: malloc(8 MiB) failed\n"), 1;
  memset(p, 1, parked);
  double touched = rss_mib(), now = touched;
  free(p); /* cached; the 20 MiB requests below neither fit it nor grow it (it is under half their size) */
  int cycles = 0;
  for (; cycles < 4000 && touched - now < 7.0; cycles++) {
    char *q = malloc(busy);
    if (q == NULL) return fprintf(stderr, "FAIL aged: malloc(20 MiB) failed\n"), 1;
    q[0] = 1;
    free(q);
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
    now = rss_mib();
  }
  printf("aged: rss %.1f MiB with the 8 MiB block touched, %.1f MiB after %d large malloc+free cycles\n", touched,
         now, cycles);
  if (touched - now < 7.0) {
    fprintf(stderr, "FAIL aged: the cached 8 MiB mapping was never purged\n");
    return 1;
  }
  return 0;
}

/* ---- reuse: a freed large block serves the next request of its size, and goes back when asked ------- */

static void *reuse_thread(void *arg) {
  char *p = malloc((size_t)4 << 20);
  if (p != NULL) {
    memset(p, 1, (size_t)4 << 20);
    free(p); /* cached */
  }
  *(int *)arg = p != NULL;
  return NULL;
}

static int check_many_large(void) {
  enum { EACH = 50, KINDS = 4, CYCLES = 6 };
  static const size_t sizes[KINDS] = {600 << 10, 1 << 20, 3 << 20, 5 << 20};
  static char *blocks[EACH * KINDS];
  struct hak_stats first = {0};
  for (int c = 0; c < CYCLES; c++) {
    if (c == 1) first = snap();
    for (int i = 0; i < EACH * KINDS; i++) {
      blocks[i] = malloc(sizes[i % KINDS]);
      if (blocks[i] == NULL) return fprintf(stderr, "FAIL many-large: malloc(%zu)\n", sizes[i % KINDS]), 1;
      blocks[i][sizes[i % KINDS] - 1] = (char)i;
    }
    for (int i = 0; i < EACH * KINDS; i++) free(blocks[i]);
  }
  struct hak_stats last = snap();
  unsigned long long maps = last.mmap_calls - first.mmap_calls, unmaps = last.munmap_calls - first.munmap_calls,
                     remaps = last.mremap_calls - first.mremap_calls, hits = last.large_cache_hits - first.large_cache_hits;
  printf("many-large: %d cycles of %d blocks of 600 KiB-5 MiB after the first: %llu mmap, %llu munmap, %llu mremap "
         "calls, %llu cache hits\n", CYCLES - 1, EACH * KINDS, maps, unmaps, remaps, hits);
  if (maps + unmaps + remaps > 2 || hits != (unsigned long long)(CYCLES - 1) * EACH * KINDS)
    return fprintf(stderr, "FAIL many-large: the large cache did not serve every block from a mapping of its size\n"), 1;
  collect(true);
  static const size_t cached_asked[3][2] = {{520, 8}, {8, 12}, {500, 600}};
  for (int i = 0; i < 3; i++) {
    size_t cached = cached_asked[i][0] << 20, asked = cached_asked[i][1] << 20;
    char *c = malloc(cached);
    if (c == NULL) return fprintf(stderr, "FAIL many-large: malloc(%zu)\n", cached), 1;
    c[0] = 1;
    free(c); /* the only cached mapping */
    struct hak_stats before = snap();
    char *p = malloc(asked);
    struct hak_stats after = snap();
    if (p == NULL) return fprintf(stderr, "FAIL many-large: malloc(%zu)\n", asked), 1;
    p[asked - 1] = 1;
    free(p);
    printf("many-large: %zu MiB cached, %zu MiB asked: %llu cache hits, %llu mmap calls\n", cached >> 20, asked >> 20,
           (unsigned long long)(after.large_cache_hits - before.large_cache_hits),
           (unsigned long long)(after.mmap_calls - before.mmap_calls));
    if (after.large_cache_hits != before.large_cache_hits + 1)
      return fprintf(stderr, "FAIL many-large: the cached %zu MiB mapping did not serve %zu MiB\n", cached >> 20,
                     asked >> 20), 1;
    collect(true);
  }
  enum { EXACT = 299 << 12, HUGE = 100 << 20 };
  char *exact = malloc(EXACT), *huge = malloc(HUGE), *small[16];
  if (exact == NULL || huge == NULL) return fprintf(stderr, "FAIL many-large: malloc\n"), 1;
  exact[0] = huge[0] = 1;
  for (int i = 0; i < 16; i++) {
    if ((small[i] = malloc(1 << 20)) == NULL) return fprintf(stderr, "FAIL many-large: malloc(1 MiB)\n"), 1;
    small[i][0] = 1;
  }
  free(exact);
  free(huge);
  for (int i = 0; i < 16; i++) free(small[i]); /* cached ahead of the exact fit, in its bin */
  struct hak_stats before = snap();
  char *again = malloc(EXACT), *huge_again = malloc(HUGE);
  struct hak_stats after = snap();
  if (again == NULL || huge_again == NULL) return fprintf(stderr, "FAIL many-large: malloc\n"), 1;
  again[0] = huge_again[0] = 1;
  free(again);
  free(huge_again);
  printf("many-large: 1.17 MiB and 100 MiB asked again behind 16 cached 1 MiB mappings: %llu cache hits, %llu mremap "
         "calls\n", (unsigned long long)(after.large_cache_hits - before.large_cache_hits),
         (unsigned long long)(after.mremap_calls - before.mremap_calls));
  if (after.large_cache_hits != before.large_cache_hits + 2 || after.mremap_calls != before.mremap_calls)
    return fprintf(stderr, "FAIL many-large: a mapping of the exact size was passed over\n"), 1;
  collect(true);
  return 0;
}

static int check_reuse(void) {
  const size_t size = (size_t)4 << 20;
  struct hak_stats s0 = snap();
  char *p = malloc(size);
  if (p == NULL) return fprintf(stderr, "FAIL reuse: malloc(4 MiB) failed\n"), 1;
  memset(p, 1, size);
  free(p);
  struct hak_stats s1 = snap();
  char *q = malloc(size); /* the same size again: the cached mapping serves it, no system call */
  struct hak_stats s2 = snap();
  free(q);
  printf("reuse: second 4 MiB block %s the first, %llu mmap calls for it, large hits %llu -> %llu\n",
         q == p ? "reuses" : "does not reuse", (unsigned long long)(s2.mmap_calls - s1.mmap_calls),
         (unsigned long long)s1.large_cache_hits, (unsigned long long)s2.large_cache_hits);
  if (q != p || s2.mmap_calls != s1.mmap_calls || s2.large_cache_hits != s1.large_cache_hits + 1 ||
      s2.allocs[HAK_TIER_LARGE] != s0.allocs[HAK_TIER_LARGE] + 2 || s1.frees <= s0.frees) {
    fprintf(stderr, "FAIL reuse: reuse of a freed 4 MiB block was not served and counted as a cache hit\n");
    return 1;
  }
  struct hak_stats before = snap();
  collect(true); /* the cached mapping goes back with everything else */
  struct hak_stats after = snap();
  printf("reuse: hak_collect(true) took committed bytes from %.1f to %.1f MiB\n", mib(before.committed_bytes),
         mib(after.committed_bytes));
  if ((int64_t)(before.committed_bytes - after.committed_bytes) < (int64_t)size) {
    fprintf(stderr, "FAIL reuse: hak_collect(true) left the freed 4 MiB block committed\n");
    return 1;
  }
  pthread_t t;
  int ok = 0;
  if (pthread_create(&t, NULL, reuse_thread, &ok) != 0 || pthread_join(t, NULL) != 0 || !ok)
    return fprintf(stderr, "FAIL reuse: the thread could not allocate\n"), 1;
  struct hak_stats exited = snap();
  collect(true); /* a block another thread freed before it exited goes back too */
  struct hak_stats released = snap();
  printf("reuse: after a thread freed 4 MiB and exited, hak_collect(true) took committed bytes from %.1f to %.1f MiB\n",
         mib(exited.committed_bytes), mib(released.committed_bytes));
  if ((int64_t)(exited.committed_bytes - released.committed_bytes) < (int64_t)size) {
    fprintf(stderr, "FAIL reuse: the 4 MiB block an exited thread freed stayed committed\n");
    return 1;
  }
  return 0;
}

/* ---- emptied: the blocks of an exited thread, all freed by another, count as freed -------------------- */

enum { EMPTIED_BLOCKS = 2000 };
static void *emptied_a[EMPTIED_BLOCKS], *emptied_b[EMPTIED_BLOCKS];

static pthread_barrier_t emptied_filled;

/* Allocate, wait until the other thread has too (so each maps a segment of its own), then exit: the
 * blocks stay live and the segment is abandoned. */
static void *emptied_fill(void *arg) {
  void **set = arg;
  for (int i = 0; i < EMPTIED_BLOCKS; i++) {
    set[i] = malloc(64);
    if (set[i] != NULL) memset(set[i], (int)(i & 0xff), 64);
  }
  pthread_barrier_wait(&emptied_filled);
  return NULL;
}

static uintptr_t segment_of(const void *p) { return (uintptr_t)p >> 22; } /* 4 MiB segments */

static void *emptied_freer(void *arg) {
  for (int i = 0; i < EMPTIED_BLOCKS; i++) free(emptied_a[i]); /* remote frees into A's abandoned segment */
  return arg;
}

static int check_emptied(void) {
  pthread_t t, ta, tb;
  pthread_barrier_init(&emptied_filled, NULL, 2);
  if (pthread_create(&ta, NULL, emptied_fill, emptied_a) != 0 || pthread_create(&tb, NULL, emptied_fill, emptied_b) != 0)
    return 2;
  if (pthread_join(ta, NULL) != 0 || pthread_join(tb, NULL) != 0) return 2;
  for (int i = 0; i < EMPTIED_BLOCKS; i++)
    if (emptied_a[i] == NULL || emptied_b[i] == NULL) return fprintf(stderr, "FAIL emptied: malloc(64) failed\n"), 1;
  if (segment_of(emptied_a[0]) == segment_of(emptied_b[0]))
    return fprintf(stderr, "FAIL emptied: the two threads' blocks share a segment; the check needs two\n"), 1;
  struct hak_stats s0 = snap();
  if (pthread_create(&t, NULL, emptied_freer, NULL) != 0 || pthread_join(t, NULL) != 0) return 2;
  struct timespec wait = {0, 300 * 1000000L}; /* three purge delays of the test's 100 ms */
  nanosleep(&wait, NULL);
  collect(false); /* what is due, as a maintenance pass or the purger would */
  struct hak_stats s1 = snap();
  long long gone = (long long)s0.live_blocks[HAK_TIER_SMALL] - (long long)s1.live_blocks[HAK_TIER_SMALL];
  printf("emptied: small live blocks %llu -> %llu after another thread freed the %d of an exited one\n",
         (unsigned long long)s0.live_blocks[HAK_TIER_SMALL], (unsigned long long)s1.live_blocks[HAK_TIER_SMALL],
         EMPTIED_BLOCKS);
  for (int i = 0; i < EMPTIED_BLOCKS; i++) {
    const unsigned char *q = emptied_b[i];
    for (int k = 0; k < 64; k++)
      if (q[k] != (unsigned char)(i & 0xff))
        return fprintf(stderr, "FAIL emptied: block %d of the other thread changed at byte %d\n", i, k), 1;
  }
  /* before: its frees sat on the pages' remote lists, uncounted and resident, until a thread needed room */
  if (gone < EMPTIED_BLOCKS)
    return fprintf(stderr, "FAIL emptied: the emptied segment of an exited thread was not given back\n"), 1;
  for (int i = 0; i < EMPTIED_BLOCKS; i++) free(emptied_b[i]);
  return 0;
}

/* ---- pool: an idle thread's few frees must not trap everyone else's ------------------------------------ */

static long rss_kib(void);

enum { POOL_BLOCKS = 50000, POOL_EVERY = 1000 };
static char *pool_blocks[POOL_BLOCKS];
static pthread_barrier_t pool_step;

static void *pool_worker(void *arg) {
  for (int i = 0; i < POOL_BLOCKS; i++) {
    pool_blocks[i] = malloc(1000);
    if (pool_blocks[i] != NULL) memset(pool_blocks[i], 5, 1000);
  }
  return arg;
}

/* Frees one block in POOL_EVERY of the exited worker's, then idles (blocked) until the end. */
static void *pool_thread(void *arg) {
  pthread_barrier_wait(&pool_step);
  for (int i = 0; i < POOL_BLOCKS; i += POOL_EVERY) {
    free(pool_blocks[i]);
    pool_blocks[i] = NULL;
  }
  pthread_barrier_wait(&pool_step);
  pthread_barrier_wait(&pool_step);
  return arg;
}

static int check_pool(void) {
  pthread_t worker, pool;
  pthread_barrier_init(&pool_step, NULL, 2);
  if (pthread_create(&pool, NULL, pool_thread, NULL) != 0) return 2;
  if (pthread_create(&worker, NULL, pool_worker, NULL) != 0 || pthread_join(worker, NULL) != 0) return 2;
  for (int i = 0; i < POOL_BLOCKS; i++)
    if (pool_blocks[i] == NULL) return fprintf(stderr, "FAIL pool: malloc(1000) failed\n"), 1;
  long live = rss_kib();
  pthread_barrier_wait(&pool_step); /* the pool thread frees its few */
  pthread_barrier_wait(&pool_step); /* and idles */
  for (int i = 0; i < POOL_BLOCKS; i++) free(pool_blocks[i]);
  for (int i = 0; i < POOL_BLOCKS; i++) {
    pool_blocks[i] = malloc(1000);
    if (pool_blocks[i] == NULL) return fprintf(stderr, "FAIL pool: malloc(1000) failed\n"), 1;
    memset(pool_blocks[i], 6, 1000);
  }
  long again = rss_kib();
  printf("pool: %ld KiB with the worker's blocks live, %ld after the main thread freed them and allocated as "
         "many\n", live, again);
  for (int i = 0; i < POOL_BLOCKS; i++) free(pool_blocks[i]);
  pthread_barrier_wait(&pool_step);
  pthread_join(pool, NULL);
  /* the memory the main thread freed must serve its new blocks: when the pool thread had taken the
   * worker's segments over at its first free into each, those frees waited for it and RSS doubled */
  if (again > live + live / 4)
    return fprintf(stderr, "FAIL pool: freed memory did not serve the new blocks (an idle thread holds it)\n"), 1;
  return 0;
}

/* ---- idle: maintenance while a hot loop never takes a slow path -------------------------------------- */

static int check_idle(void) {
  enum { BLOCKS = 200000 };
  void **b = malloc(BLOCKS * sizeof *b);
  if (b == NULL) return fprintf(stderr, "FAIL idle: out of memory\n"), 1;
  for (size_t i = 0; i < BLOCKS; i++) {
    b[i] = malloc(64);
    memset(b[i], 1, 64);
  }
  for (size_t i = 0; i < BLOCKS; i++) free(b[i]);
  free(b);
  struct hak_stats full = snap();
  uint64_t pairs = 0;
  struct hak_stats now = full;
  for (int round = 0; round < 2000 && now.committed_bytes * 2 > full.committed_bytes; round++) {
    for (int i = 0; i < 100000; i++, pairs++) {
      volatile char *p = malloc(32);
      p[0] = 1;
      free((void *)p);
    }
    now = snap();
  }
  printf("idle: committed %.1f MiB after the mass free, %.1f MiB after %llu malloc+free pairs\n",
         mib(full.committed_bytes), mib(now.committed_bytes), (unsigned long long)pairs);
  if (now.committed_bytes * 2 > full.committed_bytes) {
    fprintf(stderr, "FAIL idle: the freed pages were never purged while the loop ran\n");
    return 1;
  }
  return 0;
}

/* ---- deadline: a purge deadline does not outlive the slices it was set for ------------------------ */

#define DEADLINE_BLOCKS 1536 /* 256-byte blocks: six or more one-slice pages of their class */
static void *deadline_block[DEADLINE_BLOCKS];

/* Fill the class's pages, or free them all. With HAKMEM_DRAIN_INTERVAL=1 a maintenance pass runs each
 * time a page becomes empty, and it hands back the pages emptied before (their slices stay dirty until
 * the purge delay has passed). */
static int deadline_round(bool fill) {
  for (int i = 0; i < DEADLINE_BLOCKS; i++) {
    if (fill) {
      deadline_block[i] = malloc(256);
      if (deadline_block[i] == NULL) return fprintf(stderr, "FAIL deadline: malloc(256) failed\n"), 1;
      memset(deadline_block[i], 7, 256);
    } else {
      free(deadline_block[i]);
    }
  }
  return 0;
}

static int check_deadline(void) {
  /* run with HAKMEM_PURGE_DELAY_MS=1000 and HAKMEM_DRAIN_INTERVAL=1 (test_reclaim.py) */
  if (deadline_round(true) || deadline_round(false)) return 1; /* pages freed: a purge is due in 1 s */
  if (deadline_round(true)) return 1;                          /* their slices taken again at once */
  sleep_ms(1200);
  collect(false); /* the old deadline has passed, with nothing left to purge */
  uint64_t before = snap().madvise_calls;
  if (deadline_round(false)) return 1; /* freed again: the next purge is due 1 s from now */
  uint64_t at_free = snap().madvise_calls;
  sleep_ms(1200);
  collect(false);
  uint64_t after = snap().madvise_calls;
  printf("deadline: madvise calls %llu before the second free, %llu right after it, %llu once its delay passed\n",
         (unsigned long long)before, (unsigned long long)at_free, (unsigned long long)after);
  if (at_free != before) {
    fprintf(stderr, "FAIL deadline: freed pages were purged at once, not after the purge delay\n");
    return 1;
  }
  if (after == at_free) {
    fprintf(stderr, "FAIL deadline: the freed pages were not purged after the delay either (test proves nothing)\n");
    return 1;
  }
  return 0;
}

/* ---- asleep: memory comes back while the program makes no call --------------------------------------- */

/* Both bursts in the calling process; 0 when their memory came back. `who` names the process. */
/* How long `asleep` waits for freed memory to go: each of its phases takes back memory the previous one's
 * sleep saw purged, so the purge delay learns ever longer intervals from it (src/purger.c), up to its
 * ceiling of 10 s at the test's 400 ms. */
enum { ASLEEP_WAIT_MS = 12000 };

static int bursts_then_sleep(const char *who) {
  const long limit_kib = 32 << 10;
  if (large_burst() != 0) return 1;
  long cached = rss_kib();
  long after_large = sleep_until_rss(limit_kib, ASLEEP_WAIT_MS);
  if (small_burst(false) != 0) return 1;
  long freed = rss_kib();
  long after_small = sleep_until_rss(limit_kib, ASLEEP_WAIT_MS);
  printf("asleep: %s: large blocks freed %ld KiB resident, asleep %ld; small blocks freed %ld, asleep %ld; "
         "threads %d\n", who, cached, after_large, freed, after_small, thread_count());
  if (cached < 200 << 10 || freed <= limit_kib) /* the delay had not passed: the caches must still hold them */
    return fprintf(stderr, "FAIL asleep (%s): freed memory was not cached (the test proves nothing)\n", who), 1;
  if (after_large > limit_kib || after_small > limit_kib)
    return fprintf(stderr, "FAIL asleep (%s): freed memory stayed resident while the program slept\n", who), 1;
  return 0;
}

/* A thread that frees all but one in 2,000 of its 60,000 blocks and exits: its segments are abandoned
 * with those few live blocks and many freed slices. */
enum { EXITED_BLOCKS = 60000, EXITED_KEEP_EVERY = 2000 };
static void *exited_kept[EXITED_BLOCKS / EXITED_KEEP_EVERY];

static void *exiting_thread(void *arg) {
  (void)arg;
  static char *blocks[EXITED_BLOCKS];
  for (int i = 0; i < EXITED_BLOCKS; i++) {
    blocks[i] = malloc(1000);
    if (blocks[i] == NULL) return NULL;
    memset(blocks[i], 3, 1000);
  }
  for (int i = 0; i < EXITED_BLOCKS; i++) {
    if (i % EXITED_KEEP_EVERY == 0) exited_kept[i / EXITED_KEEP_EVERY] = blocks[i];
    else free(blocks[i]);
  }
  return arg;
}

/* A thread that allocates blocks and exits without freeing any: another thread frees them. */
static void *handing_thread(void *arg) {
  char **blocks = arg;
  for (int i = 0; i < EXITED_BLOCKS; i++) {
    blocks[i] = malloc(1000);
    if (blocks[i] != NULL) memset(blocks[i], 4, 1000);
  }
  return arg;
}

static int check_asleep(void) {
  free(malloc(1000));
  free(malloc(1 << 20));
  if (thread_count() != 1)
    return fprintf(stderr, "FAIL asleep: %d threads in a program that cached 1 MiB\n", thread_count()), 1;
  /* first, while no purger runs: the exiting thread itself must get one going */
  const long limit_kib = 32 << 10;
  pthread_t t;
  if (pthread_create(&t, NULL, exiting_thread, NULL) != 0 || pthread_join(t, NULL) != 0)
    return fprintf(stderr, "FAIL asleep: thread\n"), 1;
  long left = rss_kib(), asleep = sleep_until_rss(limit_kib, ASLEEP_WAIT_MS);
  printf("asleep: exited thread: %ld KiB resident after it exited, asleep %ld\n", left, asleep);
  if (left <= limit_kib) return fprintf(stderr, "FAIL asleep: the exited thread's memory was purged at once\n"), 1;
  if (asleep > limit_kib)
    return fprintf(stderr, "FAIL asleep: an exited thread's freed memory stayed resident while the program slept\n"), 1;
  for (size_t i = 0; i < sizeof exited_kept / sizeof exited_kept[0]; i++) free(exited_kept[i]);
  /* then blocks an exited thread left live, all freed by this thread: once emptied by frees from another
   * thread, its segments stayed resident (abandoned) until some thread needed memory */
  static char *handed[EXITED_BLOCKS];
  if (pthread_create(&t, NULL, handing_thread, handed) != 0 || pthread_join(t, NULL) != 0)
    return fprintf(stderr, "FAIL asleep: thread\n"), 1;
  for (int i = 0; i < EXITED_BLOCKS; i++)
    if (handed[i] == NULL) return fprintf(stderr, "FAIL asleep: malloc(1000) in the handing thread\n"), 1;
  long held = rss_kib();
  /* in a shuffled order (a hash table's, say): counting frees in a row into one segment missed it */
  shuffle(handed, EXITED_BLOCKS);
  for (int i = 0; i < EXITED_BLOCKS; i++) free(handed[i]);
  long handed_asleep = sleep_until_rss(limit_kib, ASLEEP_WAIT_MS);
  printf("asleep: blocks of an exited thread: %ld KiB resident while live, asleep after their frees %ld\n", held,
         handed_asleep);
  if (held <= limit_kib) return fprintf(stderr, "FAIL asleep: the handed blocks were not resident (proves nothing)\n"), 1;
  if (handed_asleep > limit_kib)
    return fprintf(stderr, "FAIL asleep: blocks of an exited thread, freed by another, stayed resident while the "
                           "program slept\n"), 1;
  if (bursts_then_sleep("parent") != 0) return 1;
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return fprintf(stderr, "FAIL asleep: fork\n"), 1;
  if (pid == 0) {
    int rc = bursts_then_sleep("child");
    fflush(stdout);
    _exit(rc);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return fprintf(stderr, "FAIL asleep: the forked child failed (status %#x)\n", status), 1;
  return 0;
}

/* ---- sleeper: a thread frees a burst of medium blocks and sleeps --------------------------------------- */

static void *free_every_block(void *arg) {
  char **blocks = arg;
  for (size_t i = 0; blocks[i] != NULL; i++) free(blocks[i]);
  return arg;
}

/* `name`'s burst: `burst` bytes in blocks of `size` written into `blocks` (NULL after the last), then freed
 * by this thread or, `by_other`, by another, then no call: RSS must come back within `slack_kib` of `start`
 * within 3 s. 0 when it did; `kept` names what stayed, for the failure. */
static int burst_comes_back(const char *name, char **blocks, size_t burst, size_t size, bool by_other, long start,
                            long slack_kib, const char *kept) {
  size_t count = burst / size;
  for (size_t i = 0; i < count; i++) {
    blocks[i] = malloc(size);
    if (blocks[i] == NULL) return fprintf(stderr, "FAIL %s: malloc of %zu bytes\n", name, size), 1;
    memset(blocks[i], 1, size);
  }
  blocks[count] = NULL;
  long live = rss_kib() - start;
  pthread_t t;
  if (!by_other) free_every_block(blocks);
  else if (pthread_create(&t, NULL, free_every_block, blocks) != 0 || pthread_join(t, NULL) != 0)
    return fprintf(stderr, "FAIL %s: thread\n", name), 1;
  long asleep = sleep_until_rss(start + slack_kib, 3000) - start;
  printf("%s: %zu blocks of %zu B: %ld KiB resident above the start while live, %ld asleep after %s freed "
         "them\n", name, count, size, live, asleep, by_other ? "another thread" : "this one");
  if (live < (long)(burst >> 10) / 2)
    return fprintf(stderr, "FAIL %s: the blocks were not resident (the test proves nothing)\n", name), 1;
  if (asleep > slack_kib) return fprintf(stderr, "FAIL %s: %s\n", name, kept), 1;
  return 0;
}

static int check_sleeper(void) {
  enum { BURST = 64 << 20 };
  static char *blocks[BURST / (48 << 10) + 1];
  const size_t sizes[] = {48 << 10, 200000};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
    if (burst_comes_back("sleeper", blocks, BURST, sizes[k], false, rss_kib(), 8 << 10,
                         "the thread kept the pages its frees emptied while it slept") != 0)
      return 1;
  return 0;
}

/* ---- orphaned: a sleeping thread's blocks, all freed by another thread ------------------------------- */

static int check_orphaned(void) {
  enum { BURST = 128 << 20, SLACK_KIB = 24 << 10 };
  static char *blocks[BURST / 4000 + 1];
  const size_t sizes[] = {4000, 100000};
  long start = rss_kib();
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t count = BURST / sizes[k];
    uint64_t orphans = snap().orphaned_pages;
    if (burst_comes_back("orphaned", blocks, BURST, sizes[k], true, start, SLACK_KIB,
                         "pages another thread emptied stayed while their owner slept") != 0)
      return 1;
    orphans = snap().orphaned_pages - orphans;
    printf("orphaned: %llu pages given back as orphans\n", (unsigned long long)orphans);
    if (orphans == 0) return fprintf(stderr, "FAIL orphaned: no page went back as an orphan\n"), 1;
    /* the same memory again, each block its own byte: pages handed back come out whole and apart */
    for (size_t i = 0; i < count; i++) {
      blocks[i] = malloc(sizes[k]);
      if (blocks[i] == NULL) return fprintf(stderr, "FAIL orphaned: malloc of %zu bytes\n", sizes[k]), 1;
      memset(blocks[i], (int)(i % 251), sizes[k]);
    }
    for (size_t i = 0; i < count; i++) {
      unsigned char want = (unsigned char)(i % 251);
      if ((unsigned char)blocks[i][0] != want || (unsigned char)blocks[i][sizes[k] / 2] != want ||
          (unsigned char)blocks[i][sizes[k] - 1] != want)
        return fprintf(stderr, "FAIL orphaned: block %zu of %zu B damaged\n", i, sizes[k]), 1;
    }
    for (size_t i = 0; i < count; i++) free(blocks[i]);
    sleep_until_rss(start + SLACK_KIB, 3000); /* the next burst starts from there */
  }
  return 0;
}

/* ---- abandoned: an exited thread's blocks, freed by another thread that then sleeps -------------------- */

struct abandon_job {
  char **blocks;
  size_t count, size, keep_every; /* the worker frees all but every keep_every-th block itself */
};

static void *allocate_and_exit(void *arg) {
  struct abandon_job *job = arg;
  for (size_t i = 0; i < job->count; i++) {
    job->blocks[i] = malloc(job->size);
    if (job->blocks[i] == NULL) return NULL;
    memset(job->blocks[i], (int)(i % 251), job->size);
  }
  for (size_t i = 0; i < job->count; i++)
    if (i % job->keep_every != 0) {
      free(job->blocks[i]);
      job->blocks[i] = NULL;
    }
  return job;
}

static int check_abandoned(void) {
  enum { BURST = 100 << 20 };
  static char *blocks[BURST / 1000 + 1];
  /* 256 KiB blocks, at most 62 to a segment; 1,000-byte ones of which the main thread frees one in 100
   * (a few dozen to a segment; they do not wait in its chains, whose pages would stay: 5.8 MiB) */
  const struct {
    size_t size, keep_every;
    long slack_kib;
  } bursts[] = {{256 << 10, 1, 8 << 10}, {1000, 100, 8 << 10}};
  long start = rss_kib();
  for (size_t k = 0; k < sizeof bursts / sizeof bursts[0]; k++) {
    struct abandon_job job = {blocks, BURST / bursts[k].size, bursts[k].size, bursts[k].keep_every};
    pthread_t t;
    void *done = NULL;
    if (pthread_create(&t, NULL, allocate_and_exit, &job) != 0 || pthread_join(t, &done) != 0 || done == NULL)
      return fprintf(stderr, "FAIL abandoned: worker\n"), 1;
    long live = rss_kib() - start;
    uint64_t orphans = snap().orphaned_pages;
    for (size_t i = 0; i < job.count; i++) {
      if (blocks[i] == NULL) continue;
      unsigned char want = (unsigned char)(i % 251);
      if ((unsigned char)blocks[i][0] != want || (unsigned char)blocks[i][job.size - 1] != want)
        return fprintf(stderr, "FAIL abandoned: block %zu of %zu B damaged\n", i, job.size), 1;
      free(blocks[i]);
    }
    long asleep = sleep_until_rss(start + bursts[k].slack_kib, 3000) - start;
    orphans = snap().orphaned_pages - orphans;
    printf("abandoned: %zu blocks of %zu B, this thread freed 1 in %zu after their thread exited: %ld KiB "
           "resident above the start while live, %ld asleep; %llu pages given back as orphans\n",
           job.count, job.size, job.keep_every, live, asleep, (unsigned long long)orphans);
    if (live < (BURST >> 10) / (long)(2 * job.keep_every))
      return fprintf(stderr, "FAIL abandoned: the blocks were not resident (the test proves nothing)\n"), 1;
    if (asleep > bursts[k].slack_kib)
      return fprintf(stderr, "FAIL abandoned: pages emptied after their thread exited stayed resident\n"), 1;
    if (orphans == 0) return fprintf(stderr, "FAIL abandoned: no page went back as an orphan\n"), 1;
    /* the same memory again, from this thread: pages handed back come out whole */
    job.keep_every = job.count + 1;
    for (size_t i = 0; i < job.count; i++) {
      blocks[i] = malloc(job.size);
      if (blocks[i] == NULL) return fprintf(stderr, "FAIL abandoned: malloc of %zu bytes\n", job.size), 1;
      memset(blocks[i], (int)(i % 251), job.size);
    }
    for (size_t i = 0; i < job.count; i++) {
      unsigned char want = (unsigned char)(i % 251);
      if ((unsigned char)blocks[i][0] != want || (unsigned char)blocks[i][job.size / 2] != want ||
          (unsigned char)blocks[i][job.size - 1] != want)
        return fprintf(stderr, "FAIL abandoned: block %zu of %zu B damaged after reuse\n", i, job.size), 1;
    }
    for (size_t i = 0; i < job.count; i++) free(blocks[i]);
    sleep_until_rss(start + bursts[k].slack_kib, 3000); /* the next burst starts from there */
  }
  return 0;
}

/* abandoned-double-free SIZE [mlock]: 40 blocks of an exited worker, all freed by this thread and their
 * page given back as an orphan; then the first block freed again must be reported, not written into the
 * purged page (under mlockall read-only zeroes: a segfault) nor taken for an overflow (hardened builds). */
static int check_abandoned_double_free(size_t size, bool lock) {
  enum { COUNT = 40 };
  static char *blocks[COUNT];
  if (lock && mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
    printf("abandoned-double-free: skip (mlockall failed: not allowed to lock memory here)\n");
    return 77;
  }
  struct abandon_job job = {blocks, COUNT, size, COUNT + 1};
  pthread_t t;
  void *done = NULL;
  if (pthread_create(&t, NULL, allocate_and_exit, &job) != 0 || pthread_join(t, &done) != 0 || done == NULL)
    return fprintf(stderr, "FAIL abandoned-double-free: worker\n"), 1;
  uint64_t orphans = snap().orphaned_pages;
  for (size_t i = 0; i < COUNT; i++) free(blocks[i]);
  for (int waited = 0; snap().orphaned_pages == orphans; waited += 10) { /* snap sends this thread's chains */
    if (waited > 5000) return fprintf(stderr, "FAIL abandoned-double-free: no page went back as an orphan\n"), 1;
    collect(false); /* the collection (no purger below 32 MiB) */
    sleep_ms(10);
  }
  printf("abandoned-double-free: %zu-byte blocks' page given back; freeing the first block again\n", size);
  fflush(stdout);
  free(blocks[0]);
  snap(); /* sends a chain the free might have started */
  return fprintf(stderr, "FAIL abandoned-double-free: the second free went unreported\n"), 1;
}

/* ---- batched: remote frees of small blocks wait in the freeing thread, a little and not for long ------ */

enum { BATCH_BLOCKS = 100003, BATCH_SIZE = 48, BATCH_WAITING_MAX = 32 * 32 /* slots x blocks a chain */ };

static char *batch_blocks[BATCH_BLOCKS];
static sem_t batch_freed, batch_go_on;

/* Frees every block of batch_blocks (the main thread's), then waits, alive, until told to collect and end. */
static void *batch_worker(void *arg) {
  (void)arg;
  for (size_t i = 0; i < BATCH_BLOCKS; i++) free(batch_blocks[i]);
  sem_post(&batch_freed);
  sem_wait(&batch_go_on);
  collect(false);
  sem_post(&batch_freed);
  sem_wait(&batch_go_on);
  return NULL;
}

static int check_batched(void) {
  sem_init(&batch_freed, 0, 0);
  sem_init(&batch_go_on, 0, 0);
  struct hak_stats start = snap();
  for (size_t i = 0; i < BATCH_BLOCKS; i++) {
    batch_blocks[i] = malloc(BATCH_SIZE);
    if (batch_blocks[i] == NULL) return fprintf(stderr, "FAIL batched: malloc\n"), 1;
    memset(batch_blocks[i], (int)(i % 251), BATCH_SIZE);
  }
  uint64_t committed_live = snap().committed_bytes;
  pthread_t t;
  if (pthread_create(&t, NULL, batch_worker, NULL) != 0) return fprintf(stderr, "FAIL batched: pthread_create\n"), 1;
  sem_wait(&batch_freed);
  uint64_t sent = snap().remote_frees - start.remote_frees;
  printf("batched: %llu of %d remote frees sent while the worker waits\n", (unsigned long long)sent, BATCH_BLOCKS);
  if (sent > BATCH_BLOCKS || sent + BATCH_WAITING_MAX < BATCH_BLOCKS)
    return fprintf(stderr, "FAIL batched: %llu remote frees sent, %d freed, at most %d may wait\n",
                   (unsigned long long)sent, BATCH_BLOCKS, BATCH_WAITING_MAX), 1;
  sem_post(&batch_go_on); /* the worker's own collection sends the rest */
  sem_wait(&batch_freed);
  sent = snap().remote_frees - start.remote_frees;
  printf("batched: %llu after the worker's hak_collect(false)\n", (unsigned long long)sent);
  if (sent != BATCH_BLOCKS)
    return fprintf(stderr, "FAIL batched: %llu remote frees after the worker's collection, want %d\n",
                   (unsigned long long)sent, BATCH_BLOCKS), 1;
  collect(true); /* the owner takes them all */
  struct hak_stats owner = snap();
  if (owner.live_blocks[0] > start.live_blocks[0] + 16)
    return fprintf(stderr, "FAIL batched: %llu small blocks live after the owner's collection, %llu at the start\n",
                   (unsigned long long)owner.live_blocks[0], (unsigned long long)start.live_blocks[0]), 1;
  /* the memory serves the owner again, block by block intact */
  for (size_t i = 0; i < BATCH_BLOCKS; i++) {
    batch_blocks[i] = malloc(BATCH_SIZE);
    if (batch_blocks[i] == NULL) return fprintf(stderr, "FAIL batched: malloc\n"), 1;
    memset(batch_blocks[i], (int)(i % 251), BATCH_SIZE);
  }
  for (size_t i = 0; i < BATCH_BLOCKS; i++)
    if ((unsigned char)batch_blocks[i][0] != i % 251 || (unsigned char)batch_blocks[i][BATCH_SIZE - 1] != i % 251)
      return fprintf(stderr, "FAIL batched: block %zu damaged\n", i), 1;
  uint64_t committed = snap().committed_bytes;
  printf("batched: committed %.1f MiB with the blocks live, %.1f MiB with them allocated again\n",
         mib(committed_live), mib(committed));
  if (committed > committed_live + (1u << 20))
    return fprintf(stderr, "FAIL batched: the blocks allocated again took new memory\n"), 1;
  /* a second round, freed by the worker that then exits: its exit sends what waited */
  sem_post(&batch_go_on);
  pthread_join(t, NULL);
  start = snap();
  if (pthread_create(&t, NULL, batch_worker, NULL) != 0) return fprintf(stderr, "FAIL batched: pthread_create\n"), 1;
  sem_wait(&batch_freed);
  sem_post(&batch_go_on);
  sem_wait(&batch_freed);
  sem_post(&batch_go_on);
  pthread_join(t, NULL);
  sent = snap().remote_frees - start.remote_frees;
  printf("batched: %llu remote frees after the second worker's exit\n", (unsigned long long)sent);
  if (sent != BATCH_BLOCKS)
    return fprintf(stderr, "FAIL batched: %llu remote frees after the worker exited, want %d\n",
                   (unsigned long long)sent, BATCH_BLOCKS), 1;
  return 0;
}

/* ---- calloc: fresh medium blocks are not written over, and every calloc reads as zeroes ------------ */

enum { CALLOC_BLOCKS = 800, CALLOC_BIG = 300000 };

static char *calloc_blocks[CALLOC_BLOCKS];

static int all_zero(const char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0) return 0;
  return 1;
}

static void *calloc_free_all(void *arg) {
  (void)arg;
  for (size_t i = 0; i < CALLOC_BLOCKS; i++) free(calloc_blocks[i]);
  return NULL;
}

/* calloc CALLOC_BLOCKS blocks of `size` and check each reads as zeroes; `touch`: then write one byte. */
static int calloc_round(const char *what, size_t size, bool touch) {
  for (size_t i = 0; i < CALLOC_BLOCKS; i++) {
    calloc_blocks[i] = calloc(1, size);
    if (calloc_blocks[i] == NULL) return fprintf(stderr, "FAIL calloc: calloc(1, %zu)\n", size), 1;
    if (!all_zero(calloc_blocks[i], size))
      return fprintf(stderr, "FAIL calloc: %s: block %zu of %zu bytes not zero\n", what, i, size), 1;
    if (touch) calloc_blocks[i][size / 2] = 1;
  }
  return 0;
}

static void scribble_and_free(size_t size) {
  for (size_t i = 0; i < CALLOC_BLOCKS; i++) {
    memset(calloc_blocks[i], 0xa5, size);
    free(calloc_blocks[i]);
  }
}

static int check_calloc(void) {
  /* fresh memory: one byte written in each block of 300,000, so only about 800 OS pages are touched */
  long start = rss_kib();
  if (calloc_round("fresh", CALLOC_BIG, true) != 0) return 1;
  long grown = rss_kib() - start;
  printf("calloc: %d blocks of %d B, one byte written in each: %ld KiB resident more (%d KiB asked)\n",
         CALLOC_BLOCKS, CALLOC_BIG, grown, CALLOC_BLOCKS * (CALLOC_BIG / 1024));
  if (grown > 32 << 10) return fprintf(stderr, "FAIL calloc: fresh blocks were written over\n"), 1;
  scribble_and_free(CALLOC_BIG);
  /* the same memory again, each size in turn: blocks the program wrote, freed by their owner */
  const size_t sizes[] = {1100, 20000, CALLOC_BIG};
  for (size_t k = 0; k < 3; k++) {
    if (calloc_round("fresh or freed by the owner", sizes[k], false) != 0) return 1;
    scribble_and_free(sizes[k]);
    if (calloc_round("freed by the owner", sizes[k], false) != 0) return 1;
    /* written, then freed by another thread (remote frees, collected into the owner's pages) */
    for (size_t i = 0; i < CALLOC_BLOCKS; i++) memset(calloc_blocks[i], 0x5a, sizes[k]);
    pthread_t t;
    if (pthread_create(&t, NULL, calloc_free_all, NULL) != 0) return fprintf(stderr, "FAIL calloc: pthread_create\n"), 1;
    pthread_join(t, NULL);
    if (calloc_round("freed by another thread", sizes[k], false) != 0) return 1;
    scribble_and_free(sizes[k]);
    collect(true); /* purged (or, with HAKMEM_PURGE_MODE=free, lazily): the next round maps or reuses them */
    if (calloc_round("after a collection", sizes[k], false) != 0) return 1;
    scribble_and_free(sizes[k]);
  }
  printf("calloc: every block read as zeroes (fresh, reused, freed remotely, after a collection)\n");
  return 0;
}

/* ---- calloc-large: a large calloc from a cached mapping zeroes what its last block touched only --------- */

enum { SPARSE_MIB = 128, SPARSE_PAGE = 4096 };

/* The first byte of p[0, n) that is not zero, or -1. Reading untouched memory maps the zero page: no RSS. */
static long first_nonzero(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0) return (long)i;
  return -1;
}

/* Leave a freed large block of `size` in the cache, written every `step` bytes in runs of `run` (step 0:
 * in full). With `fresh`, the cache is emptied first, so that the block gets memory no block touched. */
static int leave_written(const char *what, size_t size, size_t step, size_t run, bool fresh) {
  if (fresh) collect(true);
  unsigned char *p = malloc(size);
  if (p == NULL) return fprintf(stderr, "FAIL calloc-large: %s: malloc(%zu)\n", what, size), 1;
  if (step == 0) memset(p, 0x5a, size);
  for (size_t at = 0; step != 0 && at < size; at += step) memset(p + at, 0x5a, at + run <= size ? run : size - at);
  free(p);
  return 0;
}

/* calloc(size): it must read as zeroes; *grown is what the calloc itself added to RSS (reading untouched
 * memory maps the zero page, which adds none). The block is written in full and freed. */
static int calloc_zeroed(const char *what, size_t size, long *grown) {
  long before = rss_kib();
  unsigned char *p = calloc(1, size);
  if (p == NULL) return fprintf(stderr, "FAIL calloc-large: %s: calloc(1, %zu)\n", what, size), 1;
  *grown = rss_kib() - before;
  long bad = first_nonzero(p, size);
  if (bad >= 0) return fprintf(stderr, "FAIL calloc-large: %s: byte %ld of %zu is not zero\n", what, bad, size), 1;
  memset(p, 0xa5, size);
  free(p);
  return 0;
}

static int check_calloc_large(void) {
  const size_t big = (size_t)SPARSE_MIB << 20;
  long grown;
  /* written in full: the calloc zeroes every byte (resident: memset) */
  if (leave_written("full", big, 0, 0, true) != 0 || calloc_zeroed("after a full write", big, &grown) != 0) return 1;
  /* one byte a MiB: the calloc zeroes those pages and faults in no other */
  if (leave_written("sparse", big, 1 << 20, 1, true) != 0 || calloc_zeroed("after a sparse write", big, &grown) != 0)
    return 1;
  printf("calloc-large: a %d MiB calloc after a block that wrote one byte a MiB: %ld KiB more resident\n",
         SPARSE_MIB, grown);
  if (grown > 8 << 10)
    return fprintf(stderr, "FAIL calloc-large: the calloc faulted in pages no block had touched (%ld KiB)\n", grown), 1;
  /* every other page (gaps too short for a madvise each: zeroed with the rest), then the same mapping
   * again, now written in full by the check */
  if (leave_written("every other page", big, 2 * SPARSE_PAGE, SPARSE_PAGE, true) != 0 ||
      calloc_zeroed("after every other page", big, &grown) != 0 || calloc_zeroed("again", big, &grown) != 0)
    return 1;
  /* an end that is not page-aligned; a smaller request from a larger mapping written in full */
  const size_t odd = ((size_t)5 << 20) + 123;
  if (leave_written("odd size", odd, 0, 0, true) != 0 || calloc_zeroed("odd size", odd, &grown) != 0 ||
      leave_written("8 MiB", (size_t)8 << 20, 0, 0, true) != 0 ||
      calloc_zeroed("7 MiB from an 8 MiB mapping", (size_t)7 << 20, &grown) != 0)
    return 1;
  /* after a collection (MADV_DONTNEED, or under HAKMEM_PURGE_MODE=free lazily: the contents may stay) */
  if (leave_written("collected", big, 0, 0, true) != 0) return 1;
  collect(true);
  if (calloc_zeroed("after a collection", big, &grown) != 0) return 1;
  printf("calloc-large: every block read as zeroes (written in full, sparsely, every other page, odd sizes, "
         "a smaller request, after a collection)\n");
  return 0;
}

/* ---- fork-inherited: a forked child gives back what its parent freed just before the fork ------------ */

enum { INHERITED_BLOCKS = 512, INHERITED_SIZE = 256 << 10 };

/* Returns NULL when a malloc failed. */
static void *burst_then_free(void *arg) {
  static char *blocks[INHERITED_BLOCKS];
  for (int i = 0; i < INHERITED_BLOCKS; i++) {
    blocks[i] = malloc(INHERITED_SIZE);
    if (blocks[i] == NULL) return NULL;
    memset(blocks[i], 5, INHERITED_SIZE);
  }
  for (int i = 0; i < INHERITED_BLOCKS; i++) free(blocks[i]);
  return arg;
}

static void *return_at_once(void *arg) { return arg; }

static int check_fork_inherited(bool threads) {
  /* the 32 MiB trim bound, and slack for what the child's own allocations hold */
  enum { LIMIT_KIB = 48 << 10, WAIT_MS = 5000 };
  const char *name = threads ? "fork-inherited-threads" : "fork-inherited";
  long start = rss_kib();
  pthread_t t;
  void *burst = NULL;
  if (pthread_create(&t, NULL, burst_then_free, (void *)name) != 0 || pthread_join(t, &burst) != 0)
    return fprintf(stderr, "FAIL %s: thread\n", name), 1;
  if (burst == NULL) return fprintf(stderr, "FAIL %s: malloc of %d bytes\n", name, INHERITED_SIZE), 1;
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return fprintf(stderr, "FAIL %s: fork\n", name), 1;
  if (pid == 0) {
    long inherited = rss_kib() - start;
    if (threads && (pthread_create(&t, NULL, return_at_once, NULL) != 0 || pthread_join(t, NULL) != 0)) _exit(3);
    /* small blocks of classes the test has not used: a slow path each, where a purger may start (a large
     * block would note its growth and ask for one anyway). Within the first purge delay none starts (a
     * child that execs by then needs none); the second comes after it. */
    char *one = malloc(5000);
    if (one == NULL) _exit(3);
    one[0] = 1;
    free(one);
    struct timespec past_delay = {0, 600 * 1000000L};
    nanosleep(&past_delay, NULL);
    one = malloc(7000);
    if (one == NULL) _exit(3);
    one[0] = 1;
    free(one);
    long asleep = sleep_until_rss(start + LIMIT_KIB, WAIT_MS) - start;
    printf("%s: the child inherited %ld KiB resident above the parent's start, %ld asleep\n", name, inherited,
           asleep);
    fflush(stdout);
    if (inherited < (INHERITED_BLOCKS * (INHERITED_SIZE >> 10)) / 2) {
      fprintf(stderr, "FAIL %s: the freed blocks were purged before the fork (the test proves nothing)\n", name);
      _exit(1);
    }
    if (asleep > LIMIT_KIB) {
      fprintf(stderr, "FAIL %s: the child kept what its parent freed before the fork\n", name);
      _exit(1);
    }
    _exit(0);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return fprintf(stderr, "FAIL %s: the child failed (status %#x)\n", name, status), 1;
  return 0;
}

static double cpu_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int check_refused(void) {
  if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
    printf("refused: skip (mlockall failed: not allowed to lock memory here)\n");
    return 77;
  }
  if (large_burst() != 0) return 1;
  struct hak_stats s;
  stats_get_sized(&s, sizeof s);
  uint64_t madvise_before = s.madvise_calls;
  double before = cpu_seconds();
  struct timespec wait = {1, 0};
  nanosleep(&wait, NULL);
  double used = cpu_seconds() - before;
  stats_get_sized(&s, sizeof s);
  uint64_t tries = s.madvise_calls - madvise_before;
  printf("refused: %.3f s of CPU and %llu madvise calls during 1 s of sleep with every purge refused, threads %d\n",
         used, (unsigned long long)tries, thread_count());
  if (thread_count() != 2) return fprintf(stderr, "FAIL refused: the purger did not start\n"), 1;
  if (used > 0.1) return fprintf(stderr, "FAIL refused: the purger spun on purges the kernel refused\n"), 1;
  /* ten cached mappings, each tried once (at a 50 ms delay, retrying every delay made some 170 calls) */
  if (tries > 12) return fprintf(stderr, "FAIL refused: refused purges were tried again and again\n"), 1;
  return 0;
}

static void *exit_worker(void *arg) {
  (void)arg;
  if (large_burst() != 0) return NULL;
  int (*region_alloc)(size_t, struct hak_region *) =
      (int (*)(size_t, struct hak_region *))dlsym(RTLD_DEFAULT, "hak_region_alloc");
  int (*region_free)(struct hak_region *) = (int (*)(struct hak_region *))dlsym(RTLD_DEFAULT, "hak_region_free");
  struct hak_region r;
  if (region_alloc != NULL && region_free != NULL && region_alloc(8 << 20, &r) == 0) {
    memset(r.ptr, 1, 8 << 20);
    region_free(&r);
  }
  return arg;
}

/* pthread-exit-locked: every purge refused (mlockall), then the main thread leaves. */
static int check_pthread_exit_locked(void) {
  if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
    printf("pthread-exit-locked: skip (mlockall failed: not allowed to lock memory here)\n");
    return 77;
  }
  if (large_burst() != 0) return 1;
  printf("pthread-exit-locked: main thread leaving\n");
  fflush(stdout);
  pthread_exit(NULL);
}

static pthread_barrier_t idle_exit;
static void *idle_then_exit(void *arg) {
  pthread_barrier_wait(&idle_exit);
  return arg;
}

/* dying-frees: detached threads that never allocate exit in groups whose stacks overflow glibc's stack
 * cache (40 MiB), so that exiting threads, past their TSD destructors, free the TLS blocks of other cached
 * stacks (blocks of this thread's heap). Only the main thread may be left with a heap; then, with 40 MiB
 * held, the main thread leaves through pthread_exit and the process must end. */
static int check_dying_frees(void) {
  enum { GROUP = 12, ROUNDS = 3 };
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 8u << 20);
  pthread_barrier_init(&idle_exit, NULL, GROUP + 1);
  for (int round = 0; round < ROUNDS; round++) {
    for (int i = 0; i < GROUP; i++) {
      pthread_t t;
      if (pthread_create(&t, &attr, idle_then_exit, NULL) != 0) return fprintf(stderr, "FAIL dying-frees: thread\n"), 1;
    }
    pthread_barrier_wait(&idle_exit);
    for (int waited = 0; thread_count() > 1 && waited < 5000; waited += 10) {
      struct timespec step = {0, 10 * 1000000L};
      nanosleep(&step, NULL);
    }
  }
  struct hak_stats s;
  stats_get_sized(&s, sizeof s);
  printf("dying-frees: threads started %llu, exited %llu\n", (unsigned long long)s.threads_started,
         (unsigned long long)s.threads_exited);
  if (s.threads_started - s.threads_exited != 1)
    return fprintf(stderr, "FAIL dying-frees: heaps left to threads that are gone\n"), 1;
  static char *kept[640];
  for (int i = 0; i < 640; i++) {
    kept[i] = malloc(64 << 10);
    if (kept[i] == NULL) return fprintf(stderr, "FAIL dying-frees: malloc\n"), 1;
    memset(kept[i], 1, 64 << 10);
  }
  printf("dying-frees: main thread leaving\n");
  fflush(stdout);
  pthread_exit(NULL);
}

/* heapless-left: a thread that only makes large allocations (it never gets a heap: the main thread frees
 * them, since a thread's large free gives it one) outlives the main thread, which leaves through
 * pthread_exit with 48 MiB in the large cache waiting for the purge delay: that memory must still come
 * back while the thread lives on. */
static sem_t worker_allocated, worker_freed;
static char *heapless_blocks[24];

static void *large_only_worker(void *arg) {
  for (int i = 0; i < 24; i++) {
    heapless_blocks[i] = malloc(2u << 20);
    if (heapless_blocks[i] == NULL) return fprintf(stderr, "FAIL heapless-left: malloc\n"), exit(1), arg;
    memset(heapless_blocks[i], 1, 2u << 20);
  }
  sem_post(&worker_allocated);
  sem_wait(&worker_freed); /* the main thread has freed them and leaves now */
  long before = rss_kib();
  long after = sleep_until_rss(before - (40 << 10), 3000);
  printf("heapless-left: rss %ld -> %ld KiB after the main thread left\n", before, after);
  exit(after <= before - (40 << 10) ? 0 : (fprintf(stderr, "FAIL heapless-left: the cached blocks stayed\n"), 1));
}

static int check_heapless_left(void) {
  if (large_burst() != 0) return 1; /* over 32 MiB: the purger runs */
  sem_init(&worker_allocated, 0, 0);
  sem_init(&worker_freed, 0, 0);
  pthread_t t;
  if (pthread_create(&t, NULL, large_only_worker, NULL) != 0) return fprintf(stderr, "FAIL heapless-left: thread\n"), 1;
  sem_wait(&worker_allocated);
  for (int i = 0; i < 24; i++) free(heapless_blocks[i]);
  sem_post(&worker_freed);
  pthread_exit(NULL);
}

/* sigcancel: a thread that runs with glibc's SIGCANCEL blocked (a parent can leave it blocked across
 * exec; async cancellation's cleanup handlers run so) but is not exiting still gets a heap of its own:
 * its allocations must not all go through the slow path. */
static void *sigcancel_blocked(void *arg) {
  uint64_t block = 1ull << (32 - 1);
  syscall(SYS_rt_sigprocmask, SIG_BLOCK, &block, NULL, sizeof block);
  struct hak_stats s;
  stats_get_sized(&s, sizeof s);
  uint64_t slow_before = s.slow_allocs;
  for (int i = 0; i < 100000; i++) {
    void *p = malloc(64);
    if (p == NULL) return fprintf(stderr, "FAIL sigcancel: malloc\n"), (void *)1;
    free(p);
  }
  stats_get_sized(&s, sizeof s);
  printf("sigcancel: %llu slow allocations in 100000\n", (unsigned long long)(s.slow_allocs - slow_before));
  if (s.slow_allocs - slow_before > 1000) return fprintf(stderr, "FAIL sigcancel: no heap of its own\n"), (void *)1;
  return NULL;
}

static int check_sigcancel(void) {
  pthread_t t;
  void *failed = (void *)1;
  if (pthread_create(&t, NULL, sigcancel_blocked, NULL) != 0 || pthread_join(t, &failed) != 0) return 1;
  return failed != NULL;
}

static int check_pthread_exit(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, exit_worker, NULL) != 0) return fprintf(stderr, "FAIL pthread-exit: thread\n"), 1;
  printf("pthread-exit: main thread leaving\n");
  fflush(stdout);
  pthread_detach(t);
  pthread_exit(NULL);
}

/* pthread-exit-round4, pthread-exit-round4-later: a heap whose thread's first allocation came in its last
 * round of key destructors counts as live until a sweep; main keeps 64 MiB live, frees 40 MiB (the purger
 * starts and has reason to wait) and leaves through pthread_exit. The thread ends before main allocates
 * (joined), or lingers 600 ms in that last round (detached), past main's exit and the purger's first wait:
 * the purger's sweep before it waits, or a timed one, finds it gone. Before, the process never ended
 * (SIGTERM blocked too). */
static void allocate_in_round4_and_linger(void *v) {
  if (++round_no == 4) {
    char *volatile p = malloc(100);
    memset(p, 1, 100);
    usleep(600 * 1000);
    free(p);
  } else {
    pthread_setspecific(round_key, v);
  }
}

static int check_pthread_exit_round4(bool later) {
  const char *name = later ? "pthread-exit-round4-later" : "pthread-exit-round4";
  pthread_key_create(&round_key, later ? allocate_in_round4_and_linger : allocate_in_round4);
  pthread_t t;
  if (pthread_create(&t, NULL, round4_thread, NULL) != 0) return fprintf(stderr, "FAIL %s: thread\n", name), 1;
  if (later) {
    pthread_detach(t);
    usleep(100 * 1000); /* its heap is made by now */
  } else {
    pthread_join(t, NULL);
  }
  char *big = malloc(64 << 20);
  if (big == NULL) return fprintf(stderr, "FAIL %s: malloc\n", name), 1;
  memset(big, 1, 64 << 20);
  free(malloc(40 << 20));
  printf("%s: main thread leaving\n", name);
  fflush(stdout);
  pthread_exit(NULL);
}

int main(int argc, char **argv) {
  /* The RSS bounds below are in 4 KiB pages: on a machine whose transparent huge pages are `always`, a
   * byte written every 64 KiB of a large block costs 2 MiB (a helper's run: `large` grew 287 MiB against
   * 30 allowed). hakmem leaves that policy to the system (HAKMEM_HUGE_PAGES only asks for huge pages),
   * so the test takes it out of the measurement. */
  prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
  stats_get_sized = (int (*)(struct hak_stats *, size_t))dlsym(RTLD_DEFAULT, "hak_stats_get_sized");
  collect = (void (*)(bool))dlsym(RTLD_DEFAULT, "hak_collect");
  if (stats_get_sized == NULL || collect == NULL) {
    puts("skip: not running on hakmem");
    return 77;
  }
  if (argc == 2 && strcmp(argv[1], "late") == 0) return check_late();
  if (argc == 2 && strcmp(argv[1], "late-freed") == 0) return check_late_freed();
  if (argc == 2 && strcmp(argv[1], "round4") == 0) return check_round4();
  if (argc == 2 && strcmp(argv[1], "trim-heapless") == 0) return check_trim_heapless();
  if (argc == 2 && strcmp(argv[1], "refill") == 0) return check_refill();
  if (argc == 2 && strcmp(argv[1], "at-once") == 0) return check_at_once();
  if (argc == 2 && strcmp(argv[1], "at-once-queue") == 0) return check_at_once_queue();
  if (argc == 2 && strcmp(argv[1], "trim") == 0) return check_trim();
  if (argc == 2 && strcmp(argv[1], "trim-first-pages") == 0) return check_trim_first_pages();
  if (argc == 2 && strcmp(argv[1], "medium") == 0) return check_medium();
  if (argc == 2 && strcmp(argv[1], "regrow") == 0) return check_regrow();
  if (argc == 2 && strcmp(argv[1], "turns") == 0) return check_turns();
  if (argc == 2 && strcmp(argv[1], "hot-head") == 0) return check_hot_head();
  if (argc == 2 && strcmp(argv[1], "large") == 0) return check_large();
  if (argc == 2 && strcmp(argv[1], "tail") == 0) return check_tail();
  if (argc == 2 && strcmp(argv[1], "aged") == 0) return check_aged();
  if (argc == 2 && strcmp(argv[1], "idle") == 0) return check_idle();
  if (argc == 2 && strcmp(argv[1], "reuse") == 0) return check_reuse();
  if (argc == 2 && strcmp(argv[1], "many-large") == 0) return check_many_large();
  if (argc == 2 && strcmp(argv[1], "emptied") == 0) return check_emptied();
  if (argc == 2 && strcmp(argv[1], "pool") == 0) return check_pool();
  if (argc == 2 && strcmp(argv[1], "deadline") == 0) return check_deadline();
  if (argc == 2 && strcmp(argv[1], "asleep") == 0) return check_asleep();
  if (argc == 2 && strcmp(argv[1], "sleeper") == 0) return check_sleeper();
  if (argc == 2 && strcmp(argv[1], "orphaned") == 0) return check_orphaned();
  if (argc == 2 && strcmp(argv[1], "abandoned") == 0) return check_abandoned();
  if ((argc == 3 || argc == 4) && strcmp(argv[1], "abandoned-double-free") == 0)
    return check_abandoned_double_free(strtoul(argv[2], NULL, 10), argc == 4 && strcmp(argv[3], "mlock") == 0);
  if (argc == 2 && strcmp(argv[1], "batched") == 0) return check_batched();
  if (argc == 2 && strcmp(argv[1], "calloc") == 0) return check_calloc();
  if (argc == 2 && strcmp(argv[1], "calloc-large") == 0) return check_calloc_large();
  if (argc == 2 && strcmp(argv[1], "fork-inherited") == 0) return check_fork_inherited(false);
  if (argc == 2 && strcmp(argv[1], "fork-inherited-threads") == 0) return check_fork_inherited(true);
  if (argc == 2 && strcmp(argv[1], "refused") == 0) return check_refused();
  if (argc == 2 && strcmp(argv[1], "pthread-exit") == 0) return check_pthread_exit();
  if (argc == 2 && strcmp(argv[1], "pthread-exit-round4") == 0) return check_pthread_exit_round4(false);
  if (argc == 2 && strcmp(argv[1], "pthread-exit-round4-later") == 0) return check_pthread_exit_round4(true);
  if (argc == 2 && strcmp(argv[1], "pthread-exit-locked") == 0) return check_pthread_exit_locked();
  if (argc == 2 && strcmp(argv[1], "dying-frees") == 0) return check_dying_frees();
  if (argc == 2 && strcmp(argv[1], "heapless-left") == 0) return check_heapless_left();
  if (argc == 2 && strcmp(argv[1], "sigcancel") == 0) return check_sigcancel();
  fprintf(stderr, "usage: test_reclaim late|late-freed|round4|trim-heapless|refill|at-once|at-once-queue|trim|trim-first-pages|medium|large|many-large|tail|aged|idle|reuse|emptied|pool|deadline|asleep|sleeper|orphaned|batched|calloc|fork-inherited|fork-inherited-threads|refused|\n"
          "pthread-exit|pthread-exit-locked|dying-frees|heapless-left|sigcancel|calloc-large|pthread-exit-round4|pthread-exit-round4-later\n");
  return 2;
}
