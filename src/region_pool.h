/* region_pool.h — the layer below the region API (region.c): the areas regions live in, the map from a
 * region's address to its area, and each class's global pool of free regions, with the purge and unmap
 * that the background release drives. Implemented in region_pool.c; nothing here knows of thread caches
 * or configuration. Lock order inside: class lock < meta lock (area metadata). */
#ifndef HAK_REGION_POOL_H
#define HAK_REGION_POOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "hakmem.h"

#define HAK_RPOOL_MIN_SHIFT 21   /* log2(HAK_REGION_MIN) */
#define HAK_RPOOL_AREA_MAX 64    /* regions in one area, at most */

/* A region's state, the low byte of slot.word. */
enum { HAK_RSLOT_UNUSED = 0, HAK_RSLOT_LIVE = 1, HAK_RSLOT_DIRTY = 2, HAK_RSLOT_CLEAN = 3 };

struct hak_rarea;

/* One region of an area. `word` is the only field touched without owning the region. */
struct hak_rslot {
  _Atomic uint64_t word;         /* generation << 8 | state */
  struct hak_rslot *prev, *next; /* links in a class's dirty or clean list, under the class lock */
  struct hak_rarea *area;
  uint32_t index;
  bool purged; /* pages given back since the last allocation (committed accounting) */
};

/* A 2 MiB-aligned mapping holding 1..64 regions of one class. base, cls and nregions are atomic because
 * a stale handle may be checked against a recycled area. */
struct hak_rarea {
  _Atomic(uint8_t *) base;
  size_t bytes;
  _Atomic uint32_t cls, nregions;
  uint32_t pool_clean;        /* regions on the class's clean list (class lock) */
  struct hak_rarea *next_free; /* recycled area structs */
  struct hak_rslot slots[HAK_RPOOL_AREA_MAX];
};

/* A class: its global pool (lock, lists) and its counters. The counters of threads that have a cache
 * live in region.c's thread caches and are folded in here when a thread leaves. */
struct hak_rclass {
  pthread_mutex_t lock;
  struct hak_rslot dirty, clean; /* list sentinels: next = newest, prev = oldest */
  struct hak_rslot refused;      /* dirty regions whose purge the kernel refused (mlock'd pages): not tried
                                    again, nor waited for by the background thread, until allocated and
                                    freed again */
  uint64_t regions;              /* regions in mapped areas (class lock) */
  _Atomic uint64_t areas, mapped_bytes, refills, bytes_released, release_errors;
  _Atomic int64_t dirty_count, clean_count;       /* plus the deltas kept by thread caches */
  _Atomic uint64_t allocations, slow_path, frees; /* totals of threads that exited */
} __attribute__((aligned(64)));

extern struct hak_rclass hak_rpool_classes[HAK_REGION_CLASSES];

static inline size_t hak_rpool_class_bytes(uint32_t c) { return HAK_REGION_MIN << c; }

static inline uint64_t hak_rslot_pack(uint32_t gen, int state) { return (uint64_t)gen << 8 | (uint64_t)state; }
static inline uint32_t hak_rslot_gen(uint64_t w) { return (uint32_t)(w >> 8); }
static inline int hak_rslot_state(uint64_t w) { return (int)(w & 0xff); }

/* The first byte of the region a slot stands for. */
static inline uint8_t *hak_rslot_ptr(const struct hak_rslot *s) {
  return s->area->base + (size_t)s->index * hak_rpool_class_bytes(s->area->cls);
}

/* Initialise the classes' locks and lists (once, before any other call). */
void hak_rpool_init(void);

/* Map a new area for class c of max(1, regions_in_class >> dampener) regions (at most 64 and 64 GiB), with
 * the huge-page hint when `huge`; returns its first region, the others go to the clean list. NULL when
 * the mapping fails. */
struct hak_rslot *hak_rpool_refill(uint32_t c, uint32_t dampener, bool huge);

/* Take a free region of class c from the global pool, dirty ones (still committed, refused ones last)
 * first; NULL if none. */
struct hak_rslot *hak_rpool_take(uint32_t c);

/* Put a free region (state dirty or clean) back in the global pool; unmaps its area when that leaves the
 * whole area clean and free. Takes the class lock. */
void hak_rpool_put(struct hak_rslot *s);

/* Put a dirty region whose purge the kernel has just refused on the class's refused list and count the
 * failure; it is not tried again until allocated and freed again. Takes the class lock. */
void hak_rpool_put_refused(struct hak_rslot *s);

/* Purge the oldest dirty regions of class c, up to `budget` bytes (at least one region when
 * `at_least_one`), without holding the class lock during madvise; a failure is counted and the region
 * stays dirty, on the refused list. Unmaps areas left entirely clean. Returns the bytes attempted. */
size_t hak_rpool_release(uint32_t c, size_t budget, bool at_least_one);

/* Whether any class's global pool holds a dirty region that a purge may release (refused ones aside). */
bool hak_rpool_any_dirty(void);

/* The slot a region handle names if the handle's fields are consistent with a mapped area, else NULL
 * (any value is safe to pass: area metadata is never unmapped). */
struct hak_rslot *hak_rpool_find(const struct hak_region *r);

/* Fork: take every lock of this layer (class locks, then the meta lock), and release them in the parent
 * and the child. */
void hak_rpool_fork_lock(void);
void hak_rpool_fork_unlock(void);

#endif
