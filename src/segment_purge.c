/* segment_purge.c — giving the segments' free slices back to the OS: the purge of a segment's slices
 * once their delay has passed, the collection over every mapped segment (run by the purger and the
 * maintenance passes, under each segment's slices_lock) that also unmaps the segment cache past
 * SEGMENT_CACHE_MAX, trims that measure what waits with mincore and purge it all, and orphaned pages.
 * The segments themselves, their pages and their lists are segment.c. */
#include <errno.h>
#include <pthread.h>

#include "segment_internal.h"

#define SLICE_OS_PAGES (HAK_SLICE_SIZE / HAK_OS_PAGE)

/* The slices in `bits` stop waiting (taken by a page, purged or unmapped): drop what a trim measured of
 * them from the totals (slices_lock held, or the segment is nobody's). */
void hak_segment_forget_measured(hak_segment *seg, uint64_t bits) {
  uint64_t measured = bits & seg->measured_slices, absent = 0;
  if (measured == 0) return;
  seg->measured_slices &= ~bits;
  hak_counter_add(&hak_segs.measured_slices, (uint64_t)0 - (uint64_t)__builtin_popcountll(measured));
  for (; measured != 0; measured &= measured - 1)
    absent += SLICE_OS_PAGES - seg->slice_resident[__builtin_ctzll(measured)];
  hak_counter_add(&hak_segs.absent_pages, (uint64_t)0 - absent);
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
  hak_counter_add(&hak_segs.measured_slices, (uint64_t)__builtin_popcountll(todo));
  hak_counter_add(&hak_segs.absent_pages, absent);
}

/* Return the free slices in `slices` to the OS, a system call per contiguous run (slices_lock held).
 * Locked memory (mlockall, mlock), where madvise fails with EINVAL, is replaced by read-only zero memory
 * instead, and so is every purge while segments are mapped read-only (hak_os_mappings_populated). */
void hak_segment_purge_slices(hak_segment *seg, uint64_t slices) {
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
  hak_segment_forget_measured(seg, slices);
  if (read_resident(seg, slices)) return;
  for (uint64_t left = slices; left != 0; left &= left - 1) seg->slice_resident[__builtin_ctzll(left)] = SLICE_OS_PAGES;
}

/* The dirty free slices in `dirty` that were freed too recently for a deadline purge at `now_ms`: those
 * with over a quarter of the delay in force still to wait (the quarter lets slices freed close together
 * go in one purge). Their earliest deadline goes to *next_due (0: none). */
uint64_t hak_segment_young_slices(const hak_segment *seg, uint64_t dirty, uint64_t now_ms, uint64_t *next_due) {
  uint64_t delay = (uint64_t)hak_learned_delay_in_force(&hak_segs.delay, now_ms), young = 0, next = 0;
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
void hak_segment_purge_locked(hak_segment *seg, uint64_t now_ms, bool force) {
  uint64_t dirty = seg->dirty_slices & seg->free_slices;
  uint64_t due = atomic_load_explicit(&seg->purge_due_ms, memory_order_relaxed), next_due = 0;
  if (dirty == 0 || (!force && (due == 0 || now_ms < due))) return;
  if (!force) dirty &= ~hak_segment_young_slices(seg, dirty, now_ms, &next_due);
  if (dirty == 0) { /* all of them freed since (the oldest were taken again, or the delay grew) */
    atomic_store_explicit(&seg->purge_due_ms, next_due, memory_order_relaxed);
    return;
  }
  bool learn = !force && !hak_purger_alone();
  if (learn) count_resident(seg, dirty);
  hak_segment_purge_slices(seg, dirty);
  if (learn) { /* by the deadline: taking these back teaches the delay, by what they held resident */
    uint64_t purged = dirty & seg->purged_slices, pages = 0;
    seg->deadline_purged_slices |= purged;
    for (uint64_t m = purged; m != 0; m &= m - 1) pages += seg->slice_resident[__builtin_ctzll(m)];
    hak_learned_delay_note_purged(&hak_segs.delay, now_ms, pages * HAK_OS_PAGE);
  }
  hak_counter_add(&hak_segs.waiting_slices, (uint64_t)0 - (uint64_t)__builtin_popcountll(dirty));
  hak_segment_forget_measured(seg, dirty);
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
 * back so is unmapped (hak_segment_release_if_emptied). A page that leaves the full state drops its
 * hint. A purge drops the page's remote list unread: in hardened builds its blocks' freed tags are not
 * checked again (docs/security.md). */

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
        purge |= run_mask(at, hak_segment_slices_for_class(page->size_class));
        atomic_fetch_add_explicit(&hak_segs.orphaned_pages, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&hak_segs.orphan_blocks[page->size_class], target, memory_order_relaxed);
      } else
        seg->orphan_waited |= bit; /* changed meanwhile: one more look */
      if (purge & bit) continue;
    }
    keep |= bit;
    if (next == 0 || due < next) next = due;
  }
  hak_segment_purge_slices(seg, purge); /* one call per run of neighbouring pages */
  atomic_fetch_and_explicit(&seg->orphan_seen, ~unseen, memory_order_relaxed);
  atomic_fetch_or_explicit(&seg->orphan_seen, newly_seen, memory_order_relaxed);
  if (keep != 0) atomic_fetch_or_explicit(&seg->orphan_hint, keep, memory_order_relaxed);
  return next;
}

uint64_t hak_segments_orphaned_pages(void) { return atomic_load_explicit(&hak_segs.orphaned_pages, memory_order_relaxed); }
uint64_t hak_segments_orphan_blocks(unsigned cls) {
  return atomic_load_explicit(&hak_segs.orphan_blocks[cls], memory_order_relaxed);
}


bool hak_segment_purge(hak_segment *seg, uint64_t now_ms, bool force) {
  uint64_t due = atomic_load_explicit(&seg->purge_due_ms, memory_order_relaxed);
  if (!force && (due == 0 || now_ms < due)) return due != 0; /* nothing due: no lock */
  pthread_mutex_lock(&seg->slices_lock);
  hak_segment_purge_locked(seg, now_ms, force);
  bool pending = atomic_load_explicit(&seg->purge_due_ms, memory_order_relaxed) != 0;
  pthread_mutex_unlock(&seg->slices_lock);
  return pending;
}

uint64_t hak_segments_purge_due(void) {
  return atomic_load_explicit(&hak_segs.earliest_due_ms, memory_order_relaxed);
}

uint64_t hak_segments_waiting_bytes(void) { return waiting_bytes(false); }

bool hak_segments_trim(uint64_t keep_bytes, uint64_t *waiting) {
  /* counts older than a purge delay are taken again (measure_locked): until then the slices count whole */
  uint64_t now = hak_clock_ms(), delay = (uint64_t)hak_opts.value[HAK_OPT_PURGE_DELAY_MS];
  bool stale = atomic_load_explicit(&hak_segs.measured_slices, memory_order_relaxed) != 0 &&
               now - atomic_load_explicit(&hak_segs.measured_ms, memory_order_relaxed) > delay;
  *waiting = waiting_bytes(stale);
  if (*waiting <= keep_bytes) return false;
  pthread_mutex_lock(&hak_segs.lock);
  /* blocks larger than an OS page may have had a few bytes written (64 KiB-aligned blocks of 100 B):
   * counted whole, slices that hold a page or two resident purged and faulted in again at every round of
   * a program that frees and allocates them, 5x mimalloc's time. So the slices not measured yet are
   * measured first, and only what is resident must fit */
  if (stale || atomic_load_explicit(&hak_segs.measured_slices, memory_order_relaxed) <
                   atomic_load_explicit(&hak_segs.waiting_slices, memory_order_relaxed)) {
    if (stale || atomic_load_explicit(&hak_segs.measured_slices, memory_order_relaxed) == 0)
      atomic_store_explicit(&hak_segs.measured_ms, now, memory_order_relaxed);
    for (hak_segment *seg = hak_segs.all; seg != NULL; seg = seg->all_next) {
      if (pthread_mutex_trylock(&seg->slices_lock) != 0) continue;
      if (stale) hak_segment_forget_measured(seg, seg->measured_slices);
      measure_locked(seg);
      pthread_mutex_unlock(&seg->slices_lock);
    }
    *waiting = waiting_bytes(false);
    if (*waiting <= keep_bytes) {
      pthread_mutex_unlock(&hak_segs.lock);
      return false;
    }
  }
  bool trimmed = false;
  for (hak_segment *seg = hak_segs.all; seg != NULL; seg = seg->all_next) {
    if (pthread_mutex_trylock(&seg->slices_lock) != 0) continue; /* busy, or held by this thread's caller */
    uint64_t waited = seg->dirty_slices;
    /* what each slice holds, for the bound's growth should a page take it back (take_page): the measured
     * count, or the whole slice */
    for (uint64_t m = waited & ~seg->measured_slices; m != 0; m &= m - 1)
      seg->slice_resident[__builtin_ctzll(m)] = SLICE_OS_PAGES;
    hak_segment_purge_locked(seg, 0, true);
    waited &= seg->purged_slices;
    seg->trimmed_slices |= waited;
    trimmed |= waited != 0;
    pthread_mutex_unlock(&seg->slices_lock);
  }
  pthread_mutex_unlock(&hak_segs.lock);
  return trimmed;
}

void hak_segments_collect(bool force) {
  uint64_t due = atomic_load_explicit(&hak_segs.earliest_due_ms, memory_order_relaxed);
  if (!force && due == 0) return;
  uint64_t now = hak_clock_ms();
  if (!force && now < due) return;
  hak_segment *unmap = NULL;
  pthread_mutex_lock(&hak_segs.lock);
  /* taken now and merged back at the end: an owner may set a deadline once the walk is past its segment */
  atomic_store_explicit(&hak_segs.earliest_due_ms, 0, memory_order_seq_cst); /* before the reads: see note_due */
  if (force) {
    unmap = hak_segs.cache;
    hak_segs.cache = NULL;
    hak_segs.cache_count = 0;
  }
  /* every segment: cached and abandoned ones are nobody's, and an owner that went idle would keep its
   * freed slices for good. A segment whose lock is busy (its owner taking a page) waits for the next
   * collection; so does one whose lock a fork left held by a thread the child does not have. */
  uint64_t next_due = 0;
  long delay = hak_opts.value[HAK_OPT_PURGE_DELAY_MS];
  uint64_t later = now + (uint64_t)(delay > 0 ? delay : 1);
  for (hak_segment *seg = hak_segs.all; seg != NULL; seg = seg->all_next) {
    uint64_t due = atomic_load_explicit(&seg->purge_due_ms, memory_order_seq_cst);
    bool orphans = atomic_load_explicit(&seg->orphan_hint, memory_order_relaxed) != 0;
    if (!orphans && (due == 0 || (!force && due > now))) { /* nothing due here: no lock */
      if (due != 0 && (next_due == 0 || due < next_due)) next_due = due;
      continue;
    }
    if (pthread_mutex_trylock(&seg->slices_lock) == 0) {
      hak_segment_purge_locked(seg, now, force); /* forced: every waiting slice, not only those whose deadline came */
      due = atomic_load_explicit(&seg->purge_due_ms, memory_order_relaxed);
      uint64_t orphans_due = orphans && (delay >= 0 || force) ? purge_orphans_locked(seg, now, delay, force || delay <= 0) : 0;
      if (orphans_due != 0 && (due == 0 || orphans_due < due)) due = orphans_due;
      bool emptied = orphans && hak_segment_release_if_emptied(seg);
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
  if (!force && hak_segs.cache_count > SEGMENT_CACHE_MAX && hak_opts.value[HAK_OPT_PURGE_DELAY_MS] >= 0) {
    /* past the first SEGMENT_CACHE_MAX (the most recently released), purged segments are unmapped */
    hak_segment *seg = hak_segs.cache;
    for (unsigned i = 0; i < SEGMENT_CACHE_MAX && seg != NULL; i++) seg = seg->next;
    while (seg != NULL) {
      hak_segment *next = seg->next;
      if (atomic_load_explicit(&seg->purge_due_ms, memory_order_relaxed) == 0) {
        list_remove(&hak_segs.cache, seg);
        hak_segs.cache_count--;
        seg->next = unmap;
        unmap = seg;
      }
      seg = next;
    }
  }
  pthread_mutex_unlock(&hak_segs.lock);
  /* the purger may have read the deadline this walk took (above), and gone to wait untimed (a hunt) */
  if (next_due != 0) hak_purger_note_merged(next_due);
  while (unmap != NULL) {
    hak_segment *next = unmap->next;
    hak_segment_unmap(unmap);
    unmap = next;
  }
}
