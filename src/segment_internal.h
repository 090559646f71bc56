/* segment_internal.h — private to segment.c and segment_purge.c, included by no other file: the
 * process-wide segment lists and counters (hak_segs), the small helpers both files inline, and the
 * functions one of them calls in the other. */
#ifndef HAK_SEGMENT_INTERNAL_H
#define HAK_SEGMENT_INTERNAL_H

#include <pthread.h>

#include "sync.h"

/* Empty segments kept mapped: every one released while its memory ages (its free slices are purged on
 * schedule), up to SEGMENT_CACHE_HARD_MAX, and SEGMENT_CACHE_MAX once they are purged: the collection
 * unmaps the rest. So a program that frees a big working set and allocates it again within the purge
 * delay reuses it without faults (a hunt: with every segment past the 16th unmapped at once, freeing and
 * allocating 512 MiB of 64 KiB blocks 20 times took 13x glibc's CPU time, 2.2 M page faults). With a
 * delay of 0 the cache keeps SEGMENT_CACHE_MAX; with -1 ("never return memory") it is unbounded. */
#define SEGMENT_CACHE_MAX 16
#define SEGMENT_CACHE_HARD_MAX 1024 /* 4 GiB of address space */

/* The process-wide lists of segments and the counters over all of them, defined in segment.c. */
struct hak_segs {
  pthread_mutex_t lock;
  hak_segment *cache;     /* empty segments, most recently released first */
  unsigned cache_count;
  hak_segment *abandoned; /* segments of exited threads that still hold live blocks */
  hak_segment *all;       /* every mapped segment, owned or not: the collection purges them all */
  _Atomic unsigned abandoned_count;
  _Atomic uint64_t earliest_due_ms; /* earliest purge due in any segment; 0: none */
  _Atomic uint64_t reclaimed;
  _Atomic uint64_t orphaned_pages; /* given back by the collection (purge_orphans_locked) */
  /* their blocks, per class: freed by other threads, and collected by no owner (hak_segments_orphan_blocks) */
  _Atomic uint64_t orphan_blocks[HAK_CLASS_COUNT];
  _Atomic uint64_t waiting_slices; /* free slices not purged since their use, over all segments (dirty_slices) */
  /* of those, the ones a trim has measured (measured_slices), and the OS pages it found not resident in
   * them: what waits is counted as every page of the others and the resident pages of these */
  _Atomic uint64_t measured_slices;
  _Atomic uint64_t absent_pages;
  _Atomic uint64_t measured_ms; /* when the oldest of those counts was taken (hak_segments_trim; a
                                   segment busy at a walk that takes them again keeps its older ones) */
  _Atomic uint64_t used_slices;    /* slices under a page, over all segments */
  hak_learned_delay delay; /* the free slices' purge delay (purge_delay.c) */
};
extern struct hak_segs hak_segs;

/* The earliest purge deadline of all segments takes `due` into account. seq_cst, with the store of a
 * segment's deadline before it and the collection's reset and reads (hak_segments_collect): either the
 * collection reads the new deadline or this call reads the reset and stores the deadline. (Relaxed, a
 * review found that both could miss each other, and the deadline was lost.) */
static inline void note_due(uint64_t due) {
  if (due == 0) return;
  uint64_t old = atomic_load_explicit(&hak_segs.earliest_due_ms, memory_order_seq_cst);
  while ((old == 0 || due < old) &&
         !atomic_compare_exchange_weak_explicit(&hak_segs.earliest_due_ms, &old, due, memory_order_seq_cst,
                                                memory_order_seq_cst)) {
  }
}

/* A collection is due at `due` (> 0): the segments' earliest deadline and the purger both learn it (the
 * purger is asked for, and started by the next allocation, once hakmem's memory is big enough to matter). */
static inline void ask_collection(uint64_t due) {
  note_due(due);
  hak_purger_note(due, (uint64_t)atomic_load_explicit(&hak_os_counters.committed_bytes, memory_order_relaxed));
}

static inline uint64_t run_mask(unsigned at, unsigned n) { return (n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1)) << at; }

static inline void list_push(hak_segment **head, hak_segment *seg) {
  seg->prev = NULL;
  seg->next = *head;
  if (*head) (*head)->prev = seg;
  *head = seg;
}

static inline void list_remove(hak_segment **head, hak_segment *seg) {
  if (seg->prev) seg->prev->next = seg->next;
  else *head = seg->next;
  if (seg->next) seg->next->prev = seg->prev;
  seg->next = seg->prev = NULL;
}

static inline uint64_t purge_due_of(const hak_segment *seg) {
  return atomic_load_explicit(&seg->purge_due_ms, memory_order_relaxed);
}

/* What waits for its purge deadline, in bytes: the slices no trim measured whole, the measured ones by
 * their resident pages, or every slice whole if `stale`. Relaxed reads of counters other threads move:
 * never below zero. */
static inline uint64_t waiting_bytes(bool stale) {
  uint64_t slices = atomic_load_explicit(&hak_segs.waiting_slices, memory_order_relaxed);
  uint64_t absent = stale ? 0 : atomic_load_explicit(&hak_segs.absent_pages, memory_order_relaxed) * HAK_OS_PAGE;
  return (slices << HAK_SLICE_SHIFT) > absent ? (slices << HAK_SLICE_SHIFT) - absent : 0;
}

/* ---- Defined in segment.c ------------------------------------------------------------------------ */
/* The slices a page of class `cls` takes. */
unsigned hak_segment_slices_for_class(unsigned cls);
/* Unmap `seg`, which no list but `all` holds any more; the caller holds no lock. */
void hak_segment_unmap(hak_segment *seg);
/* Unset the pages of an abandoned segment whose every page went back as an orphan (hak_segs.lock and its
 * slices_lock held); true if so, and the caller unmaps it once it has dropped the locks. */
bool hak_segment_release_if_emptied(hak_segment *seg);

/* ---- Defined in segment_purge.c ------------------------------------------------------------------ */
/* The slices in `bits` stop waiting: what a trim measured of them leaves the totals. */
void hak_segment_forget_measured(hak_segment *seg, uint64_t bits);
/* Return the free slices in `slices` to the OS (slices_lock held). */
void hak_segment_purge_slices(hak_segment *seg, uint64_t slices);
/* The dirty free slices in `dirty` freed too recently for a deadline purge at `now_ms`. */
uint64_t hak_segment_young_slices(const hak_segment *seg, uint64_t dirty, uint64_t now_ms, uint64_t *next_due);
/* hak_segment_purge with slices_lock held. */
void hak_segment_purge_locked(hak_segment *seg, uint64_t now_ms, bool force);

#endif
