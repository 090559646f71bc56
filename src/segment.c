/* segment.c — 4 MiB segments and their 64 KiB slices: carving pages out of a heap's segments, giving
 * slices back, purging free slices after the delay (every segment's, in the collection the purger and the
 * maintenance passes run, under each segment's slices_lock), and the process-wide lists: every mapped
 * segment, the cache of empty segments and the abandoned segments of exited threads. */
#include <emmintrin.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "sync.h"

/* Empty segments kept mapped: every one released while its memory ages (its free slices are purged on
 * schedule), up to SEGMENT_CACHE_HARD_MAX, and SEGMENT_CACHE_MAX once they are purged: the collection
 * unmaps the rest. So a program that frees a big working set and allocates it again within the purge
 * delay reuses it without faults (a hunt: with every segment past the 16th unmapped at once, freeing and
 * allocating 512 MiB of 64 KiB blocks 20 times took 13x glibc's CPU time, 2.2 M page faults). With a
 * delay of 0 the cache keeps SEGMENT_CACHE_MAX; with -1 ("never return memory") it is unbounded. */
#define SEGMENT_CACHE_MAX 16
#define SEGMENT_CACHE_HARD_MAX 1024 /* 4 GiB of address space */
/* slice_page of free slices: each its own */
static const uint8_t slice_identity[HAK_SLICES] = {
    0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
    22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43,
    44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63};
/* slice_class of a slice no page has used yet */
#define SLICE_NEVER_USED 0xff

static struct {
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
} segs = {.lock = PTHREAD_MUTEX_INITIALIZER};

void hak_segments_lock(void) { pthread_mutex_lock(&segs.lock); }
void hak_segments_unlock(void) { pthread_mutex_unlock(&segs.lock); }
void hak_segments_after_fork_child(void) {
  pthread_mutex_init(&segs.lock, NULL);
  /* a segment's lock held by a thread the child does not have would be held for good (the collection
   * would skip that segment at every pass, never idle); only this thread runs here */
  uint64_t now = hak_clock_ms(), earliest = 0;
  hak_learned_delay_after_fork(&segs.delay, now);
  /* the child starts from the option's delay: deadlines its parent set with a learned one come closer */
  long delay = hak_opts.value[HAK_OPT_PURGE_DELAY_MS];
  for (hak_segment *seg = segs.all; seg != NULL; seg = seg->all_next) {
    pthread_mutex_init(&seg->slices_lock, NULL);
    uint64_t due = atomic_load_explicit(&seg->purge_due_ms, memory_order_relaxed);
    if (due != 0 && delay > 0 && due > now + (uint64_t)delay) {
      due = now + (uint64_t)delay;
      atomic_store_explicit(&seg->purge_due_ms, due, memory_order_relaxed);
    }
    if (due != 0 && (earliest == 0 || due < earliest)) earliest = due;
  }
  atomic_store_explicit(&segs.earliest_due_ms, earliest, memory_order_relaxed);
}
uint64_t hak_segments_reclaimed(void) { return atomic_load_explicit(&segs.reclaimed, memory_order_relaxed); }
uint64_t hak_segments_orphaned_pages(void) { return atomic_load_explicit(&segs.orphaned_pages, memory_order_relaxed); }
uint64_t hak_segments_orphan_blocks(unsigned cls) {
  return atomic_load_explicit(&segs.orphan_blocks[cls], memory_order_relaxed);
}

/* The earliest purge deadline of all segments takes `due` into account. seq_cst, with the store of a
 * segment's deadline before it and the collection's reset and reads (hak_segments_collect): either the
 * collection reads the new deadline or this call reads the reset and stores the deadline. (Relaxed, a
 * review found that both could miss each other, and the deadline was lost.) */
static void note_due(uint64_t due) {
  if (due == 0) return;
  uint64_t old = atomic_load_explicit(&segs.earliest_due_ms, memory_order_seq_cst);
  while ((old == 0 || due < old) &&
         !atomic_compare_exchange_weak_explicit(&segs.earliest_due_ms, &old, due, memory_order_seq_cst,
                                                memory_order_seq_cst)) {
  }
}

/* A collection is due at `due` (> 0): the segments' earliest deadline and the purger both learn it (the
 * purger is asked for, and started by the next allocation, once hakmem's memory is big enough to matter). */
static void ask_collection(uint64_t due) {
  note_due(due);
  hak_purger_note(due, (uint64_t)atomic_load_explicit(&hak_os_counters.committed_bytes, memory_order_relaxed));
}

static uint64_t run_mask(unsigned at, unsigned n) { return (n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1)) << at; }

/* Lowest slice index starting a run of n (1-64) free slices, or -1. Bit i of m marks a run of `len`
 * free slices from i; runs double in length, then the last step overlaps two runs of `len` to reach n:
 * 5 shifts for a 31-slice page where one per slice took 30. */
static int find_run(uint64_t free_slices, unsigned n) {
  uint64_t m = free_slices;
  unsigned len = 1;
  while (len * 2 <= n && m) {
    m &= m >> len;
    len *= 2;
  }
  if (len < n) m &= m >> (n - len);
  return m ? __builtin_ctzll(m) : -1;
}

/* Classes up to 512 bytes use one slice (128 or more blocks). The direct table's larger classes, 640-1280
 * bytes, use four (204-409 blocks instead of 51-102): a class's free blocks are spread over fewer pages,
 * so its head page runs dry less often (random_mixed 20M: 172 K slow allocations -> 54 K, with the
 * rotation of heap.c; lab A/B 2026-11-24, 15 rounds: random_mixed 0.979, larson 0.951, churn 0.947; two
 * slices gained less, eight raised churn's peak RSS by a quarter, and two slices for 320-512 bytes raised
 * prodcons' by 5 %: docs/notes/2026-11-24-performance-log.md). The 1280-byte class takes requests of
 * 1025-1040 bytes (and in hardened builds of 1017-1024 bytes, once their canary is added): with one
 * slice (51 blocks) every tiny_hot batch of 64 such blocks went through a page switch (3.0 ns per
 * operation against 2.3 with four slices: performance log, eighth session). Larger classes take a run
 * of slices holding about 32 blocks, at most 31 slices, so that two such pages fit the 63 slices of a
 * segment: at 32, a program of one medium size from 64 KiB up used one page per segment and twice
 * glibc's address space (2000 blocks of 100,000 bytes: 462 MB of VmSize against 198; 249 at 31:
 * docs/notes/2026-11-25-medium-pages.md). */
static unsigned slices_for_class(unsigned cls) {
  size_t bs = hak_class_size(cls);
  if (bs <= 512) return 1;
  if (cls <= HAK_DIRECT_CLASS_MAX) return 4;
  size_t n = (bs * 32 + HAK_SLICE_SIZE - 1) / HAK_SLICE_SIZE;
  return n > HAK_MAX_PAGE_SLICES ? HAK_MAX_PAGE_SLICES : (unsigned)n;
}

static void list_push(hak_segment **head, hak_segment *seg) {
  seg->prev = NULL;
  seg->next = *head;
  if (*head) (*head)->prev = seg;
  *head = seg;
}

static void list_remove(hak_segment **head, hak_segment *seg) {
  if (seg->prev) seg->prev->next = seg->next;
  else *head = seg->next;
  if (seg->next) seg->next->prev = seg->prev;
  seg->next = seg->prev = NULL;
}

static void own(hak_heap *heap, hak_segment *seg) {
  atomic_store_explicit(&seg->owner, heap, memory_order_release);
  list_push(&heap->segments, seg);
  heap->segment_count++;
}

static void disown(hak_heap *heap, hak_segment *seg) {
  list_remove(&heap->segments, seg);
  heap->segment_count--;
  atomic_store_explicit(&seg->owner, NULL, memory_order_release);
}

/* A segment counts as committed but for its purged slices. Uncounted before the unmap: threads exiting
 * together wait in munmap for each other, and what they still counted added up to a false peak. */
static void uncount_and_unmap(hak_segment *seg) {
  hak_os_uncommit(HAK_SEGMENT_SIZE - ((size_t)__builtin_popcountll(seg->purged_slices) << HAK_SLICE_SHIFT));
  hak_os_unmap_guarded(seg, HAK_SEGMENT_SIZE, HAK_SEGMENT_GUARD, false);
}

/* Under mlockall(MCL_FUTURE) a writable mapping would be populated and locked whole: the segment is
 * mapped read-only instead, its header slice made writable, and each page's slices when it takes them
 * (take_page). Its slices count as purged until then. */
static hak_segment *segment_map(void) {
  bool sparse = hak_os_mappings_populated();
  hak_segment *seg = sparse ? hak_os_map_guarded_read_only(HAK_SEGMENT_SIZE, HAK_SEGMENT_GUARD, HAK_SEGMENT_SIZE)
                            : hak_os_map_guarded(HAK_SEGMENT_SIZE, HAK_SEGMENT_GUARD, HAK_SEGMENT_SIZE, false);
  if (seg == NULL) return NULL;
  if (sparse) {
    int err = hak_os_commit(seg, HAK_SLICE_SIZE);
    if (err != 0) {
      hak_os_unmap_guarded(seg, HAK_SEGMENT_SIZE, HAK_SEGMENT_GUARD, false);
      errno = ENOMEM; /* as take_page says when a commit fails */
      return NULL;
    }
    hak_os_recommit(HAK_SLICE_SIZE); /* committed: the header; the other slices count as purged */
    seg->purged_slices = seg->read_only_slices = ~(uint64_t)1;
  }
  if (!hak_pagemap_set(seg, seg)) {
    uncount_and_unmap(seg);
    return NULL;
  }
  seg->kind = HAK_KIND_SEGMENT;
  /* Slice 0 is the header and its descriptor is never a page: a nonzero size keeps a hardened free of a
   * pointer into the header from reading before the segment (HAK_SEGMENT_GUARD). */
  seg->pages[0].block_size = 16;
  seg->free_slices = ~(uint64_t)1;
  seg->zero_slices = ~(uint64_t)1; /* a fresh mapping, writable or read-only */
  memcpy(seg->slice_page, slice_identity, HAK_SLICES);
  memset(seg->slice_class, SLICE_NEVER_USED, sizeof seg->slice_class);
  pthread_mutex_lock(&segs.lock);
  seg->all_next = segs.all;
  if (segs.all != NULL) segs.all->all_prev = seg;
  segs.all = seg;
  pthread_mutex_unlock(&segs.lock);
  return seg;
}

/* The latest segments given back to the OS, each with the class of the last page on each of its slices:
 * a later free of a pointer into one is a use after free whose class can still be named, where the page
 * map alone would call the pointer never returned. For reports only: read without a lock. 256 (18 KiB):
 * exited threads' segments go back together once other threads free their blocks (release_if_emptied),
 * and with 16 a double free into the 17th latest was called a pointer hakmem never returned (a review:
 * 40 threads). */
#define UNMAPPED_REMEMBERED 256
static struct {
  _Atomic uint64_t next;
  struct {
    _Atomic(uintptr_t) base;
    uint8_t slice_class[HAK_SLICES];
  } entry[UNMAPPED_REMEMBERED];
} unmapped;

static void remember_unmapped(const hak_segment *seg) {
  unsigned i = (unsigned)(atomic_fetch_add_explicit(&unmapped.next, 1, memory_order_relaxed) % UNMAPPED_REMEMBERED);
  atomic_store_explicit(&unmapped.entry[i].base, 0, memory_order_relaxed);
  memcpy(unmapped.entry[i].slice_class, seg->slice_class, HAK_SLICES);
  atomic_store_explicit(&unmapped.entry[i].base, (uintptr_t)seg, memory_order_release);
}

bool hak_segment_was_released(const void *p, int *cls) {
  uintptr_t base = (uintptr_t)p & ~(uintptr_t)(HAK_SEGMENT_SIZE - 1);
  unsigned slice = (unsigned)(((uintptr_t)p - base) >> HAK_SLICE_SHIFT);
  if (slice == 0) return false; /* the header: never a block */
  unsigned c = SLICE_NEVER_USED;
  if (hak_pagemap_get(p) == (void *)base) {
    hak_segment *seg = (hak_segment *)base;
    if (hak_segment_page_of(seg, p)->slice_count != 0) return false; /* a page lives there */
    c = seg->slice_class[slice];
  } else {
    for (unsigned i = 0; i < UNMAPPED_REMEMBERED; i++) {
      if (atomic_load_explicit(&unmapped.entry[i].base, memory_order_acquire) != base) continue;
      c = unmapped.entry[i].slice_class[slice];
      /* the entry may have been rewritten meanwhile: its classes then belong to another segment */
      if (atomic_load_explicit(&unmapped.entry[i].base, memory_order_acquire) != base) return false;
      break;
    }
  }
  if (c == SLICE_NEVER_USED) return false;
  *cls = (int)c;
  return true;
}

#define SLICE_OS_PAGES (HAK_SLICE_SIZE / HAK_OS_PAGE)

/* The slices in `bits` stop waiting (taken by a page, purged or unmapped): drop what a trim measured of
 * them from the totals (slices_lock held, or the segment is nobody's). */
static void forget_measured(hak_segment *seg, uint64_t bits) {
  uint64_t measured = bits & seg->measured_slices, absent = 0;
  if (measured == 0) return;
  seg->measured_slices &= ~bits;
  hak_counter_add(&segs.measured_slices, (uint64_t)0 - (uint64_t)__builtin_popcountll(measured));
  for (; measured != 0; measured &= measured - 1)
    absent += SLICE_OS_PAGES - seg->slice_resident[__builtin_ctzll(measured)];
  hak_counter_add(&segs.absent_pages, (uint64_t)0 - absent);
}

/* The resident OS pages of each slice in `slices` (nonzero), into slice_resident: one mincore over the
 * span from the first to the last. False, and nothing written, if mincore fails. */
static bool read_resident(hak_segment *seg, uint64_t slices) {
  unsigned first = (unsigned)__builtin_ctzll(slices), last = 63u - (unsigned)__builtin_clzll(slices);
  unsigned char resident[HAK_SLICES * SLICE_OS_PAGES];
  if (hak_os_resident((uint8_t *)seg + ((size_t)first << HAK_SLICE_SHIFT), (size_t)(last - first + 1) << HAK_SLICE_SHIFT,
                      resident) != 0)
    return false;
  for (uint64_t left = slices; left != 0; left &= left - 1) {
    unsigned i = (unsigned)__builtin_ctzll(left), pages = 0;
    const unsigned char *vec = resident + (size_t)(i - first) * SLICE_OS_PAGES;
    for (unsigned k = 0; k < SLICE_OS_PAGES; k++) pages += vec[k] & 1u;
    seg->slice_resident[i] = (uint8_t)pages;
  }
  return true;
}

/* Count the resident OS pages of the dirty free slices of `seg` that no trim measured yet: one mincore
 * over the span from the first to the last (slices_lock held). Free slices are not written while they
 * wait, but the kernel may still fill them in (khugepaged collapsing a huge page around one touched
 * page), so a count holds for a purge delay (hak_segments_trim), or until they are taken or purged. On
 * failure they stay unmeasured, counted whole. */
static void measure_locked(hak_segment *seg) {
  uint64_t todo = seg->dirty_slices & seg->free_slices & ~seg->measured_slices, absent = 0;
  if (todo == 0 || !read_resident(seg, todo)) return;
  for (uint64_t left = todo; left != 0; left &= left - 1)
    absent += SLICE_OS_PAGES - seg->slice_resident[__builtin_ctzll(left)];
  seg->measured_slices |= todo;
  hak_counter_add(&segs.measured_slices, (uint64_t)__builtin_popcountll(todo));
  hak_counter_add(&segs.absent_pages, absent);
}

/* Unmap `seg`, which no list but `all` holds any more; the caller holds no lock. */
static void segment_unmap(hak_segment *seg) {
  pthread_mutex_lock(&segs.lock);
  if (seg->all_prev != NULL) seg->all_prev->all_next = seg->all_next;
  else segs.all = seg->all_next;
  if (seg->all_next != NULL) seg->all_next->all_prev = seg->all_prev;
  pthread_mutex_unlock(&segs.lock);
  hak_counter_add(&segs.waiting_slices, (uint64_t)0 - (uint64_t)__builtin_popcountll(seg->dirty_slices));
  forget_measured(seg, seg->dirty_slices);
  remember_unmapped(seg);
  hak_pagemap_set(seg, NULL);
  uncount_and_unmap(seg);
}

/* Return the free slices in `slices` to the OS, a system call per contiguous run (slices_lock held).
 * Locked memory (mlockall, mlock), where madvise fails with EINVAL, is replaced by read-only zero memory
 * instead, and so is every purge while segments are mapped read-only (hak_os_mappings_populated). */
static void purge_slices(hak_segment *seg, uint64_t slices) {
  bool lazy = hak_opts.value[HAK_OPT_PURGE_MODE] == 1;
  bool locked = hak_os_mappings_populated();
  while (slices) {
    unsigned at = (unsigned)__builtin_ctzll(slices);
    uint64_t run = ~(slices >> at), bits;
    unsigned n = run ? (unsigned)__builtin_ctzll(run) : 64 - at;
    bits = run_mask(at, n);
    void *start = (uint8_t *)seg + ((size_t)at << HAK_SLICE_SHIFT);
    size_t bytes = (size_t)n << HAK_SLICE_SHIFT;
    int err = locked ? EINVAL : hak_os_purge(start, bytes, lazy);
    bool zeroed = err == 0 && !lazy;
    if (err == EINVAL && hak_os_decommit(start, bytes) == 0) {
      seg->read_only_slices |= bits;
      err = 0;
      zeroed = true;
    }
    if (err == 0) seg->purged_slices |= bits;
    if (zeroed) seg->zero_slices |= bits;
    slices &= ~bits;
  }
}

/* Before a deadline purge (slices_lock held): the OS pages each of the dirty free slices in `slices` holds
 * resident, in slice_resident (what a page that takes one back faults in again: a 56 KiB block with 100
 * bytes written leaves one of its 28 slices' 448 pages). What a trim measured is dropped first. Counted
 * whole if mincore fails. */
static void count_resident(hak_segment *seg, uint64_t slices) {
  forget_measured(seg, slices);
  if (read_resident(seg, slices)) return;
  for (uint64_t left = slices; left != 0; left &= left - 1) seg->slice_resident[__builtin_ctzll(left)] = SLICE_OS_PAGES;
}

/* The dirty free slices in `dirty` that were freed too recently for a deadline purge at `now_ms`: those
 * with over a quarter of the delay in force still to wait (the quarter lets slices freed close together
 * go in one purge). Their earliest deadline goes to *next_due (0: none). */
static uint64_t young_slices(const hak_segment *seg, uint64_t dirty, uint64_t now_ms, uint64_t *next_due) {
  uint64_t delay = (uint64_t)hak_learned_delay_in_force(&segs.delay, now_ms), young = 0, next = 0;
  for (; dirty != 0; dirty &= dirty - 1) {
    unsigned i = (unsigned)__builtin_ctzll(dirty);
    uint64_t due = seg->slice_freed_ms[i] + delay;
    if (due <= now_ms + delay / 4) continue;
    young |= (uint64_t)1 << i;
    if (next == 0 || due < next) next = due;
  }
  *next_due = next;
  return young;
}

/* hak_segment_purge with slices_lock held. The segment's deadline is its oldest waiting slice's; a
 * deadline purge takes the slices whose own deadline has (nearly) come and sets the next one by the
 * rest, which taking them all had purged up to a delay early (a page retired just before the deadline,
 * purged at once and faulted in again by its next allocation). A forced purge takes them all. */
static void purge_locked(hak_segment *seg, uint64_t now_ms, bool force) {
  uint64_t dirty = seg->dirty_slices & seg->free_slices;
  uint64_t due = atomic_load_explicit(&seg->purge_due_ms, memory_order_relaxed), next_due = 0;
  if (dirty == 0 || (!force && (due == 0 || now_ms < due))) return;
  if (!force) dirty &= ~young_slices(seg, dirty, now_ms, &next_due);
  if (dirty == 0) { /* all of them freed since (the oldest were taken again, or the delay grew) */
    atomic_store_explicit(&seg->purge_due_ms, next_due, memory_order_relaxed);
    return;
  }
  bool learn = !force && !hak_purger_alone();
  if (learn) count_resident(seg, dirty);
  purge_slices(seg, dirty);
  if (learn) { /* by the deadline: taking these back teaches the delay, by what they held resident */
    uint64_t purged = dirty & seg->purged_slices, pages = 0;
    seg->deadline_purged_slices |= purged;
    for (uint64_t m = purged; m != 0; m &= m - 1) pages += seg->slice_resident[__builtin_ctzll(m)];
    hak_learned_delay_note_purged(&segs.delay, now_ms, pages * HAK_OS_PAGE);
  }
  hak_counter_add(&segs.waiting_slices, (uint64_t)0 - (uint64_t)__builtin_popcountll(dirty));
  forget_measured(seg, dirty);
  seg->dirty_slices &= ~dirty;
  atomic_store_explicit(&seg->purge_due_ms, next_due, memory_order_relaxed);
}

/* ---- Orphaned pages ------------------------------------------------------------------------------
 * A thread that allocated a burst and went idle while other threads freed all of it keeps the burst's
 * pages: they wait in its full lists, and only it collects their remote frees (heap.c), on its own slow
 * paths (a main thread that allocated 200 MB for workers to free: all of it resident while it waited).
 * A full page holds no free block (its owner found none to hand out or carve, and a block in its class
 * cache counts as used), so the remote free that brings its remote count to `reserved` frees its last
 * block. A thread that exits leaves each page still holding live blocks in the full state too (notified:
 * there is no owner to tell), with those blocks as its target (orphan_target, hak_page_abandon_state):
 * other threads that free them all
 * after it exited got the memory back only once some thread took the segment over, which one that
 * frees fewer than 64 blocks of it never does (ADOPT_AFTER_FREES: a thread that freed 100 MB of 256
 * KiB blocks an exited worker had written, then slept, kept all of it). The free that brings the count
 * to the target notes the page here (orphan_hint, before its CAS: the segment may go after). The
 * collection then looks at the page under the segment's slices_lock, where no page is set up or given
 * back: still full and its remote list holding every block a purge delay after a collection first found
 * it so (orphan_seen_ms; at once when forced or with a delay of 0), it swaps the remote word for
 * REMOTE_PURGED in one CAS (an owner that took the page out of the full state first wins) and purges
 * the page's slices. The owner, when it next looks at the page, hands it to its segment, which keeps
 * those slices purged (hak_segment_page_free); its blocks count freed from the purge on (orphan_blocks:
 * the statistics counted them live until an owner looked). An abandoned segment whose every page went
 * back so is unmapped (release_if_emptied). A page that leaves the full state drops its hint. A
 * purge drops the page's remote list unread: in hardened builds its blocks' freed tags are not checked
 * again (docs/security.md). */

void hak_segment_note_orphan(hak_segment *seg, const hak_page *page) {
  uint64_t bit = (uint64_t)1 << (page - seg->pages);
  atomic_fetch_and_explicit(&seg->orphan_seen, ~bit, memory_order_relaxed); /* emptied anew: wait again */
  atomic_fetch_or_explicit(&seg->orphan_hint, bit, memory_order_release);
}

void hak_segments_orphan_due(void) {
  long delay = hak_opts.value[HAK_OPT_PURGE_DELAY_MS];
  if (delay < 0) return;
  ask_collection(hak_clock_ms() + (uint64_t)delay);
}

/* The pages orphan_hint notes in `seg` (slices_lock held; `delay` > 0 unless `at_once`): each still full
 * with every block freed by other threads since a collection found it so a delay ago (or `at_once`) is
 * purged; one found full but not emptied yet gets one more look (a free between its note and its CAS),
 * then its hint goes (its owner took it back and filled it again: looking at it every delay for good
 * kept the purger waking, a review). Returns when the pages still noted want their next look; 0: none. */
static uint64_t purge_orphans_locked(hak_segment *seg, uint64_t now, long delay, bool at_once) {
  uint64_t hint = atomic_exchange_explicit(&seg->orphan_hint, 0, memory_order_acquire);
  uint64_t seen = atomic_load_explicit(&seg->orphan_seen, memory_order_relaxed);
  uint64_t keep = 0, newly_seen = 0, unseen = 0, purge = 0, next = 0;
  for (uint64_t m = hint; m != 0; m &= m - 1) {
    unsigned at = (unsigned)__builtin_ctzll(m);
    uint64_t bit = (uint64_t)1 << at, due = now + (uint64_t)(delay > 0 ? delay : 1);
    bool waited = (seg->orphan_waited & bit) != 0;
    seg->orphan_waited &= ~bit;
    unseen |= bit;
    if (at == 0 || (seg->free_slices & bit) != 0) continue; /* given back since */
    hak_page *page = &seg->pages[at]; /* a page start while the hint holds: see below */
    uint32_t reserved = page->reserved;
    uintptr_t word = atomic_load_explicit(&page->remote, memory_order_acquire);
    uintptr_t state = word & REMOTE_STATE_MASK;
    uint32_t target = atomic_load_explicit(&page->orphan_target, memory_order_relaxed); /* after the state */
    /* out of the full state: its owner has it (or the slice lies inside another page, whose descriptor
     * here was given back with an empty remote list) */
    if (state != REMOTE_FULL && state != REMOTE_NOTIFIED) continue;
    if (reserved == 0 || target == 0 || hak_remote_count(word) != target) { /* not emptied (yet) */
      if (waited) continue;
      seg->orphan_waited |= bit;
    } else if (!at_once && (seen & bit) == 0) { /* emptied: the delay starts */
      seg->orphan_seen_ms[at] = now;
      newly_seen |= bit;
      unseen &= ~bit;
    } else if (!at_once && now - seg->orphan_seen_ms[at] < (uint64_t)delay) { /* emptied, not for long */
      due = seg->orphan_seen_ms[at] + (uint64_t)delay;
      unseen &= ~bit;
    } else {
      if (atomic_compare_exchange_strong_explicit(&page->remote, &word, hak_remote_word(NULL, 0, REMOTE_PURGED),
                                                  memory_order_acq_rel, memory_order_relaxed)) {
        purge |= run_mask(at, slices_for_class(page->size_class));
        atomic_fetch_add_explicit(&segs.orphaned_pages, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&segs.orphan_blocks[page->size_class], target, memory_order_relaxed);
      } else
        seg->orphan_waited |= bit; /* changed meanwhile: one more look */
      if (purge & bit) continue;
    }
    keep |= bit;
    if (next == 0 || due < next) next = due;
  }
  purge_slices(seg, purge); /* one call per run of neighbouring pages */
  atomic_fetch_and_explicit(&seg->orphan_seen, ~unseen, memory_order_relaxed);
  atomic_fetch_or_explicit(&seg->orphan_seen, newly_seen, memory_order_relaxed);
  if (keep != 0) atomic_fetch_or_explicit(&seg->orphan_hint, keep, memory_order_relaxed);
  return next;
}

bool hak_segment_purge(hak_segment *seg, uint64_t now_ms, bool force) {
  uint64_t due = atomic_load_explicit(&seg->purge_due_ms, memory_order_relaxed);
  if (!force && (due == 0 || now_ms < due)) return due != 0; /* nothing due: no lock */
  pthread_mutex_lock(&seg->slices_lock);
  purge_locked(seg, now_ms, force);
  bool pending = atomic_load_explicit(&seg->purge_due_ms, memory_order_relaxed) != 0;
  pthread_mutex_unlock(&seg->slices_lock);
  return pending;
}

static uint64_t purge_due_of(const hak_segment *seg) {
  return atomic_load_explicit(&seg->purge_due_ms, memory_order_relaxed);
}

/* A page takes back `purged` slices, which their deadline purged, and `kept` ones, dirty and not purged
 * since (slices_lock held): the slices' delay learns from them (purge_delay.c), purged ones by the pages
 * they held resident, kept ones whole. The clock is read only when there is something to learn: purged
 * slices, or kept ones while a learned delay stands. */
static uint64_t waiting_bytes(bool stale);

static void learn_from_take(const hak_segment *seg, uint64_t purged, uint64_t kept) {
  if (!hak_learned_delay_stands(&segs.delay)) kept = 0;
  if ((purged | kept) == 0) return;
  uint64_t now = hak_clock_ms(), delay = (uint64_t)hak_opts.value[HAK_OPT_PURGE_DELAY_MS];
  hak_slices_taken taken = {0};
  for (; purged != 0; purged &= purged - 1) {
    unsigned i = (unsigned)__builtin_ctzll(purged);
    uint64_t interval = hak_learned_delay_interval(&segs.delay, now, seg->slice_freed_ms[i]);
    uint64_t bytes = (uint64_t)seg->slice_resident[i] * HAK_OS_PAGE;
    if (interval == 0 || bytes == 0) continue;
    taken.purged_bytes += bytes;
    taken.purged_kib_ms += (bytes >> 10) * interval;
  }
  for (; kept != 0; kept &= kept - 1) {
    uint64_t interval = hak_learned_delay_interval(&segs.delay, now, seg->slice_freed_ms[__builtin_ctzll(kept)]);
    if (interval <= delay) continue;
    taken.kept_bytes += HAK_SLICE_SIZE;
    if (interval > taken.kept_max_ms) taken.kept_max_ms = interval;
  }
  if ((taken.purged_bytes | taken.kept_bytes) == 0) return;
  taken.live_bytes = hak_segments_used_bytes();
  taken.waiting_bytes = waiting_bytes(false);
  hak_learned_delay_note_slices(&segs.delay, now, &taken);
}

/* A page of class `cls` on slices at..at+n of `seg` (slices_lock held). */
static hak_page *take_page(hak_heap *heap, hak_segment *seg, unsigned at, unsigned n, unsigned cls) {
  uint64_t bits = run_mask(at, n);
  uint64_t read_only = bits & seg->read_only_slices;
  if (read_only != 0) { /* the run's slices are all free, so its read-only ones are one mprotect away */
    int err = hak_os_commit((uint8_t *)seg + ((size_t)at << HAK_SLICE_SHIFT), (size_t)n << HAK_SLICE_SHIFT);
    if (err != 0) {
      errno = ENOMEM;
      return NULL;
    }
    seg->read_only_slices &= ~bits; /* and they are counted committed below, as purged slices */
  }
  uint64_t purged = bits & seg->purged_slices;
  if (purged) hak_os_recommit((size_t)__builtin_popcountll(purged) << HAK_SLICE_SHIFT);
  uint64_t trimmed = bits & seg->trimmed_slices, pages = 0;
  for (uint64_t m = trimmed; m != 0; m &= m - 1) pages += seg->slice_resident[__builtin_ctzll(m)];
  if (trimmed) hak_purger_note_refault(HAK_TRIM_SLICES, pages * HAK_OS_PAGE);
  seg->trimmed_slices &= ~bits;
  uint64_t waited = bits & seg->dirty_slices;
  /* (pass 2 of page_from_owned_segments may have just purged some: they were not kept) */
  learn_from_take(seg, bits & seg->deadline_purged_slices, waited & ~seg->purged_slices);
  seg->deadline_purged_slices &= ~bits;
  if (waited) hak_counter_add(&segs.waiting_slices, (uint64_t)0 - (uint64_t)__builtin_popcountll(waited));
  forget_measured(seg, waited);
  hak_counter_add(&segs.used_slices, n);
  bool zeroed = (bits & ~seg->zero_slices) == 0;
  seg->free_slices &= ~bits;
  seg->dirty_slices &= ~bits;
  seg->purged_slices &= ~bits;
  seg->zero_slices &= ~bits;
  /* purge_due_ms is set exactly while dirty free slices wait: when the last of them is taken again, a
   * deadline left behind would purge the next freed slice too early (hak_segment_page_free sets one only
   * when none is pending) and keep the heap's maintenance at its fastest rate (heap_maintain) */
  if ((seg->dirty_slices & seg->free_slices) == 0) atomic_store_explicit(&seg->purge_due_ms, 0, memory_order_relaxed);
  uint8_t slot = (uint8_t)(HAK_CLASS_CACHE && cls < HAK_CACHE_CLASSES ? cls + 1 : 0);
  for (unsigned i = at; i < at + n; i++) {
    seg->slice_page[i] = (uint8_t)at;
    seg->slice_cache_slot[i] = slot;
  }
  hak_page *page = &seg->pages[at];
  uintptr_t key = 0, canary_key = 0;
#if HAK_SECURE
  hak_secure_page_keys(heap, &key, &canary_key);
#endif
  hak_page_init(page, seg, at, n, cls, key, canary_key, zeroed);
  seg->used_pages++;
  return page;
}

/* Free slices still holding pages that blocks of class `cls` touched (not purged since; slices_lock held).
 * The 64 slice classes are compared 16 at a time (a loop over the dirty slices took up to 63 turns). */
static uint64_t dirty_slices_of_class(const hak_segment *seg, unsigned cls) {
  _Static_assert(HAK_SLICES == 64, "one bit per slice");
  __m128i want = _mm_set1_epi8((char)cls);
  uint64_t same = 0;
  for (unsigned i = 0; i < HAK_SLICES; i += 16) {
    __m128i classes = _mm_loadu_si128((const __m128i *)&seg->slice_class[i]);
    same |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(classes, want)) << i;
  }
  return same & seg->free_slices & seg->dirty_slices;
}

/* A run of n free slices in one of the heap's segments, chosen so the new page adds as little resident
 * memory as it can: first slices that blocks of the same class left dirty (their touched pages line up
 * with the new blocks), then clean slices (never used, or purged), then any. In that last case, for
 * blocks larger than an OS page, the run's dirty slices whose own deadline has come (young_slices) are
 * purged first (the next maintenance pass would purge them anyway): the old blocks' touched pages would
 * otherwise stay resident between the new blocks' touched ones. Slices freed since are taken as they
 * are: purged at once, vectors grown by realloc,
 * whose blocks move up from class to class, had every page purged and faulted in again (1000 vectors
 * grown by 16 B to 256 KiB: 359 K page faults and 1.08 s against 83 K and 0.64 s;
 * docs/notes/2026-11-25-class-migration.md). */
static hak_page *page_from_owned_segments(hak_heap *heap, unsigned cls, unsigned n) {
  /* blocks of a page or less touch every OS page of their slices as they are carved: no purge helps */
  bool sparse = hak_class_size(cls) > HAK_OS_PAGE;
  for (int pass = 0; pass < 3; pass++) {
    for (hak_segment *seg = heap->segments; seg != NULL; seg = seg->next) {
      /* only the owner changes free_slices: a segment without room is skipped without its lock */
      if (find_run(seg->free_slices, n) < 0) continue;
      pthread_mutex_lock(&seg->slices_lock);
      uint64_t candidates = pass == 0   ? dirty_slices_of_class(seg, cls)
                            : pass == 1 ? seg->free_slices & ~seg->dirty_slices
                                        : seg->free_slices;
      int at = find_run(candidates, n);
      if (at < 0) {
        pthread_mutex_unlock(&seg->slices_lock);
        continue;
      }
      uint64_t stale = run_mask((unsigned)at, n) & seg->dirty_slices;
      /* once the segment's deadline has passed (none is set with HAKMEM_PURGE_DELAY_MS=-1) */
      uint64_t due = purge_due_of(seg), now;
      if (pass == 2 && stale && sparse && due != 0 && (now = hak_clock_ms()) >= due) {
        uint64_t next_due;
        purge_slices(seg, stale & ~young_slices(seg, stale, now, &next_due));
      }
      hak_page *page = take_page(heap, seg, (unsigned)at, n, cls);
      pthread_mutex_unlock(&seg->slices_lock);
      return page;
    }
  }
  return NULL;
}

hak_page *hak_segment_page_alloc(hak_heap *heap, unsigned cls, bool add_segment) {
  unsigned n = slices_for_class(cls);
  hak_page *page = page_from_owned_segments(heap, cls, n);
  if (page != NULL) hak_purger_note_growth(); /* its slices may have been purged: committed again */
  if (page != NULL || !add_segment) return page;
  pthread_mutex_lock(&segs.lock);
  hak_segment *seg = segs.cache;
  if (seg != NULL) {
    list_remove(&segs.cache, seg);
    segs.cache_count--;
  }
  pthread_mutex_unlock(&segs.lock);
  int saved_errno = errno; /* a first failure that the retry repairs must not show through malloc */
  if (seg == NULL) seg = segment_map();
  if (seg == NULL) { /* out of memory or address space: give back everything free, then retry once */
    hak_heaps_collect(true);
    page = page_from_owned_segments(heap, cls, n);
    if (page == NULL && (seg = segment_map()) == NULL) return NULL;
    errno = saved_errno;
    if (page != NULL) return page;
  }
  own(heap, seg);
  pthread_mutex_lock(&seg->slices_lock); /* a cached segment is in `all`, which the collection walks */
  page = take_page(heap, seg, 1, n, cls);
  pthread_mutex_unlock(&seg->slices_lock);
  hak_purger_note_growth();
  return page;
}

/* `page` of `seg` is no page any more: its slices are each their own, their class remembered. Returns
 * its slices' bits; the caller makes them free. */
static uint64_t unset_page(hak_segment *seg, hak_page *page) {
  unsigned at = (unsigned)(page - seg->pages), n = page->slice_count;
  page->slice_count = 0;
  page->span = page->block_limit = 0;
  page->free = page->local_free = NULL;
  memcpy(&seg->slice_page[at], &slice_identity[at], n);
  memset(&seg->slice_cache_slot[at], 0, n);
  memset(&seg->slice_class[at], (int)page->size_class, n);
  seg->used_pages--;
  return run_mask(at, n);
}

void hak_segment_page_free(hak_heap *heap, hak_page *page) {
  hak_segment *seg = hak_segment_of(page);
  unsigned at = (unsigned)(page - seg->pages), n = page->slice_count;
  uint64_t bits = unset_page(seg, page), due = 0;
  long delay = hak_opts.value[HAK_OPT_PURGE_DELAY_MS];
  uint64_t now = delay > 0 ? hak_clock_ms() : 0;
  if (delay > 0) delay = hak_learned_delay_in_force(&segs.delay, now);
  pthread_mutex_lock(&seg->slices_lock);
  /* the slices of a page the collection gave back (an orphaned page, above) are purged already */
  uint64_t dirty = bits & ~seg->purged_slices;
  seg->free_slices |= bits;
  seg->dirty_slices |= dirty;
  for (unsigned i = at; i < at + n; i++) seg->slice_freed_ms[i] = now;
  hak_counter_add(&segs.waiting_slices, (uint64_t)__builtin_popcountll(dirty));
  hak_counter_add(&segs.used_slices, (uint64_t)0 - n);
  if (dirty != 0 && delay == 0) {
    purge_locked(seg, 0, true);
  } else if (dirty != 0 && delay > 0 && atomic_load_explicit(&seg->purge_due_ms, memory_order_relaxed) == 0) {
    due = now + (uint64_t)delay;
    atomic_store_explicit(&seg->purge_due_ms, due, memory_order_seq_cst); /* before note_due: see there */
  }
  pthread_mutex_unlock(&seg->slices_lock);
  if (seg->used_pages == 0 && heap != NULL && heap->segment_count > 1) {
    hak_segment_release(heap, seg);
  } else if (due != 0) {
    ask_collection(due); /* the collection purges it too, should the owner go idle before its own pass */
  } else if (delay > 0) {
    hak_purger_trim_if_alone(); /* the segment's deadline is set already: no note, but more waits */
  }
}


void hak_segment_release(hak_heap *heap, hak_segment *seg) {
  if (heap != NULL) disown(heap, seg);
  hak_segment *evict = NULL;
  uint64_t seg_due = purge_due_of(seg);
  pthread_mutex_lock(&segs.lock);
  list_push(&segs.cache, seg);
  note_due(seg_due);
  long delay = hak_opts.value[HAK_OPT_PURGE_DELAY_MS];
  if (++segs.cache_count > (delay == 0 ? SEGMENT_CACHE_MAX : SEGMENT_CACHE_HARD_MAX) && delay >= 0) {
    for (evict = segs.cache; evict->next != NULL; evict = evict->next) {
    }
    list_remove(&segs.cache, evict);
    segs.cache_count--;
  }
  uint64_t due = seg_due, cached_bytes = (uint64_t)segs.cache_count * HAK_SEGMENT_SIZE;
  pthread_mutex_unlock(&segs.lock);
  if (evict != NULL) segment_unmap(evict);
  if (due != 0) hak_purger_note(due, cached_bytes);
}

uint64_t hak_segments_purge_due(void) {
  return atomic_load_explicit(&segs.earliest_due_ms, memory_order_relaxed);
}

/* Take `seg` off the abandoned list (segs.lock held). */
static void unabandon_locked(hak_segment *seg) {
  list_remove(&segs.abandoned, seg);
  seg->abandoned = false;
  atomic_fetch_sub_explicit(&segs.abandoned_count, 1, memory_order_relaxed);
}

/* An abandoned segment whose every page went back as an orphan holds no live block, so no free ever
 * counts towards taking it over (page.c), and only a thread short of room would: it stayed mapped, its
 * never-used slices counted committed (500 threads that left a block each, all freed: 2 GiB mapped,
 * 1.9 GiB committed, for good). Such a segment's pages are unset and it leaves the abandoned list
 * (segs.lock and its slices_lock held; abandoned, so no thread changes its pages, and a free into it
 * now is a double free, reported from the page map). True if so: the caller unmaps it once it has
 * dropped the locks (segment_unmap). */
static bool release_if_emptied(hak_segment *seg) {
  if (!seg->abandoned || seg->used_pages == 0) return false;
  hak_page *page;
  for (unsigned at = 1; (page = hak_segment_next_page(seg, &at)) != NULL;)
    if (!hak_page_given_back(page)) return false;
  for (unsigned at = 1; (page = hak_segment_next_page(seg, &at)) != NULL;) {
    hak_counter_add(&segs.used_slices, (uint64_t)0 - page->slice_count);
    seg->free_slices |= unset_page(seg, page);
  }
  unabandon_locked(seg);
  return true;
}

/* Its due slices are purged by the collection (hak_segments_collect) like every segment's; a thread that
 * frees enough of its blocks (page.c) or needs room takes it over. */
void hak_segment_abandon(hak_heap *heap, hak_segment *seg) {
  disown(heap, seg);
  uint64_t due = purge_due_of(seg);
  pthread_mutex_lock(&segs.lock);
  list_push(&segs.abandoned, seg);
  seg->abandoned = true;
  note_due(due);
  atomic_fetch_add_explicit(&segs.abandoned_count, 1, memory_order_relaxed);
  /* the collection may have given its last pages back while this thread left them (heap.c) */
  pthread_mutex_lock(&seg->slices_lock);
  bool emptied = release_if_emptied(seg);
  pthread_mutex_unlock(&seg->slices_lock);
  uint64_t held = (uint64_t)(segs.cache_count + atomic_load_explicit(&segs.abandoned_count, memory_order_relaxed)) *
                  HAK_SEGMENT_SIZE;
  pthread_mutex_unlock(&segs.lock);
  if (emptied) segment_unmap(seg);
  else if (due != 0) hak_purger_note(due, held);
}

/* A thread takes `seg` off the abandoned list to adopt it (segs.lock held): counted reclaimed. */
static void take_over_locked(hak_segment *seg) {
  unabandon_locked(seg);
  atomic_fetch_add_explicit(&segs.reclaimed, 1, memory_order_relaxed);
}

hak_segment *hak_segment_reclaim_one(void) {
  if (atomic_load_explicit(&segs.abandoned_count, memory_order_relaxed) == 0) return NULL;
  pthread_mutex_lock(&segs.lock);
  hak_segment *seg = segs.abandoned;
  if (seg != NULL) take_over_locked(seg);
  pthread_mutex_unlock(&segs.lock);
  return seg;
}

bool hak_segment_reclaim(hak_segment *seg) {
  pthread_mutex_lock(&segs.lock);
  bool taken = seg->abandoned;
  if (taken) take_over_locked(seg);
  pthread_mutex_unlock(&segs.lock);
  return taken;
}

uint64_t hak_segments_used_bytes(void) {
  return atomic_load_explicit(&segs.used_slices, memory_order_relaxed) << HAK_SLICE_SHIFT;
}

/* What waits for its purge deadline, in bytes: the slices no trim measured whole, the measured ones by
 * their resident pages, or every slice whole if `stale`. Relaxed reads of counters other threads move:
 * never below zero. */
static uint64_t waiting_bytes(bool stale) {
  uint64_t slices = atomic_load_explicit(&segs.waiting_slices, memory_order_relaxed);
  uint64_t absent = stale ? 0 : atomic_load_explicit(&segs.absent_pages, memory_order_relaxed) * HAK_OS_PAGE;
  return (slices << HAK_SLICE_SHIFT) > absent ? (slices << HAK_SLICE_SHIFT) - absent : 0;
}

uint64_t hak_segments_waiting_bytes(void) { return waiting_bytes(false); }

bool hak_segments_trim(uint64_t keep_bytes, uint64_t *waiting) {
  /* counts older than a purge delay are taken again (measure_locked): until then the slices count whole */
  uint64_t now = hak_clock_ms(), delay = (uint64_t)hak_opts.value[HAK_OPT_PURGE_DELAY_MS];
  bool stale = atomic_load_explicit(&segs.measured_slices, memory_order_relaxed) != 0 &&
               now - atomic_load_explicit(&segs.measured_ms, memory_order_relaxed) > delay;
  *waiting = waiting_bytes(stale);
  if (*waiting <= keep_bytes) return false;
  pthread_mutex_lock(&segs.lock);
  /* blocks larger than an OS page may have had a few bytes written (64 KiB-aligned blocks of 100 B):
   * counted whole, slices that hold a page or two resident purged and faulted in again at every round of
   * a program that frees and allocates them, 5x mimalloc's time. So the slices not measured yet are
   * measured first, and only what is resident must fit */
  if (stale || atomic_load_explicit(&segs.measured_slices, memory_order_relaxed) <
                   atomic_load_explicit(&segs.waiting_slices, memory_order_relaxed)) {
    if (stale || atomic_load_explicit(&segs.measured_slices, memory_order_relaxed) == 0)
      atomic_store_explicit(&segs.measured_ms, now, memory_order_relaxed);
    for (hak_segment *seg = segs.all; seg != NULL; seg = seg->all_next) {
      if (pthread_mutex_trylock(&seg->slices_lock) != 0) continue;
      if (stale) forget_measured(seg, seg->measured_slices);
      measure_locked(seg);
      pthread_mutex_unlock(&seg->slices_lock);
    }
    *waiting = waiting_bytes(false);
    if (*waiting <= keep_bytes) {
      pthread_mutex_unlock(&segs.lock);
      return false;
    }
  }
  bool trimmed = false;
  for (hak_segment *seg = segs.all; seg != NULL; seg = seg->all_next) {
    if (pthread_mutex_trylock(&seg->slices_lock) != 0) continue; /* busy, or held by this thread's caller */
    uint64_t waited = seg->dirty_slices;
    /* what each slice holds, for the bound's growth should a page take it back (take_page): the measured
     * count, or the whole slice */
    for (uint64_t m = waited & ~seg->measured_slices; m != 0; m &= m - 1)
      seg->slice_resident[__builtin_ctzll(m)] = SLICE_OS_PAGES;
    purge_locked(seg, 0, true);
    waited &= seg->purged_slices;
    seg->trimmed_slices |= waited;
    trimmed |= waited != 0;
    pthread_mutex_unlock(&seg->slices_lock);
  }
  pthread_mutex_unlock(&segs.lock);
  return trimmed;
}

void hak_segments_collect(bool force) {
  uint64_t due = atomic_load_explicit(&segs.earliest_due_ms, memory_order_relaxed);
  if (!force && due == 0) return;
  uint64_t now = hak_clock_ms();
  if (!force && now < due) return;
  hak_segment *unmap = NULL;
  pthread_mutex_lock(&segs.lock);
  /* taken now and merged back at the end: an owner may set a deadline once the walk is past its segment */
  atomic_store_explicit(&segs.earliest_due_ms, 0, memory_order_seq_cst); /* before the reads: see note_due */
  if (force) {
    unmap = segs.cache;
    segs.cache = NULL;
    segs.cache_count = 0;
  }
  /* every segment: cached and abandoned ones are nobody's, and an owner that went idle would keep its
   * freed slices for good. A segment whose lock is busy (its owner taking a page) waits for the next
   * collection; so does one whose lock a fork left held by a thread the child does not have. */
  uint64_t next_due = 0;
  long delay = hak_opts.value[HAK_OPT_PURGE_DELAY_MS];
  uint64_t later = now + (uint64_t)(delay > 0 ? delay : 1);
  for (hak_segment *seg = segs.all; seg != NULL; seg = seg->all_next) {
    uint64_t due = atomic_load_explicit(&seg->purge_due_ms, memory_order_seq_cst);
    bool orphans = atomic_load_explicit(&seg->orphan_hint, memory_order_relaxed) != 0;
    if (!orphans && (due == 0 || (!force && due > now))) { /* nothing due here: no lock */
      if (due != 0 && (next_due == 0 || due < next_due)) next_due = due;
      continue;
    }
    if (pthread_mutex_trylock(&seg->slices_lock) == 0) {
      purge_locked(seg, now, force); /* forced: every waiting slice, not only those whose deadline came */
      due = atomic_load_explicit(&seg->purge_due_ms, memory_order_relaxed);
      uint64_t orphans_due = orphans && (delay >= 0 || force) ? purge_orphans_locked(seg, now, delay, force || delay <= 0) : 0;
      if (orphans_due != 0 && (due == 0 || orphans_due < due)) due = orphans_due;
      bool emptied = orphans && release_if_emptied(seg);
      pthread_mutex_unlock(&seg->slices_lock);
      if (emptied) { /* unmapped below, after the walk: it stays in `all` until then */
        seg->next = unmap;
        unmap = seg;
        continue;
      }
    } else {
      due = later;
    }
    if (due != 0 && (next_due == 0 || due < next_due)) next_due = due;
  }
  note_due(next_due);
  if (!force && segs.cache_count > SEGMENT_CACHE_MAX && hak_opts.value[HAK_OPT_PURGE_DELAY_MS] >= 0) {
    /* past the first SEGMENT_CACHE_MAX (the most recently released), purged segments are unmapped */
    hak_segment *seg = segs.cache;
    for (unsigned i = 0; i < SEGMENT_CACHE_MAX && seg != NULL; i++) seg = seg->next;
    while (seg != NULL) {
      hak_segment *next = seg->next;
      if (atomic_load_explicit(&seg->purge_due_ms, memory_order_relaxed) == 0) {
        list_remove(&segs.cache, seg);
        segs.cache_count--;
        seg->next = unmap;
        unmap = seg;
      }
      seg = next;
    }
  }
  pthread_mutex_unlock(&segs.lock);
  /* the purger may have read the deadline this walk took (above), and gone to wait untimed (a hunt) */
  if (next_due != 0) hak_purger_note_merged(next_due);
  while (unmap != NULL) {
    hak_segment *next = unmap->next;
    segment_unmap(unmap);
    unmap = next;
  }
}
