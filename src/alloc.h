/* alloc.h — the fast paths of malloc and free, inlined into the public entry points (api.c) and into
 * the standard-name overrides (override.c). Everything here is lock-free and touches only the calling
 * thread's heap, the page of the block and the pagemap. Anything unusual goes to a slow path. */
#ifndef HAK_ALLOC_H
#define HAK_ALLOC_H

#include <errno.h>
#include <string.h>

#include "internal.h"

#if HAK_SECURE
/* Hardened builds keep two words per small/medium block:
 * - the canary, the block's last word, holds hak_canary() from carving on and is never written again: a
 *   free that finds it changed reports an overflow from the block into its neighbour;
 * - the freed tag, the block's second word, holds the same value while the block is free (malloc checks
 *   and clears it): a free that finds it reports a double free, a malloc that misses it a corrupted list. (Equal values let free test both words against one
 *   register; the tag tells a reader of a freed block nothing its canary would not.)
 * The classes of hardened builds start at 32 bytes, so the two never share a word. malloc writes only the
 * line it reads the free-list link from; free reads the canary's line but writes only the first line,
 * which the link goes to anyway (a block's last line is not written back and forth between threads). */
static inline uintptr_t hak_canary(const hak_page *page, const void *block) {
  return page->canary_key ^ (uintptr_t)block;
}

static inline uintptr_t *hak_canary_word(const hak_page *page, const hak_block *b) {
  return (uintptr_t *)((uint8_t *)b + page->block_size - HAK_CANARY_SIZE);
}

static inline uintptr_t *hak_freed_tag(hak_block *b) { return (uintptr_t *)b + 1; }

/* A popped block loses its freed tag and its encoded link (left in place, the link and the block's
 * address gave away the page's free-list key to a reader of fresh memory: a review forged a link with
 * it). */
static inline void *hak_secure_on_alloc(hak_block *b) {
  b->next = NULL;
  *hak_freed_tag(b) = 0;
  return b;
}

/* Whether a block about to be popped carries its freed tag. A block on a free list always does; one that
 * does not was freed twice after its tag was overwritten (the second free took it for live), or is not a
 * free block at all: a link flipped by a use-after-free write decodes, with the xor encoding, to the
 * address it was flipped to, so the range test alone let a few written bytes hand out a live block
 * again (a review's reproducer: the same two blocks returned forever). */
static inline bool hak_secure_pop_ok(const hak_page *page, const hak_block *b) {
  return *hak_freed_tag((hak_block *)b) == hak_canary(page, b);
}

/* Decode the link of free block `b`, which malloc is popping; false when it leads out of b's segment
 * (and is not the end of the list). The next pop reads the freed tag of what it leads to, which any
 * address of the segment but a free block of this page fails (but for a 2^-64 chance, without the
 * keys), and every address of a segment is readable up to its guard (HAK_SEGMENT_GUARD): so the pop
 * needs no test against the page's block starts (hak_next_decode_checked, which the list walks keep).
 * Two loads and two instructions fewer per malloc: `pair` 0.916 with the free's change below, hardened
 * builds, docs/notes/2026-11-26-hardened-link-and-realistic.md. */
static inline bool hak_secure_pop_link(const hak_page *page, const hak_block *b, hak_block **next) {
  uintptr_t n = hak_next_decoded(page, b);
  *next = (hak_block *)n;
  return likely((n ^ (uintptr_t)b) < HAK_SEGMENT_SIZE) || n == 0;
}
#endif

/* Allocations from one page without a slow path after which the owner takes one anyway (collecting the
 * page's remote frees, flushing its counters, running maintenance when due): blocks freed by their
 * owner go straight back on `free`, so a steady loop could otherwise run on one page forever. */
#define HAK_PAGE_TICK_ALLOCS 4096u

/* One allocation in page->used_allocs: `used` (low half) and `allocs` (high half) both grow by one. */
#define HAK_ONE_ALLOC (((uint64_t)1 << 32) | 1)

#if HAK_SECURE
/* Report a corrupted free-list link found at `b` (page.c); never returns, but is declared as returning so
 * that the fast paths reach it with a jump and need no stack frame of their own. */
__attribute__((cold, returns_nonnull)) void *hak_report_corrupt_link(const hak_page *page, const hak_block *b);
#endif

/* Pop a block from the page's free list; NULL if empty. Every call the fast path makes is a tail call. */
static inline void *hak_page_pop(hak_heap *heap, hak_page *page) {
  hak_block *b = page->free;
  if (unlikely(b == NULL)) return NULL;
#if HAK_SECURE
  hak_block *next;
  if (unlikely(!hak_secure_pop_link(page, b, &next) || !hak_secure_pop_ok(page, b)))
    return hak_report_corrupt_link(page, b);
  page->free = next;
  hak_secure_on_alloc(b);
#else
  page->free = hak_next_decode(page, b);
#endif
  uint64_t used_allocs = page->used_allocs + HAK_ONE_ALLOC;
  page->used_allocs = used_allocs;
  if (unlikely((uint32_t)(used_allocs >> 32) == HAK_PAGE_TICK_ALLOCS)) return hak_page_tick(heap, page, b);
  return b;
}

/* malloc for sizes up to HAK_MEDIUM_MAX (already including the canary in hardened builds). */
static inline void *hak_alloc_inline(size_t size) {
  hak_heap *heap = hak_tls_heap;
  if (likely(size <= HAK_SMALL_MAX)) {
    size_t idx = hak_direct_index(size);
#if HAK_CLASS_CACHE
    hak_class_cache *cache = &heap->cache[hak_direct_class[idx]];
    hak_block *b = cache->head;
    if (likely(b != NULL)) {
      cache->head = b->next;
      cache->counts--; /* the low half is above the bias here: no borrow */
      return b;
    }
#endif
    hak_page *page = heap->direct[idx];
    void *p = hak_page_pop(heap, page);
    if (likely(p != NULL)) return p;
    return hak_alloc_slow(heap, size, hak_size_class(size));
  }
  unsigned cls = hak_size_class(size);
  hak_page *page = heap->pages[cls].first;
  if (page != NULL) {
    void *p = hak_page_pop(heap, page);
    if (likely(p != NULL)) return p;
  }
  return hak_alloc_slow(heap, size, cls);
}

/* Full malloc: tiers by size, large tier above HAK_MEDIUM_MAX. */
static inline void *hak_malloc_inline(size_t size) {
  if (likely(size <= HAK_MEDIUM_MAX - HAK_CANARY_SIZE)) return hak_alloc_inline(size + HAK_CANARY_SIZE);
  return hak_large_alloc(size, 0, false);
}

__attribute__((noinline, cold)) void hak_free_other(void *p);


#if HAK_SECURE
/* Report a free that failed the checks below: not a block start, a double free or an overflow (secure.c).
 * Never returns; declared as returning so that free reaches it with a jump (no stack frame in free). */
__attribute__((cold)) void hak_secure_bad_free(const hak_page *page, hak_block *b);
/* The same report for realloc and the usable-size calls, which read a block without freeing it. */
__attribute__((cold, noreturn)) void hak_secure_bad_use(const hak_page *page, const void *p);

/* Hardened builds: whether `b` is a live block of `page`: its canary is intact and it carries no freed tag
 * (so it is a block start, but for a 2^-64 chance, and not freed). Writes nothing. */
static inline bool hak_secure_is_live(const hak_page *page, const hak_block *b) {
  uintptr_t expected = hak_canary(page, b);
  return (*hak_canary_word(page, b) == expected) & (*hak_freed_tag((hak_block *)b) != expected);
}

/* Hardened builds, on every free: whether the block fails its checks (then nothing was written). It
 * passes when the canary is intact and the block carries no freed tag; it then gets one. The canary
 * depends on the block's address, so a pointer that is not a block start fails it too (but for a 2^-64
 * chance). Both reads stay in the segment's mapping for any pointer into the segment, whatever page
 * descriptor covers it (HAK_SEGMENT_GUARD), so no range test comes first. secure.c tells the faults
 * apart. */
static inline bool hak_secure_free_fails(hak_page *page, hak_block *b) {
  if (unlikely(!hak_secure_is_live(page, b))) return true;
  *hak_freed_tag(b) = hak_canary(page, b);
  return false;
}
#endif

/* The owner's free of `b` onto its page's list. */
static inline __attribute__((always_inline)) void hak_page_free_owned(hak_heap *heap, hak_page *page, hak_block *b) {
  uint64_t used_allocs = page->used_allocs;
  uint32_t used = (uint32_t)used_allocs;
  /* the last test catches an immediate double free in default builds; hardened builds found it before */
  if (unlikely(used <= page->free_fast_above || (!HAK_SECURE && b == page->free))) {
    hak_free_local_slow(heap, page, b);
    return;
  }
  hak_next_encode(page, b, page->free);
  page->free = b;
  page->used_allocs = used_allocs - 1; /* used >= 1 here: the low half does not borrow */
}

/* The owner's free of small block `b` onto its class's cache (see internal.h); false when the list is
 * full (then the block goes to its page: a burst of frees passes by the list, which keeps its blocks).
 * Default builds only. */
static inline __attribute__((always_inline)) bool hak_class_cache_push(hak_heap *heap, hak_class_cache *cache,
                                                                      hak_block *b) {
  hak_block *head = cache->head;
  uint64_t counts = cache->counts;
  if (unlikely(b == head)) hak_class_cache_double_free(b); /* an immediate double free */
  if (unlikely((int32_t)counts < 0)) return false; /* full: the low half's sign bit */
  b->next = head;
  cache->head = b;
  bool tick = __builtin_add_overflow(counts, HAK_CACHE_PUSH, &counts);
  cache->counts = counts;
  if (__builtin_expect_with_probability(tick, 1, 1.0 / HAK_CACHE_TICK_PUSHES)) hak_class_cache_tick(heap, b);
  return true;
}

/* free. */
static inline __attribute__((always_inline)) void hak_free_inline(void *p) {
  hak_segment *seg = hak_segment_of(p);
  if (unlikely(hak_pagemap_get(p) != (void *)seg || p == NULL)) {
    hak_free_other(p);
    return;
  }
  hak_block *b = (hak_block *)p;
  hak_heap *heap = hak_tls_heap;
  bool owned = atomic_load_explicit(&seg->owner, memory_order_relaxed) == heap;
#if HAK_CLASS_CACHE
  /* the class cache's slot comes from the segment header, next to the slice's page index: no descriptor
   * is read (LIFO: the next malloc of the class reuses b while it is in the CPU's cache) */
  size_t slot = seg->slice_cache_slot[hak_segment_slice_of(p)];
  if (likely(owned && slot != 0)) {
    if (likely(hak_class_cache_push(heap, &heap->cache[slot - 1], b))) return;
  }
#endif
  hak_page *page = hak_segment_page_of(seg, p);
#if HAK_SECURE
  /* opaque to the compiler, which otherwise computes the descriptor's address twice (once for the
   * checks' fields, once for the list's): two instructions per free */
  __asm__("" : "+r"(page));
  if (unlikely(hak_secure_free_fails(page, b))) {
    hak_secure_bad_free(page, b);
    return;
  }
#endif
  if (likely(owned)) {
    hak_page_free_owned(heap, page, b);
  } else {
    hak_page_remote_free(heap, seg, page, b);
  }
}

/* Usable size of a block known to be ours, or 0 for NULL; aborts on a pointer that is not ours. */
size_t hak_usable_size_of(const void *p);

#endif
