/* segment.c — 4 MiB segments and their 64 KiB slices: mapping and unmapping segments, carving pages out
 * of a heap's segments and giving their slices back, and the process-wide lists: every mapped segment,
 * the cache of empty segments and the abandoned segments of exited threads. Purging the free slices
 * (the collection, trims and orphaned pages) is segment_purge.c; what the two share, segment_internal.h. */
#include <emmintrin.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "segment_internal.h"

/* slice_page of free slices: each its own */
static const uint8_t slice_identity[HAK_SLICES] = {
    0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
    22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43,
    44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63};
/* slice_class of a slice no page has used yet */
#define SLICE_NEVER_USED 0xff

struct hak_segs hak_segs = {.lock = PTHREAD_MUTEX_INITIALIZER};

void hak_segments_lock(void) { pthread_mutex_lock(&hak_segs.lock); }
void hak_segments_unlock(void) { pthread_mutex_unlock(&hak_segs.lock); }
void hak_segments_after_fork_child(void) {
  pthread_mutex_init(&hak_segs.lock, NULL);
  /* a segment's lock held by a thread the child does not have would be held for good (the collection
   * would skip that segment at every pass, never idle); only this thread runs here */
  uint64_t now = hak_clock_ms(), earliest = 0;
  hak_learned_delay_after_fork(&hak_segs.delay, now);
  /* the child starts from the option's delay: deadlines its parent set with a learned one come closer */
  long delay = hak_opts.value[HAK_OPT_PURGE_DELAY_MS];
  for (hak_segment *seg = hak_segs.all; seg != NULL; seg = seg->all_next) {
    pthread_mutex_init(&seg->slices_lock, NULL);
    uint64_t due = atomic_load_explicit(&seg->purge_due_ms, memory_order_relaxed);
    if (due != 0 && delay > 0 && due > now + (uint64_t)delay) {
      due = now + (uint64_t)delay;
      atomic_store_explicit(&seg->purge_due_ms, due, memory_order_relaxed);
    }
    if (due != 0 && (earliest == 0 || due < earliest)) earliest = due;
  }
  atomic_store_explicit(&hak_segs.earliest_due_ms, earliest, memory_order_relaxed);
}
uint64_t hak_segments_reclaimed(void) { return atomic_load_explicit(&hak_segs.reclaimed, memory_order_relaxed); }

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
unsigned hak_segment_slices_for_class(unsigned cls) {
  size_t bs = hak_class_size(cls);
  if (bs <= 512) return 1;
  if (cls <= HAK_DIRECT_CLASS_MAX) return 4;
  size_t n = (bs * 32 + HAK_SLICE_SIZE - 1) / HAK_SLICE_SIZE;
  return n > HAK_MAX_PAGE_SLICES ? HAK_MAX_PAGE_SLICES : (unsigned)n;
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
  pthread_mutex_lock(&hak_segs.lock);
  seg->all_next = hak_segs.all;
  if (hak_segs.all != NULL) hak_segs.all->all_prev = seg;
  hak_segs.all = seg;
  pthread_mutex_unlock(&hak_segs.lock);
  return seg;
}

/* The latest segments given back to the OS, each with the class of the last page on each of its slices:
 * a later free of a pointer into one is a use after free whose class can still be named, where the page
 * map alone would call the pointer never returned. For reports only: read without a lock. 256 (18 KiB):
 * exited threads' segments go back together once other threads free their blocks
 * (hak_segment_release_if_emptied), and with 16 a double free into the 17th latest was called a pointer
 * hakmem never returned (a review: 40 threads). */
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

/* Unmap `seg`, which no list but `all` holds any more; the caller holds no lock. */
void hak_segment_unmap(hak_segment *seg) {
  pthread_mutex_lock(&hak_segs.lock);
  if (seg->all_prev != NULL) seg->all_prev->all_next = seg->all_next;
  else hak_segs.all = seg->all_next;
  if (seg->all_next != NULL) seg->all_next->all_prev = seg->all_prev;
  pthread_mutex_unlock(&hak_segs.lock);
  hak_counter_add(&hak_segs.waiting_slices, (uint64_t)0 - (uint64_t)__builtin_popcountll(seg->dirty_slices));
  hak_segment_forget_measured(seg, seg->dirty_slices);
  remember_unmapped(seg);
  hak_pagemap_set(seg, NULL);
  uncount_and_unmap(seg);
}

/* A page takes back `purged` slices, which their deadline purged, and `kept` ones, dirty and not purged
 * since (slices_lock held): the slices' delay learns from them (purge_delay.c), purged ones by the pages
 * they held resident, kept ones whole. The clock is read only when there is something to learn: purged
 * slices, or kept ones while a learned delay stands. */

static void learn_from_take(const hak_segment *seg, uint64_t purged, uint64_t kept) {
  if (!hak_learned_delay_stands(&hak_segs.delay)) kept = 0;
  if ((purged | kept) == 0) return;
  uint64_t now = hak_clock_ms(), delay = (uint64_t)hak_opts.value[HAK_OPT_PURGE_DELAY_MS];
  hak_slices_taken taken = {0};
  for (; purged != 0; purged &= purged - 1) {
    unsigned i = (unsigned)__builtin_ctzll(purged);
    uint64_t interval = hak_learned_delay_interval(&hak_segs.delay, now, seg->slice_freed_ms[i]);
    uint64_t bytes = (uint64_t)seg->slice_resident[i] * HAK_OS_PAGE;
    if (interval == 0 || bytes == 0) continue;
    taken.purged_bytes += bytes;
    taken.purged_kib_ms += (bytes >> 10) * interval;
  }
  for (; kept != 0; kept &= kept - 1) {
    uint64_t interval = hak_learned_delay_interval(&hak_segs.delay, now, seg->slice_freed_ms[__builtin_ctzll(kept)]);
    if (interval <= delay) continue;
    taken.kept_bytes += HAK_SLICE_SIZE;
    if (interval > taken.kept_max_ms) taken.kept_max_ms = interval;
  }
  if ((taken.purged_bytes | taken.kept_bytes) == 0) return;
  taken.live_bytes = hak_segments_used_bytes();
  taken.waiting_bytes = waiting_bytes(false);
  hak_learned_delay_note_slices(&hak_segs.delay, now, &taken);
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
  if (waited) hak_counter_add(&hak_segs.waiting_slices, (uint64_t)0 - (uint64_t)__builtin_popcountll(waited));
  hak_segment_forget_measured(seg, waited);
  hak_counter_add(&hak_segs.used_slices, n);
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
 * blocks larger than an OS page, the run's dirty slices whose own deadline has come
 * (hak_segment_young_slices) are purged first (the next maintenance pass would purge them anyway): the
 * old blocks' touched pages would otherwise stay resident between the new blocks' touched ones. Slices
 * freed since are taken as they are: purged at once, vectors grown by realloc, whose blocks move up
 * from class to class, had every page purged and faulted in again (1000 vectors grown by 16 B to 256
 * KiB: 359 K page faults and 1.08 s against 83 K and 0.64 s; docs/notes/2026-11-25-class-migration.md). */
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
        hak_segment_purge_slices(seg, stale & ~hak_segment_young_slices(seg, stale, now, &next_due));
      }
      hak_page *page = take_page(heap, seg, (unsigned)at, n, cls);
      pthread_mutex_unlock(&seg->slices_lock);
      return page;
    }
  }
  return NULL;
}

hak_page *hak_segment_page_alloc(hak_heap *heap, unsigned cls, bool add_segment) {
  unsigned n = hak_segment_slices_for_class(cls);
  hak_page *page = page_from_owned_segments(heap, cls, n);
  if (page != NULL) hak_purger_note_growth(); /* its slices may have been purged: committed again */
  if (page != NULL || !add_segment) return page;
  pthread_mutex_lock(&hak_segs.lock);
  hak_segment *seg = hak_segs.cache;
  if (seg != NULL) {
    list_remove(&hak_segs.cache, seg);
    hak_segs.cache_count--;
  }
  pthread_mutex_unlock(&hak_segs.lock);
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
  if (delay > 0) delay = hak_learned_delay_in_force(&hak_segs.delay, now);
  pthread_mutex_lock(&seg->slices_lock);
  /* the slices of a page the collection gave back (an orphaned page, above) are purged already */
  uint64_t dirty = bits & ~seg->purged_slices;
  seg->free_slices |= bits;
  seg->dirty_slices |= dirty;
  for (unsigned i = at; i < at + n; i++) seg->slice_freed_ms[i] = now;
  hak_counter_add(&hak_segs.waiting_slices, (uint64_t)__builtin_popcountll(dirty));
  hak_counter_add(&hak_segs.used_slices, (uint64_t)0 - n);
  if (dirty != 0 && delay == 0) {
    hak_segment_purge_locked(seg, 0, true);
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
  pthread_mutex_lock(&hak_segs.lock);
  list_push(&hak_segs.cache, seg);
  note_due(seg_due);
  long delay = hak_opts.value[HAK_OPT_PURGE_DELAY_MS];
  if (++hak_segs.cache_count > (delay == 0 ? SEGMENT_CACHE_MAX : SEGMENT_CACHE_HARD_MAX) && delay >= 0) {
    for (evict = hak_segs.cache; evict->next != NULL; evict = evict->next) {
    }
    list_remove(&hak_segs.cache, evict);
    hak_segs.cache_count--;
  }
  uint64_t due = seg_due, cached_bytes = (uint64_t)hak_segs.cache_count * HAK_SEGMENT_SIZE;
  pthread_mutex_unlock(&hak_segs.lock);
  if (evict != NULL) hak_segment_unmap(evict);
  if (due != 0) hak_purger_note(due, cached_bytes);
}

/* Take `seg` off the abandoned list (hak_segs.lock held). */
static void unabandon_locked(hak_segment *seg) {
  list_remove(&hak_segs.abandoned, seg);
  seg->abandoned = false;
  atomic_fetch_sub_explicit(&hak_segs.abandoned_count, 1, memory_order_relaxed);
}

/* An abandoned segment whose every page went back as an orphan holds no live block, so no free ever
 * counts towards taking it over (page.c), and only a thread short of room would: it stayed mapped, its
 * never-used slices counted committed (500 threads that left a block each, all freed: 2 GiB mapped,
 * 1.9 GiB committed, for good). Such a segment's pages are unset and it leaves the abandoned list
 * (hak_segs.lock and its slices_lock held; abandoned, so no thread changes its pages, and a free into it
 * now is a double free, reported from the page map). True if so: the caller unmaps it once it has
 * dropped the locks (hak_segment_unmap). */
bool hak_segment_release_if_emptied(hak_segment *seg) {
  if (!seg->abandoned || seg->used_pages == 0) return false;
  hak_page *page;
  for (unsigned at = 1; (page = hak_segment_next_page(seg, &at)) != NULL;)
    if (!hak_page_given_back(page)) return false;
  for (unsigned at = 1; (page = hak_segment_next_page(seg, &at)) != NULL;) {
    hak_counter_add(&hak_segs.used_slices, (uint64_t)0 - page->slice_count);
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
  pthread_mutex_lock(&hak_segs.lock);
  list_push(&hak_segs.abandoned, seg);
  seg->abandoned = true;
  note_due(due);
  atomic_fetch_add_explicit(&hak_segs.abandoned_count, 1, memory_order_relaxed);
  /* the collection may have given its last pages back while this thread left them (heap.c) */
  pthread_mutex_lock(&seg->slices_lock);
  bool emptied = hak_segment_release_if_emptied(seg);
  pthread_mutex_unlock(&seg->slices_lock);
  uint64_t held = (uint64_t)(hak_segs.cache_count + atomic_load_explicit(&hak_segs.abandoned_count, memory_order_relaxed)) *
                  HAK_SEGMENT_SIZE;
  pthread_mutex_unlock(&hak_segs.lock);
  if (emptied) hak_segment_unmap(seg);
  else if (due != 0) hak_purger_note(due, held);
}

/* A thread takes `seg` off the abandoned list to adopt it (hak_segs.lock held): counted reclaimed. */
static void take_over_locked(hak_segment *seg) {
  unabandon_locked(seg);
  atomic_fetch_add_explicit(&hak_segs.reclaimed, 1, memory_order_relaxed);
}

hak_segment *hak_segment_reclaim_one(void) {
  if (atomic_load_explicit(&hak_segs.abandoned_count, memory_order_relaxed) == 0) return NULL;
  pthread_mutex_lock(&hak_segs.lock);
  hak_segment *seg = hak_segs.abandoned;
  if (seg != NULL) take_over_locked(seg);
  pthread_mutex_unlock(&hak_segs.lock);
  return seg;
}

bool hak_segment_reclaim(hak_segment *seg) {
  pthread_mutex_lock(&hak_segs.lock);
  bool taken = seg->abandoned;
  if (taken) take_over_locked(seg);
  pthread_mutex_unlock(&hak_segs.lock);
  return taken;
}

uint64_t hak_segments_used_bytes(void) {
  return atomic_load_explicit(&hak_segs.used_slices, memory_order_relaxed) << HAK_SLICE_SHIFT;
}
