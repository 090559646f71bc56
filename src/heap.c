/* heap.c — what one thread's heap does with its pages: the page queues and the direct table, the
 * allocation slow path (full pages, new pages, segments taken over), the local-free slow path, periodic
 * maintenance that hands empty pages back, collections, and giving its pages up when its thread exits
 * (abandoned segments) or taking over a segment an exited thread left. Where heaps come from and go to
 * (the pool, thread start and exit, the late heap, sweeps, fork) is heap_pool.c. */
#include <pthread.h>
#include <sched.h>

#include "alloc.h"

/* Self-tuned maintenance interval (HAKMEM_DRAIN_INTERVAL=0): starts here; doubles (up to the max) when a
 * class that just handed a page back needs a new one, or when a pass found nothing to do; shrinks by a
 * quarter (down to the min) while empty pages or purges wait and nothing thrashes. */
#define AUTO_INTERVAL_START 64
#define AUTO_INTERVAL_MIN 16
#define AUTO_INTERVAL_MAX 4096
/* Slices of empty pages (2 MiB) a heap keeps waiting in its queues, besides each class's first page. A
 * page that its owner's free empties past this retires at once (hak_free_local_slow), once the purger
 * covers an idle program or with a purge delay of 0; past it otherwise, or with pages
 * that remote frees emptied, the next pass comes within AUTO_INTERVAL_MIN slow paths, whatever the
 * interval, and retires those empty for that long. Either way a burst of frees hands its pages to their
 * segments while it lasts, where the purger reaches them even if the thread then goes idle. Counted in
 * slices, not pages: 32 medium pages of up to 31 slices each kept 40-60 MiB of a burst resident (a
 * review). */
#define EMPTY_SLICES_KEPT 32
/* The first page of each class stays when it empties, so that a class used one block at a time does not
 * take a page from its segment and give it back at every malloc and free. For small classes (class
 * caches; pages of 64-256 KiB) always. For medium classes (pages up to 31 slices, blocks up to 512 KiB)
 * only up to EMPTY_HEAD_BYTES of what such pages hold resident (head_bytes), one page at least: past
 * that an emptied first page retires like any other, and the purger returns it while the thread sleeps
 * (where it covers idle programs: not with a purge delay of 0). Every pass looks at the pages kept, and a
 * forced one (malloc_trim) retires them.
 * Before, a thread that had used ten medium classes kept one block of each for good once idle: 1.4 MiB
 * per thread, 0.34 now (rounds 10 ms apart; glibc 0.13, jemalloc 0.23, tcmalloc 0.45, mimalloc 0.83:
 * `thread_footprint 64 0 medium`, docs/notes/2026-11-26-medium-first-pages.md). A class that takes a
 * page again within HOT_HEAD_GAP_MS of retiring its first one keeps it whenever it empties in the next
 * HOT_HEAD_KEEP_MS: without that, a loop over more classes than the bytes cover paid a retirement and a
 * new page at every turn (six classes of 2-64 KiB, 340 ns a round instead of 44). Hot classes keep theirs
 * up to HOT_HEAD_BYTES (counted as head_bytes does, at least), where they kept them whole, and a hot
 * page of up to HOT_HEAD_SMALL always (a class's small page made to retire at every round by a bigger one
 * kept before it: 40 -> 200 ns a round, a review). A thread that goes idle right after a burst of rounds
 * held 1.7 MiB with one block of each of ten sizes (16-384 KiB) a round, 6.0-6.5 with four, 12 with
 * twelve; now 1.3-1.4, 3.9-4.8 and 3.6-5.0, the rest mostly an empty page waiting under EMPTY_SLICES_KEPT
 * (`thread_footprint 32 0 medium-burst 4`: jemalloc 1.0, tcmalloc 1.7, mimalloc 2.8;
 * docs/notes/2026-11-26-hot-first-pages.md). */
#define EMPTY_HEAD_BYTES ((uint32_t)256 << 10)
#define HOT_HEAD_BYTES ((uint32_t)1 << 20)
#define HOT_HEAD_SMALL ((uint32_t)128 << 10)
#define HOT_HEAD_GAP_MS 4u /* hak_clock_ms is coarse: 4 to 8 ms with the kernel's usual 4 ms tick */
#define HOT_HEAD_KEEP_MS 1000u
#define EMPTY_HEAD 2 /* page->is_empty_listed of a medium class's first page, counted in empty_head_bytes */
/* Slow-path events between the passes that fold the counts of every page into the statistics. */
#define COUNTS_FOLD_EVENTS 1024u

hak_page hak_page_empty;
hak_heap hak_heap_empty = {.direct = {[0 ... HAK_DIRECT_COUNT - 1] = &hak_page_empty}};
__thread hak_heap *hak_tls_heap = &hak_heap_empty;

/* The direct-table entries of each class: [direct_first[c], direct_first[c + 1]). */
static uint8_t direct_first[HAK_DIRECT_CLASS_MAX + 2];

/* The most entries one class has: 8 (the 1024-byte class covers 897-1024, one entry per 16 bytes). */
#define DIRECT_SPAN_MAX 8u

static void init_direct_ranges(void) {
  for (unsigned c = HAK_MIN_CLASS + 1; c <= HAK_DIRECT_CLASS_MAX + 1; c++)
    direct_first[c] = (uint8_t)(hak_class_size(c - 1) / 16 + 1); /* classes below HAK_MIN_CLASS: no entries */
  direct_first[HAK_DIRECT_CLASS_MAX + 1] = HAK_DIRECT_COUNT; /* the last class may reach past the table */
  for (unsigned c = HAK_MIN_CLASS; c <= HAK_DIRECT_CLASS_MAX; c++)
    if (direct_first[c + 1] <= direct_first[c] || (unsigned)(direct_first[c + 1] - direct_first[c]) > DIRECT_SPAN_MAX)
      hak_fatal("internal error: direct-table span of size class", NULL, (int)c);
}

void hak_heap_init_tables(void) {
  init_direct_ranges();
  hak_class_cache_init_table();
}

/* ---- Page queues -------------------------------------------------------------------------------- */

/* Queue operations keep page->is_head true exactly for each queue's first page. */
static void queue_remove(hak_page_queue *q, hak_page *page) {
  if (page->prev) {
    page->prev->next = page->next;
  } else {
    q->first = page->next;
    if (q->first) hak_page_set_head(q->first, true);
  }
  if (page->next) page->next->prev = page->prev;
  else q->last = page->prev;
  page->next = page->prev = NULL;
  hak_page_set_head(page, false);
}

static void queue_push_front(hak_page_queue *q, hak_page *page) {
  page->prev = NULL;
  page->next = q->first;
  if (q->first) {
    q->first->prev = page;
    hak_page_set_head(q->first, false);
  } else {
    q->last = page;
  }
  q->first = page;
  hak_page_set_head(page, true);
}

static void queue_push_back(hak_page_queue *q, hak_page *page) {
  page->next = NULL;
  page->prev = q->last;
  hak_page_set_head(page, q->last == NULL);
  if (q->last) q->last->next = page;
  else q->first = page;
  q->last = page;
}

/* Point the direct-table entries of a class at the first page of its queue. Always DIRECT_SPAN_MAX
 * stores, the class's last entry written again for classes with fewer: a loop over the class's own span
 * ends after 1 to 8 rounds, and its exit branch, mispredicted at most page switches of a program that
 * mixes sizes, was a fifth of the switch's cost (random_mixed p99.9 38-39 -> 31-33 ns,
 * docs/notes/2026-11-24-performance-log.md). */
static void set_direct(hak_heap *heap, unsigned cls) {
  if (cls > HAK_DIRECT_CLASS_MAX) return;
  hak_page *page = heap->pages[cls].first ? heap->pages[cls].first : &hak_page_empty;
  unsigned first = direct_first[cls], last = direct_first[cls + 1] - 1u;
  for (unsigned i = 0; i < DIRECT_SPAN_MAX; i++) heap->direct[first + i < last ? first + i : last] = page;
}

/* ---- Reset -------------------------------------------------------------------------------------- */

void hak_heap_reset(hak_heap *heap) {
  for (unsigned i = 0; i < HAK_DIRECT_COUNT; i++) heap->direct[i] = &hak_page_empty;
  for (unsigned c = 0; c < HAK_CLASS_COUNT; c++) heap->pages[c].first = heap->pages[c].last = NULL;
  for (unsigned c = 0; c < HAK_CLASS_COUNT; c++) heap->full[c].first = heap->full[c].last = NULL;
  atomic_store_explicit(&heap->full_notified, 0, memory_order_relaxed);
  heap->empty_classes = 0;
  heap->empty_slices = 0;
  heap->empty_head_bytes = 0;
  heap->kept_heads = heap->heads_retired = heap->hot_heads = 0;
  heap->slow_events = 0;
  heap->next_maintenance = 0;
  heap->counts_folded_at = 0;
  heap->auto_interval = AUTO_INTERVAL_START;
  heap->thrash_events = 0;
  heap->retired_classes = 0;
  heap->work_pending = false;
  heap->segments = NULL;
  memset(heap->abandoned_seen, 0, sizeof heap->abandoned_seen);
  memset(heap->remote_batch, 0, sizeof heap->remote_batch); /* sent by hak_heap_retire before */
  heap->segment_count = 0;
  hak_class_cache_reset(heap);
}

/* ---- Empty pages and maintenance ----------------------------------------------------------------- */

static void rescue_full_pages(hak_heap *heap, unsigned cls);

/* What an empty first page of a medium class holds resident, at least: the blocks it surely handed out
 * (it carves its next hak_page_extend_count blocks only once all those before are in use): all but its
 * last extension, and one of that. The last one is shorter at the page's end: counted as a whole
 * extension, eight blocks of 384 KiB (capacity 5, extensions of 4) counted 768 KiB of their 1.9 MiB. */
static uint32_t head_bytes(const hak_page *page) {
  uint32_t capacity = page->capacity, bs = page->block_size;
  uint32_t first = hak_extend_count(bs, true), n = hak_extend_count(bs, false);
  uint32_t last = capacity <= first ? capacity : (capacity - first - 1) % n + 1;
  return (capacity > last ? capacity - last + 1 : 1) * bs;
}

/* Whether medium class `cls` took a page within HOT_HEAD_GAP_MS of retiring its first one, in the last
 * HOT_HEAD_KEEP_MS: then it keeps its first page when it empties (up to HOT_HEAD_BYTES). */
static bool head_is_hot(const hak_heap *heap, unsigned cls) {
  return (heap->hot_heads & ((uint64_t)1 << cls)) && (uint32_t)hak_clock_ms() - heap->head_ms[cls] < HOT_HEAD_KEEP_MS;
}

static void note_empty(hak_heap *heap, hak_page *page) {
  if (page->is_empty_listed) return;
  page->empty_since = heap->slow_events;
  if (page->is_head && page->size_class > HAK_DIRECT_CLASS_MAX) {
    /* a medium class's first page (its emptying frees take the fast path again), looked at by every
     * pass (check_kept_heads) */
    page->is_empty_listed = EMPTY_HEAD;
    heap->kept_heads |= (uint64_t)1 << page->size_class;
    heap->empty_head_noted[page->size_class] = head_bytes(page);
    heap->empty_head_bytes += heap->empty_head_noted[page->size_class];
    hak_page_update_fast_above(page);
    return;
  }
  page->is_empty_listed = 1;
  heap->empty_slices += page->slice_count;
  heap->empty_classes |= (uint64_t)1 << page->size_class;
}

static void unnote_empty(hak_heap *heap, hak_page *page) {
  if (!page->is_empty_listed) return;
  if (page->is_empty_listed == EMPTY_HEAD) {
    heap->empty_head_bytes -= heap->empty_head_noted[page->size_class];
    heap->kept_heads &= ~((uint64_t)1 << page->size_class);
  } else {
    heap->empty_slices -= page->slice_count;
  }
  page->is_empty_listed = 0;
  hak_page_update_fast_above(page);
}

static void retire_page(hak_heap *heap, hak_page *page) {
  unsigned cls = page->size_class;
  heap->retired_classes |= (uint64_t)1 << cls;
  unnote_empty(heap, page);
  queue_remove(&heap->pages[cls], page);
  set_direct(heap, cls);
  hak_segment_page_free(heap, page);
}

/* Hand back empty pages that stayed empty for at least `age` slow-path events; the first page of each
 * small class stays unless `all`. (Those of medium classes kept empty are listed apart: check_kept_heads.
 * One listed here became first when the page before it retired: a review found it kept for good, 1.9 MiB,
 * and its slices holding the passes at their fastest pace.) */
static void retire_empty_pages(hak_heap *heap, uint32_t age, bool all) {
  uint64_t classes = heap->empty_classes;
  heap->empty_classes = 0;
  while (classes) {
    unsigned cls = (unsigned)__builtin_ctzll(classes);
    classes &= classes - 1;
    hak_page *page = heap->pages[cls].first;
    while (page != NULL) {
      hak_page *next = page->next;
      if (page->is_empty_listed) {
        hak_page_collect(heap, page);
        bool old = heap->slow_events - page->empty_since >= age;
        if (page->used != 0) unnote_empty(heap, page);
        else if ((all || page != heap->pages[cls].first || cls > HAK_DIRECT_CLASS_MAX) && old) retire_page(heap, page);
        else heap->empty_classes |= (uint64_t)1 << cls;
      }
      page = next;
    }
  }
}

static bool head_is_hot(const hak_heap *heap, unsigned cls);

/* Retire the empty first page `page` of medium class `cls`; a page the class takes again within
 * HOT_HEAD_GAP_MS turns it hot (find_page). */
static void retire_head(hak_heap *heap, hak_page *page, unsigned cls) {
  heap->hot_heads &= ~((uint64_t)1 << cls);
  heap->heads_retired |= (uint64_t)1 << cls;
  heap->head_ms[cls] = (uint32_t)hak_clock_ms();
  hak_page_collect(heap, page); /* its counts go to the statistics first, as in retire_empty_pages */
  retire_page(heap, page);
}

/* The first pages of medium classes kept empty (EMPTY_HEAD_BYTES): those in use again leave the count;
 * with `all` (a forced collection), those still empty retire. With `age_out` (a maintenance pass, every
 * `age` slow-path events), where the bound applies (head_stays: the purger covers idle programs), while
 * they hold more than EMPTY_HEAD_BYTES (one page alone too: the loop below had one), those of classes
 * that are not hot retire once no block was taken from them since the counts were last flushed (every
 * pass's collection flushes them) and they were listed empty `age` events ago. A page freed once stayed
 * kept until malloc_trim otherwise, and past HOT_HEAD_BYTES with it a hot class of blocks over
 * HOT_HEAD_SMALL retired its own page at every free and took one at every malloc (twelve 128 KiB blocks
 * freed, then a loop of 200 KB malloc+free: 383 ns a pair, glibc 44, 13 without the twelve; with 40 MiB
 * live: docs/notes/2026-11-26-cold-kept-heads.md). An idle thread runs no pass: what it keeps is as
 * before. */
static void check_kept_heads(hak_heap *heap, bool all, bool age_out, uint32_t age) {
  age_out = age_out && hak_purger_covers_idle(); /* false with a purge delay of 0 too */
  for (uint64_t classes = heap->kept_heads; classes != 0; classes &= classes - 1) {
    unsigned c = (unsigned)__builtin_ctzll(classes);
    hak_page *page = heap->pages[c].first; /* a page stops being first unlisted */
    bool untouched = page->allocs == 0; /* before the collection flushes the count */
    hak_page_collect(heap, page);
    if (page->used != 0) {
      unnote_empty(heap, page);
    } else if (all) {
      retire_page(heap, page);
    } else if (age_out && untouched && heap->empty_head_bytes > EMPTY_HEAD_BYTES && !head_is_hot(heap, c) &&
               heap->slow_events - page->empty_since >= age) {
      retire_head(heap, page, c);
    }
  }
}

/* Whether enough slow-path events passed since the last maintenance for the next one to run. */
static bool maintenance_due(const hak_heap *heap) {
  return (int32_t)(heap->slow_events - heap->next_maintenance) >= 0;
}

static void heap_maintain(hak_heap *heap, bool force) {
  long interval = hak_opts.value[HAK_OPT_DRAIN_INTERVAL];
  if (interval == 0) {
    if (heap->thrash_events > 0 || !heap->work_pending) {
      heap->auto_interval = heap->auto_interval * 2 > AUTO_INTERVAL_MAX ? AUTO_INTERVAL_MAX : heap->auto_interval * 2;
    } else {
      uint32_t smaller = heap->auto_interval - heap->auto_interval / 4;
      heap->auto_interval = smaller < AUTO_INTERVAL_MIN ? AUTO_INTERVAL_MIN : smaller;
    }
    interval = heap->auto_interval;
  }
  heap->thrash_events = 0;
  heap->retired_classes = 0;
  heap->next_maintenance = heap->slow_events + (uint32_t)interval;
  hak_remote_batches_flush(heap);
  uint64_t notified = atomic_exchange_explicit(&heap->full_notified, 0, memory_order_acq_rel);
  while (notified) {
    unsigned cls = (unsigned)__builtin_ctzll(notified);
    notified &= notified - 1;
    rescue_full_pages(heap, cls);
  }
  /* lists of classes the thread stopped freeing hand their blocks back, so that their pages can empty */
  hak_class_cache_drain(heap, !force);
  /* pages empty for a whole interval retire; during a burst of frees (an early pass) those empty for
   * AUTO_INTERVAL_MIN slow paths, since a grown interval would keep the whole burst for good once the
   * program goes idle (a main thread that freed an exited worker's 60 MB: nothing retired) */
  uint32_t age = force ? 0 : heap->empty_slices >= EMPTY_SLICES_KEPT ? AUTO_INTERVAL_MIN : (uint32_t)interval;
  if (heap->empty_slices) retire_empty_pages(heap, age, force);
  if (heap->kept_heads) check_kept_heads(heap, force, true, (uint32_t)interval);
  /* pages set aside unfolded (rotate_queue) show in the statistics too; at most once per COUNTS_FOLD_EVENTS
   * slow paths, since it walks every page and a pass may come every AUTO_INTERVAL_MIN */
  if (heap->slow_events - heap->counts_folded_at >= COUNTS_FOLD_EVENTS) {
    hak_heap_flush_counts(heap);
    heap->counts_folded_at = heap->slow_events;
  }
  uint64_t now = hak_clock_ms();
  bool purge_pending = false;
  for (hak_segment *seg = heap->segments; seg != NULL; seg = seg->next) {
    purge_pending |= hak_segment_purge(seg, now, force);
  }
  heap->work_pending = purge_pending || heap->empty_slices != 0;
  hak_large_flush_last(heap, !force); /* before the collection, which may then purge it */
  hak_segments_collect(false);
  hak_large_collect(false);
}

/* ---- Allocation slow path ------------------------------------------------------------------------ */

/* A page the collection gave back while it was full, all its blocks freed by other threads (REMOTE_PURGED,
 * segment_purge.c), off its list: its slices go back to its segment (to `releasing`'s, which may release the
 * segment; NULL: kept), purged already. Its `used` blocks, the orphan target, count freed since the
 * purge (hak_segments_orphan_blocks). */
static void retire_purged_page(hak_heap *heap, hak_page *page, hak_heap *releasing) {
  hak_page_flush_counts(heap, page);
  page->used = 0;
  page->used_at_flush = 0;
  hak_segment_page_free(releasing, page);
}

/* Pages of class `cls` in the full list that received remote frees go back to the queue (its back: the
 * head is being used); pages that became empty are noted for retirement; pages the collection gave back go
 * to their segments. */
static void rescue_full_pages(hak_heap *heap, unsigned cls) {
  hak_page *page = heap->full[cls].first;
  while (page != NULL) {
    hak_page *next = page->next;
    uintptr_t word = atomic_load_explicit(&page->remote, memory_order_acquire);
    if (hak_remote_list(word) != NULL || (word & REMOTE_STATE_MASK) == REMOTE_PURGED) {
      queue_remove(&heap->full[cls], page);
      hak_page_set_full(page, false);
      if (hak_page_clear_full_state(page) == REMOTE_PURGED) { /* perhaps since the load */
        retire_purged_page(heap, page, heap);
      } else {
        hak_page_collect(heap, page);
        queue_push_back(&heap->pages[cls], page);
        if (page->used == 0 && (!page->is_head || cls > HAK_DIRECT_CLASS_MAX)) note_empty(heap, page);
      }
    }
    page = next;
  }
  set_direct(heap, cls);
}

static hak_page *scan_queue(hak_heap *heap, unsigned cls, hak_page *page, hak_page *head);
static inline hak_page *rotate_queue(hak_heap *heap, unsigned cls);

/* Whether a thread other than the caller has a heap (started and not yet exited). */
static bool other_threads_live(void) { return hak_heaps_live() > 1; }

/* Count one slow allocation (the maintenance clock and the statistics). */
static void count_slow_alloc(hak_heap *heap) {
  heap->slow_events++;
  HAK_COUNT_N(heap->counters.slow_allocs, 1);
}

/* Whether full pages of class `cls` received remote frees since the owner last looked (heap_maintain
 * and find_page clear the bit when they rescue them). */
static bool class_notified(hak_heap *heap, unsigned cls) {
  return (atomic_load_explicit(&heap->full_notified, memory_order_relaxed) & ((uint64_t)1 << cls)) != 0;
}

/* A page of class `cls` with free blocks, moved to the front of its queue; NULL when out of memory. The
 * caller counted the slow allocation. */
static hak_page *find_page(hak_heap *heap, unsigned cls) {
  if (maintenance_due(heap)) heap_maintain(heap, false);
  uint64_t bit = (uint64_t)1 << cls;
  if (class_notified(heap, cls)) {
    atomic_fetch_and_explicit(&heap->full_notified, ~bit, memory_order_acq_rel);
    rescue_full_pages(heap, cls);
  }
  hak_page_queue *q = &heap->pages[cls];
  hak_page *page = q->first, *head = page; /* heap->direct shows `head` */
  if (page != NULL) {
    /* a first page kept empty (EMPTY_HEAD_BYTES) that ran out of blocks is in use again */
    if (page->is_empty_listed == EMPTY_HEAD && page->free == NULL) unnote_empty(heap, page);
    hak_page *next = rotate_queue(heap, cls);
    if (next != NULL) return next;
  }
  for (;;) {
    hak_page *found = scan_queue(heap, cls, page, head);
    if (found != NULL) return found;
    page = hak_segment_page_alloc(heap, cls, false);
    if (page != NULL) break;
    /* No room in the heap's segments: take a segment of an exited thread. Its pages join the queues,
     * and one of this class with free blocks is used before a new page is carved anywhere. */
    hak_segment *seg = hak_segment_reclaim_one();
    if (seg == NULL && heap->segments == NULL && !hak_heaps_is_late(heap) && other_threads_live()) {
      /* A new thread about to map its first segment: a thread that just handed it its objects is often
       * a moment from exiting and abandoning a segment this one could reuse (larson: peak RSS over 9
       * runs 5.3-7.3 MiB -> 5.2-6.4, docs/notes 2026-11-23). Let it run once, then look again. (Also when
       * the segment cache holds an empty segment: adopting the abandoned one instead lets the cached one
       * be purged. Not for the shared late heap, whose mutex is held here.) */
      sched_yield();
      seg = hak_segment_reclaim_one();
    }
    if (seg == NULL) {
      page = hak_segment_page_alloc(heap, cls, true);
      break;
    }
    hak_heap_adopt(heap, seg);
    set_direct(heap, cls); /* the failed scan may have left it on a page now in the full list */
    page = head = q->first;
  }
  if (heap->retired_classes & bit) heap->thrash_events++;
  if (heap->heads_retired & bit) {
    heap->heads_retired &= ~bit;
    uint32_t now = (uint32_t)hak_clock_ms();
    if (now - heap->head_ms[cls] <= HOT_HEAD_GAP_MS) heap->hot_heads |= bit;
    heap->head_ms[cls] = now;
  }
  if (page == NULL) {
    set_direct(heap, cls);
    return NULL;
  }
  hak_page_extend(page);
  queue_push_front(q, page);
  set_direct(heap, cls);
  return page;
}

/* A page found exhausted for the first time: it goes to the queue's back, marked, for a second look. */
static void defer_exhausted(hak_heap *heap, hak_page_queue *q, hak_page *page) {
  queue_remove(q, page);
  unnote_empty(heap, page);
  page->found_exhausted = 1;
  queue_push_back(q, page);
}

/* `page`, which has free blocks, becomes the head of its class's queue and is shown in the direct table
 * (unless it is `shown`, the page the table already shows). Returns `page`. */
static hak_page *use_page(hak_heap *heap, unsigned cls, hak_page *page, hak_page *shown) {
  hak_page_queue *q = &heap->pages[cls];
  unnote_empty(heap, page);
  page->found_exhausted = 0;
  if (page != q->first) {
    queue_remove(q, page);
    queue_push_front(q, page);
  }
  if (page != shown) set_direct(heap, cls);
  return page;
}

/* The usual page switch, without the scan below: the head page of class `cls` ran dry (nothing on its
 * lists) and the page after it has blocks on its own list. The head goes to the queue's back uncollected
 * (remote frees it may hold wait until the queue comes round to it), marked found exhausted, and the next
 * page becomes the head. It takes almost all of `random_mixed`'s switches and skips the two collections
 * and the scan (p99.9 54 -> 49 ns: docs/results 2026-11-24-latency-1c17e5a and -acfe9a3).
 *
 * A head with blocks left to carve is deferred too when the next page holds at least as many free blocks
 * as one extension would carve, so freed blocks are used before new ones are carved (peak RSS, lab A/B
 * 2026-11-24: mid_large_mt 7.7 -> 6.7 MiB) without switching every few allocations between pages that
 * hold only a few (a 300-block working set of 500 B: 243 K switches in 20 M operations with the
 * threshold, 921 K without). Its found_exhausted mark does not send it to the full list, since a scan
 * carves from a page before it looks at the mark.
 *
 * The queue moves are written out for the one shape this case has (a head, a next page, a last page, no
 * page on the empty list but perhaps the next one) instead of going through queue_remove,
 * queue_push_back and use_page: with those calls the switch showed as a bump at 39-60 ns in
 * random_mixed's latency histogram and its p99.9 was 48-49 ns; written out, 23-45 ns and 38-39 ns
 * (docs/notes/2026-11-24-performance-log.md). NULL when it does not apply. */
static inline hak_page *rotate_queue(hak_heap *heap, unsigned cls) {
  hak_page_queue *q = &heap->pages[cls];
  hak_page *head = q->first;
  hak_page *next = head != NULL ? head->next : NULL;
  if (next == NULL || next->free == NULL || head->free != NULL || head->local_free != NULL ||
      head->found_exhausted || head->is_empty_listed)
    return NULL;
  if (head->capacity != head->reserved && next->capacity - next->used < hak_page_extend_count(head))
    return NULL; /* used counts remote frees not yet collected: the difference is a lower bound */
  q->first = next;
  next->prev = NULL;
  hak_page_set_head(next, true);
  hak_page *last = q->last; /* next itself in a queue of two */
  head->next = NULL;
  head->prev = last;
  last->next = head;
  q->last = head;
  hak_page_set_head(head, false);
  head->found_exhausted = 1;
  unnote_empty(heap, next);
  next->found_exhausted = 0;
  set_direct(heap, cls);
  return next;
}

/* The first page of class `cls`, from `page` on, that has free blocks (collected or carved), moved to the
 * front of the queue. A page found exhausted for the first time goes to the queue's back, where the
 * owner's frees into it stay on the fast path: a working set spread over a few pages per class refills
 * them all, and sending each exhausted page to the full list cost a slow path on its next free
 * (random_mixed: one malloc and one free in 37 each, docs/notes 2026-11-23 night). Found exhausted again,
 * it goes to the full list. NULL if no page has a free block. */
static hak_page *scan_queue(hak_heap *heap, unsigned cls, hak_page *page, hak_page *head) {
  hak_page_queue *q = &heap->pages[cls];
  hak_page *first_deferred = NULL;
  while (page != NULL && page != first_deferred) {
    hak_page *next = page->next;
    hak_page_collect(heap, page);
    if (page->free != NULL || hak_page_extend(page)) return use_page(heap, cls, page, head);
    if (!page->found_exhausted) {
      defer_exhausted(heap, q, page);
      if (first_deferred == NULL) first_deferred = page;
      page = next != NULL ? next : q->first; /* the page just moved is q->last: stop when it comes round */
      continue;
    }
    queue_remove(q, page);
    unnote_empty(heap, page);
    page->found_exhausted = 0;
    if (hak_page_set_full_state(page)) {
      hak_page_set_full(page, true);
      queue_push_front(&heap->full[cls], page);
    } else { /* remote frees arrived meanwhile */
      hak_page_collect(heap, page);
      queue_push_front(q, page);
      set_direct(heap, cls);
      return page;
    }
    page = next;
  }
  return NULL;
}

void *hak_heap_alloc_from(hak_heap *heap, unsigned cls) {
  count_slow_alloc(heap);
  hak_page *page = find_page(heap, cls);
  return page != NULL ? hak_page_pop(heap, page) : NULL;
}

void *hak_alloc_slow(hak_heap *heap, size_t size, unsigned cls) {
  if (unlikely(heap == &hak_heap_empty)) {
    if (hak_heap_thread_gone()) return hak_heaps_late_alloc(cls);
    heap = hak_heap_for_thread();
    if (heap == NULL) {
      errno = ENOMEM;
      return NULL;
    }
  }
  count_slow_alloc(heap);
  if (unlikely(hak_tls_sweep_due)) { /* an allocation path holding nothing: a sweep may start the purger */
    hak_tls_sweep_due = false;
    hak_heaps_sweep_dead();
  }
  hak_purger_start_pending(); /* first: pthread_create's own mallocs may move this class's pages */
  /* the usual case, without a call: a page switch with neither maintenance nor a rescue due first */
  hak_page *page = maintenance_due(heap) || class_notified(heap, cls) ? NULL : rotate_queue(heap, cls);
  if (page == NULL) page = find_page(heap, cls);
  if (page == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  return hak_page_pop(heap, page);
}

void hak_heap_tick(hak_heap *heap) {
  heap->slow_events++;
  if (maintenance_due(heap)) heap_maintain(heap, false);
}

hak_block *hak_page_tick(hak_heap *heap, hak_page *page, hak_block *block) {
  hak_page_collect(heap, page);
  hak_heap_tick(heap);
  return block;
}

/* ---- Free slow path ------------------------------------------------------------------------------ */

/* The owner's free emptied the first page of medium class `cls`, not kept yet (see EMPTY_HEAD_BYTES): keep
 * it, or retire it. Neither counts as a slow-path event: the heap's passes keep their pace. */
static bool head_stays(hak_heap *heap, hak_page *page, unsigned cls) {
  uint32_t others = heap->empty_head_bytes - (page->is_empty_listed == EMPTY_HEAD ? heap->empty_head_noted[cls] : 0);
  uint32_t own = head_bytes(page), kept = others + own;
  /* not with a purge delay of 0 (hak_purger_covers_idle is false then): each retirement would purge the
   * page at once, and its next use fault it in again (a review: rounds 10 ms apart, 77 -> 653 us) */
  return others == 0 || kept <= EMPTY_HEAD_BYTES ||
         ((kept <= HOT_HEAD_BYTES || own <= HOT_HEAD_SMALL) && head_is_hot(heap, cls)) || !hak_purger_covers_idle();
}

static void head_emptied(hak_heap *heap, hak_page *page, unsigned cls) {
  /* kept first pages in use again count until a pass looks: look now, before retiring this one for them
   * (a review: a class's block taken again from its kept page made another class's page retire at every
   * round, 40 -> 200 ns a round) */
  bool stays = head_stays(heap, page, cls);
  if (!stays) {
    check_kept_heads(heap, false, false, 0);
    stays = head_stays(heap, page, cls);
  }
  if (stays) {
    note_empty(heap, page);
    return;
  }
  retire_head(heap, page, cls);
}

void hak_free_local_slow(hak_heap *heap, hak_page *page, hak_block *block) {
  if (page->slice_count == 0) hak_fatal_unknown(block, true, "free of a pointer that is not an allocated block:");
  HAK_COUNT_N(heap->counters.slow_frees, 1);
  /* the head of free is a freed or a carved, never returned block; every block of a purged page was freed */
  if (page->used == 0 || block == page->free ||
      (page->in_full && hak_page_given_back(page)))
    hak_fatal("double free (or free of a block not allocated) detected of", block, page->size_class);
  hak_page_clear_fresh(page);
  hak_next_encode(page, block, page->free);
  page->free = block;
  page->used--;
  unsigned cls = page->size_class;
  if (page->in_full) {
    queue_remove(&heap->full[cls], page);
    hak_page_set_full(page, false);
    hak_page_clear_full_state(page);
    queue_push_back(&heap->pages[cls], page);
    set_direct(heap, cls);
  }
  if (page->used == 0 && page->is_head && cls > HAK_DIRECT_CLASS_MAX) {
    head_emptied(heap, page, cls);
  } else if (page->used == 0 && !page->is_head) {
    heap->slow_events++;
    /* A heap keeps empty pages of at most EMPTY_SLICES_KEPT slices waiting, besides each class's
     * first page: a page emptied past that retires now, to its segment's free slices, which the purge delay
     * governs and the purger empties even while this thread sleeps. Before, it waited to age a pass's
     * interval: the last pages of a burst of frees stayed for good once the thread went idle (a ring of
     * 1-64 KiB blocks freed, then idle: 42 MiB kept, now 18: docs/notes/2026-11-25-idle-empty-pages.md).
     * Only where that helps: with HAKMEM_PURGE_DELAY_MS=0, or once the purger (or a lone program's trims)
     * covers an idle program; below, rounds of 100 blocks of 48 KiB took their pages from the segment
     * again at each round, 13.9 -> 17.0 ns a pair (a review). Below the bound pages wait: a page that a
     * queue of a few blocks empties and refills would otherwise go through its segment each time (with a
     * delay of 0, purged and faulted in again: a review measured 8.4 -> 560 ns per step, 8,334 madvise
     * calls) */
    if (heap->empty_slices + page->slice_count >= EMPTY_SLICES_KEPT &&
        (hak_opts.value[HAK_OPT_PURGE_DELAY_MS] == 0 || hak_purger_covers_idle())) {
      hak_page_collect(heap, page); /* its counts go to the statistics first, as in retire_empty_pages */
      retire_page(heap, page);
      return;
    }
    note_empty(heap, page);
    if (heap->empty_slices >= EMPTY_SLICES_KEPT &&
        (int32_t)(heap->next_maintenance - heap->slow_events) > (int32_t)AUTO_INTERVAL_MIN)
      heap->next_maintenance = heap->slow_events + AUTO_INTERVAL_MIN;
    if (maintenance_due(heap)) heap_maintain(heap, false);
  }
}

/* ---- Thread exit: abandon; thread start: reclaim ------------------------------------------------- */

void hak_heap_adopt(hak_heap *heap, hak_segment *seg) {
  atomic_store_explicit(&seg->owner, heap, memory_order_release);
  seg->prev = NULL;
  seg->next = heap->segments;
  if (heap->segments) heap->segments->prev = seg;
  heap->segments = seg;
  heap->segment_count++;
  hak_page *page;
  for (unsigned at = 1; (page = hak_segment_next_page(seg, &at)) != NULL;) {
    hak_page_set_full(page, false);
    page->is_empty_listed = 0;
    page->found_exhausted = 0; /* a new owner's first scan gives it the second chance again */
    if (hak_page_clear_full_state(page) == REMOTE_PURGED) { /* other threads freed its blocks after its owner exited */
      retire_purged_page(heap, page, NULL);
      continue;
    }
    hak_page_collect(heap, page);
    if (page->used == 0) {
      hak_segment_page_free(NULL, page);
    } else {
      queue_push_back(&heap->pages[page->size_class], page);
      set_direct(heap, page->size_class);
    }
  }
}

/* Whether a page left with live blocks was emptied by other threads meanwhile (orphaned pages: the
 * caller asks for the collection). */
static bool abandon_queue(hak_heap *heap, hak_page_queue *q) {
  bool orphans = false;
  hak_page *page = q->first;
  while (page != NULL) {
    hak_page *next = page->next;
    /* out of the full state first, so that the collection does not take it while this thread collects */
    bool purged = hak_page_clear_full_state(page) == REMOTE_PURGED;
    if (!purged) hak_page_collect(heap, page);
    hak_page_set_full(page, false);
    page->is_empty_listed = 0;
    page->found_exhausted = 0;
    page->next = page->prev = NULL;
    hak_page_set_head(page, false);
    if (purged) retire_purged_page(heap, page, NULL);
    else if (page->used == 0) hak_segment_page_free(NULL, page);
    else orphans |= hak_page_abandon_state(hak_segment_of(page), page); /* other threads may free the rest */
    page = next;
  }
  q->first = q->last = NULL;
  return orphans;
}

void hak_heap_retire(hak_heap *heap) {
  hak_large_flush_last(heap, false);
  hak_remote_batches_flush(heap); /* first: a chain may be bound for this heap's own pages */
  hak_class_cache_drain(heap, false);
  hak_class_cache_fold(heap);
  bool orphans = false;
  for (unsigned c = 0; c < HAK_CLASS_COUNT; c++) {
    orphans |= abandon_queue(heap, &heap->pages[c]);
    orphans |= abandon_queue(heap, &heap->full[c]);
  }
  if (orphans) hak_segments_orphan_due();
  hak_segment *seg = heap->segments;
  while (seg != NULL) {
    hak_segment *next = seg->next;
    if (seg->used_pages == 0) hak_segment_release(heap, seg);
    else hak_segment_abandon(heap, seg);
    seg = next;
  }
  hak_heap_reset(heap);
}

void hak_heap_flush_counts(hak_heap *heap) {
  hak_class_cache_fold(heap);
  for (unsigned c = 0; c < HAK_CLASS_COUNT; c++) {
    for (hak_page *page = heap->pages[c].first; page != NULL; page = page->next) hak_page_flush_counts(heap, page);
    for (hak_page *page = heap->full[c].first; page != NULL; page = page->next) hak_page_flush_counts(heap, page);
  }
}

/* Collect every page of the heap, full ones included, and note the pages that turned out empty (remote
 * frees make pages empty without the owner noticing until it looks). */
static void collect_all_pages(hak_heap *heap) {
  for (unsigned cls = 0; cls < HAK_CLASS_COUNT; cls++) {
    rescue_full_pages(heap, cls);
    for (hak_page *page = heap->pages[cls].first; page != NULL; page = page->next) {
      hak_page_collect(heap, page);
      if (page->used == 0) note_empty(heap, page);
    }
  }
}

void hak_heap_collect(hak_heap *heap, bool force) {
  if (force) { /* first: what they hold goes back to the pages collected below */
    hak_remote_batches_flush(heap);     /* chains bound for this heap's own pages (segments taken over) */
    hak_class_cache_drain(heap, false); /* its blocks may be all their pages hold */
  }
  hak_heap_flush_counts(heap); /* statistics read after an explicit collect are up to date */
  if (force) collect_all_pages(heap);
  heap_maintain(heap, force);
  if (force) {
    hak_segment *seg = heap->segments;
    while (seg != NULL) {
      hak_segment *next = seg->next;
      if (seg->used_pages == 0) hak_segment_release(heap, seg);
      seg = next;
    }
  }
}

