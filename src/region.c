/* region.c — the region allocator of hakmem.h ("Regions"): big power-of-two buffers (2 MiB .. 64 GiB) that
 * page well. Owns everything behind hak_region_*:
 *   - areas: 2 MiB-aligned mappings (huge-page hint) holding 1..64 regions of one class; a new area holds
 *     max(1, regions_in_class >> growth_dampener) regions, at most 64 and at most 64 GiB;
 *   - per-region state (generation << 8 | state) in the area's metadata, changed with atomics, so a double
 *     free or a stale / forged handle is detected and rejected with EINVAL;
 *   - a thread cache per class (bounded by thread_cache_bytes), a global pool per class (a dirty list and
 *     a clean list), and stealing from other threads' caches before a new area is mapped;
 *   - a background thread that purges the oldest dirty regions of the global pools (at most
 *     release_bytes_per_tick per period, but always at least one region so that regions bigger than the
 *     budget make progress) without holding a class lock during madvise, and unmaps an area once all its
 *     regions are clean in the global pool; madvise failures are counted, never fatal;
 *   - fork safety (pthread_atfork; the child drains the caches of threads it does not have and restarts the
 *     background thread lazily) and thread exit (a pthread key destructor returns the cache to the pools).
 * No malloc here: metadata comes from hak_os_map and is never unmapped (it is recycled), so looking up a
 * bogus handle reads valid memory. Lock order: tick < cfg < registry < thread cache < class < meta. */
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

#define API __attribute__((visibility("default")))

#define NCLASS HAK_REGION_CLASSES
#define MIN_SHIFT 21
#define AREA_MAX_REGIONS 64
#define TC_SLOTS 32
#define RELEASE_BATCH 64
#define MAX_INTERVAL_MS 3600000u
#define MAX_DAMPENER 31u
#define MAP_LEAF_BITS 14
#define MAP_TOP_BITS (48 - MIN_SHIFT - MAP_LEAF_BITS)

enum { ST_UNUSED = 0, ST_LIVE = 1, ST_DIRTY = 2, ST_CLEAN = 3 };

struct area;

/* One region of an area. `word` is the only field touched without owning the region. */
struct slot {
  _Atomic uint64_t word;    /* generation << 8 | state */
  struct slot *prev, *next; /* links in a class's dirty or clean list, under the class lock */
  struct area *area;
  uint32_t index;
  bool purged; /* pages given back since the last allocation (committed accounting) */
};

/* base, cls and nregions are atomic because a stale handle may be checked against a recycled area. */
struct area {
  _Atomic(uint8_t *) base;
  size_t bytes;
  _Atomic uint32_t cls, nregions;
  uint32_t pool_clean;   /* regions on the class's clean list (class lock) */
  struct area *next_free; /* recycled area structs */
  struct slot slots[AREA_MAX_REGIONS];
};

struct klass {
  pthread_mutex_t lock;
  struct slot dirty, clean; /* list sentinels: next = newest, prev = oldest */
  uint64_t regions;         /* regions in mapped areas (class lock) */
  _Atomic uint64_t areas, mapped_bytes, refills, bytes_released, release_errors;
  _Atomic int64_t dirty_count, clean_count;       /* plus the deltas kept by thread caches */
  _Atomic uint64_t allocations, slow_path, frees; /* totals of threads that exited */
} __attribute__((aligned(64)));

/* Counters a thread keeps for itself; only the owner writes them, stats read them under the registry lock. */
struct tcount {
  _Atomic uint64_t allocations, slow_path, frees;
  _Atomic int64_t dirty, clean;
};

struct tcache {
  _Atomic int lock;
  struct tcache *prev, *next; /* registry (registry lock); next also links recycled caches */
  uint32_t count[NCLASS];
  struct slot *stack[NCLASS][TC_SLOTS];
  struct tcount cnt[NCLASS];
  uint32_t gen_next, gen_left; /* generations this thread may still hand out (see next_generation) */
};

static struct klass classes[NCLASS];
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static _Atomic bool initialized; /* set at the end of init(): the fork handlers are in place */
static pthread_key_t tc_key;
static __thread struct tcache *tls_tc;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tcache *reg_head, *tc_free;

static pthread_mutex_t meta_lock = PTHREAD_MUTEX_INITIALIZER;
static struct area *area_free;
/* Generations come from one process-wide sequence, so a (slot, generation) pair names a single
 * allocation until 2^32 generations have been handed out, even across areas unmapped and mapped again
 * at the same address (per-slot counters from a per-area seed overlapped the next area's after 65,536
 * reuses of one slot, and a stale handle could then free a live region). Each thread cache takes them
 * GEN_BLOCK at a time: one atomic add per allocation cost 8 ns of a 26 ns allocate+free pair. 0 is never
 * handed out. */
#define GEN_BLOCK 4096u
static _Atomic uint32_t gen_blocks; /* blocks of GEN_BLOCK generations taken so far */

static uint32_t take_gen_block(uint32_t *left) {
  uint32_t first = atomic_fetch_add_explicit(&gen_blocks, 1, memory_order_relaxed) * GEN_BLOCK;
  *left = GEN_BLOCK;
  if (first == 0) { /* the block holding 0 (again after the sequence wraps) */
    first = 1;
    (*left)--;
  }
  return first;
}

static uint32_t next_generation(struct tcache *tc) {
  if (tc == NULL) { /* no thread cache: a block for one allocation */
    uint32_t left;
    return take_gen_block(&left);
  }
  if (tc->gen_left == 0) tc->gen_next = take_gen_block(&tc->gen_left);
  tc->gen_left--;
  return tc->gen_next++;
}

static _Atomic(uintptr_t) map_top[(size_t)1 << MAP_TOP_BITS];

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
static _Atomic size_t cfg_tc_bytes = (size_t)64 << 20;
static _Atomic uint32_t cfg_damp = 1;
static _Atomic bool bg_running;
static uint64_t cfg_version; /* bumped by configure (cfg_lock) to wake the background thread */

static void bg_ensure(void);

static inline size_t class_bytes(uint32_t c) { return HAK_REGION_MIN << c; }

static inline uint32_t class_of(size_t bytes) {
  if (bytes <= HAK_REGION_MIN) return 0;
  return (uint32_t)(64 - __builtin_clzll((unsigned long long)(bytes - 1))) - MIN_SHIFT;
}

static inline uint64_t pack(uint32_t gen, int state) { return (uint64_t)gen << 8 | (uint64_t)state; }
static inline uint32_t word_gen(uint64_t w) { return (uint32_t)(w >> 8); }
static inline int word_state(uint64_t w) { return (int)(w & 0xff); }
static inline uint8_t *slot_ptr(const struct slot *s) {
  return s->area->base + (size_t)s->index * class_bytes(s->area->cls);
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

/* ---- Address -> area map: two levels over 48 bits at 2 MiB granularity; one entry per region start ---- */

static _Atomic(uintptr_t) *map_leaf(uintptr_t addr, bool create) {
  size_t top = (size_t)(addr >> (MIN_SHIFT + MAP_LEAF_BITS));
  uintptr_t leaf = atomic_load_explicit(&map_top[top], memory_order_acquire);
  if (leaf != 0 || !create) return (_Atomic(uintptr_t) *)leaf;
  size_t bytes = sizeof(uintptr_t) << MAP_LEAF_BITS;
  void *fresh = hak_os_map(bytes, HAK_OS_PAGE, false);
  if (fresh == NULL) return NULL;
  uintptr_t expected = 0;
  if (!atomic_compare_exchange_strong_explicit(&map_top[top], &expected, (uintptr_t)fresh, memory_order_acq_rel,
                                               memory_order_acquire)) {
    hak_os_unmap(fresh, bytes, true);
    return (_Atomic(uintptr_t) *)expected;
  }
  return fresh;
}

static inline size_t map_index(uintptr_t addr) {
  return (size_t)(addr >> MIN_SHIFT) & (((size_t)1 << MAP_LEAF_BITS) - 1);
}

static bool map_set(uintptr_t addr, struct area *a) {
  if (addr >> 48) return false;
  _Atomic(uintptr_t) *leaf = map_leaf(addr, a != NULL);
  if (leaf == NULL) return a == NULL;
  atomic_store_explicit(&leaf[map_index(addr)], (uintptr_t)a, memory_order_release);
  return true;
}

static struct area *map_get(uintptr_t addr) {
  if (addr >> 48) return NULL;
  _Atomic(uintptr_t) *leaf = map_leaf(addr, false);
  if (leaf == NULL) return NULL;
  return (struct area *)atomic_load_explicit(&leaf[map_index(addr)], memory_order_acquire);
}

/* ---- Lists of the global pool (class lock held) ----------------------------------------------------- */

static void list_init(struct slot *head) { head->prev = head->next = head; }
static bool list_empty(const struct slot *head) { return head->next == head; }

static void list_push_head(struct slot *head, struct slot *s) {
  s->prev = head;
  s->next = head->next;
  head->next->prev = s;
  head->next = s;
}

static void list_unlink(struct slot *s) {
  s->prev->next = s->next;
  s->next->prev = s->prev;
  s->prev = s->next = NULL;
}

/* ---- Counters ------------------------------------------------------------------------------------- */

/* Change the dirty or clean count of class c by delta, in the thread's own counters when it has a cache. */
static void count_state(struct tcache *tc, uint32_t c, bool dirty, int64_t delta) {
  if (tc != NULL) {
    _Atomic int64_t *mine = dirty ? &tc->cnt[c].dirty : &tc->cnt[c].clean;
    atomic_store_explicit(mine, atomic_load_explicit(mine, memory_order_relaxed) + delta, memory_order_relaxed);
  } else {
    atomic_fetch_add_explicit(dirty ? &classes[c].dirty_count : &classes[c].clean_count, delta, memory_order_relaxed);
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
    struct klass *k = &classes[c];
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

/* ---- Area metadata (recycled, never unmapped) ------------------------------------------------------- */

static struct area *area_meta_get(void) {
  pthread_mutex_lock(&meta_lock);
  struct area *a = area_free;
  if (a == NULL) {
    size_t chunk = (size_t)64 << 10;
    uint8_t *mem = hak_os_map(chunk, HAK_OS_PAGE, false);
    if (mem != NULL) {
      for (size_t off = 0; off + sizeof(struct area) <= chunk; off += sizeof(struct area)) {
        struct area *fresh = (struct area *)(mem + off);
        fresh->next_free = area_free;
        area_free = fresh;
      }
      a = area_free;
    }
  }
  if (a != NULL) area_free = a->next_free;
  pthread_mutex_unlock(&meta_lock);
  return a;
}

static void area_meta_put(struct area *a) {
  pthread_mutex_lock(&meta_lock);
  a->next_free = area_free;
  area_free = a;
  pthread_mutex_unlock(&meta_lock);
}

/* Remove a fully clean area from its class (class lock held): its slots leave the clean list and become
 * unused, its map entries are cleared. The caller unmaps it with area_unmap after dropping the lock. */
static void area_detach(struct area *a) {
  struct klass *k = &classes[a->cls];
  size_t cb = class_bytes(a->cls);
  for (uint32_t i = 0; i < a->nregions; i++) {
    struct slot *s = &a->slots[i];
    list_unlink(s);
    uint64_t w = atomic_load_explicit(&s->word, memory_order_relaxed);
    atomic_store_explicit(&s->word, pack(word_gen(w) + 1, ST_UNUSED), memory_order_release);
    map_set((uintptr_t)(a->base + (size_t)i * cb), NULL);
  }
  a->pool_clean = 0;
  k->regions -= a->nregions;
  atomic_fetch_sub_explicit(&k->areas, 1, memory_order_relaxed);
  atomic_fetch_sub_explicit(&k->mapped_bytes, a->bytes, memory_order_relaxed);
  atomic_fetch_sub_explicit(&k->clean_count, a->nregions, memory_order_relaxed);
}

/* Unmap a detached area in runs of equal committed accounting, then recycle its metadata. */
static void area_unmap(struct area *a) {
  size_t cb = class_bytes(a->cls);
  uint32_t i = 0;
  while (i < a->nregions) {
    uint32_t j = i;
    while (j < a->nregions && a->slots[j].purged == a->slots[i].purged) j++;
    hak_os_unmap(a->base + (size_t)i * cb, (size_t)(j - i) * cb, !a->slots[i].purged);
    i = j;
  }
  area_meta_put(a);
}

/* Put a clean region on the class's clean list (class lock held). Returns its area when the area has
 * become entirely free and clean; the area is then already detached. */
static struct area *pool_put_clean(struct slot *s) {
  struct area *a = s->area;
  list_push_head(&classes[a->cls].clean, s);
  if (++a->pool_clean < a->nregions) return NULL;
  area_detach(a);
  return a;
}

/* Put a free region (dirty or clean) back in the global pool (takes the class lock). */
static void pool_put(struct slot *s) {
  struct klass *k = &classes[s->area->cls];
  struct area *gone = NULL;
  pthread_mutex_lock(&k->lock);
  if (word_state(atomic_load_explicit(&s->word, memory_order_relaxed)) == ST_DIRTY)
    list_push_head(&k->dirty, s);
  else
    gone = pool_put_clean(s);
  pthread_mutex_unlock(&k->lock);
  if (gone != NULL) area_unmap(gone);
}

/* ---- Thread caches -------------------------------------------------------------------------------- */

static void tc_drain(struct tcache *tc) {
  for (uint32_t c = 0; c < NCLASS; c++) {
    while (tc->count[c] > 0) pool_put(tc->stack[c][--tc->count[c]]);
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

static struct tcache *my_tc(void) {
  struct tcache *tc = tls_tc;
  if (tc != NULL) return tc;
  pthread_mutex_lock(&reg_lock);
  tc = tc_free;
  if (tc != NULL) tc_free = tc->next;
  pthread_mutex_unlock(&reg_lock);
  if (tc == NULL) {
    size_t bytes = (sizeof(struct tcache) + HAK_OS_PAGE - 1) & ~(HAK_OS_PAGE - 1);
    tc = hak_os_map(bytes, HAK_OS_PAGE, false);
    if (tc == NULL) return NULL;
  }
  memset(tc, 0, sizeof(*tc));
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
  size_t n = atomic_load_explicit(&cfg_tc_bytes, memory_order_relaxed) / class_bytes(c);
  return n < TC_SLOTS ? (uint32_t)n : TC_SLOTS;
}

static struct slot *tc_pop(struct tcache *tc, uint32_t c) {
  if (tc == NULL) return NULL;
  struct slot *s = NULL;
  spin_lock(&tc->lock);
  if (tc->count[c] > 0) s = tc->stack[c][--tc->count[c]];
  spin_unlock(&tc->lock);
  return s;
}

static bool tc_push(struct tcache *tc, uint32_t c, struct slot *s) {
  if (tc == NULL) return false;
  bool ok = false;
  spin_lock(&tc->lock);
  if (tc->count[c] < tc_limit(c)) {
    tc->stack[c][tc->count[c]++] = s;
    ok = true;
  }
  spin_unlock(&tc->lock);
  return ok;
}

/* Take about half of another thread's cached regions of class c; keep one, cache or pool the rest. */
static struct slot *steal(struct tcache *self, uint32_t c) {
  struct slot *got[TC_SLOTS];
  uint32_t n = 0;
  pthread_mutex_lock(&reg_lock);
  for (struct tcache *t = reg_head; t != NULL && n == 0; t = t->next) {
    if (t == self || !spin_trylock(&t->lock)) continue;
    uint32_t take = (t->count[c] + 1) / 2;
    while (n < take) got[n++] = t->stack[c][--t->count[c]];
    spin_unlock(&t->lock);
  }
  pthread_mutex_unlock(&reg_lock);
  for (uint32_t i = 1; i < n; i++) {
    if (!tc_push(self, c, got[i])) pool_put(got[i]);
  }
  return n > 0 ? got[0] : NULL;
}

/* ---- Background release ----------------------------------------------------------------------------- */

/* Purge up to `budget` bytes (at least one region) of the oldest dirty regions; returns bytes attempted. */
static size_t release_class(uint32_t c, size_t budget, bool at_least_one) {
  struct klass *k = &classes[c];
  size_t cb = class_bytes(c);
  struct slot *batch[RELEASE_BATCH];
  int errs[RELEASE_BATCH];
  struct area *gone[RELEASE_BATCH];
  size_t n = 0, ngone = 0, spent = 0;
  pthread_mutex_lock(&k->lock);
  while (n < RELEASE_BATCH && !list_empty(&k->dirty) && (spent + cb <= budget || (at_least_one && n == 0))) {
    batch[n] = k->dirty.prev;
    list_unlink(batch[n++]);
    spent += cb;
  }
  pthread_mutex_unlock(&k->lock);
  if (n == 0) return 0;
  for (size_t i = 0; i < n; i++) errs[i] = hak_os_purge(slot_ptr(batch[i]), cb, false);
  pthread_mutex_lock(&k->lock);
  for (size_t i = 0; i < n; i++) {
    struct slot *s = batch[i];
    if (errs[i] != 0) {
      atomic_fetch_add_explicit(&k->release_errors, 1, memory_order_relaxed);
      list_push_head(&k->dirty, s);
      continue;
    }
    s->purged = true;
    atomic_store_explicit(&s->word, pack(word_gen(atomic_load_explicit(&s->word, memory_order_relaxed)), ST_CLEAN),
                          memory_order_relaxed);
    atomic_fetch_sub_explicit(&k->dirty_count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&k->clean_count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&k->bytes_released, cb, memory_order_relaxed);
    struct area *a = pool_put_clean(s);
    if (a != NULL) gone[ngone++] = a;
  }
  pthread_mutex_unlock(&k->lock);
  for (size_t i = 0; i < ngone; i++) area_unmap(gone[i]);
  return spent;
}

static void release_tick(size_t budget) {
  pthread_mutex_lock(&tick_lock);
  size_t spent = 0;
  for (uint32_t c = 0; c < NCLASS && spent < budget; c++) {
    for (;;) {
      size_t got = release_class(c, budget - spent, spent == 0);
      spent += got;
      if (got == 0 || spent >= budget) break;
    }
  }
  pthread_mutex_unlock(&tick_lock);
}

/* Whether a global pool holds dirty regions (cfg_lock held: classes come after it in the lock order). */
static bool any_pool_dirty(void) {
  for (uint32_t c = 0; c < NCLASS; c++) {
    pthread_mutex_lock(&classes[c].lock);
    bool dirty = !list_empty(&classes[c].dirty);
    pthread_mutex_unlock(&classes[c].lock);
    if (dirty) return true;
  }
  return false;
}

static void *bg_main(void *arg) {
  pthread_mutex_lock(&cfg_lock);
  for (;;) {
    uint32_t interval = cfg.release_interval_ms;
    if (interval == 0) break;
    uint64_t version = cfg_version;
    struct timespec until = hak_os_deadline_in(interval);
    int rc = 0;
    while (rc != ETIMEDOUT && version == cfg_version) rc = pthread_cond_timedwait(&bg_cond, &cfg_lock, &until);
    if (version != cfg_version) continue;
    size_t budget = cfg.release_bytes_per_tick;
    pthread_mutex_unlock(&cfg_lock);
    release_tick(budget);
    pthread_mutex_lock(&cfg_lock);
    /* Nothing left to release: end. A thread that stayed would keep alive a process whose main thread
     * left through pthread_exit (it waits for its last thread). Every put of a dirty region into a pool
     * calls bg_ensure afterwards: one that read `true` before the store below put its region before this
     * check, which then sees it; one that reads `false` starts a new thread. */
    atomic_store_explicit(&bg_running, false, memory_order_seq_cst);
    if (!any_pool_dirty()) {
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
  if (hak_os_thread_start(bg_main) != 0) {
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
  for (uint32_t c = 0; c < NCLASS; c++) pthread_mutex_lock(&classes[c].lock);
  pthread_mutex_lock(&meta_lock);
}

static void fork_unlock(void) {
  pthread_mutex_unlock(&meta_lock);
  for (uint32_t c = NCLASS; c-- > 0;) pthread_mutex_unlock(&classes[c].lock);
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
  for (uint32_t c = 0; c < NCLASS; c++) {
    pthread_mutex_init(&classes[c].lock, NULL);
    list_init(&classes[c].dirty);
    list_init(&classes[c].clean);
  }
  init_cond();
  pthread_key_create(&tc_key, tc_destructor);
  pthread_atfork(fork_prepare, fork_unlock, fork_child);
  atomic_store_explicit(&initialized, true, memory_order_release);
}

static inline void ensure_init(void) { pthread_once(&init_once, init); }

/* ---- Allocation ------------------------------------------------------------------------------------- */

/* Map a new area for class c and return its first region; the others go to the clean list. */
static struct slot *refill(uint32_t c) {
  struct klass *k = &classes[c];
  size_t cb = class_bytes(c);
  pthread_mutex_lock(&k->lock);
  uint64_t n = k->regions >> atomic_load_explicit(&cfg_damp, memory_order_relaxed);
  pthread_mutex_unlock(&k->lock);
  if (n < 1) n = 1;
  if (n > AREA_MAX_REGIONS) n = AREA_MAX_REGIONS;
  if (n > HAK_REGION_MAX / cb) n = HAK_REGION_MAX / cb;
  struct area *a = area_meta_get();
  if (a == NULL) return NULL;
  size_t bytes = (size_t)n * cb;
  bool huge = atomic_load_explicit(&cfg_huge, memory_order_relaxed);
  uint8_t *base = hak_os_map(bytes, HAK_REGION_MIN, huge);
  if (base == NULL) {
    area_meta_put(a);
    return NULL;
  }
  if (!huge) hak_os_advise(base, bytes, MADV_NOHUGEPAGE);
  a->base = base;
  a->bytes = bytes;
  a->cls = c;
  a->nregions = (uint32_t)n;
  a->pool_clean = 0;
  for (uint32_t i = 0; i < n; i++) {
    struct slot *s = &a->slots[i];
    s->prev = s->next = NULL;
    s->area = a;
    s->index = i;
    s->purged = false;
    atomic_store_explicit(&s->word, pack(0, ST_CLEAN), memory_order_relaxed);
  }
  for (uint32_t i = 0; i < n; i++) {
    if (map_set((uintptr_t)(base + (size_t)i * cb), a)) continue;
    while (i-- > 0) map_set((uintptr_t)(base + (size_t)i * cb), NULL);
    hak_os_unmap(base, bytes, true);
    area_meta_put(a);
    return NULL;
  }
  pthread_mutex_lock(&k->lock);
  k->regions += n;
  atomic_fetch_add_explicit(&k->areas, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&k->mapped_bytes, bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&k->refills, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&k->clean_count, (int64_t)n, memory_order_relaxed);
  for (uint32_t i = 1; i < n; i++) {
    list_push_head(&k->clean, &a->slots[i]);
    a->pool_clean++;
  }
  pthread_mutex_unlock(&k->lock);
  return &a->slots[0];
}

static struct slot *pool_take(uint32_t c) {
  struct klass *k = &classes[c];
  struct slot *s = NULL;
  pthread_mutex_lock(&k->lock);
  if (!list_empty(&k->dirty)) {
    s = k->dirty.next;
    list_unlink(s);
  } else if (!list_empty(&k->clean)) {
    s = k->clean.next;
    list_unlink(s);
    s->area->pool_clean--;
  }
  pthread_mutex_unlock(&k->lock);
  return s;
}

API int hak_region_alloc(size_t bytes, struct hak_region *out) {
  if (out == NULL || bytes == 0) return EINVAL;
  if (bytes > HAK_REGION_MAX) return EOVERFLOW;
  ensure_init();
  if (!atomic_load_explicit(&cfg_enabled, memory_order_relaxed)) return ENOTSUP;
  uint32_t c = class_of(bytes);
  struct tcache *tc = my_tc();
  struct slot *s = tc_pop(tc, c);
  if (s == NULL) {
    count_event(tc, tc ? &tc->cnt[c].slow_path : NULL, &classes[c].slow_path);
    s = pool_take(c);
    if (s == NULL) s = steal(tc, c);
    if (s == NULL) s = refill(c);
    if (s == NULL) return ENOMEM;
    bg_ensure(); /* e.g. in a forked child, which starts without the thread */
  }
  uint64_t w = atomic_load_explicit(&s->word, memory_order_relaxed);
  count_state(tc, c, word_state(w) == ST_DIRTY, -1);
  if (s->purged) {
    s->purged = false;
    hak_os_recommit(class_bytes(c));
  }
  uint32_t gen = next_generation(tc);
  atomic_store_explicit(&s->word, pack(gen, ST_LIVE), memory_order_release);
  count_event(tc, tc ? &tc->cnt[c].allocations : NULL, &classes[c].allocations);
  out->ptr = slot_ptr(s);
  out->capacity = class_bytes(c);
  out->size_class = c;
  out->generation = gen;
  return 0;
}

/* The slot a handle names if the handle's fields are consistent with an area, else NULL. */
static struct slot *find_slot(const struct hak_region *r) {
  if (r == NULL || r->size_class >= NCLASS) return NULL;
  size_t cb = class_bytes(r->size_class);
  uintptr_t addr = (uintptr_t)r->ptr;
  if (r->capacity != cb || (addr & (HAK_REGION_MIN - 1)) != 0) return NULL;
  struct area *a = map_get(addr);
  if (a == NULL || a->cls != r->size_class || addr < (uintptr_t)a->base) return NULL;
  size_t off = (size_t)(addr - (uintptr_t)a->base);
  if (off % cb != 0 || off / cb >= a->nregions) return NULL;
  return &a->slots[off / cb];
}

API int hak_region_free(struct hak_region *region) {
  ensure_init();
  struct slot *s = find_slot(region);
  if (s == NULL) return EINVAL;
  uint64_t expected = pack(region->generation, ST_LIVE);
  if (!atomic_compare_exchange_strong_explicit(&s->word, &expected, pack(region->generation, ST_DIRTY),
                                               memory_order_acq_rel, memory_order_relaxed))
    return EINVAL;
  uint32_t c = region->size_class;
  struct tcache *tc = my_tc();
  count_event(tc, tc ? &tc->cnt[c].frees : NULL, &classes[c].frees);
  count_state(tc, c, true, 1);
  if (atomic_load_explicit(&cfg_eager, memory_order_relaxed)) {
    size_t cb = class_bytes(c);
    struct klass *k = &classes[c];
    if (hak_os_purge(region->ptr, cb, false) == 0) {
      s->purged = true;
      atomic_store_explicit(&s->word, pack(region->generation, ST_CLEAN), memory_order_relaxed);
      count_state(tc, c, true, -1);
      count_state(tc, c, false, 1);
      atomic_fetch_add_explicit(&k->bytes_released, cb, memory_order_relaxed);
    } else {
      atomic_fetch_add_explicit(&k->release_errors, 1, memory_order_relaxed);
    }
    pool_put(s);
    return 0;
  }
  if (!tc_push(tc, c, s)) {
    pool_put(s);
    bg_ensure();
  }
  return 0;
}

API int hak_region_prefetch(const struct hak_region *region, size_t offset, size_t len) {
  ensure_init();
  struct slot *s = find_slot(region);
  if (s == NULL || atomic_load_explicit(&s->word, memory_order_acquire) != pack(region->generation, ST_LIVE))
    return EINVAL;
  if (offset > region->capacity || len > region->capacity - offset) return EINVAL;
  if (len == 0) return 0;
  uintptr_t start = ((uintptr_t)region->ptr + offset) & ~(uintptr_t)(HAK_OS_PAGE - 1);
  uintptr_t end = ((uintptr_t)region->ptr + offset + len + HAK_OS_PAGE - 1) & ~(uintptr_t)(HAK_OS_PAGE - 1);
  hak_os_advise((void *)start, (size_t)(end - start), MADV_WILLNEED);
  return 0;
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
  atomic_store_explicit(&cfg_tc_bytes, c->thread_cache_bytes, memory_order_relaxed);
  atomic_store_explicit(&cfg_damp, c->growth_dampener, memory_order_relaxed);
  pthread_cond_broadcast(&bg_cond);
  pthread_mutex_unlock(&cfg_lock);
  if (c->release_interval_ms > 0) bg_ensure();
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
    struct klass *k = &classes[c];
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
        .class_bytes = class_bytes((uint32_t)c),
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
