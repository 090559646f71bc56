/* page.c — the free lists of one page: carving fresh blocks, collecting owner and remote frees, the
 * lock-free remote push, and the full/notified state machine kept in the low bits of page->remote. */
#include "alloc.h"

void hak_page_init(hak_page *page, hak_segment *seg, unsigned slice, unsigned slices, unsigned cls, uintptr_t key,
                   uintptr_t canary_key, bool zeroed) {
  size_t bs = hak_class_size(cls);
  page->free = NULL;
  page->local_free = NULL;
  page->used = 0;
  page->fresh = zeroed && cls > HAK_DIRECT_CLASS_MAX; /* before the fast-path threshold is set below */
  page->block_size = (uint32_t)bs;
  hak_page_set_full(page, false);
  page->size_class = (uint8_t)cls;
  page->slice_count = (uint8_t)slices;
  page->is_empty_listed = 0;
  page->found_exhausted = 0;
  hak_page_set_head(page, false);
  page->capacity = 0;
  atomic_store_explicit(&page->remote, 0, memory_order_relaxed);
  page->start = (uint8_t *)seg + ((size_t)slice << HAK_SLICE_SHIFT);
  page->reserved = (uint32_t)(((size_t)slices << HAK_SLICE_SHIFT) / bs);
  page->divisor_magic = UINT64_MAX / bs + 1;
  page->span = page->reserved * (uint32_t)bs;
  page->block_limit = (page->span - (uint32_t)bs) / 16 + 1;
  page->allocs = 0;
  page->used_at_flush = 0;
  page->empty_since = 0;
  page->next = page->prev = NULL;
  page->key = key;
  page->canary_key = canary_key;
}

#if HAK_SECURE
void *hak_report_corrupt_link(const hak_page *page, const hak_block *b) {
  hak_fatal("free-list corruption (a freed block was overwritten, or freed twice after a write to it) at", b,
            page->size_class);
}
#endif

bool hak_page_extend(hak_page *page) {
  uint32_t left = page->reserved - page->capacity;
  if (left == 0) return false;
  size_t bs = page->block_size;
  uint32_t n = hak_page_extend_count(page);
  if (n > left) n = left;
  uint8_t *first = page->start + (size_t)page->capacity * bs;
  /* One pass: each block gets its link and, in hardened builds, its canary and freed tag (carved blocks
   * are free: freeing one before malloc returned it is caught). */
  for (uint32_t i = 0; i < n; i++) {
    hak_block *b = (hak_block *)(first + (size_t)i * bs);
#if HAK_SECURE
    uintptr_t canary = hak_canary(page, b);
    *hak_canary_word(page, b) = canary;
    *hak_freed_tag(b) = canary;
#endif
    hak_next_encode(page, b, i + 1 < n ? (hak_block *)((uint8_t *)b + bs) : page->free);
  }
  page->free = (hak_block *)first;
  page->capacity += n;
  return true;
}

/* Take the whole remote list and its length, keeping the state bits. */
static hak_block *take_remote(hak_page *page, uint32_t *count) {
  uintptr_t old = atomic_load_explicit(&page->remote, memory_order_relaxed);
  while (hak_remote_list(old) != NULL) {
    if (atomic_compare_exchange_weak_explicit(&page->remote, &old, old & REMOTE_STATE_MASK, memory_order_acquire,
                                              memory_order_relaxed)) {
      *count = hak_remote_count(old);
      return hak_remote_list(old);
    }
  }
  return NULL;
}

static hak_block *list_tail(const hak_page *page, hak_block *list) {
  /* No list is longer than the page's carved blocks: a link written back into its own list (a use after
   * free; no key needed in hardened builds, docs/security.md) makes a cycle, which would walk forever. In
   * hardened builds every block of a free list also carries its freed tag. */
  hak_block *next;
  uint32_t steps = 0;
  while ((next = hak_next_decode(page, list)) != NULL) {
    bool corrupt = ++steps >= page->capacity;
#if HAK_SECURE
    corrupt |= !hak_secure_pop_ok(page, next);
#endif
    if (unlikely(corrupt)) hak_fatal("free-list corruption (a freed block was overwritten) at", list, page->size_class);
    list = next;
  }
  return list;
}

void hak_page_flush_counts(hak_heap *heap, hak_page *page) {
  uint32_t allocs = page->allocs, local_frees = allocs - (page->used - page->used_at_flush);
  HAK_COUNT_N(heap->counters.allocs[page->size_class], allocs);
  HAK_COUNT_N(heap->counters.frees[page->size_class], local_frees);
  page->allocs = 0;
  page->used_at_flush = page->used;
}

/* Normally O(1): called when `free` is empty, the owner's list becomes `free` and the remote list
 * (whose length travels in the remote word) is parked in `local_free`. Lists are walked only when both
 * places are taken. */
void hak_page_collect(hak_heap *heap, hak_page *page) {
  hak_page_flush_counts(heap, page);
  if (page->local_free != NULL) {
    hak_page_clear_fresh(page);
    if (page->free != NULL) hak_next_encode(page, list_tail(page, page->local_free), page->free);
    page->free = page->local_free;
    page->local_free = NULL;
  }
  uint32_t n = 0;
  hak_block *list = take_remote(page, &n);
  if (list == NULL) return;
  hak_page_clear_fresh(page);
  if (unlikely(n > page->used)) hak_fatal("double free (remote) detected in page of", list, page->size_class);
  page->used -= n;
  page->used_at_flush = page->used;
  HAK_COUNT_N(heap->counters.collected[page->size_class], n);
  if (page->free == NULL) {
    page->free = list;
  } else {
    page->local_free = list;
  }
}

/* Remote frees by threads without a heap: exiting threads, or a heap that could not be mapped. */
static _Atomic uint64_t orphan_remote_frees;

uint64_t hak_orphan_remote_frees(void) { return atomic_load_explicit(&orphan_remote_frees, memory_order_relaxed); }

/* Frees into one abandoned segment after which the freeing thread takes the segment over. */
#define ADOPT_AFTER_FREES 64

/* A free into `seg`, a segment of an exited thread: whether this thread has now taken it over
 * (hak_heap_adopt), so that this free and the next ones into it are local and its pages go back to the
 * OS once empty, as its own do. Left abandoned, pages that other threads emptied stayed resident until
 * some thread needed room, which an idle program never does (test_reclaim asleep). Only a thread that
 * has freed many of its blocks takes it over, in any order (a table slot per segment: counting frees in
 * a row missed every shuffled order): the remote frees of everyone else then wait for that thread's slow
 * paths, so a thread that frees a few blocks here and there and then idles must not become the owner
 * (test_reclaim pool). Two segments sharing a slot restart each other's count. */
static bool adopt_on_free(hak_heap *heap, hak_segment *seg, uint32_t frees) {
  unsigned slot = (unsigned)((uintptr_t)seg >> HAK_CHUNK_SHIFT) & (HAK_ADOPT_SLOTS - 1);
  if (heap->abandoned_seen[slot].seg != (uintptr_t)seg) {
    heap->abandoned_seen[slot].seg = (uintptr_t)seg;
    heap->abandoned_seen[slot].frees = 0;
  }
  heap->abandoned_seen[slot].frees += frees;
  if (heap->abandoned_seen[slot].frees < ADOPT_AFTER_FREES || !hak_segment_reclaim(seg)) return false;
  heap->abandoned_seen[slot].seg = 0;
  hak_heap_adopt(heap, seg);
  return true;
}

/* Publish the chain first..last of `n` blocks of `page` (linked with the page's encoding; last's link
 * is set here) on the page's remote list with one CAS, or free them here if this thread takes the
 * segment over. Once the CAS has published the chain, the owner may collect it, free the page and unmap
 * the segment at any moment: everything needed from the page and segment is read before, and afterwards
 * only heap structures (never unmapped) are touched. */
static void push_chain(hak_heap *heap, hak_segment *seg, hak_page *page, hak_block *first, hak_block *last,
                       uint32_t n, bool may_adopt) {
  if (unlikely(heap == &hak_heap_empty) && may_adopt) heap = hak_heap_for_counting();
  hak_heap *owner = atomic_load_explicit(&seg->owner, memory_order_acquire);
  if (owner == NULL && may_adopt && heap != &hak_heap_empty && adopt_on_free(heap, seg, n)) {
    for (hak_block *b = first;; ) { /* each link is read before its block's free writes over it */
      hak_block *next = b == last ? NULL : hak_next_decode(page, b);
      hak_free_local_slow(heap, page, b);
      if (next == NULL) break;
      b = next;
    }
    return;
  }
  uint64_t class_bit = (uint64_t)1 << page->size_class;
  /* acquire: a full state read here comes with its orphan target */
  uintptr_t old = atomic_load_explicit(&page->remote, memory_order_acquire), state, next;
  bool empties;
  do {
    state = old & REMOTE_STATE_MASK;
    hak_block *head = hak_remote_list(old);
    if (unlikely(first == head || state == REMOTE_PURGED)) hak_fatal("double free detected of", first, page->size_class);
    hak_next_encode(page, last, head);
    next = hak_remote_word(first, hak_remote_count(old) + n, state == REMOTE_FULL ? REMOTE_NOTIFIED : state);
    /* A full page's live blocks are all out (its owner's free blocks do not count: an exited owner's
     * target says so): this chain holds the last of them when the list holds all the others (while one
     * waits in the owner's class cache or in a thread's batch, the count never gets there). Noted before
     * the CAS, after which the segment may go. */
    empties = state != REMOTE_NORMAL &&
              hak_remote_count(next) == atomic_load_explicit(&page->orphan_target, memory_order_relaxed);
    if (unlikely(empties)) hak_segment_note_orphan(seg, page);
  } while (!atomic_compare_exchange_weak_explicit(&page->remote, &old, next, memory_order_release, memory_order_acquire));
  if (unlikely(empties)) hak_segments_orphan_due();
  if (heap != &hak_heap_empty) HAK_COUNT_N(heap->counters.remote_frees, n);
  else atomic_fetch_add_explicit(&orphan_remote_frees, n, memory_order_relaxed);
  /* An owner read before the CAS may be stale (the segment changed hands in a window of a few
   * instructions); a stray bit is harmless, and the new owner still collects the page at its next forced
   * collection (hak_collect(true), malloc_trim) or when its thread exits. */
  if (state == REMOTE_FULL && owner != NULL) atomic_fetch_or_explicit(&owner->full_notified, class_bit, memory_order_release);
}

/* Send the slot's chain on behalf of `heap` and empty the slot (first: the push may run this heap's
 * maintenance). */
static void flush_batch(hak_heap *heap, hak_remote_batch *rb, bool may_adopt) {
  hak_page *page = rb->page;
  hak_block *first = rb->first, *last = rb->last;
  uint32_t n = rb->count;
  rb->page = NULL;
  rb->first = rb->last = NULL;
  rb->count = 0;
  push_chain(heap, hak_segment_of(page), page, first, last, n, may_adopt);
}

void hak_remote_batches_flush(hak_heap *heap) {
  if (!HAK_REMOTE_CHAINS) return;
  for (unsigned i = 0; i < HAK_REMOTE_BATCH_SLOTS; i++)
    if (heap->remote_batch[i].page != NULL) flush_batch(heap, &heap->remote_batch[i], true);
}

/* The blocks of a chain of a thread the fork did not copy, counted from `first` to `last`; 0 when they
 * do not lead there within HAK_REMOTE_BATCH_MAX blocks of the page. That thread may have been between two
 * stores of hak_page_remote_free: a new slot's page set and its first block not yet (a review: the child
 * sent a chain of NULL, "double free detected of 0x0": 14 children of 3000 in its program, 23 of 2000 in
 * tests/c/fork_chains.c), or a block linked and its
 * count not yet raised. Its stores come in program order (a signal fence there keeps the compiler's),
 * so the chain read here is one it held, or none. */
static uint32_t frozen_chain_length(const hak_remote_batch *rb) {
  const hak_page *page = rb->page;
  hak_block *b = rb->first;
  if (page->slice_count == 0 || b == NULL || rb->last == NULL) return 0;
  for (uint32_t n = 1; n <= HAK_REMOTE_BATCH_MAX; n++) {
    if (!hak_page_block_range(page, (uintptr_t)b)) return 0;
    if (b == rb->last) return n;
    b = hak_next_decode(page, b);
  }
  return 0;
}

void hak_remote_batches_flush_frozen(hak_heap *frozen, hak_heap *self) {
  if (!HAK_REMOTE_CHAINS) return;
  for (unsigned i = 0; i < HAK_REMOTE_BATCH_SLOTS; i++) {
    hak_remote_batch *rb = &frozen->remote_batch[i];
    if (rb->page == NULL) continue;
    rb->count = frozen_chain_length(rb);
    if (rb->count != 0) {
      flush_batch(self, rb, self != &hak_heap_empty);
    } else { /* its blocks stay counted in use: a leak in this process only */
      rb->page = NULL;
      rb->first = rb->last = NULL;
    }
  }
}

/* Blocks of a class a chain holds before it is sent. */
static uint32_t batch_limit(const hak_page *page) {
  uint32_t n = HAK_REMOTE_BATCH_BYTES / page->block_size;
  return n < 1 ? 1 : n > HAK_REMOTE_BATCH_MAX ? HAK_REMOTE_BATCH_MAX : n;
}

void hak_page_remote_free(hak_heap *heap, hak_segment *seg, hak_page *page, hak_block *block) {
  if (unlikely(page->slice_count == 0)) hak_fatal_unknown(block, true, "free of a pointer that is not an allocated block:");
  /* A segment its owner left (abandoned) has no owner to spare a CAS on a line it writes: its frees go at
   * once, so that a thread that frees an exited one's last blocks and then sleeps does not hold their
   * pages in its chains (orphaned pages, segment_purge.c; test_reclaim abandoned, 1,000-byte blocks: 5.8 -> 3.8 MiB left of 100) */
  if (!HAK_REMOTE_CHAINS || heap == &hak_heap_empty || page->size_class > HAK_DIRECT_CLASS_MAX ||
      atomic_load_explicit(&seg->owner, memory_order_relaxed) == NULL) {
    push_chain(heap, seg, page, block, block, 1, true);
    return;
  }
  /* a slot per page: descriptors are 256 bytes apart within a segment */
  hak_remote_batch *rb = &heap->remote_batch[((uintptr_t)page >> 8) & (HAK_REMOTE_BATCH_SLOTS - 1)];
  if (rb->page != page) {
    /* every block of a page the collection gave back was freed, and its memory may be read-only zeroes
     * (mlockall): refused before the link is written (a review: a segfault, or a report only when the
     * chain went). A page with a chain waiting is not given back. */
    if (unlikely(hak_page_given_back(page)))
      hak_fatal("double free detected of", block, page->size_class);
    if (rb->page != NULL) flush_batch(heap, rb, true);
    rb->page = page;
    rb->last = block;
    rb->limit = batch_limit(page);
  } else if (unlikely(block == rb->first || block == rb->last)) {
    /* freed again while its chain waits: at the head, or at the end, whose link would be set to the
     * newer blocks and then, when sent, over them (the blocks between lost, their page's count wrong) */
    hak_fatal("double free detected of", block, page->size_class);
  }
  hak_next_encode(page, block, rb->first);
  atomic_signal_fence(memory_order_release); /* the slot and the link before `first`, for a fork's child */
  rb->first = block;
  if (++rb->count >= rb->limit) flush_batch(heap, rb, true);
}

bool hak_page_set_full_state(hak_page *page) {
  atomic_store_explicit(&page->orphan_target, page->reserved, memory_order_relaxed); /* no free block in it */
  uintptr_t old = atomic_load_explicit(&page->remote, memory_order_relaxed);
  do {
    if (hak_remote_list(old) != NULL) return false; /* frees arrived: not full after all */
  } while (!atomic_compare_exchange_weak_explicit(&page->remote, &old, REMOTE_FULL, memory_order_acq_rel,
                                                  memory_order_relaxed));
  return true;
}

/* The notified state, not the full one: a remote free that read the page full with an empty list while its
 * owner lived (and the target `reserved`) would otherwise find the same word again after the owner took
 * the page out of the full state, collected nothing and put it back, and its CAS would succeed with the
 * stale target: the page's last free noted nothing, and the page and its segment stayed for good (a
 * review). A live page is never notified with an empty list (the owner takes a full page's list only after
 * clearing its state), and a block the owner collected is not freed again by then. */
bool hak_page_abandon_state(hak_segment *seg, hak_page *page) {
  atomic_store_explicit(&page->orphan_target, page->used, memory_order_relaxed);
  uintptr_t old = atomic_load_explicit(&page->remote, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(&page->remote, &old,
                                                (old & ~(uintptr_t)REMOTE_STATE_MASK) | REMOTE_NOTIFIED,
                                                memory_order_acq_rel, memory_order_relaxed)) {
  }
  if (hak_remote_count(old) != page->used) return false;
  hak_segment_note_orphan(seg, page); /* freed since the collection before: no free will note it */
  return true;
}

uintptr_t hak_page_clear_full_state(hak_page *page) {
  uintptr_t old = atomic_load_explicit(&page->remote, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(&page->remote, &old, old & ~(uintptr_t)REMOTE_STATE_MASK,
                                                memory_order_acq_rel, memory_order_relaxed)) {
  }
  return old & REMOTE_STATE_MASK;
}
