/* test_hakapi.c — hakmem's own interface: version macro, options, statistics, hak_collect (owner: tests suite).
 *
 * Runs only where hakmem is the allocator (functions looked up with dlsym, so the .glibc build links; run
 * there it says so and exits 0). Usage:
 *   test_hakapi            all checks; exit status 0 when every check passed
 *   test_hakapi options    print NAME=value for every option (for the environment tests in test_api.py)
 *   test_hakapi print      hak_stats_print(NULL) once, to stderr
 *   test_hakapi glibc-calls  malloc_stats() (to stderr), then mallopt(M_ARENA_MAX, 2)
 *   test_hakapi class-cache  the class cache of default builds (hardened builds have none) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hakmem.h"
#include "tcheck.h"

#define MiB ((size_t)1 << 20)

static struct {
  void *(*malloc)(size_t);
  void (*free)(void *);
  size_t (*usable)(const void *);
  void (*collect)(bool);
  int (*stats_get_sized)(struct hak_stats *, size_t);
  int (*stats_get_legacy)(struct hak_stats *);
  void (*stats_print)(FILE *);
  long (*option_get)(enum hak_option);
  int (*option_set)(enum hak_option, long);
  const char *(*option_name)(enum hak_option);
  int (*region_alloc)(size_t, struct hak_region *);
  int (*region_free)(struct hak_region *);
} H;

static int lookup_all(void) {
  struct { void **slot; const char *name; } t[] = {
      {(void **)&H.malloc, "hak_malloc"},          {(void **)&H.free, "hak_free"},
      {(void **)&H.usable, "hak_usable_size"},     {(void **)&H.collect, "hak_collect"},
      {(void **)&H.stats_get_sized, "hak_stats_get_sized"}, {(void **)&H.stats_get_legacy, "hak_stats_get"},
      {(void **)&H.stats_print, "hak_stats_print"},
      {(void **)&H.option_get, "hak_option_get"},  {(void **)&H.option_set, "hak_option_set"},
      {(void **)&H.option_name, "hak_option_name"}, {(void **)&H.region_alloc, "hak_region_alloc"},
      {(void **)&H.region_free, "hak_region_free"}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    *t[i].slot = dlsym(RTLD_DEFAULT, t[i].name);
    REQUIRE(*t[i].slot != NULL, "%s is not exported", t[i].name);
  }
  return 1;
}

static struct hak_stats snap(void) {
  struct hak_stats s;
  memset(&s, 0xff, sizeof s);
  REQUIRE(H.stats_get_sized(&s, sizeof s) == 0, "hak_stats_get_sized failed");
  return s;
}

static uint64_t total_allocs(const struct hak_stats *s) {
  return s->allocs[HAK_TIER_SMALL] + s->allocs[HAK_TIER_MEDIUM] + s->allocs[HAK_TIER_LARGE];
}

static void *must_malloc(size_t n) {
  void *p = malloc(n);
  REQUIRE(p != NULL, "malloc(%zu) returned NULL", n);
  return p;
}

/* ---- version and options ------------------------------------------------------------------------ */

static void check_version(void) {
  tc_section("HAKMEM_VERSION macros");
  CHECK_EQ(HAKMEM_VERSION, HAKMEM_VERSION_MAJOR * 10000 + HAKMEM_VERSION_MINOR * 100 + HAKMEM_VERSION_PATCH,
           "HAKMEM_VERSION");
  CHECK(HAKMEM_VERSION_MINOR < 100 && HAKMEM_VERSION_PATCH < 100, "minor %d / patch %d do not fit the encoding",
        HAKMEM_VERSION_MINOR, HAKMEM_VERSION_PATCH);
  printf("version %d.%d.%d\n", HAKMEM_VERSION_MAJOR, HAKMEM_VERSION_MINOR, HAKMEM_VERSION_PATCH);
}

static void check_options(void) {
  tc_section("hak_option_name / get / set");
  static const char *const names[HAK_OPT_COUNT] = {
      "HAKMEM_STATS",      "HAKMEM_VERBOSE",        "HAKMEM_PROFILE",        "HAKMEM_PURGE_DELAY_MS",
      "HAKMEM_PURGE_MODE", "HAKMEM_HUGE_PAGES",     "HAKMEM_DRAIN_INTERVAL", "HAKMEM_LARGE_CACHE_MB",
      "HAKMEM_BACKGROUND_PURGE"};
  for (int i = 0; i < HAK_OPT_COUNT; i++) {
    const char *n = H.option_name((enum hak_option)i);
    CHECK(n != NULL && strcmp(n, names[i]) == 0, "hak_option_name(%d) = \"%s\", expected \"%s\"", i,
          n ? n : "(null)", names[i]);
    CHECK(H.option_get((enum hak_option)i) != -1, "hak_option_get(%s) = -1 for a known option", names[i]);
  }
  CHECK(H.option_name(HAK_OPT_COUNT) == NULL, "hak_option_name(HAK_OPT_COUNT) is not NULL");
  CHECK(H.option_name((enum hak_option)-1) == NULL, "hak_option_name(-1) is not NULL");
  CHECK_EQ(H.option_get(HAK_OPT_COUNT), -1, "hak_option_get(HAK_OPT_COUNT)");
  CHECK_EQ(H.option_get((enum hak_option)1000), -1, "hak_option_get(1000)");
  CHECK_EQ(H.option_set(HAK_OPT_COUNT, 0), EINVAL, "hak_option_set(HAK_OPT_COUNT, 0)");
  CHECK_EQ(H.option_set((enum hak_option)-3, 0), EINVAL, "hak_option_set(-3, 0)");

  static const struct { enum hak_option opt; long good, bad; } cases[] = {
      {HAK_OPT_PURGE_MODE, 1, 7},     {HAK_OPT_PURGE_MODE, 0, -1},   {HAK_OPT_PROFILE, 2, 3},
      {HAK_OPT_PROFILE, 0, -1},       {HAK_OPT_VERBOSE, 2, 3},       {HAK_OPT_PURGE_DELAY_MS, 250, -2},
      {HAK_OPT_LARGE_CACHE_MB, 32, -5}, {HAK_OPT_DRAIN_INTERVAL, 0, -1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    enum hak_option o = cases[i].opt;
    long saved = H.option_get(o);
    CHECK_EQ(H.option_set(o, cases[i].good), 0, names[o]);
    CHECK_EQ(H.option_get(o), cases[i].good, names[o]);
    CHECK(H.option_set(o, cases[i].bad) == EINVAL, "hak_option_set(%s, %ld): expected EINVAL", names[o],
          cases[i].bad);
    CHECK(H.option_get(o) == cases[i].good, "%s changed to %ld by a rejected hak_option_set(%ld)", names[o],
          H.option_get(o), cases[i].bad);
    CHECK_EQ(H.option_set(o, saved), 0, "restoring an option");
  }

  /* A profile set at run time gives its presets to the options nothing set: HAKMEM_HUGE_PAGES is 1 in the
   * fast profile, 0 in the others; HAKMEM_LARGE_CACHE_MB, set above, keeps its value. */
  if (getenv("HAKMEM_HUGE_PAGES") == NULL) {
    long profile = H.option_get(HAK_OPT_PROFILE), cache = H.option_get(HAK_OPT_LARGE_CACHE_MB);
    CHECK_EQ(H.option_set(HAK_OPT_PROFILE, 0), 0, "hak_option_set(PROFILE, fast)");
    CHECK_EQ(H.option_get(HAK_OPT_HUGE_PAGES), 1, "HUGE_PAGES after a set of the fast profile");
    CHECK_EQ(H.option_get(HAK_OPT_LARGE_CACHE_MB), cache, "LARGE_CACHE_MB, set explicitly, after a profile set");
    CHECK_EQ(H.option_set(HAK_OPT_PROFILE, profile), 0, "restoring the profile");
    CHECK_EQ(H.option_get(HAK_OPT_HUGE_PAGES), profile == 0 ? 1 : 0, "HUGE_PAGES after the profile's restore");
  }
}

/* ---- large tier from one thread, then from several ---------------------------------------------- */

/* The large tier skips its lock and updates its counters without atomic instructions while the process
 * has one thread (src/sync.h). Its counters must come out exact both ways: a lost update under contention
 * would show as hits + misses short of the allocations made. */
enum { LARGE_THREADS = 4, LARGE_ROUNDS = 1500 };

static void large_round_trip(uint64_t *rng, unsigned id) {
  *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
  size_t size = 600 * 1024 + (size_t)((*rng >> 33) % (2 * MiB)); /* 600 KiB .. 2.6 MiB */
  unsigned char *p = must_malloc(size);
  unsigned char mark = (unsigned char)(id * 31 + (*rng >> 20));
  p[0] = mark;
  p[size / 2] = mark;
  p[size - 1] = mark;
  sched_yield(); /* let another thread take the cache lock meanwhile */
  REQUIRE(p[0] == mark && p[size / 2] == mark && p[size - 1] == mark,
          "large block %p of %zu bytes changed while its thread held it", (void *)p, size);
  free(p);
}

static void *large_thread(void *arg) {
  uint64_t rng = (uintptr_t)arg * 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < LARGE_ROUNDS; i++) large_round_trip(&rng, (unsigned)(uintptr_t)arg);
  return NULL;
}

static void check_large_threads(void) {
  tc_section("large tier: exact counters from one thread, then from several at once");
#define DELTA(a, b, field) ((unsigned long long)((b).field - (a).field))
  REQUIRE(__libc_single_threaded, "the process already has threads: this section must run before any");
  /* no background purger here: the thread that creates it allocates the new thread's TLS array from a
   * heap of its own, whose segment then stays mapped for that live block and spoils the count below */
  long saved_purge = H.option_get(HAK_OPT_BACKGROUND_PURGE);
  CHECK_EQ(H.option_set(HAK_OPT_BACKGROUND_PURGE, 0), 0, "hak_option_set(BACKGROUND_PURGE, 0)");
  uint64_t rng = 7;
  H.collect(true); /* an empty large cache, so the mappings left after the forced collect below are ours */
  struct hak_stats s0 = snap();
  for (int i = 0; i < LARGE_ROUNDS; i++) large_round_trip(&rng, 0);
  struct hak_stats s1 = snap();
  CHECK_EQ(DELTA(s0, s1, allocs[HAK_TIER_LARGE]), LARGE_ROUNDS, "large allocs from one thread");
  CHECK_EQ(DELTA(s0, s1, large_cache_hits) + DELTA(s0, s1, large_cache_misses), LARGE_ROUNDS,
           "large cache hits + misses from one thread");
  CHECK(DELTA(s0, s1, large_cache_hits) >= LARGE_ROUNDS / 2, "only %llu of %d large blocks reused a cached mapping",
        DELTA(s0, s1, large_cache_hits), LARGE_ROUNDS);

  pthread_t t[LARGE_THREADS];
  for (uintptr_t i = 0; i < LARGE_THREADS; i++)
    REQUIRE(pthread_create(&t[i], NULL, large_thread, (void *)(i + 1)) == 0, "pthread_create");
  for (int i = 0; i < LARGE_ROUNDS; i++) large_round_trip(&rng, 0);
  for (int i = 0; i < LARGE_THREADS; i++) REQUIRE(pthread_join(t[i], NULL) == 0, "pthread_join");
  struct hak_stats s2 = snap();
  const unsigned long long total = (unsigned long long)LARGE_ROUNDS * (LARGE_THREADS + 1);
  CHECK_EQ(DELTA(s1, s2, allocs[HAK_TIER_LARGE]), total, "large allocs from five threads at once");
  CHECK_EQ(DELTA(s1, s2, large_cache_hits) + DELTA(s1, s2, large_cache_misses), total,
           "large cache hits + misses from five threads at once");

  H.collect(true); /* unmaps every cached mapping: what the cache held must all be there to give back */
  struct hak_stats s3 = snap();
  /* a lost cache entry would leave at least one mapping of 600 KiB; new pagemap leaves take 128 KiB each */
  CHECK(s3.mapped_bytes <= s0.mapped_bytes + 512 * 1024, "mapped_bytes %llu after a forced collect, %llu before",
        (unsigned long long)s3.mapped_bytes, (unsigned long long)s0.mapped_bytes);
  CHECK_EQ(H.option_set(HAK_OPT_BACKGROUND_PURGE, saved_purge), 0, "restoring BACKGROUND_PURGE");
#undef DELTA
}

/* ---- statistics --------------------------------------------------------------------------------- */

static void *remote_thread(void *arg) {
  void **blocks = arg;
  for (int i = 0; i < 500; i++) blocks[i] = must_malloc(64 + (size_t)i);
  return NULL;
}

/* remote_thread's work, then it stays alive until the main thread has freed its blocks */
static pthread_barrier_t live_barrier;
static void *live_remote_thread(void *arg) {
  remote_thread(arg);
  pthread_barrier_wait(&live_barrier); /* blocks ready */
  pthread_barrier_wait(&live_barrier); /* blocks freed */
  return NULL;
}

/* Six blocks of 3 MiB, each written in full (the large-cache cap checks). */
static void six_written_blocks(void **blocks) {
  for (int i = 0; i < 6; i++) {
    blocks[i] = must_malloc(3 * MiB);
    memset(blocks[i], 1, 3 * MiB);
  }
}

static void check_stats(void) {
  tc_section("hak_stats_get: argument, per-tier counters, frees, remote frees, threads");
  CHECK_EQ(H.stats_get_sized(NULL, sizeof(struct hak_stats)), EINVAL, "hak_stats_get_sized(NULL)");
  CHECK_EQ(H.stats_get_legacy(NULL), EINVAL, "hak_stats_get(NULL)");

  enum { NS = 1000, NM = 200, NL = 10 };
  static void *small[NS], *medium[NM], *large[NL];
  struct hak_stats s0 = snap();
  for (int i = 0; i < NS; i++) small[i] = must_malloc(100);
  struct hak_stats s1 = snap();
  for (int i = 0; i < NM; i++) medium[i] = must_malloc(8192);
  struct hak_stats s2 = snap();
  for (int i = 0; i < NL; i++) large[i] = must_malloc(MiB);
  struct hak_stats s3 = snap();
#define DELTA(a, b, field) ((unsigned long long)((b).field - (a).field))
  CHECK(DELTA(s0, s1, allocs[HAK_TIER_SMALL]) >= NS, "small allocs grew by %llu for %d malloc(100)",
        DELTA(s0, s1, allocs[HAK_TIER_SMALL]), NS);
  CHECK(DELTA(s0, s1, alloc_bytes[HAK_TIER_SMALL]) >= NS * 100ull, "small alloc_bytes grew by %llu",
        DELTA(s0, s1, alloc_bytes[HAK_TIER_SMALL]));
  CHECK(DELTA(s1, s2, allocs[HAK_TIER_MEDIUM]) >= NM, "medium allocs grew by %llu for %d malloc(8192)",
        DELTA(s1, s2, allocs[HAK_TIER_MEDIUM]), NM);
  CHECK(DELTA(s1, s2, allocs[HAK_TIER_SMALL]) < 20, "malloc(8192) counted as small %llu times",
        DELTA(s1, s2, allocs[HAK_TIER_SMALL]));
  CHECK(DELTA(s1, s2, alloc_bytes[HAK_TIER_MEDIUM]) >= NM * 8192ull, "medium alloc_bytes grew by %llu",
        DELTA(s1, s2, alloc_bytes[HAK_TIER_MEDIUM]));
  CHECK(DELTA(s2, s3, allocs[HAK_TIER_LARGE]) >= NL, "large allocs grew by %llu for %d malloc(1 MiB)",
        DELTA(s2, s3, allocs[HAK_TIER_LARGE]), NL);
  CHECK(DELTA(s2, s3, allocs[HAK_TIER_MEDIUM]) < 5, "malloc(1 MiB) counted as medium %llu times",
        DELTA(s2, s3, allocs[HAK_TIER_MEDIUM]));
  CHECK(DELTA(s2, s3, alloc_bytes[HAK_TIER_LARGE]) >= NL * (unsigned long long)MiB, "large alloc_bytes grew by %llu",
        DELTA(s2, s3, alloc_bytes[HAK_TIER_LARGE]));
  CHECK(s3.mapped_bytes >= s3.committed_bytes, "mapped_bytes %llu < committed_bytes %llu",
        (unsigned long long)s3.mapped_bytes, (unsigned long long)s3.committed_bytes);
  CHECK(s3.peak_committed_bytes >= s3.committed_bytes, "peak_committed_bytes %llu < committed_bytes %llu",
        (unsigned long long)s3.peak_committed_bytes, (unsigned long long)s3.committed_bytes);
  CHECK(s3.mmap_calls > 0, "mmap_calls is 0");
  CHECK(s3.current_rss_bytes > 0 && s3.peak_rss_bytes > 0, "rss counters are 0 (current %llu, peak %llu)",
        (unsigned long long)s3.current_rss_bytes, (unsigned long long)s3.peak_rss_bytes);
  CHECK(s3.minor_faults > 0, "minor_faults is 0");
  for (int i = 0; i < NS; i++) free(small[i]);
  for (int i = 0; i < NM; i++) free(medium[i]);
  for (int i = 0; i < NL; i++) free(large[i]);
  struct hak_stats s4 = snap();
  CHECK(DELTA(s3, s4, frees) >= NS + NM + NL, "frees grew by %llu for %d free()", DELTA(s3, s4, frees),
        NS + NM + NL);

  /* blocks of a thread that is still running: remote frees */
  static void *remote[500];
  pthread_t t;
  REQUIRE(pthread_barrier_init(&live_barrier, NULL, 2) == 0, "pthread_barrier_init");
  REQUIRE(pthread_create(&t, NULL, live_remote_thread, remote) == 0, "pthread_create");
  pthread_barrier_wait(&live_barrier);
  struct hak_stats s5 = snap();
  for (int i = 0; i < 500; i++) free(remote[i]);
  /* small blocks wait in this thread in chains of at most 4 KiB a page until sent: hak_stats_get sends
   * the caller's */
  struct hak_stats s6 = snap();
  pthread_barrier_wait(&live_barrier);
  REQUIRE(pthread_join(t, NULL) == 0, "pthread_join");
  pthread_barrier_destroy(&live_barrier);
  CHECK(DELTA(s4, s5, threads_started) >= 1, "threads_started did not grow for a thread that allocated");
  CHECK(DELTA(s5, s6, remote_frees) >= 500, "remote_frees grew by %llu after freeing 500 blocks of a running thread",
        DELTA(s5, s6, remote_frees));
  CHECK(DELTA(s5, s6, frees) >= 500, "frees grew by %llu after freeing 500 blocks of a running thread",
        DELTA(s5, s6, frees));

  /* blocks of a thread that has exited: remote frees into its abandoned segment until 64 of them take
   * the segment over (page.c, counted by the chains sent: the chain that reaches 64, at most 32 blocks,
   * is freed locally), local frees after that; chains that waited meanwhile go to the remote lists of
   * what is now this thread's own pages */
  REQUIRE(pthread_create(&t, NULL, remote_thread, remote) == 0, "pthread_create");
  REQUIRE(pthread_join(t, NULL) == 0, "pthread_join");
  struct hak_stats s7 = snap();
  for (int i = 0; i < 500; i++) free(remote[i]);
  struct hak_stats s8 = snap();
  CHECK(DELTA(s6, s7, threads_exited) >= 2, "threads_exited grew by %llu after two threads were joined",
        DELTA(s6, s7, threads_exited));
  CHECK(DELTA(s7, s8, remote_frees) >= 32 && DELTA(s7, s8, remote_frees) < 500,
        "remote_frees grew by %llu after freeing 500 blocks of an exited thread", DELTA(s7, s8, remote_frees));
  CHECK(DELTA(s7, s8, segments_reclaimed) >= 1, "no segment taken over by freeing 500 blocks of an exited thread");
  CHECK(DELTA(s7, s8, frees) >= 500, "frees grew by %llu after freeing 500 blocks of an exited thread",
        DELTA(s7, s8, frees));

  tc_section("large tier: a fresh size maps memory, a freed block is reused from the cache");
  CHECK_EQ(H.option_set(HAK_OPT_LARGE_CACHE_MB, 256), 0, "hak_option_set(LARGE_CACHE_MB, 256)");
  struct hak_stats l0 = snap();
  void *big = must_malloc(64 * MiB);
  memset(big, 1, 64 * MiB);
  struct hak_stats l1 = snap();
  CHECK(DELTA(l0, l1, large_cache_misses) >= 1, "a first 64 MiB block was not counted as a cache miss");
  CHECK(DELTA(l0, l1, mmap_calls) >= 1, "a first 64 MiB block made no mmap call");
  CHECK(DELTA(l0, l1, mapped_bytes) >= 64 * MiB, "mapped_bytes grew by %llu for a 64 MiB block",
        DELTA(l0, l1, mapped_bytes));
  free(big);
  void *b1 = must_malloc(2 * MiB);
  free(b1);
  struct hak_stats l2 = snap();
  void *b2 = must_malloc(2 * MiB);
  struct hak_stats l3 = snap();
  CHECK(DELTA(l2, l3, large_cache_hits) >= 1, "a 2 MiB block right after freeing one was not a cache hit");
  free(b2);

  tc_section("large tier: HAKMEM_LARGE_CACHE_MB bounds what the cache keeps unpurged, four times it mapped");
  H.collect(true); /* an empty cache */
  long saved_cap = H.option_get(HAK_OPT_LARGE_CACHE_MB);
  CHECK_EQ(H.option_set(HAK_OPT_LARGE_CACHE_MB, 8), 0, "hak_option_set(LARGE_CACHE_MB, 8)");
  void *blocks[6];
  six_written_blocks(blocks);
  struct hak_stats c0 = snap();
  for (int i = 0; i < 6; i++) free(blocks[i]);
  struct hak_stats c1 = snap();
  /* six mappings of 3 MiB + a page went in: an 8 MiB cap keeps at most two of them unpurged, and all six
   * mapped (18 MiB of 32) */
  CHECK(c0.committed_bytes - c1.committed_bytes >= 4 * 3 * MiB, "freeing 18 MiB of large blocks under an 8 MiB "
        "cache gave back only %llu bytes", (unsigned long long)(c0.committed_bytes - c1.committed_bytes));
  CHECK(DELTA(c0, c1, madvise_calls) >= 4, "%llu madvise calls for six 3 MiB blocks under an 8 MiB cache",
        DELTA(c0, c1, madvise_calls));
  CHECK(DELTA(c0, c1, munmap_calls) == 0, "%llu munmap calls for 18 MiB under an 8 MiB cache (32 MiB mapped)",
        DELTA(c0, c1, munmap_calls));
  for (int i = 0; i < 6; i++) blocks[i] = must_malloc(3 * MiB);
  struct hak_stats c1b = snap();
  CHECK(DELTA(c1, c1b, large_cache_hits) == 6 && DELTA(c1, c1b, mmap_calls) == 0,
        "six 3 MiB blocks after six were freed: %llu cache hits, %llu mmap calls", DELTA(c1, c1b, large_cache_hits),
        DELTA(c1, c1b, mmap_calls));
  CHECK_EQ(H.option_set(HAK_OPT_LARGE_CACHE_MB, 4), 0, "hak_option_set(LARGE_CACHE_MB, 4)");
  for (int i = 0; i < 6; i++) free(blocks[i]);
  struct hak_stats c1c = snap();
  /* a 4 MiB cap maps at most 16 MiB: five of the six mappings */
  CHECK(c1b.mapped_bytes - c1c.mapped_bytes >= 3 * MiB, "freeing 18 MiB of large blocks under a 4 MiB cache "
        "unmapped only %llu bytes", (unsigned long long)(c1b.mapped_bytes - c1c.mapped_bytes));
  CHECK(DELTA(c1b, c1c, munmap_calls) >= 1, "no munmap call for 18 MiB under a 4 MiB cache (16 MiB mapped)");
  /* MADV_FREE leaves the pages counted as resident: past the cap the mappings are unmapped, as before */
  H.collect(true);
  long saved_mode = H.option_get(HAK_OPT_PURGE_MODE);
  CHECK_EQ(H.option_set(HAK_OPT_PURGE_MODE, 1), 0, "hak_option_set(PURGE_MODE, 1)");
  CHECK_EQ(H.option_set(HAK_OPT_LARGE_CACHE_MB, 8), 0, "hak_option_set(LARGE_CACHE_MB, 8)");
  six_written_blocks(blocks);
  struct hak_stats c1d = snap();
  for (int i = 0; i < 6; i++) free(blocks[i]);
  struct hak_stats c1e = snap();
  CHECK(DELTA(c1d, c1e, munmap_calls) >= 4, "%llu munmap calls for six 3 MiB blocks under an 8 MiB cache with "
        "MADV_FREE", DELTA(c1d, c1e, munmap_calls));
  CHECK_EQ(H.option_set(HAK_OPT_PURGE_MODE, saved_mode), 0, "restoring PURGE_MODE");
  CHECK_EQ(H.option_set(HAK_OPT_LARGE_CACHE_MB, 1), 0, "hak_option_set(LARGE_CACHE_MB, 1)");
  void *over = must_malloc(3 * MiB);
  struct hak_stats c2 = snap();
  free(over);
  struct hak_stats c3 = snap();
  CHECK(DELTA(c2, c3, munmap_calls) >= 1, "a 3 MiB block freed under a 1 MiB cache stayed mapped");
  CHECK_EQ(H.option_set(HAK_OPT_LARGE_CACHE_MB, saved_cap), 0, "restoring LARGE_CACHE_MB");

  tc_section("large tier: realloc in place of a reused mapping counts only what the block asks for");
  H.collect(true);
  char *whole = must_malloc(8 * MiB);
  for (size_t i = 0; i < 8 * MiB; i += 4096) whole[i] = 1;
  free(whole); /* cached with 8 MiB touched */
  char *part = must_malloc(5600 * 1024); /* the same mapping, its unused tail given back */
  struct hak_stats r0 = snap();
  part = realloc(part, 5700 * 1024); /* in place: nothing past 5.6 MiB is written */
  struct hak_stats r1 = snap();
  CHECK(part != NULL, "realloc to 5.6 MiB failed");
  /* realloc used to claim the whole mapping, as malloc_usable_size does: +2.5 MiB of each */
  CHECK(DELTA(r0, r1, committed_bytes) < MiB, "committed_bytes grew by %llu for a 100 KiB realloc in place",
        DELTA(r0, r1, committed_bytes));
  CHECK(r1.live_bytes[HAK_TIER_LARGE] < 6 * MiB, "live large bytes %llu after realloc to 5.6 MiB",
        (unsigned long long)r1.live_bytes[HAK_TIER_LARGE]);
  free(part);
#undef DELTA
}

/* ---- live blocks, and glibc's introspection calls built on them ------------------------------------ */

static void *remote_small_thread(void *arg) {
  void **blocks = arg;
  for (int i = 0; i < 300; i++) blocks[i] = must_malloc(48);
  return NULL;
}

/* The caller's own blocks are counted exactly; blocks freed by a thread other than their owner count once
 * the owner's memory is collected (here: an exited owner's, by hak_collect(true)). mallinfo2/mallinfo
 * show the same numbers in glibc's fields. Runs with no other thread alive. */
static void check_live(void) {
  tc_section("hak_stats live_blocks/live_bytes; mallinfo2, mallinfo, malloc_info, mallopt");
  enum { NS = 1000, NM = 100, NL = 4 };
  static void *small[NS], *medium[NM], *large[NL];
  const size_t large_size = 3 * MiB;
  H.collect(true); /* earlier sections' remote frees, collected now rather than in the middle of this one */
  struct hak_stats s0 = snap();
  struct mallinfo2 m0 = mallinfo2();
  for (int i = 0; i < NS; i++) small[i] = must_malloc(100);
  for (int i = 0; i < NM; i++) medium[i] = must_malloc(8192);
  for (int i = 0; i < NL; i++) large[i] = must_malloc(large_size);
  struct hak_stats s1 = snap();
  struct mallinfo2 m1 = mallinfo2();
#define LIVE(a, b, field, t) ((long long)((b).field[t] - (a).field[t]))
  CHECK_EQ(LIVE(s0, s1, live_blocks, HAK_TIER_SMALL), NS, "live small blocks after 1000 malloc(100)");
  CHECK_EQ(LIVE(s0, s1, live_blocks, HAK_TIER_MEDIUM), NM, "live medium blocks after 100 malloc(8192)");
  CHECK_EQ(LIVE(s0, s1, live_blocks, HAK_TIER_LARGE), NL, "live large blocks after 4 malloc(3 MiB)");
  long long small_bytes = LIVE(s0, s1, live_bytes, HAK_TIER_SMALL), medium_bytes = LIVE(s0, s1, live_bytes, HAK_TIER_MEDIUM),
            large_bytes = LIVE(s0, s1, live_bytes, HAK_TIER_LARGE);
  /* block sizes: 100 (+ the hardened canary) rounds up to 112; 8192 (+ canary) to at most 10240; a large
   * block's mapping has a header page and may come from a cached mapping up to 1.5x its need */
  CHECK(small_bytes >= NS * 100ll && small_bytes <= NS * 112ll, "live small bytes grew by %lld for %d x 100",
        small_bytes, NS);
  CHECK(medium_bytes >= NM * 8192ll && medium_bytes <= NM * 10240ll, "live medium bytes grew by %lld for %d x 8192",
        medium_bytes, NM);
  CHECK(large_bytes >= NL * (long long)large_size && large_bytes <= NL * (long long)(large_size + 4096) * 3 / 2,
        "live large bytes grew by %lld for %d x 3 MiB", large_bytes, NL);
  CHECK(s1.live_bytes[HAK_TIER_LARGE] <= s1.committed_bytes, "live large bytes %llu above committed %llu",
        (unsigned long long)s1.live_bytes[HAK_TIER_LARGE], (unsigned long long)s1.committed_bytes);

  CHECK_EQ((long long)(m1.uordblks - m0.uordblks), small_bytes + medium_bytes, "mallinfo2 uordblks growth");
  CHECK_EQ((long long)(m1.hblks - m0.hblks), NL, "mallinfo2 hblks growth");
  CHECK_EQ((long long)(m1.hblkhd - m0.hblkhd), large_bytes, "mallinfo2 hblkhd growth");
  CHECK(m1.arena == m1.uordblks + m1.fordblks && m1.arena >= m1.uordblks, "mallinfo2 arena %zu != uordblks %zu + "
        "fordblks %zu", m1.arena, m1.uordblks, m1.fordblks);
  CHECK(m1.arena + m1.hblkhd <= s1.committed_bytes + 4096 || m1.arena == m1.uordblks,
        "mallinfo2 arena %zu + hblkhd %zu above committed %llu", m1.arena, m1.hblkhd,
        (unsigned long long)s1.committed_bytes);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  struct mallinfo mi = mallinfo();
#pragma GCC diagnostic pop
  CHECK(mi.uordblks == (int)m1.uordblks && mi.hblks == (int)m1.hblks && mi.hblkhd == (int)m1.hblkhd,
        "mallinfo (%d, %d, %d) differs from mallinfo2 (%zu, %zu, %zu)", mi.uordblks, mi.hblks, mi.hblkhd,
        m1.uordblks, m1.hblks, m1.hblkhd);

  char *xml = NULL;
  size_t xml_len = 0;
  FILE *f = open_memstream(&xml, &xml_len);
  REQUIRE(f != NULL, "open_memstream failed");
  CHECK_EQ(malloc_info(0, f), 0, "malloc_info(0, f)");
  fclose(f);
  char want[96];
  snprintf(want, sizeof want, "<total type=\"mmap\" count=\"%llu\"", (unsigned long long)s1.live_blocks[HAK_TIER_LARGE]);
  CHECK(xml != NULL && strncmp(xml, "<malloc version=\"hakmem-", 24) == 0 && strstr(xml, want) != NULL &&
        strstr(xml, "</malloc>\n") != NULL, "malloc_info wrote \"%.200s\"", xml ? xml : "");
  free(xml);
  errno = 0;
  CHECK(malloc_info(1, stdout) == -1 && errno == EINVAL, "malloc_info(1, stdout): expected -1 with EINVAL");
  CHECK_EQ(mallopt(M_ARENA_MAX, 2), 1, "mallopt(M_ARENA_MAX, 2)");
  CHECK_EQ(mallopt(M_MMAP_THRESHOLD, 1 << 20), 1, "mallopt(M_MMAP_THRESHOLD, 1 MiB)");
  CHECK_EQ(mallopt(M_KEEP, 0), 1, "mallopt(M_KEEP, 0): an SVID parameter of <malloc.h>");
  CHECK_EQ(mallopt(12345, 1), 0, "mallopt(12345, 1): an unknown parameter");
  CHECK_EQ(mallopt(0, 1), 0, "mallopt(0, 1): an unknown parameter");
  FILE *ro = fopen("/dev/null", "r");
  REQUIRE(ro != NULL, "fopen(/dev/null, r)");
  CHECK_EQ(malloc_info(0, ro) == -1, 1, "malloc_info to a stream that cannot be written returns -1");
  fclose(ro);
  FILE *full = fopen("/dev/full", "w"); /* buffered: the write fails only when the stream is flushed */
  if (full != NULL) {
    CHECK_EQ(malloc_info(0, full) == -1, 1, "malloc_info to a buffered stream on /dev/full returns -1");
    fclose(full);
  }

  for (int i = 0; i < NS; i++) free(small[i]);
  for (int i = 0; i < NM; i++) free(medium[i]);
  for (int i = 0; i < NL; i++) free(large[i]);
  struct hak_stats s2 = snap();
  for (int t = 0; t < HAK_TIER_COUNT; t++) {
    CHECK(LIVE(s0, s2, live_blocks, t) == 0 && LIVE(s0, s2, live_bytes, t) == 0,
          "tier %d: %lld live blocks, %lld bytes more than before, once all were freed", t,
          LIVE(s0, s2, live_blocks, t), LIVE(s0, s2, live_bytes, t));
  }

  static void *remote[300];
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, remote_small_thread, remote) == 0, "pthread_create");
  REQUIRE(pthread_join(t, NULL) == 0, "pthread_join");
  struct hak_stats s3 = snap();
  CHECK_EQ(LIVE(s2, s3, live_blocks, HAK_TIER_SMALL), 300, "live small blocks after an exited thread's 300");
  for (int i = 0; i < 300; i++) free(remote[i]);
  H.collect(true); /* reclaims the exited thread's memory and collects the frees */
  struct hak_stats s4 = snap();
  CHECK_EQ(LIVE(s2, s4, live_blocks, HAK_TIER_SMALL), 0, "live small blocks once another thread's were freed "
           "and collected");
  CHECK_EQ(LIVE(s2, s4, live_bytes, HAK_TIER_SMALL), 0, "live small bytes once another thread's were freed "
           "and collected");

  /* A live large block changes size or gives back its tail in place: the live bytes follow it. One large
   * block stays live throughout, so a count that went wrong cannot hide behind a tier total of 0. */
  void *keep = must_malloc(2 * MiB);
  struct hak_stats g0 = snap();
  char *p = must_malloc(4 * MiB);
  struct hak_stats g1 = snap();
  long long d = LIVE(g0, g1, live_bytes, HAK_TIER_LARGE);
  CHECK(d >= (long long)(4 * MiB + 4096) && d <= (long long)(6 * MiB + 8192), "live large bytes +%lld for 4 MiB", d);
  p = realloc(p, 12 * MiB);
  REQUIRE(p != NULL, "realloc to 12 MiB");
  struct hak_stats g2 = snap();
  d = LIVE(g0, g2, live_bytes, HAK_TIER_LARGE);
  CHECK(d >= (long long)(12 * MiB + 4096) && d <= (long long)(18 * MiB + 8192), "live large bytes +%lld after "
        "realloc to 12 MiB", d);
  /* default builds: the whole mapping becomes the caller's, tail included; hardened builds: the usable
   * size is the request, and the mapping holds it, the end canary, the guard page and the header page */
  size_t usable = malloc_usable_size(p);
  struct hak_stats g3 = snap();
  d = LIVE(g0, g3, live_bytes, HAK_TIER_LARGE);
  void *probe56 = must_malloc(56);
  bool hardened = malloc_usable_size(probe56) == 56; /* a 64-byte block less the hardened canary */
  free(probe56);
  size_t mapped = hardened ? ((usable + 8 + 4095) & ~(size_t)4095) + 4096 : usable; /* hardened: + the guard page */
  CHECK(d == (long long)(mapped + 4096), "live large bytes +%lld, usable size %zu (%s build) plus the header page",
        d, usable, hardened ? "hardened" : "default");
  /* the usable size of a block that reuses a larger cached mapping: the tail it gave back stays out of
   * the committed count in hardened builds, whose usable size is the request (a review: +2 MiB) */
  void *cached = must_malloc(8 * MiB);
  memset(cached, 1, 8 * MiB);
  free(cached);
  char *reuse = must_malloc(6 * MiB);
  memset(reuse, 2, 6 * MiB);
  struct hak_stats claim0 = snap();
  size_t reuse_usable = malloc_usable_size(reuse);
  struct hak_stats claim1 = snap();
  long long grew = (long long)(claim1.committed_bytes - claim0.committed_bytes);
  CHECK(hardened ? grew == 0 : grew >= 0, "committed +%lld after malloc_usable_size of a reused mapping (usable %zu)",
        grew, reuse_usable);
  memset(reuse, 3, reuse_usable);
  free(reuse);
  p = realloc(p, 1 * MiB);
  REQUIRE(p != NULL, "realloc down to 1 MiB");
  struct hak_stats g4 = snap();
  d = LIVE(g0, g4, live_bytes, HAK_TIER_LARGE);
  CHECK(d >= (long long)(1 * MiB + 4096) && d <= (long long)(3 * MiB / 2 + 8192), "live large bytes +%lld after "
        "realloc down to 1 MiB", d);
  free(p);
  struct hak_stats g5 = snap();
  CHECK(LIVE(g0, g5, live_bytes, HAK_TIER_LARGE) == 0 && LIVE(g0, g5, live_blocks, HAK_TIER_LARGE) == 0,
        "large tier after the free: %lld live bytes, %lld blocks more than before",
        LIVE(g0, g5, live_bytes, HAK_TIER_LARGE), LIVE(g0, g5, live_blocks, HAK_TIER_LARGE));
  free(keep);

  /* A region has a mapping of its own: mallinfo2 counts it with the large blocks, not as free memory. */
  struct mallinfo2 r0 = mallinfo2();
  struct hak_region region;
  REQUIRE(H.region_alloc(8 * MiB, &region) == 0, "hak_region_alloc(8 MiB)");
  memset(region.ptr, 1, 8 * MiB);
  struct mallinfo2 r1 = mallinfo2();
  CHECK(r1.hblks == r0.hblks + 1 && r1.hblkhd >= r0.hblkhd + 8 * MiB, "a live 8 MiB region: hblks %zu -> %zu, "
        "hblkhd %zu -> %zu", r0.hblks, r1.hblks, r0.hblkhd, r1.hblkhd);
  CHECK(r1.fordblks < r0.fordblks + 4 * MiB, "a live 8 MiB region counted as free: fordblks %zu -> %zu",
        r0.fordblks, r1.fordblks);
  CHECK_EQ(H.region_free(&region), 0, "hak_region_free");
  struct mallinfo2 r2 = mallinfo2();
  CHECK_EQ(r2.hblks, r0.hblks, "mallinfo2 hblks once the region was freed");
#undef LIVE
}

/* Another running thread's blocks show in the counts once it folds them (here through hak_collect(false),
 * which folds every page's counts and collects nothing else): pages it set aside without folding their
 * counts are folded then. */
static pthread_barrier_t live_barrier;

static void *live_worker(void *arg) {
  void **blocks = arg;
  pthread_barrier_wait(&live_barrier); /* the main thread's snapshot is taken */
  for (int i = 0; i < 100; i++) blocks[i] = must_malloc(48);
  H.collect(false);
  pthread_barrier_wait(&live_barrier); /* allocated */
  pthread_barrier_wait(&live_barrier); /* the main thread looked */
  for (int i = 0; i < 100; i++) free(blocks[i]);
  return NULL;
}

static void check_live_other_thread(void) {
  tc_section("hak_stats live_blocks: another running thread's blocks count once it folds its counts");
  static void *blocks[100];
  REQUIRE(pthread_barrier_init(&live_barrier, NULL, 2) == 0, "pthread_barrier_init");
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, live_worker, blocks) == 0, "pthread_create");
  struct hak_stats a = snap();
  pthread_barrier_wait(&live_barrier);
  pthread_barrier_wait(&live_barrier);
  struct hak_stats b = snap();
  pthread_barrier_wait(&live_barrier);
  REQUIRE(pthread_join(t, NULL) == 0, "pthread_join");
  CHECK_EQ(b.live_blocks[HAK_TIER_SMALL] - a.live_blocks[HAK_TIER_SMALL], 100,
           "live small blocks after a running thread allocated 100 and called hak_collect(false)");
  pthread_barrier_destroy(&live_barrier);
}

/* ---- slow paths ---------------------------------------------------------------------------------- */

/* Programs and libraries of different versions: the library writes exactly the bytes the caller's struct
 * has (whole fields), zeroes what it does not know, and the sizeless symbol of 0.1.0/0.2.0 programs
 * writes the 0.1.0 struct (25 counters) and not a byte more. */
static void check_stats_sizes(void) {
  tc_section("hak_stats_get_sized: caller's size respected; legacy hak_stats_get writes 0.1.0's 200 bytes");
  enum { WORDS = 40, LEGACY = 25 };
  uint64_t buf[WORDS];
  free(must_malloc(100)); /* so that allocs[small], the first counter, is not 0 */
  memset(buf, 0xab, sizeof buf);
  CHECK_EQ(H.stats_get_legacy((struct hak_stats *)buf), 0, "hak_stats_get");
  CHECK(buf[LEGACY] == 0xababababababababull, "legacy hak_stats_get wrote past 0.1.0's struct");
  CHECK(buf[0] != 0xababababababababull && buf[0] > 0, "legacy hak_stats_get left allocs[small] unwritten");
  CHECK(buf[LEGACY - 1] != 0xababababababababull, "legacy hak_stats_get left current_rss_bytes unwritten");

  memset(buf, 0xab, sizeof buf);
  CHECK_EQ(H.stats_get_sized((struct hak_stats *)buf, 3 * sizeof(uint64_t) + 5), 0, "sized, 3 words + 5 bytes");
  CHECK(buf[2] != 0xababababababababull, "the third counter was not written");
  CHECK(buf[3] == 0xababababababababull, "a partial field was written (size 29)");

  memset(buf, 0xab, sizeof buf);
  size_t words = sizeof(struct hak_stats) / sizeof(uint64_t);
  CHECK_EQ(H.stats_get_sized((struct hak_stats *)buf, (words + 4) * sizeof(uint64_t)), 0, "sized, 4 words more");
  for (size_t i = words; i < words + 4; i++) CHECK(buf[i] == 0, "word %zu past the library's struct not zeroed", i);
  CHECK(buf[words + 4] == 0xababababababababull, "wrote past the caller's size");
}

/* A working set spread over three pages of one class, half of it replaced every round: each round's
 * mallocs drain the pages one after the other. A page that runs dry stays in its queue the first time, so
 * the next round's frees into it stay on the fast path; sending it to the full list at once (as before
 * 2026-11-23) cost about one slow free per page per round. */
static void check_slow_paths(void) {
  tc_section("slow paths: frees into pages that just ran dry stay on the fast path");
  /* 56-byte requests: 64-byte blocks in both builds (the hardened canary adds 8), 1024 per 64 KiB page,
   * so the working set fills exactly three pages */
  enum { N = 3 * 1024, ROUNDS = 100, SIZE = 56 };
  static void *blocks[N];
  for (int i = 0; i < N; i++) blocks[i] = must_malloc(SIZE);
  struct hak_stats s0 = snap();
  for (int r = 0; r < ROUNDS; r++) {
    for (int i = r & 1; i < N; i += 2) free(blocks[i]);
    for (int i = r & 1; i < N; i += 2) blocks[i] = must_malloc(SIZE);
  }
  struct hak_stats s1 = snap();
  unsigned long long slow_allocs = s1.slow_allocs - s0.slow_allocs, slow_frees = s1.slow_frees - s0.slow_frees;
  CHECK(slow_allocs >= ROUNDS, "%llu slow allocations in %d rounds that each drain at least one page",
        slow_allocs, ROUNDS);
  CHECK(slow_frees < ROUNDS / 4, "%llu slow frees in %d rounds of frees into pages that ran dry", slow_frees,
        ROUNDS);
  for (int i = 0; i < N; i++) free(blocks[i]);
}

/* ---- hak_stats_print ---------------------------------------------------------------------------- */

static void check_print(void) {
  tc_section("hak_stats_print");
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  REQUIRE(f != NULL, "open_memstream failed");
  H.stats_print(f);
  fclose(f);
  CHECK(len > 20 && strncmp(buf, "hakmem stats:", 13) == 0, "hak_stats_print output does not start with "
        "\"hakmem stats:\": \"%.60s\"", buf ? buf : "");
  CHECK(buf && strchr(buf, '\n') && strchr(buf, '\n') < buf + len - 1, "hak_stats_print printed a single line");
  free(buf);
}

/* ---- hak_collect -------------------------------------------------------------------------------- */

static void check_collect(void) {
  tc_section("hak_collect: purge delay -1 keeps free memory, hak_collect(true) returns it");
  enum { N = 3200 };
  static void *blocks[N];
  const size_t size = 64 << 10;
  long saved_delay = H.option_get(HAK_OPT_PURGE_DELAY_MS), saved_mode = H.option_get(HAK_OPT_PURGE_MODE);
  CHECK_EQ(H.option_set(HAK_OPT_PURGE_DELAY_MS, -1), 0, "hak_option_set(PURGE_DELAY_MS, -1)");
  CHECK_EQ(H.option_set(HAK_OPT_PURGE_MODE, 0), 0, "hak_option_set(PURGE_MODE, 0)");
  H.collect(true);
  struct hak_stats s0 = snap();
  for (int i = 0; i < N; i++) {
    blocks[i] = must_malloc(size);
    memset(blocks[i], i, size);
  }
  struct hak_stats s1 = snap();
  unsigned long long need = (unsigned long long)(N * size) * 3 / 4;
  CHECK(s1.committed_bytes >= s0.committed_bytes + need, "committed grew from %llu to %llu for %zu MiB in use",
        (unsigned long long)s0.committed_bytes, (unsigned long long)s1.committed_bytes, N * size / MiB);
  CHECK(s1.peak_committed_bytes >= s1.committed_bytes, "peak_committed below committed");
  for (int i = 0; i < N; i++) free(blocks[i]);
  H.collect(false);
  struct hak_stats s2 = snap();
  CHECK(s2.committed_bytes + need / 2 >= s1.committed_bytes,
        "with purge delay -1, hak_collect(false) released memory: committed %llu -> %llu",
        (unsigned long long)s1.committed_bytes, (unsigned long long)s2.committed_bytes);
  H.collect(true);
  struct hak_stats s3 = snap();
  printf("committed: %llu before, %llu in use, %llu freed, %llu after hak_collect(true); rss %llu -> %llu\n",
         (unsigned long long)s0.committed_bytes, (unsigned long long)s1.committed_bytes,
         (unsigned long long)s2.committed_bytes, (unsigned long long)s3.committed_bytes,
         (unsigned long long)s1.current_rss_bytes, (unsigned long long)s3.current_rss_bytes);
  CHECK(s3.committed_bytes + need <= s2.committed_bytes, "hak_collect(true) lowered committed only from %llu to %llu",
        (unsigned long long)s2.committed_bytes, (unsigned long long)s3.committed_bytes);
  CHECK(s3.current_rss_bytes + need / 2 <= s1.current_rss_bytes,
        "with MADV_DONTNEED purging, rss only went from %llu to %llu", (unsigned long long)s1.current_rss_bytes,
        (unsigned long long)s3.current_rss_bytes);
  CHECK(s3.peak_committed_bytes >= s1.committed_bytes, "peak_committed %llu below an earlier committed %llu",
        (unsigned long long)s3.peak_committed_bytes, (unsigned long long)s1.committed_bytes);

  /* Large blocks go to the large cache when freed; hak_collect(true) empties it. */
  void *large[16];
  for (int i = 0; i < 16; i++) {
    large[i] = must_malloc(4 * MiB + (size_t)i * 4096);
    memset(large[i], 2, 4 * MiB);
  }
  struct hak_stats l1 = snap();
  for (int i = 0; i < 16; i++) free(large[i]);
  H.collect(true);
  struct hak_stats l2 = snap();
  CHECK(l2.committed_bytes + 48 * MiB <= l1.committed_bytes,
        "freeing 64 MiB of large blocks and hak_collect(true) lowered committed only from %llu to %llu",
        (unsigned long long)l1.committed_bytes, (unsigned long long)l2.committed_bytes);
  H.option_set(HAK_OPT_PURGE_DELAY_MS, saved_delay);
  H.option_set(HAK_OPT_PURGE_MODE, saved_mode);
}

/* ---- blocks shared between hak_* and the standard names --------------------------------------- */

static void check_mixing(void) {
  tc_section("hak_malloc blocks freed by free() and malloc blocks by hak_free()");
  struct hak_stats s0 = snap();
  for (size_t n = 1; n <= 8 * MiB; n = n * 3 + 5) {
    void *p = H.malloc(n);
    REQUIRE(p != NULL, "hak_malloc(%zu) returned NULL", n);
    free(p);
    p = must_malloc(n);
    CHECK(H.usable(p) >= n, "hak_usable_size(malloc(%zu)) = %zu: malloc is not hakmem's", n, H.usable(p));
    H.free(p);
  }
  struct hak_stats s1 = snap();
  CHECK(total_allocs(&s1) - total_allocs(&s0) >= 28, "standard malloc calls were not counted by hakmem"); /* 14 sizes, 2 allocations each */
}

/* ---- the class cache (default builds) ------------------------------------------------------------ */

/* 48-byte requests: 48-byte blocks, 1365 per 64 KiB page. */
enum { CC_SIZE = 48, CC_PER_PAGE = 65536 / CC_SIZE };

static unsigned long long live_small(const struct hak_stats *s) { return s->live_blocks[HAK_TIER_SMALL]; }

static void check_class_cache(void) {
  tc_section("class cache: owner frees of three pages reused without a page switch, in LIFO order");
  enum { N = 3 * CC_PER_PAGE };
  static void *blocks[N];
  for (int i = 0; i < N; i++) blocks[i] = must_malloc(CC_SIZE);
  /* one block of each page, the first page's last: without the cache the current page (the last one)
   * has only its own block and the next malloc switches pages */
  int picked[3] = {2 * CC_PER_PAGE + 5, CC_PER_PAGE + 5, 5};
  struct hak_stats s0 = snap();
  for (int k = 0; k < 3; k++) free(blocks[picked[k]]);
  for (int k = 2; k >= 0; k--) {
    void *p = must_malloc(CC_SIZE);
    CHECK(p == blocks[picked[k]], "malloc %d returned %p, not %p, the block freed %s", 2 - k, p, blocks[picked[k]],
          k == 2 ? "last" : k == 1 ? "second" : "first");
  }
  struct hak_stats s1 = snap();
  CHECK_EQ(s1.slow_allocs - s0.slow_allocs, 0ull, "slow allocations reusing three blocks of three pages");
  CHECK_EQ(total_allocs(&s1) - total_allocs(&s0), 3ull, "allocations counted");
  CHECK_EQ(s1.frees - s0.frees, 3ull, "frees counted");
  CHECK_EQ(live_small(&s1), live_small(&s0), "live small blocks after three frees and three mallocs");

  tc_section("class cache: a full list passes frees on to the pages; counts stay exact");
  struct hak_stats s2 = snap();
  for (int i = 0; i < 1000; i++) free(blocks[i]); /* far past any list's limit */
  struct hak_stats s3 = snap();
  CHECK_EQ(s3.frees - s2.frees, 1000ull, "frees counted with the list overflowing");
  CHECK_EQ(live_small(&s2) - live_small(&s3), 1000ull, "live small blocks fell by the frees");
  /* the list took the first 64 frees (its limit for 48-byte blocks) and keeps them; malloc pops them
   * newest first */
  for (int i = 63; i >= 0; i--) {
    void *p = must_malloc(CC_SIZE);
    CHECK(p == blocks[i], "malloc %d after the burst returned %p, not %p, the list's block", 63 - i, p, blocks[i]);
    blocks[i] = p;
  }
  for (int i = 64; i < 1000; i++) blocks[i] = must_malloc(CC_SIZE);
  struct hak_stats s4 = snap();
  CHECK_EQ(total_allocs(&s4) - total_allocs(&s3), 1000ull, "allocations counted");
  CHECK_EQ(live_small(&s4), live_small(&s2), "live small blocks back where they were");

  tc_section("class cache: an immediate double free is reported");
  /* (in a child: the report aborts) */
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 2);
    void *q = must_malloc(CC_SIZE);
    free(q);
    free(q);
    _exit(0);
  }
  int status = 0;
  REQUIRE(pid > 0 && waitpid(pid, &status, 0) == pid, "fork/waitpid");
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "a double free of the cached block did not abort (status %#x)",
        status);

  tc_section("class cache: a list that overflows and runs dry in every batch grows; a drain sets it back");
  {
    /* 1000-byte requests: 1024-byte blocks, a list of 32 at first (32 KiB) and of 64 at most (64 KiB).
     * Each round frees a batch of 64 in address order and reallocates it: the first 32 frees fill the
     * list, the rest go to their pages, and the 64 mallocs empty the list and then take from the pages */
    enum { BATCH = 64, ROUNDS = 400 };
    static void *batch[BATCH];
    for (int i = 0; i < BATCH; i++) batch[i] = must_malloc(1000);
    int round_grown = -1;
    for (int r = 0; r < ROUNDS && round_grown < 0; r++) {
      for (int i = 0; i < BATCH; i++) free(batch[i]);
      void *first = must_malloc(1000);
      if (first == batch[BATCH - 1]) round_grown = r; /* the last block freed came from the list */
      batch[0] = first;
      for (int i = 1; i < BATCH; i++) batch[i] = must_malloc(1000);
    }
    CHECK(round_grown >= 0, "after %d rounds of 64 frees and mallocs of 1000 bytes the list still held 32", ROUNDS);
    /* a grown list takes a whole batch: every malloc returns the blocks newest first */
    for (int i = 0; i < BATCH; i++) free(batch[i]);
    int lifo = 0;
    for (int i = BATCH - 1; i >= 0; i--) {
      void *p = must_malloc(1000);
      lifo += p == batch[i];
      batch[i] = p;
    }
    CHECK_EQ(lifo, BATCH, "blocks of a 64-block batch reused newest first by the grown list");
    H.collect(true);
    for (int i = 0; i < BATCH; i++) free(batch[i]);
    void *after = must_malloc(1000);
    CHECK(after == batch[31], "after hak_collect(true) the list held %s (first malloc %p; the 32nd block %p, the 64th %p)",
          after == batch[BATCH - 1] ? "64 again" : "an unexpected block", after, batch[31], batch[BATCH - 1]);
    batch[31] = after;
    for (int i = 0; i < BATCH; i++)
      if (i != 31) batch[i] = must_malloc(1000);
    for (int i = 0; i < BATCH; i++) free(batch[i]);
    printf("class cache: the list grew in round %d\n", round_grown);
  }

  tc_section("class cache: hak_collect(true) hands the lists back, so that their pages can be returned");
  long saved_delay = H.option_get(HAK_OPT_PURGE_DELAY_MS);
  CHECK_EQ(H.option_set(HAK_OPT_PURGE_DELAY_MS, -1), 0, "hak_option_set(PURGE_DELAY_MS, -1)");
  /* free everything but the last block of every page, then those: the last frees, the list's blocks, are
   * one per page, and each keeps its 64 KiB page in use until the list hands them back */
  for (int i = 0; i < N; i++)
    if (i % CC_PER_PAGE != CC_PER_PAGE - 1) free(blocks[i]);
  for (int i = CC_PER_PAGE - 1; i < N; i += CC_PER_PAGE) free(blocks[i]);
  H.collect(true);
  struct hak_stats s5 = snap();
  void *fresh[N];
  for (int i = 0; i < N; i++) fresh[i] = must_malloc(CC_SIZE);
  struct hak_stats s6 = snap();
  CHECK(s6.committed_bytes >= s5.committed_bytes + 2 * 65536,
        "hak_collect(true) left the pages of %d blocks committed: committed %llu, then %llu with the blocks back",
        N, (unsigned long long)s5.committed_bytes, (unsigned long long)s6.committed_bytes);
  for (int i = 0; i < N; i++) free(fresh[i]);
  H.option_set(HAK_OPT_PURGE_DELAY_MS, saved_delay);
}

static void print_options(void) {
  for (int i = 0; i < HAK_OPT_COUNT; i++)
    printf("%s=%ld\n", H.option_name((enum hak_option)i), H.option_get((enum hak_option)i));
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (!tc_hakmem_active()) {
    printf("allocator: glibc\nhakmem is not in this process: nothing to check\n");
    return argc > 1 ? 2 : 0;
  }
  lookup_all();
  if (argc > 1 && strcmp(argv[1], "options") == 0) {
    print_options();
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "class-cache") == 0) {
    check_class_cache();
    return tc_finish("test_hakapi class-cache");
  }
  if (argc > 1 && strcmp(argv[1], "print") == 0) {
    H.stats_print(NULL);
    return 0;
  }
  if (argc > 2 && strcmp(argv[1], "reuse-report-fd") == 0) {
    /* close every descriptor but 0-2, open argv[2] at fd 100 (where HAKMEM_STATS keeps its copy of
     * stderr) and leave it open: the statistics at exit must not land in that file */
    close_range(3, ~0u, 0);
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || dup2(fd, 100) != 100) return 4;
    close(fd);
    return write(100, "data\n", 5) == 5 ? 0 : 5;
  }
  if (argc > 1 && strcmp(argv[1], "trim") == 0) {
    /* 20 MB of small blocks freed: the first malloc_trim gives memory back (1), the next finds none (0) */
    enum { N = 20000 };
    static void *blocks[N];
    for (int i = 0; i < N; i++) blocks[i] = malloc(1000);
    for (int i = 0; i < N; i++) free(blocks[i]);
    int first = malloc_trim(0), second = malloc_trim(0);
    printf("malloc_trim %d then %d\n", first, second);
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "hint-window") == 0) {
    /* 34,000 GiB-sized blocks, each mapped and unmapped (run with HAKMEM_LARGE_CACHE_MB=0), walk past the
     * end of the 32 TiB window of address hints; then 1,000 blocks of 8 MiB: once the hints stopped at the
     * window's end, each mapping cost three mmap/munmap calls instead of one */
    for (int i = 0; i < 34000; i++) {
      char *p = must_malloc((size_t)1 << 30);
      p[0] = 1;
      free(p);
    }
    struct hak_stats before = snap();
    for (int i = 0; i < 1000; i++) {
      char *p = must_malloc((size_t)8 << 20);
      p[0] = 1;
      free(p);
    }
    struct hak_stats after = snap();
    printf("hint window: %llu mmap and %llu munmap calls for 1000 blocks of 8 MiB\n",
           (unsigned long long)(after.mmap_calls - before.mmap_calls),
           (unsigned long long)(after.munmap_calls - before.munmap_calls));
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "glibc-calls") == 0) {
    malloc_stats();
    return mallopt(M_ARENA_MAX, 2) == 1 ? 0 : 3;
  }
  printf("allocator: hakmem\n");
  check_version();
  check_options();
  check_large_threads(); /* first: it needs the process to have one thread at its start */
  check_stats();
  check_stats_sizes();
  check_live();
  check_live_other_thread();
  check_slow_paths();
  check_print();
  check_collect();
  check_mixing();
  return tc_finish("test_hakapi");
}
