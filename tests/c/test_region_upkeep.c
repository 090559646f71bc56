/* test_region_upkeep.c — the region allocator's housekeeping across threads and over time: generations
 * handed out by short-lived threads, a lowered thread_cache_bytes applied to regions already cached,
 * hak_collect(true) and free regions (its own thread's and a live other thread's), a live thread's
 * cache released by the background thread once idle and kept while in use (without the thread being
 * started again and again), a forked child's inherited cache, periods under frequent configure calls, the
 * background
 * release's turn-taking between classes, a region whose purge the kernel refuses (in a background
 * release and in an eager return), and, as processes of their own, regions in a process that has used up
 * its thread-specific keys (`keys` argument) and in one that cannot create threads (`no-threads`). Each check failed on the code before its fix (a
 * review's reproducers). Run by tests/test_region.py; without libhakmem it exits 77 (skipped). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <sys/mman.h>
#include <time.h>

#include "hakmem.h"
#include "process_memory.h"
#include "tcheck.h"

#pragma weak hak_region_alloc
#pragma weak hak_region_free
#pragma weak hak_region_configure
#pragma weak hak_region_stats
#pragma weak hak_collect
#pragma weak hak_stats_get_sized

#define MIB ((size_t)1 << 20)

/* pthread_create, interposed (libhakmem's calls come here too): counts every call, and fails them all
 * with EAGAIN once refuse_threads is set, as pids.max, RLIMIT_NPROC or a sandbox would. */
static _Atomic int thread_creations;
static bool refuse_threads;

int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*start)(void *), void *arg) {
  static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
  thread_creations++;
  if (refuse_threads) return EAGAIN;
  if (real == NULL) real = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(RTLD_NEXT, "pthread_create");
  return real(th, attr, start, arg);
}

static struct hak_region_class_stats cls_stats(uint32_t c) {
  struct hak_region_class_stats all[HAK_REGION_CLASSES];
  REQUIRE(hak_region_stats(all, HAK_REGION_CLASSES) == HAK_REGION_CLASSES, "hak_region_stats");
  return all[c];
}

static void configure_eager(uint32_t interval_ms, size_t per_tick, size_t tc_bytes, bool eager) {
  struct hak_region_config c = {.enabled = true,
                                .release_interval_ms = interval_ms,
                                .release_bytes_per_tick = per_tick,
                                .eager_return = eager,
                                .thread_cache_bytes = tc_bytes,
                                .growth_dampener = 0,
                                .huge_pages = false};
  REQUIRE(hak_region_configure(&c) == 0, "hak_region_configure");
}

static void configure(uint32_t interval_ms, size_t per_tick, size_t tc_bytes) {
  configure_eager(interval_ms, per_tick, tc_bytes, false);
}

static struct hak_region must_alloc(size_t bytes) {
  struct hak_region r;
  int rc = hak_region_alloc(bytes, &r);
  REQUIRE(rc == 0, "hak_region_alloc(%zu) = %d", bytes, rc);
  ((volatile char *)r.ptr)[0] = 1; /* one page resident: the region is dirty once freed */
  return r;
}

static void must_free(struct hak_region *r) {
  int rc = hak_region_free(r);
  REQUIRE(rc == 0, "hak_region_free(%p) = %d", r->ptr, rc);
}

/* Wait up to `ms` for class c to hold no dirty region. */
static bool wait_clean(uint32_t c, int ms) {
  for (int t = 0; t <= ms; t += 5) {
    if (cls_stats(c).dirty_regions == 0) return true;
    sleep_ms(5);
  }
  return false;
}

/* ---- generations from short-lived threads ---------------------------------------------------------- */

#define GEN_THREADS 20000

/* One allocation and its free; the generation it got goes to *arg. */
static void *alloc_one(void *arg) {
  struct hak_region r = must_alloc(2 * MIB);
  *(uint32_t *)arg = r.generation;
  must_free(&r);
  return NULL;
}

/* A thread's cache takes generations 4096 at a time. A cache recycled for the next thread used to start a
 * new block, so a million short-lived threads wrapped the 2^32 sequence and a stale handle could free a
 * live region. The leftover now goes with the cache: 20,000 threads, one allocation each, use about
 * 20,000 generations, not 80 million. */
static void test_thread_generations(void) {
  configure(0, 0, 64 * MIB);
  struct hak_region stale = must_alloc(2 * MIB);
  struct hak_region copy = stale;
  must_free(&stale);
  uint32_t gen = 0;
  for (int i = 0; i < GEN_THREADS; i++) {
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, alloc_one, &gen) == 0, "pthread_create %d", i);
    pthread_join(th, NULL);
  }
  REQUIRE(gen < GEN_THREADS + 8 * 4096, "the last of %d one-allocation threads got generation %u", GEN_THREADS, gen);
  REQUIRE(hak_region_free(&copy) == EINVAL, "a stale handle was accepted");
  printf("ok thread generations: the last of %d short-lived threads got generation %u\n", GEN_THREADS, gen);
}

/* ---- a lowered thread_cache_bytes ------------------------------------------------------------------ */

static void test_trim(void) {
  const uint32_t c = 1; /* 4 MiB */
  configure(0, 0, 64 * MIB);
  struct hak_region r[8];
  for (int i = 0; i < 8; i++) r[i] = must_alloc(4 * MIB);
  for (int i = 0; i < 8; i++) must_free(&r[i]);
  struct hak_region_class_stats s0 = cls_stats(c);
  REQUIRE(s0.dirty_regions == 8, "8 freed regions cached, %llu dirty", (unsigned long long)s0.dirty_regions);
  configure(10, (size_t)1 << 30, 0); /* no thread cache any more: the 8 go to the pool and are released */
  REQUIRE(wait_clean(c, 3000), "%llu regions stayed dirty in the thread cache",
        (unsigned long long)cls_stats(c).dirty_regions);
  REQUIRE(cls_stats(c).bytes_released - s0.bytes_released == 8 * 4 * MIB, "released %llu bytes",
        (unsigned long long)(cls_stats(c).bytes_released - s0.bytes_released));
  configure(0, 0, 64 * MIB);
  printf("ok trim: lowering thread_cache_bytes sends the regions already cached to the pool\n");
}

/* ---- hak_collect(true) ------------------------------------------------------------------------------ */

struct holder {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int stage; /* 1: the holder's regions are cached; 2: the main thread has collected */
};

static void holder_set(struct holder *h, int stage) {
  pthread_mutex_lock(&h->lock);
  h->stage = stage;
  pthread_cond_broadcast(&h->cond);
  pthread_mutex_unlock(&h->lock);
}

static void holder_wait(struct holder *h, int stage) {
  pthread_mutex_lock(&h->lock);
  while (h->stage < stage) pthread_cond_wait(&h->cond, &h->lock);
  pthread_mutex_unlock(&h->lock);
}

/* A live thread that caches four 8 MiB regions, waits for the collection, then allocates again. */
static void *holder_main(void *arg) {
  struct holder *h = arg;
  struct hak_region r[4];
  for (int i = 0; i < 4; i++) r[i] = must_alloc(8 * MIB);
  for (int i = 0; i < 4; i++) must_free(&r[i]);
  holder_set(h, 1);
  holder_wait(h, 2);
  struct hak_region again = must_alloc(8 * MIB);
  must_free(&again);
  return NULL;
}

static void test_collect(void) {
  const uint32_t held = 2, own = 3; /* 8 MiB regions cached by the holder, 16 MiB ones by this thread */
  configure(0, 0, 256 * MIB);
  uint64_t own_areas = cls_stats(own).areas;
  struct hak_region r[6];
  for (int i = 0; i < 6; i++) r[i] = must_alloc(16 * MIB);
  for (int i = 0; i < 6; i++) must_free(&r[i]);
  REQUIRE(cls_stats(own).dirty_regions == 6, "6 cached");
  struct holder h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  pthread_t th;
  REQUIRE(pthread_create(&th, NULL, holder_main, &h) == 0, "pthread_create");
  holder_wait(&h, 1);
  REQUIRE(cls_stats(held).dirty_regions == 4, "the other thread's 4 cached");
  hak_collect(true);
  struct hak_region_class_stats a = cls_stats(held), b = cls_stats(own);
  REQUIRE(a.dirty_regions == 0 && b.dirty_regions == 0, "dirty after hak_collect(true): %llu and %llu",
        (unsigned long long)a.dirty_regions, (unsigned long long)b.dirty_regions);
  REQUIRE(b.areas == own_areas, "areas left wholly free are unmapped: %llu, before %llu", (unsigned long long)b.areas,
        (unsigned long long)own_areas);
  holder_set(&h, 2);
  pthread_join(th, NULL);
  REQUIRE(cls_stats(held).free_regions >= 1, "the holder's last region came back");
  configure(0, 0, 64 * MIB);
  printf("ok collect: hak_collect(true) releases the regions cached by this thread and by a live other one\n");
}

/* ---- a live thread's idle cache ---------------------------------------------------------------------- */

/* Threads of this process named `name` (/proc/self/task/TID/comm). */
static int threads_named(const char *name) {
  int n = 0;
  DIR *d = opendir("/proc/self/task");
  REQUIRE(d != NULL, "opendir /proc/self/task");
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    char path[300], comm[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (f == NULL) continue;
    if (fgets(comm, sizeof comm, f) != NULL) comm[strcspn(comm, "\n")] = '\0';
    fclose(f);
    n += strcmp(comm, name) == 0;
  }
  closedir(d);
  return n;
}

/* A thread that fills 8 regions of 4 MiB, frees them into its cache, and stays alive, idle, until told. */
static void *idle_holder_main(void *arg) {
  struct holder *h = arg;
  struct hak_region r[8];
  for (int i = 0; i < 8; i++) {
    r[i] = must_alloc(4 * MIB);
    memset(r[i].ptr, 1, 4 * MIB);
  }
  for (int i = 0; i < 8; i++) must_free(&r[i]);
  holder_set(h, 1);
  holder_wait(h, 2);
  return NULL;
}

/* Regions a live thread freed into its cache and then left alone for a whole background period go to the
 * global pools and are released (they used to stay committed until the thread reused them or exited:
 * 32 MiB here, up to 64 MiB per class); then, nothing being left, the background thread ends. */
static void test_idle_cache(void) {
  const uint32_t c = 1; /* 4 MiB */
  configure(50, (size_t)1 << 30, 64 * MIB);
  uint64_t released0 = cls_stats(c).bytes_released;
  struct holder h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  pthread_t th;
  REQUIRE(pthread_create(&th, NULL, idle_holder_main, &h) == 0, "pthread_create");
  holder_wait(&h, 1);
  long rss_filled = rss_kib();
  REQUIRE(wait_clean(c, 5000), "%llu regions stayed dirty in the idle thread's cache",
          (unsigned long long)cls_stats(c).dirty_regions);
  uint64_t released = cls_stats(c).bytes_released - released0;
  REQUIRE(released == 8 * 4 * MIB, "released %llu bytes, not the 8 cached regions", (unsigned long long)released);
  long rss_idle = rss_kib();
  REQUIRE(rss_idle < rss_filled - 24 * 1024, "RSS %ld KiB with the regions cached, %ld once released", rss_filled,
          rss_idle);
  int running = threads_named("hakmem-regions");
  for (int t = 0; running > 0 && t < 5000; t += 10) {
    sleep_ms(10);
    running = threads_named("hakmem-regions");
  }
  REQUIRE(running == 0, "the background thread still runs with nothing cached or dirty");
  holder_set(&h, 2);
  pthread_join(th, NULL);
  configure(0, 0, 64 * MIB);
  printf("ok idle cache: an idle live thread's 32 MiB of cached regions released (RSS %ld -> %ld KiB), the "
         "background thread ended\n",
         rss_filled, rss_idle);
}

/* A cache in steady use keeps its region across background periods, and the background thread stays: one
 * 4 MiB region allocated, held 1 ms and freed, over and over for 1.5 s of 20 ms periods, comes from the
 * cache every time but the first (and any period the thread was not scheduled for at all), and no thread
 * is created after the first. Moving every cached region out each period would send about 75
 * allocations to the slow path; a background thread that ended whenever it found the cache empty (the
 * region being in use) was created again inside a free about once a period. */
static void test_busy_cache(void) {
  const uint32_t c = 1;
  configure(20, (size_t)1 << 30, 64 * MIB);
  struct hak_region first = must_alloc(4 * MIB);
  must_free(&first); /* the background thread runs from here on */
  uint64_t slow0 = cls_stats(c).slow_path;
  int created0 = thread_creations;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  int rounds = 0;
  do {
    struct hak_region r = must_alloc(4 * MIB);
    sleep_ms(1);
    must_free(&r);
    rounds++;
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < 1500);
  uint64_t slow = cls_stats(c).slow_path - slow0;
  int created = thread_creations - created0;
  REQUIRE(slow <= 4, "%llu of %d allocations missed the cache of a thread using it", (unsigned long long)slow,
          rounds);
  REQUIRE(created <= 1, "%d threads created while one thread reused its region", created);
  configure(0, 0, 64 * MIB);
  printf("ok busy cache: %d allocations in 1.5 s, %llu from the slow path, %d threads created\n", rounds,
         (unsigned long long)slow, created);
}

/* A forked child has no background thread; the regions its cache inherited are released once it makes a
 * region call (here an allocation that the cache serves): they used to wait for the child's next free. */
static void test_fork_cache(void) {
  const uint32_t c = 1;
  configure(20, (size_t)1 << 30, 64 * MIB);
  struct hak_region r[8];
  for (int i = 0; i < 8; i++) {
    r[i] = must_alloc(4 * MIB);
    memset(r[i].ptr, 1, 4 * MIB);
  }
  for (int i = 0; i < 8; i++) must_free(&r[i]);
  pid_t pid = fork();
  REQUIRE(pid >= 0, "fork");
  if (pid == 0) {
    struct hak_region kept = must_alloc(4 * MIB);
    if (!wait_clean(c, 3000)) {
      printf("FAIL: the child's 7 cached regions stayed dirty (%llu)\n", (unsigned long long)cls_stats(c).dirty_regions);
      _exit(1);
    }
    must_free(&kept);
    _exit(0);
  }
  int status;
  REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
  REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
  configure(0, 0, 64 * MIB);
  printf("ok fork cache: a forked child's inherited cache is released after its first region call\n");
}

/* A program that configures more often than once a period still gets its periods: dirty regions in the
 * pool are released while the configuration is set again every 5 ms with 50 ms periods (each call
 * restarted the background thread's wait, so none was ever released). */
static void test_reconfigure(void) {
  const uint32_t c = 2; /* 8 MiB */
  configure(0, 0, 0);
  struct hak_region r[4];
  for (int i = 0; i < 4; i++) r[i] = must_alloc(8 * MIB);
  for (int i = 0; i < 4; i++) must_free(&r[i]);
  bool clean = false;
  for (int t = 0; t < 2000 && !clean; t += 5) {
    configure(50, (size_t)1 << 30, 0);
    sleep_ms(5);
    clean = cls_stats(c).dirty_regions == 0;
  }
  REQUIRE(clean, "%llu regions still dirty after 2 s of configure calls every 5 ms",
          (unsigned long long)cls_stats(c).dirty_regions);
  configure(0, 0, 64 * MIB);
  printf("ok reconfigure: periods still pass while the configuration is set every 5 ms\n");
}

/* ---- the background release's turns --------------------------------------------------------------- */

/* With a budget of one 2 MiB region per period and hundreds of dirty 2 MiB regions, class 4's regions
 * used to wait until class 0 was clean (every period began at class 0); classes now take turns. */
static void test_release_turns(void) {
  enum { SMALL = 300 };
  static struct hak_region small[SMALL];
  const uint32_t c = 4; /* 32 MiB */
  configure(0, 0, 0);
  for (int i = 0; i < SMALL; i++) small[i] = must_alloc(2 * MIB);
  for (int i = 0; i < SMALL; i++) must_free(&small[i]);
  struct hak_region big[2] = {must_alloc(32 * MIB), must_alloc(32 * MIB)};
  must_free(&big[0]);
  must_free(&big[1]);
  configure(10, 2 * MIB, 0); /* 300 periods, 3 s, to clean class 0 alone */
  REQUIRE(wait_clean(c, 1000), "class 4 still dirty after 1 s: %llu regions, class 0 %llu",
        (unsigned long long)cls_stats(c).dirty_regions, (unsigned long long)cls_stats(0).dirty_regions);
  REQUIRE(cls_stats(0).dirty_regions > 0, "class 0 was cleaned first (the test needs it dirty)");
  configure(10, (size_t)1 << 30, 0);
  REQUIRE(wait_clean(0, 3000), "class 0 not released");
  configure(0, 0, 64 * MIB);
  printf("ok release turns: a class with a few dirty regions is released while another has hundreds\n");
}

/* ---- a region the kernel refuses to purge ------------------------------------------------------- */

/* Free a 64 MiB region with a locked page and let the background thread (10 ms periods) try to purge
 * it: returns the region's address once the failure is counted, NULL when mlock is refused. */
static void *free_locked_region(uint64_t *errors0) {
  const uint32_t c = 5; /* 64 MiB */
  configure(0, 0, 0);
  struct hak_region r = must_alloc(64 * MIB);
  if (mlock(r.ptr, 4096) != 0) {
    printf("skip refused: mlock failed (%s)\n", strerror(errno));
    must_free(&r);
    return NULL;
  }
  void *locked = r.ptr;
  must_free(&r);
  *errors0 = cls_stats(c).release_errors;
  configure(10, (size_t)1 << 30, 0);
  for (int t = 0; t < 3000 && cls_stats(c).release_errors == *errors0; t += 5) sleep_ms(5);
  REQUIRE(cls_stats(c).release_errors > *errors0, "the purge of locked pages did not fail");
  return locked;
}

/* A freed region with locked pages: the background thread tries it once, counts the error and leaves
 * it until it is allocated and freed again. It used to retry it every period for good (about 1,600
 * failed madvise calls a second), which also kept alive a process whose main thread had called
 * pthread_exit (the refused-exit mode). The region stays usable. */
static void test_refused(void) {
  const uint32_t c = 5;
  uint64_t errors0;
  void *locked = free_locked_region(&errors0);
  if (locked == NULL) return;
  sleep_ms(300);
  uint64_t errors = cls_stats(c).release_errors - errors0;
  REQUIRE(errors <= 2, "%llu failed purges of one region in 300 ms", (unsigned long long)errors);
  struct hak_region again = must_alloc(64 * MIB);
  REQUIRE(again.ptr == locked, "the refused region was not handed out again");
  munlock(locked, 4096);
  must_free(&again);
  REQUIRE(wait_clean(c, 3000), "not released once unlocked and freed again");
  configure(0, 0, 64 * MIB);
  printf("ok refused: a region the kernel refuses to purge is tried once, then left alone\n");
}

/* With eager return, a region whose purge the kernel refuses goes to the refused list at its free: it
 * used to go back dirty and wake the background thread, whose retry failed again (two failed purges
 * per free). Unlocked and freed again, it is released at once. */
static void test_eager_refused(void) {
  const uint32_t c = 5; /* 64 MiB */
  configure_eager(10, (size_t)1 << 30, 0, true);
  struct hak_region r = must_alloc(64 * MIB);
  if (mlock(r.ptr, 4096) != 0) {
    printf("skip eager-refused: mlock failed (%s)\n", strerror(errno));
    must_free(&r);
    return;
  }
  void *locked = r.ptr;
  uint64_t errors0 = cls_stats(c).release_errors;
  must_free(&r);
  REQUIRE(cls_stats(c).release_errors - errors0 == 1, "the eager purge of locked pages did not fail once");
  sleep_ms(200); /* twenty release periods */
  uint64_t errors = cls_stats(c).release_errors - errors0;
  REQUIRE(errors == 1, "%llu failed purges of one eagerly freed region in 200 ms", (unsigned long long)errors);
  struct hak_region again = must_alloc(64 * MIB);
  REQUIRE(again.ptr == locked, "the refused region was not handed out again");
  munlock(locked, 4096);
  must_free(&again);
  REQUIRE(cls_stats(c).dirty_regions == 0, "unlocked and freed eagerly, the region stayed dirty");
  REQUIRE(cls_stats(c).release_errors - errors0 == 1, "the unlocked region's purge failed");
  configure(0, 0, 64 * MIB);
  printf("ok eager-refused: a refused eager return is counted once and not retried\n");
}

/* The same, and then the main thread leaves through pthread_exit: the process must end (the test gives
 * it seconds; the background thread used to keep it alive for good). */
static int run_refused_exit(void) {
  uint64_t errors0;
  if (free_locked_region(&errors0) == NULL) return 77;
  printf("ok refused-exit: the region was refused; the main thread leaves\n");
  pthread_exit(NULL);
}

/* ---- no thread can be created ---------------------------------------------------------------------- */

/* Regions in a process that cannot create threads: they work, and after the background thread failed
 * to start, cache hits and frees do not try again (each free tried pthread_create: 27 times slower in a
 * review's sandbox). The slow path still may. */
static int run_no_threads(void) {
  refuse_threads = true;
  configure(10, (size_t)1 << 30, 64 * MIB);
  struct hak_region first = must_alloc(2 * MIB);
  must_free(&first);
  int created0 = thread_creations;
  REQUIRE(created0 >= 1, "the background thread was never asked for");
  for (int i = 0; i < 10000; i++) {
    struct hak_region r = must_alloc(2 * MIB);
    must_free(&r);
  }
  int tries = thread_creations - created0;
  REQUIRE(tries == 0, "%d attempts to start a thread in 10,000 cached allocations and frees", tries);
  printf("ok no-threads: regions work without a background thread; %d failed start(s), none from the cache\n",
         created0);
  return 0;
}

/* ---- no thread-specific key left ------------------------------------------------------------------- */

#define KEYS_SEEN 8

static pthread_key_t first_keys[KEYS_SEEN];

static void *keyless_worker(void *arg) {
  void *block = malloc(100); /* this thread's heap, kept under hakmem's own key */
  void *before[KEYS_SEEN], *after[KEYS_SEEN];
  for (int i = 0; i < KEYS_SEEN; i++) before[i] = pthread_getspecific(first_keys[i]);
  struct hak_region r = must_alloc(2 * MIB);
  for (int i = 0; i < KEYS_SEEN; i++) after[i] = pthread_getspecific(first_keys[i]);
  for (int i = 0; i < KEYS_SEEN; i++)
    REQUIRE(before[i] == after[i], "key %u changed by a region call: %p -> %p", (unsigned)first_keys[i], before[i],
          after[i]);
  must_free(&r);
  free(block);
  return arg;
}

/* Regions in a process without a free thread-specific key work without thread caches (every free goes to
 * the pool) and leave other keys alone. The region front used to store its cache under key 0, which was
 * hakmem's heap key: the heap destructor then ran on the region cache at thread exit. */
static int run_keys(void) {
  free(malloc(16)); /* hakmem's heap key exists */
  pthread_key_t k;
  unsigned made = 0;
  while (pthread_key_create(&k, NULL) == 0) made++;
  for (unsigned i = 0; i < KEYS_SEEN; i++) first_keys[i] = (pthread_key_t)i; /* the keys made first: hakmem's */
  struct hak_stats s0, s1;
  REQUIRE(hak_stats_get_sized(&s0, sizeof s0) == 0, "hak_stats_get");
  for (int i = 0; i < 3; i++) {
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, keyless_worker, NULL) == 0, "pthread_create");
    pthread_join(th, NULL);
  }
  REQUIRE(hak_stats_get_sized(&s1, sizeof s1) == 0, "hak_stats_get");
  REQUIRE(s1.threads_started - s0.threads_started == s1.threads_exited - s0.threads_exited,
        "threads started %llu, exited %llu", (unsigned long long)(s1.threads_started - s0.threads_started),
        (unsigned long long)(s1.threads_exited - s0.threads_exited));
  REQUIRE(cls_stats(0).dirty_regions == 1, "the three frees went to the pool: %llu dirty (1 region reused)",
        (unsigned long long)cls_stats(0).dirty_regions);
  printf("ok keys: %u keys made before the first region call; regions work without thread caches\n", made);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (hak_region_alloc == NULL) {
    printf("skip: hak_region_* not available (not linked with libhakmem)\n");
    return 77;
  }
  const char *only = argc > 1 ? argv[1] : NULL; /* one part, or keys or refused-exit */
  if (only != NULL && strcmp(only, "keys") == 0) return run_keys();
  if (only != NULL && strcmp(only, "refused-exit") == 0) return run_refused_exit();
  if (only != NULL && strcmp(only, "no-threads") == 0) return run_no_threads();
  static const struct {
    const char *name;
    void (*run)(void);
  } parts[] = {{"generations", test_thread_generations},
               {"trim", test_trim},
               {"collect", test_collect},
               {"idle-cache", test_idle_cache},
               {"busy-cache", test_busy_cache},
               {"fork-cache", test_fork_cache},
               {"reconfigure", test_reconfigure},
               {"turns", test_release_turns},
               {"refused", test_refused},
               {"eager-refused", test_eager_refused}};
  bool known = only == NULL;
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    if (only != NULL && strcmp(only, parts[i].name) != 0) continue;
    parts[i].run();
    known = true;
  }
  REQUIRE(known, "no part named %s", only);
  if (only != NULL) return 0;
  printf("all region upkeep tests passed\n");
  return 0;
}
