/* region_pool.c — the areas regions live in, the address -> area map, and the classes' global pools of
 * free regions (region_pool.h). An area is a 2 MiB-aligned mapping (huge-page hint unless configured off)
 * of 1..64 regions of one class; its metadata comes from hak_os_map and is recycled, never unmapped, so
 * looking up a bogus handle reads valid memory. A pool keeps a dirty list (committed), a refused list
 * (committed, the kernel refused their purge) and a clean list (purged or never touched); an area whose
 * regions are all clean in the pool is unmapped. No malloc here.
 * Lock order: class lock < meta lock. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "os.h"
#include "region_pool.h"

#define RELEASE_BATCH 64
#define MAP_LEAF_BITS 14
#define MAP_TOP_BITS (48 - HAK_RPOOL_MIN_SHIFT - MAP_LEAF_BITS)

struct hak_rclass hak_rpool_classes[HAK_REGION_CLASSES];

static _Atomic(uintptr_t) map_top[(size_t)1 << MAP_TOP_BITS];

static pthread_mutex_t meta_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hak_rarea *area_free;

/* ---- Address -> area map: two levels over 48 bits at 2 MiB granularity; one entry per region start ---- */

static _Atomic(uintptr_t) *map_leaf(uintptr_t addr, bool create) {
  size_t top = (size_t)(addr >> (HAK_RPOOL_MIN_SHIFT + MAP_LEAF_BITS));
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
  return (size_t)(addr >> HAK_RPOOL_MIN_SHIFT) & (((size_t)1 << MAP_LEAF_BITS) - 1);
}

static bool map_set(uintptr_t addr, struct hak_rarea *a) {
  if (addr >> 48) return false;
  _Atomic(uintptr_t) *leaf = map_leaf(addr, a != NULL);
  if (leaf == NULL) return a == NULL;
  atomic_store_explicit(&leaf[map_index(addr)], (uintptr_t)a, memory_order_release);
  return true;
}

static struct hak_rarea *map_get(uintptr_t addr) {
  if (addr >> 48) return NULL;
  _Atomic(uintptr_t) *leaf = map_leaf(addr, false);
  if (leaf == NULL) return NULL;
  return (struct hak_rarea *)atomic_load_explicit(&leaf[map_index(addr)], memory_order_acquire);
}

/* ---- Lists of the global pool (class lock held) ----------------------------------------------------- */

static void list_init(struct hak_rslot *head) { head->prev = head->next = head; }
static bool list_empty(const struct hak_rslot *head) { return head->next == head; }

static void list_push_head(struct hak_rslot *head, struct hak_rslot *s) {
  s->prev = head;
  s->next = head->next;
  head->next->prev = s;
  head->next = s;
}

static void list_unlink(struct hak_rslot *s) {
  s->prev->next = s->next;
  s->next->prev = s->prev;
  s->prev = s->next = NULL;
}

/* ---- Area metadata (recycled, never unmapped) ------------------------------------------------------- */

static struct hak_rarea *area_meta_get(void) {
  pthread_mutex_lock(&meta_lock);
  struct hak_rarea *a = area_free;
  if (a == NULL) {
    size_t chunk = (size_t)64 << 10;
    uint8_t *mem = hak_os_map(chunk, HAK_OS_PAGE, false);
    if (mem != NULL) {
      for (size_t off = 0; off + sizeof(struct hak_rarea) <= chunk; off += sizeof(struct hak_rarea)) {
        struct hak_rarea *fresh = (struct hak_rarea *)(mem + off);
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

static void area_meta_put(struct hak_rarea *a) {
  pthread_mutex_lock(&meta_lock);
  a->next_free = area_free;
  area_free = a;
  pthread_mutex_unlock(&meta_lock);
}

/* Remove a fully clean area from its class (class lock held): its slots leave the clean list and become
 * unused, its map entries are cleared. The caller unmaps it with area_unmap after dropping the lock. */
static void area_detach(struct hak_rarea *a) {
  struct hak_rclass *k = &hak_rpool_classes[a->cls];
  size_t cb = hak_rpool_class_bytes(a->cls);
  for (uint32_t i = 0; i < a->nregions; i++) {
    struct hak_rslot *s = &a->slots[i];
    list_unlink(s);
    uint64_t w = atomic_load_explicit(&s->word, memory_order_relaxed);
    atomic_store_explicit(&s->word, hak_rslot_pack(hak_rslot_gen(w) + 1, HAK_RSLOT_UNUSED), memory_order_release);
    map_set((uintptr_t)(a->base + (size_t)i * cb), NULL);
  }
  a->pool_clean = 0;
  k->regions -= a->nregions;
  atomic_fetch_sub_explicit(&k->areas, 1, memory_order_relaxed);
  atomic_fetch_sub_explicit(&k->mapped_bytes, a->bytes, memory_order_relaxed);
  atomic_fetch_sub_explicit(&k->clean_count, a->nregions, memory_order_relaxed);
}

/* Unmap a detached area in runs of equal committed accounting, then recycle its metadata. */
static void area_unmap(struct hak_rarea *a) {
  size_t cb = hak_rpool_class_bytes(a->cls);
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
static struct hak_rarea *pool_put_clean(struct hak_rslot *s) {
  struct hak_rarea *a = s->area;
  list_push_head(&hak_rpool_classes[a->cls].clean, s);
  if (++a->pool_clean < a->nregions) return NULL;
  area_detach(a);
  return a;
}

void hak_rpool_put(struct hak_rslot *s) {
  struct hak_rclass *k = &hak_rpool_classes[s->area->cls];
  struct hak_rarea *gone = NULL;
  pthread_mutex_lock(&k->lock);
  if (hak_rslot_state(atomic_load_explicit(&s->word, memory_order_relaxed)) == HAK_RSLOT_DIRTY)
    list_push_head(&k->dirty, s);
  else
    gone = pool_put_clean(s);
  pthread_mutex_unlock(&k->lock);
  if (gone != NULL) area_unmap(gone);
}

/* A dirty region whose purge the kernel refused (class lock held): counted, and kept off the dirty list
 * until allocated and freed again. Retried every period, a locked region kept the background thread,
 * and a process whose main thread called pthread_exit, alive for good (a review's finding;
 * test_region_upkeep refused and eager-refused). */
static void refuse_locked(struct hak_rclass *k, struct hak_rslot *s) {
  atomic_fetch_add_explicit(&k->release_errors, 1, memory_order_relaxed);
  list_push_head(&k->refused, s);
}

void hak_rpool_put_refused(struct hak_rslot *s) {
  struct hak_rclass *k = &hak_rpool_classes[s->area->cls];
  pthread_mutex_lock(&k->lock);
  refuse_locked(k, s);
  pthread_mutex_unlock(&k->lock);
}

size_t hak_rpool_release(uint32_t c, size_t budget, bool at_least_one) {
  struct hak_rclass *k = &hak_rpool_classes[c];
  size_t cb = hak_rpool_class_bytes(c);
  struct hak_rslot *batch[RELEASE_BATCH];
  int errs[RELEASE_BATCH];
  struct hak_rarea *gone[RELEASE_BATCH];
  size_t n = 0, ngone = 0, spent = 0;
  pthread_mutex_lock(&k->lock);
  while (n < RELEASE_BATCH && !list_empty(&k->dirty) && (spent + cb <= budget || (at_least_one && n == 0))) {
    batch[n] = k->dirty.prev;
    list_unlink(batch[n++]);
    spent += cb;
  }
  pthread_mutex_unlock(&k->lock);
  if (n == 0) return 0;
  for (size_t i = 0; i < n; i++) errs[i] = hak_os_purge(hak_rslot_ptr(batch[i]), cb, false);
  pthread_mutex_lock(&k->lock);
  for (size_t i = 0; i < n; i++) {
    struct hak_rslot *s = batch[i];
    if (errs[i] != 0) {
      refuse_locked(k, s);
      continue;
    }
    s->purged = true;
    uint32_t gen = hak_rslot_gen(atomic_load_explicit(&s->word, memory_order_relaxed));
    atomic_store_explicit(&s->word, hak_rslot_pack(gen, HAK_RSLOT_CLEAN), memory_order_relaxed);
    atomic_fetch_sub_explicit(&k->dirty_count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&k->clean_count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&k->bytes_released, cb, memory_order_relaxed);
    struct hak_rarea *a = pool_put_clean(s);
    if (a != NULL) gone[ngone++] = a;
  }
  pthread_mutex_unlock(&k->lock);
  for (size_t i = 0; i < ngone; i++) area_unmap(gone[i]);
  return spent;
}

struct hak_rslot *hak_rpool_refill(uint32_t c, uint32_t dampener, bool huge) {
  struct hak_rclass *k = &hak_rpool_classes[c];
  size_t cb = hak_rpool_class_bytes(c);
  pthread_mutex_lock(&k->lock);
  uint64_t n = dampener < 64 ? k->regions >> dampener : 0;
  pthread_mutex_unlock(&k->lock);
  if (n < 1) n = 1;
  if (n > HAK_RPOOL_AREA_MAX) n = HAK_RPOOL_AREA_MAX;
  if (n > HAK_REGION_MAX / cb) n = HAK_REGION_MAX / cb;
  struct hak_rarea *a = area_meta_get();
  if (a == NULL) return NULL;
  /* an area of fewer regions when the kernel refuses the whole one (RLIMIT_AS, strict overcommit): a
   * single region that still fits must not fail for want of room for the growth step */
  size_t bytes = (size_t)n * cb;
  int saved_errno = errno; /* a refusal that a smaller step repairs must not show */
  uint8_t *base = hak_os_reserve(bytes, HAK_REGION_MIN, huge);
  while (base == NULL && n > 1) {
    n /= 2;
    bytes = (size_t)n * cb;
    base = hak_os_reserve(bytes, HAK_REGION_MIN, huge);
  }
  if (base == NULL) {
    area_meta_put(a);
    return NULL;
  }
  errno = saved_errno;
  if (!huge) hak_os_advise(base, bytes, MADV_NOHUGEPAGE);
  a->base = base;
  a->bytes = bytes;
  a->cls = c;
  a->nregions = (uint32_t)n;
  a->pool_clean = 0;
  for (uint32_t i = 0; i < n; i++) {
    struct hak_rslot *s = &a->slots[i];
    s->prev = s->next = NULL;
    s->area = a;
    s->index = i;
    s->purged = false;
    atomic_store_explicit(&s->word, hak_rslot_pack(0, HAK_RSLOT_CLEAN), memory_order_relaxed);
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

struct hak_rslot *hak_rpool_take(uint32_t c) {
  struct hak_rclass *k = &hak_rpool_classes[c];
  struct hak_rslot *s = NULL;
  pthread_mutex_lock(&k->lock);
  if (!list_empty(&k->dirty)) {
    s = k->dirty.next;
    list_unlink(s);
  } else if (!list_empty(&k->refused)) {
    s = k->refused.next;
    list_unlink(s);
  } else if (!list_empty(&k->clean)) {
    s = k->clean.next;
    list_unlink(s);
    s->area->pool_clean--;
  }
  pthread_mutex_unlock(&k->lock);
  return s;
}

struct hak_rslot *hak_rpool_find(const struct hak_region *r) {
  if (r == NULL || r->size_class >= HAK_REGION_CLASSES) return NULL;
  size_t cb = hak_rpool_class_bytes(r->size_class);
  uintptr_t addr = (uintptr_t)r->ptr;
  if (r->capacity != cb || (addr & (HAK_REGION_MIN - 1)) != 0) return NULL;
  struct hak_rarea *a = map_get(addr);
  if (a == NULL || a->cls != r->size_class || addr < (uintptr_t)a->base) return NULL;
  size_t off = (size_t)(addr - (uintptr_t)a->base);
  if (off % cb != 0 || off / cb >= a->nregions) return NULL;
  return &a->slots[off / cb];
}

bool hak_rpool_any_dirty(void) {
  for (uint32_t c = 0; c < HAK_REGION_CLASSES; c++) {
    pthread_mutex_lock(&hak_rpool_classes[c].lock);
    bool dirty = !list_empty(&hak_rpool_classes[c].dirty);
    pthread_mutex_unlock(&hak_rpool_classes[c].lock);
    if (dirty) return true;
  }
  return false;
}

void hak_rpool_init(void) {
  for (uint32_t c = 0; c < HAK_REGION_CLASSES; c++) {
    pthread_mutex_init(&hak_rpool_classes[c].lock, NULL);
    list_init(&hak_rpool_classes[c].dirty);
    list_init(&hak_rpool_classes[c].clean);
    list_init(&hak_rpool_classes[c].refused);
  }
}

void hak_rpool_fork_lock(void) {
  for (uint32_t c = 0; c < HAK_REGION_CLASSES; c++) pthread_mutex_lock(&hak_rpool_classes[c].lock);
  pthread_mutex_lock(&meta_lock);
}

void hak_rpool_fork_unlock(void) {
  pthread_mutex_unlock(&meta_lock);
  for (uint32_t c = HAK_REGION_CLASSES; c-- > 0;) pthread_mutex_unlock(&hak_rpool_classes[c].lock);
}
