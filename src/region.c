/* region.c — the region API of hakmem.h ("Regions"): big power-of-two buffers (2 MiB .. 64 GiB) that page
 * well. This file is the front: the areas, the address map and the global pools of free regions are the
 * layer below (region_pool.c). It owns:
 *   - per-region state (generation << 8 | state) in the area's metadata, changed with atomics, so a double
 *     free or a stale / forged handle is detected and rejected with EINVAL;
 *   - a thread cache per class (bounded by thread_cache_bytes, which configure applies to what caches
 *     already hold) in front of the global pools, and stealing from other threads' caches before a new
 *     area is mapped;
 *   - a background thread that, every period, moves the regions a thread cache has not needed for a
 *     whole period to the global pools, and purges the oldest dirty regions of the global pools (at most
 *     release_bytes_per_tick per period, but always at least one region so that regions bigger than the
 *     budget make progress, the classes taking turns); madvise failures are counted, never fatal;
 *   - hak_collect(true)'s share (region.h): every cache emptied into the pools, every dirty region purged;
 *   - the configuration and the statistics;
 *   - fork safety (pthread_atfork; the child drains the caches of threads it does not have and restarts the
 *     background thread lazily) and thread exit (a pthread key destructor returns the cache to the pools).
 * No malloc here. Lock order: tick < cfg < registry < thread cache < class < meta (the last two in
 * region_pool.c). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "hakmem.h"
#include "os.h"
#include "region.h"
#include "region_pool.h"

#define API __attribute__((visibility("default")))

#define NCLASS HAK_REGION_CLASSES
#define TC_SLOTS 32
#define MAX_INTERVAL_MS 3600000u
#define MAX_DAMPENER 31u

/* Counters a thread keeps for itself; only the owner writes them, stats read them under the registry lock. */
struct tcount {
  _Atomic uint64_t allocations, slow_path, frees;
  _Atomic int64_t dirty, clean;
};

struct tcache {
  _Atomic int lock;
  struct tcache *prev, *next; /* registry (registry lock); next also links recycled caches */
  uint32_t count[NCLASS];
  uint32_t low[NCLASS]; /* the fewest regions of the class held since the last background period: that
                           many sat unused for the whole period (lowered wherever count is) */
  struct hak_rslot *stack[NCLASS][TC_SLOTS]; /* [0] the oldest; the owner pushes and pops at the top */
  struct tcount cnt[NCLASS];
  bool pushed; /* a push since the background thread last looked (any_cached): a cache whose regions are
                  all in use at that moment is still in use */
  uint32_t gen_next, gen_left; /* generations this thread may still hand out (see next_generation) */
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static _Atomic bool initialized; /* set at the end of init(): the fork handlers are in place */
static pthread_key_t tc_key;
static bool tc_key_made; /* pthread_key_create succeeded (init); without the key, no thread caches */
static __thread struct tcache *tls_tc;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tcache *reg_head, *tc_free;

/* Generations come from one process-wide sequence, so a (slot, generation) pair names a single
 * allocation until 2^32 generations have been handed out, even across areas unmapped and mapped again
 * at the same address (per-slot counters from a per-area seed overlapped the next area's after 65,536
 * reuses of one slot, and a stale handle could then free a live region). Each thread cache takes them
 * GEN_BLOCK at a time (one atomic add per allocation cost 8 ns of a 26 ns allocate+free pair) and keeps
 * what it has left when its thread exits and another thread reuses it: a new block per thread wrapped
 * the sequence after a million short-lived threads, and a stale handle freed a live region (a review's
 * reproducer; test_region_upkeep generations). 0 is never handed out. */
#define GEN_BLOCK 4096u
static _Atomic uint32_t gen_seq; /* generations taken so far (mod 2^32) */

/* Take up to `want` consecutive generations; returns the first and sets *got (>= 1) to how many. */
static uint32_t take_generations(uint32_t want, uint32_t *got) {
  uint32_t first = atomic_fetch_add_explicit(&gen_seq, want, memory_order_relaxed);
  *got = want;
  if (first == 0) { /* 0 is the first of the run (again after the sequence wraps): skip it */
    first = 1;
    (*got)--;
  } else if (first > UINT32_MAX - (want - 1)) { /* the run wraps past 0: keep the part before it */
    *got = (uint32_t)(0u - first);
  }
  if (*got == 0) return take_generations(want, got); /* want was 1 and the one taken was 0 */
  return first;
}

static uint32_t next_generation(struct tcache *tc) {
  uint32_t got;
  if (tc == NULL) return take_generations(1, &got); /* no thread cache: one for this allocation */
  if (tc->gen_left == 0) tc->gen_next = take_generations(GEN_BLOCK, &tc->gen_left);
  tc->gen_left--;
  return tc->gen_next++;
}

static pthread_mutex_t cfg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t tick_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bg_cond;
static struct hak_region_config cfg = {
    .enabled = true,
    .release_interval_ms = 1000,
    .release_bytes_per_tick = (size_t)256 << 20,
    .eager_return = false,
    .thread_cache_bytes = (size_t)64 << 20,
    .growth_dampener = 1,
    .huge_pages = true,
};
static _Atomic bool cfg_enabled = true, cfg_eager = false, cfg_huge = true;
static _Atomic bool cfg_background = true; /* release_interval_ms > 0 */
/* The last attempt to start the background thread failed (no thread can be created: pids.max,
 * RLIMIT_NPROC, a sandbox). The cache paths then stop asking, or every free would pay a failed clone;
 * the slow paths and configure still do, and a success clears it. */
static _Atomic bool bg_start_failed;
static _Atomic size_t cfg_tc_bytes = (size_t)64 << 20;
static _Atomic uint32_t cfg_damp = 1;
static _Atomic bool bg_running;
static uint64_t cfg_version; /* bumped by configure (cfg_lock) to wake the background thread */

static void bg_ensure(void);

static inline uint32_t class_of(size_t bytes) {
  if (bytes <= HAK_REGION_MIN) return 0;
  return (uint32_t)(64 - __builtin_clzll((unsigned long long)(bytes - 1))) - HAK_RPOOL_MIN_SHIFT;
}

/* ---- Spin lock of a thread cache (owner and stealers; critical sections are a few stores) ---------- */

static void spin_lock(_Atomic int *l) {
  for (unsigned i = 0;; i++) {
    if (atomic_load_explicit(l, memory_order_relaxed) == 0 &&
        atomic_exchange_explicit(l, 1, memory_order_acquire) == 0)
      return;
    if (i > 64) sched_yield();
  }
}
static bool spin_trylock(_Atomic int *l) {
  return atomic_load_explicit(l, memory_order_relaxed) == 0 &&
         atomic_exchange_explicit(l, 1, memory_order_acquire) == 0;
}
static void spin_unlock(_Atomic int *l) { atomic_store_explicit(l, 0, memory_order_release); }

/* ---- Counters ------------------------------------------------------------------------------------- */

/* Change the dirty or clean count of class c by delta, in the thread's own counters when it has a cache. */
static void count_state(struct tcache *tc, uint32_t c, bool dirty, int64_t delta) {
  if (tc != NULL) {
    _Atomic int64_t *mine = dirty ? &tc->cnt[c].dirty : &tc->cnt[c].clean;
    atomic_store_explicit(mine, atomic_load_explicit(mine, memory_order_relaxed) + delta, memory_order_relaxed);
  } else {
    struct hak_rclass *k = &hak_rpool_classes[c];
    atomic_fetch_add_explicit(dirty ? &k->dirty_count : &k->clean_count, delta, memory_order_relaxed);
  }
}

static void count_event(struct tcache *tc, _Atomic uint64_t *mine, _Atomic uint64_t *global) {
  if (tc != NULL)
    atomic_store_explicit(mine, atomic_load_explicit(mine, memory_order_relaxed) + 1, memory_order_relaxed);
  else
    atomic_fetch_add_explicit(global, 1, memory_order_relaxed);
}

/* Fold a cache's counters into the class totals (registry lock held, cache leaving the registry). */
static void retire_counters(struct tcache *tc) {
  for (uint32_t c = 0; c < NCLASS; c++) {
    struct tcount *t = &tc->cnt[c];
    struct hak_rclass *k = &hak_rpool_classes[c];
    atomic_fetch_add_explicit(&k->allocations, atomic_load_explicit(&t->allocations, memory_order_relaxed),
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&k->slow_path, atomic_load_explicit(&t->slow_path, memory_order_relaxed),
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&k->frees, atomic_load_explicit(&t->frees, memory_order_relaxed), memory_order_relaxed);
    atomic_fetch_add_explicit(&k->dirty_count, atomic_load_explicit(&t->dirty, memory_order_relaxed),
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&k->clean_count, atomic_load_explicit(&t->clean, memory_order_relaxed),
                              memory_order_relaxed);
  }
}

/* ---- Thread caches -------------------------------------------------------------------------------- */

static void tc_drain(struct tcache *tc) {
  for (uint32_t c = 0; c < NCLASS; c++) {
    while (tc->count[c] > 0) hak_rpool_put(tc->stack[c][--tc->count[c]]);
  }
}

static void tc_unregister(struct tcache *tc) {
  if (tc->prev != NULL) tc->prev->next = tc->next;
  else reg_head = tc->next;
  if (tc->next != NULL) tc->next->prev = tc->prev;
  retire_counters(tc);
}

static void tc_destructor(void *arg) {
  struct tcache *tc = arg;
  pthread_mutex_lock(&reg_lock);
  tc_unregister(tc);
  pthread_mutex_unlock(&reg_lock);
  tc_drain(tc);
  bg_ensure();
  if (tls_tc == tc) tls_tc = NULL;
  pthread_mutex_lock(&reg_lock);
  tc->next = tc_free;
  tc_free = tc;
  pthread_mutex_unlock(&reg_lock);
}

/* The calling thread's cache, made or recycled on first use; NULL when none can be had: the mapping
 * failed, or the process had used up its thread-specific keys before the first region call (a cache
 * without the key's destructor would keep its regions after its thread exits). Every caller then works
 * on the global pools directly. */
static struct tcache *my_tc(void) {
  struct tcache *tc = tls_tc;
  if (tc != NULL || !tc_key_made) return tc;
  pthread_mutex_lock(&reg_lock);
  tc = tc_free;
  if (tc != NULL) tc_free = tc->next;
  pthread_mutex_unlock(&reg_lock);
  if (tc == NULL) {
    size_t bytes = (sizeof(struct tcache) + HAK_OS_PAGE - 1) & ~(HAK_OS_PAGE - 1);
    tc = hak_os_map(bytes, HAK_OS_PAGE, false);
    if (tc == NULL) return NULL;
  }
  uint32_t gen_next = tc->gen_next, gen_left = tc->gen_left; /* a recycled cache's unused generations */
  memset(tc, 0, sizeof(*tc));
  tc->gen_next = gen_next;
  tc->gen_left = gen_left;
  pthread_mutex_lock(&reg_lock);
  tc->next = reg_head;
  if (reg_head != NULL) reg_head->prev = tc;
  reg_head = tc;
  pthread_mutex_unlock(&reg_lock);
  tls_tc = tc;
  pthread_setspecific(tc_key, tc);
  return tc;
}

static uint32_t tc_limit(uint32_t c) {
  size_t n = atomic_load_explicit(&cfg_tc_bytes, memory_order_relaxed) / hak_rpool_class_bytes(c);
  return n < TC_SLOTS ? (uint32_t)n : TC_SLOTS;
}

/* Remove the newest cached region of class c (count > 0, the cache's lock held). */
static struct hak_rslot *tc_take_top(struct tcache *tc, uint32_t c) {
  struct hak_rslot *s = tc->stack[c][--tc->count[c]];
  if (tc->count[c] < tc->low[c]) tc->low[c] = tc->count[c];
  return s;
}

/* Remove the n oldest cached regions of class c into out (n <= count, the cache's lock held). */
static void tc_take_oldest(struct tcache *tc, uint32_t c, uint32_t n, struct hak_rslot **out) {
  memcpy(out, tc->stack[c], n * sizeof *out);
  tc->count[c] -= n;
  memmove(tc->stack[c], tc->stack[c] + n, tc->count[c] * sizeof *out);
  tc->low[c] = tc->low[c] > n ? tc->low[c] - n : 0; /* the idle ones were the oldest: they went first */
}

/* Whether a cache operation should start the background thread: it should run and does not (read under
 * the cache's lock: see tc_push). */
static bool bg_wanted(void) {
  return atomic_load_explicit(&cfg_background, memory_order_relaxed) &&
         !atomic_load_explicit(&bg_running, memory_order_relaxed) &&
         !atomic_load_explicit(&bg_start_failed, memory_order_relaxed);
}

/* Take a cached region of class c; NULL when there is none. A hit that finds the background thread
 * stopped starts it: that happens in a forked child (it has no thread), whose inherited cache would
 * otherwise wait for the child's next free. */
static struct hak_rslot *tc_pop(struct tcache *tc, uint32_t c) {
  if (tc == NULL) return NULL;
  struct hak_rslot *s = NULL;
  bool start = false;
  spin_lock(&tc->lock);
  if (tc->count[c] > 0) {
    s = tc_take_top(tc, c);
    start = bg_wanted();
  }
  spin_unlock(&tc->lock);
  if (start) bg_ensure();
  return s;
}

/* Cache a free region; false when the cache is full (or there is none). A cache holding regions keeps the
 * background thread running (it moves them out once unused for a period), so a push that finds it
 * stopped starts it. The flag is read under the cache's lock, which the stopping thread takes after
 * clearing it (any_cached): either that thread sees this region, or this push sees the flag clear. */
static bool tc_push(struct tcache *tc, uint32_t c, struct hak_rslot *s) {
  if (tc == NULL) return false;
  bool ok = false, start = false;
  spin_lock(&tc->lock);
  if (tc->count[c] < tc_limit(c)) {
    tc->stack[c][tc->count[c]++] = s;
    tc->pushed = true;
    ok = true;
    start = bg_wanted();
  }
  spin_unlock(&tc->lock);
  if (start) bg_ensure();
  return ok;
}

/* What trim_caches moves from each cache to the global pools, oldest regions first. */
enum trim {
  TRIM_TO_LIMIT, /* what exceeds thread_cache_bytes */
  TRIM_ALL,      /* everything */
  TRIM_IDLE,     /* what the cache has not needed since the last period (its low-water mark); a new
                    period starts */
};

/* Move regions from every registered cache to the global pools as `how` says; returns whether any moved.
 * A cache's owner uses it under its lock, so this waits for the owner's push or pop in flight and never
 * takes a region out from under it. */
static bool trim_caches(enum trim how) {
  struct hak_rslot *moved[NCLASS * TC_SLOTS];
  bool any = false;
  pthread_mutex_lock(&reg_lock);
  for (struct tcache *t = reg_head; t != NULL; t = t->next) {
    uint32_t n = 0;
    spin_lock(&t->lock);
    for (uint32_t c = 0; c < NCLASS; c++) {
      uint32_t limit = tc_limit(c), out = 0;
      if (how == TRIM_ALL) out = t->count[c];
      else if (how == TRIM_IDLE) out = t->low[c];
      else if (t->count[c] > limit) out = t->count[c] - limit;
      if (out > 0) tc_take_oldest(t, c, out, moved + n);
      n += out;
      if (how == TRIM_IDLE) t->low[c] = t->count[c];
    }
    spin_unlock(&t->lock);
    for (uint32_t i = 0; i < n; i++) hak_rpool_put(moved[i]); /* registry < class in the lock order */
    any |= n > 0;
  }
  pthread_mutex_unlock(&reg_lock);
  return any;
}

/* Whether any thread cache holds a region or took one since the last call (the background thread's
 * lock, cfg, held: cfg < registry). Without the second test a thread reusing one region, its cache empty
 * while the region is in use, saw the background thread end and start again inside its next free about
 * once a period (a review's reproducer: 283 clones in 3 s with 10 ms periods, frees up to 119 us). */
static bool any_cached(void) {
  bool any = false;
  pthread_mutex_lock(&reg_lock);
  for (struct tcache *t = reg_head; t != NULL; t = t->next) {
    spin_lock(&t->lock);
    any |= t->pushed;
    t->pushed = false;
    for (uint32_t c = 0; c < NCLASS && !any; c++) any = t->count[c] > 0;
    spin_unlock(&t->lock);
  }
  pthread_mutex_unlock(&reg_lock);
  return any;
}

/* Take about half of another thread's cached regions of class c; keep one, cache or pool the rest. */
static struct hak_rslot *steal(struct tcache *self, uint32_t c) {
  struct hak_rslot *got[TC_SLOTS];
  uint32_t n = 0;
  pthread_mutex_lock(&reg_lock);
  for (struct tcache *t = reg_head; t != NULL && n == 0; t = t->next) {
    if (t == self || !spin_trylock(&t->lock)) continue;
    uint32_t take = (t->count[c] + 1) / 2;
    while (n < take) got[n++] = tc_take_top(t, c);
    spin_unlock(&t->lock);
  }
  pthread_mutex_unlock(&reg_lock);
  for (uint32_t i = 1; i < n; i++) {
    if (!tc_push(self, c, got[i])) hak_rpool_put(got[i]);
  }
  return n > 0 ? got[0] : NULL;
}

/* One background period: release up to `budget` dirty bytes from the global pools. Classes take turns
 * as the first one looked at (tick_lock), so a budget that one busy class uses up every period still
 * reaches the others: starting at class 0 every time left larger classes dirty for good. */
static void release_tick(size_t budget) {
  static uint32_t first_class; /* tick_lock */
  pthread_mutex_lock(&tick_lock);
  size_t spent = 0;
  uint32_t c = first_class;
  for (uint32_t i = 0; i < NCLASS && spent < budget; i++, c = (c + 1) % NCLASS) {
    for (;;) {
      size_t got = hak_rpool_release(c, budget - spent, spent == 0);
      spent += got;
      if (got == 0 || spent >= budget) break;
    }
  }
  first_class = c; /* the class after the last one released from */
  pthread_mutex_unlock(&tick_lock);
}

void hak_regions_collect(void) {
  if (!atomic_load_explicit(&initialized, memory_order_acquire)) return; /* no region was ever asked for */
  trim_caches(TRIM_ALL);
  pthread_mutex_lock(&tick_lock);
  /* each call purges a batch; a region the kernel refuses leaves the dirty list, so this ends */
  for (uint32_t c = 0; c < NCLASS; c++)
    while (hak_rpool_release(c, SIZE_MAX, false) != 0) {
    }
  pthread_mutex_unlock(&tick_lock);
}

static void *bg_main(void *arg) {
  hak_os_name_this_thread("hakmem-regions");
  pthread_mutex_lock(&cfg_lock);
  struct timespec until = hak_os_deadline_in(cfg.release_interval_ms);
  for (;;) {
    if (cfg.release_interval_ms == 0) break;
    uint64_t version = cfg_version;
    int rc = 0;
    while (rc != ETIMEDOUT && version == cfg_version) rc = pthread_cond_timedwait(&bg_cond, &cfg_lock, &until);
    if (version != cfg_version) {
      /* A new configuration brings the deadline forward when its period is shorter, and never pushes it
       * back: restarting the wait at each call kept a program that configures more often than once a
       * period from ever reaching one. */
      struct timespec sooner = hak_os_deadline_in(cfg.release_interval_ms);
      if (sooner.tv_sec < until.tv_sec || (sooner.tv_sec == until.tv_sec && sooner.tv_nsec < until.tv_nsec))
        until = sooner;
      continue;
    }
    size_t budget = cfg.release_bytes_per_tick;
    pthread_mutex_unlock(&cfg_lock);
    trim_caches(TRIM_IDLE);
    release_tick(budget);
    pthread_mutex_lock(&cfg_lock);
    until = hak_os_deadline_in(cfg.release_interval_ms);
    /* Nothing left to release, in the pools or in the caches: end. A thread that stayed would keep alive
     * a process whose main thread left through pthread_exit (it waits for its last thread). Every put of
     * a dirty region into a pool calls bg_ensure afterwards: one that read `true` before the store below
     * put its region before this check, which then sees it; one that reads `false` starts a new thread.
     * A push into a cache reads the flag under the cache's lock (tc_push). */
    atomic_store_explicit(&bg_running, false, memory_order_seq_cst);
    if (!hak_rpool_any_dirty() && !any_cached()) {
      pthread_mutex_unlock(&cfg_lock);
      return arg;
    }
    atomic_store_explicit(&bg_running, true, memory_order_relaxed);
  }
  atomic_store_explicit(&bg_running, false, memory_order_release);
  pthread_mutex_unlock(&cfg_lock);
  return arg;
}

/* Start the background thread if it should run and does not (after fork it does not). The thread is
 * created without holding a lock: pthread_create may allocate, and a fork handler must not wait for it. */
static void bg_ensure(void) {
  if (atomic_load_explicit(&bg_running, memory_order_acquire)) return;
  pthread_mutex_lock(&cfg_lock);
  bool start = !atomic_load_explicit(&bg_running, memory_order_relaxed) && cfg.release_interval_ms > 0;
  if (start) atomic_store_explicit(&bg_running, true, memory_order_relaxed);
  pthread_mutex_unlock(&cfg_lock);
  if (!start) return;
  bool failed = hak_os_thread_start(bg_main) != 0;
  atomic_store_explicit(&bg_start_failed, failed, memory_order_relaxed);
  if (failed) {
    pthread_mutex_lock(&cfg_lock);
    atomic_store_explicit(&bg_running, false, memory_order_relaxed);
    pthread_mutex_unlock(&cfg_lock);
  }
}

/* ---- Fork ------------------------------------------------------------------------------------------ */

static void fork_prepare(void) {
  pthread_mutex_lock(&tick_lock);
  pthread_mutex_lock(&cfg_lock);
  pthread_mutex_lock(&reg_lock);
  for (struct tcache *t = reg_head; t != NULL; t = t->next) spin_lock(&t->lock);
  hak_rpool_fork_lock();
}

static void fork_unlock(void) {
  hak_rpool_fork_unlock();
  for (struct tcache *t = reg_head; t != NULL; t = t->next) spin_unlock(&t->lock);
  pthread_mutex_unlock(&reg_lock);
  pthread_mutex_unlock(&cfg_lock);
  pthread_mutex_unlock(&tick_lock);
}

static void init_cond(void) { hak_os_cond_init_monotonic(&bg_cond); }

/* In the child only the forking thread exists: the other caches are orphans, the background thread is gone. */
static void fork_child(void) {
  fork_unlock();
  init_cond();
  atomic_store_explicit(&bg_running, false, memory_order_relaxed);
  pthread_mutex_lock(&reg_lock);
  struct tcache *orphans = NULL;
  for (struct tcache *t = reg_head, *next; t != NULL; t = next) {
    next = t->next;
    if (t == tls_tc) continue;
    tc_unregister(t);
    t->next = orphans;
    orphans = t;
  }
  pthread_mutex_unlock(&reg_lock);
  while (orphans != NULL) {
    struct tcache *t = orphans;
    orphans = t->next;
    tc_drain(t);
    pthread_mutex_lock(&reg_lock);
    t->next = tc_free;
    tc_free = t;
    pthread_mutex_unlock(&reg_lock);
  }
}

static void init(void) {
  hak_rpool_init();
  init_cond();
  tc_key_made = pthread_key_create(&tc_key, tc_destructor) == 0;
  pthread_atfork(fork_prepare, fork_unlock, fork_child);
  atomic_store_explicit(&initialized, true, memory_order_release);
}

static inline void ensure_init(void) { pthread_once(&init_once, init); }

API int hak_region_alloc(size_t bytes, struct hak_region *out) {
  if (out == NULL || bytes == 0) return EINVAL;
  if (bytes > HAK_REGION_MAX) return EOVERFLOW;
  ensure_init();
  if (!atomic_load_explicit(&cfg_enabled, memory_order_relaxed)) return ENOTSUP;
  uint32_t c = class_of(bytes);
  struct tcache *tc = my_tc();
  struct hak_rslot *s = tc_pop(tc, c);
  if (s == NULL) {
    count_event(tc, tc ? &tc->cnt[c].slow_path : NULL, &hak_rpool_classes[c].slow_path);
    s = hak_rpool_take(c);
    if (s == NULL) s = steal(tc, c);
    if (s == NULL)
      s = hak_rpool_refill(c, atomic_load_explicit(&cfg_damp, memory_order_relaxed),
                           atomic_load_explicit(&cfg_huge, memory_order_relaxed));
    if (s == NULL) return ENOMEM;
    bg_ensure(); /* e.g. in a forked child, which starts without the thread */
  }
  uint64_t w = atomic_load_explicit(&s->word, memory_order_relaxed);
  count_state(tc, c, hak_rslot_state(w) == HAK_RSLOT_DIRTY, -1);
  if (s->purged) {
    s->purged = false;
    hak_os_recommit(hak_rpool_class_bytes(c));
  }
  uint32_t gen = next_generation(tc);
  atomic_store_explicit(&s->word, hak_rslot_pack(gen, HAK_RSLOT_LIVE), memory_order_release);
  count_event(tc, tc ? &tc->cnt[c].allocations : NULL, &hak_rpool_classes[c].allocations);
  out->ptr = hak_rslot_ptr(s);
  out->capacity = hak_rpool_class_bytes(c);
  out->size_class = c;
  out->generation = gen;
  return 0;
}

API int hak_region_free(struct hak_region *region) {
  ensure_init();
  struct hak_rslot *s = hak_rpool_find(region);
  if (s == NULL) return EINVAL;
  uint64_t expected = hak_rslot_pack(region->generation, HAK_RSLOT_LIVE);
  if (!atomic_compare_exchange_strong_explicit(&s->word, &expected, hak_rslot_pack(region->generation, HAK_RSLOT_DIRTY),
                                               memory_order_acq_rel, memory_order_relaxed))
    return EINVAL;
  uint32_t c = region->size_class;
  struct tcache *tc = my_tc();
  count_event(tc, tc ? &tc->cnt[c].frees : NULL, &hak_rpool_classes[c].frees);
  count_state(tc, c, true, 1);
  if (atomic_load_explicit(&cfg_eager, memory_order_relaxed)) {
    size_t cb = hak_rpool_class_bytes(c);
    struct hak_rclass *k = &hak_rpool_classes[c];
    if (hak_os_purge(region->ptr, cb, false) != 0) {
      /* refused (mlock'd pages): as in a background release, not tried again until reused; retrying it
       * at once only failed again (test_region_upkeep eager-refused) */
      hak_rpool_put_refused(s);
      return 0;
    }
    s->purged = true;
    atomic_store_explicit(&s->word, hak_rslot_pack(region->generation, HAK_RSLOT_CLEAN), memory_order_relaxed);
    count_state(tc, c, true, -1);
    count_state(tc, c, false, 1);
    atomic_fetch_add_explicit(&k->bytes_released, cb, memory_order_relaxed);
    hak_rpool_put(s);
    return 0;
  }
  if (!tc_push(tc, c, s)) {
    hak_rpool_put(s);
    bg_ensure();
  }
  return 0;
}

API int hak_region_prefetch(const struct hak_region *region, size_t offset, size_t len) {
  ensure_init();
  struct hak_rslot *s = hak_rpool_find(region);
  if (s == NULL) return EINVAL; /* region may be NULL */
  if (atomic_load_explicit(&s->word, memory_order_acquire) != hak_rslot_pack(region->generation, HAK_RSLOT_LIVE))
    return EINVAL;
  if (offset > region->capacity || len > region->capacity - offset) return EINVAL;
  if (len == 0) return 0;
  uintptr_t start = ((uintptr_t)region->ptr + offset) & ~(uintptr_t)(HAK_OS_PAGE - 1);
  uintptr_t end = ((uintptr_t)region->ptr + offset + len + HAK_OS_PAGE - 1) & ~(uintptr_t)(HAK_OS_PAGE - 1);
  return hak_os_advise((void *)start, (size_t)(end - start), MADV_WILLNEED);
}

/* ---- Configuration and statistics ------------------------------------------------------------------ */

API int hak_region_get_config(struct hak_region_config *out) {
  if (out == NULL) return EINVAL;
  pthread_mutex_lock(&cfg_lock);
  *out = cfg;
  pthread_mutex_unlock(&cfg_lock);
  return 0;
}

API int hak_region_configure(const struct hak_region_config *c) {
  if (c == NULL || c->release_interval_ms > MAX_INTERVAL_MS || c->growth_dampener > MAX_DAMPENER ||
      (c->release_interval_ms > 0 && c->release_bytes_per_tick == 0))
    return EINVAL;
  ensure_init();
  pthread_mutex_lock(&cfg_lock);
  cfg = *c;
  cfg_version++;
  atomic_store_explicit(&cfg_enabled, c->enabled, memory_order_relaxed);
  atomic_store_explicit(&cfg_eager, c->eager_return, memory_order_relaxed);
  atomic_store_explicit(&cfg_huge, c->huge_pages, memory_order_relaxed);
  atomic_store_explicit(&cfg_background, c->release_interval_ms > 0, memory_order_relaxed);
  atomic_store_explicit(&cfg_tc_bytes, c->thread_cache_bytes, memory_order_relaxed);
  atomic_store_explicit(&cfg_damp, c->growth_dampener, memory_order_relaxed);
  pthread_cond_broadcast(&bg_cond);
  pthread_mutex_unlock(&cfg_lock);
  /* a lower thread_cache_bytes applies to the regions already cached too: the surplus goes to the pools,
   * where the background thread releases it */
  if (trim_caches(TRIM_TO_LIMIT) || c->release_interval_ms > 0) bg_ensure();
  return 0;
}

static uint64_t nonneg(int64_t v) { return v < 0 ? 0 : (uint64_t)v; }

API size_t hak_region_stats(struct hak_region_class_stats *out, size_t max) {
  if (out == NULL) return 0;
  /* No ensure_init: a process that never used regions (one calling mallinfo2, say) gets no pthread key or
   * fork handler from this. Nor, then, does it take the registry lock, which no fork handler would cover:
   * a fork while another thread held it left the child's lock held for good. Before init every counter
   * is zero and the registry empty. */
  size_t n = max < NCLASS ? max : NCLASS;
  bool locked = atomic_load_explicit(&initialized, memory_order_acquire);
  if (locked) pthread_mutex_lock(&reg_lock);
  for (size_t c = 0; c < n; c++) {
    struct hak_rclass *k = &hak_rpool_classes[c];
    uint64_t allocs = atomic_load_explicit(&k->allocations, memory_order_relaxed);
    uint64_t slow = atomic_load_explicit(&k->slow_path, memory_order_relaxed);
    uint64_t frees = atomic_load_explicit(&k->frees, memory_order_relaxed);
    int64_t dirty = atomic_load_explicit(&k->dirty_count, memory_order_relaxed);
    int64_t clean = atomic_load_explicit(&k->clean_count, memory_order_relaxed);
    for (struct tcache *t = locked ? reg_head : NULL; t != NULL; t = t->next) {
      allocs += atomic_load_explicit(&t->cnt[c].allocations, memory_order_relaxed);
      slow += atomic_load_explicit(&t->cnt[c].slow_path, memory_order_relaxed);
      frees += atomic_load_explicit(&t->cnt[c].frees, memory_order_relaxed);
      dirty += atomic_load_explicit(&t->cnt[c].dirty, memory_order_relaxed);
      clean += atomic_load_explicit(&t->cnt[c].clean, memory_order_relaxed);
    }
    out[c] = (struct hak_region_class_stats){
        .class_bytes = hak_rpool_class_bytes((uint32_t)c),
        .areas = atomic_load_explicit(&k->areas, memory_order_relaxed),
        .mapped_bytes = atomic_load_explicit(&k->mapped_bytes, memory_order_relaxed),
        .free_regions = nonneg(dirty) + nonneg(clean),
        .dirty_regions = nonneg(dirty),
        .clean_regions = nonneg(clean),
        .allocations = allocs,
        .slow_path = slow,
        .refills = atomic_load_explicit(&k->refills, memory_order_relaxed),
        .frees = frees,
        .bytes_released = atomic_load_explicit(&k->bytes_released, memory_order_relaxed),
        .release_errors = atomic_load_explicit(&k->release_errors, memory_order_relaxed),
    };
  }
  if (locked) pthread_mutex_unlock(&reg_lock);
  return n;
}
