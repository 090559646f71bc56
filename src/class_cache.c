/* class_cache.c — the slow paths of the class cache, the per-heap lists of owner-freed small blocks in
 * front of the pages (the fast paths, pop and push, are in alloc.h; the layout and its reasons in
 * internal.h): the size-to-class table, the tick, the statistics' fold, the sizing of each list's limit,
 * the double-free report and the drains at maintenance, collection and thread exit.
 *
 * A block in a list is free for the program and allocated for its page. The statistics count a pop as an
 * allocation and a push as a free; the page's own counts see a block handed back from the list as one
 * more local free, which the fold takes off again. In a forked child the lists of the parent's other
 * threads stay with their heaps, as those threads' live blocks do. */
#include "alloc.h"

uint8_t hak_direct_class[HAK_DIRECT_COUNT];

/* Blocks a list holds at most to begin with: 64, or fewer above 512 bytes so that a full list holds at
 * most 32 KiB. Each block keeps its page in use: after a shuffled burst of frees the list's blocks sit
 * in as many pages (1024-byte pages are 256 KiB). At 128 blocks and 64 KiB, 200 MB of 1000-byte blocks
 * freed in shuffled order left 52 MB resident instead of 19 (test_one_thread auto, with lists that
 * handed their oldest half back when full); at 64 and 32 KiB, 19 MB. */
#define CACHE_MAX_BLOCKS 64u
#define CACHE_MAX_BYTES ((uint32_t)32 << 10)
/* A class whose list both overflowed and ran dry for at least one in CACHE_GROW_SHARE of its pushes over
 * a window of at least HAK_CACHE_TICK_PUSHES of them (a loop that frees and reallocates batches larger
 * than the list) doubles its limit, up to CACHE_GROWN_MAX_BLOCKS and CACHE_GROWN_MAX_BYTES: at most twice
 * the pages a list at its first size can keep in use. A drain (the class idle for a maintenance pass, a
 * collection, the thread's exit) sets it back. A burst of frees alone overflows without running dry, so
 * it does not grow the list. */
#define CACHE_GROW_SHARE 16u
#define CACHE_GROWN_MAX_BLOCKS 128u
#define CACHE_GROWN_MAX_BYTES ((uint32_t)64 << 10)

void hak_class_cache_init_table(void) {
  for (size_t i = 0; i < HAK_DIRECT_COUNT; i++) hak_direct_class[i] = (uint8_t)hak_size_class(i == 0 ? 1 : i * 16);
}

static uint32_t cache_len(const hak_heap *heap, unsigned cls) {
  return (uint32_t)heap->cache[cls].counts - (HAK_CACHE_LEN_BIAS - heap->cache_state[cls].limit);
}

/* The counts word for `len` blocks and no push since the fold. */
static uint64_t counts_word(uint32_t limit, uint32_t len) {
  return ((uint64_t)(0u - HAK_CACHE_TICK_PUSHES) << 32) | (HAK_CACHE_LEN_BIAS - limit + len);
}

static uint32_t limit_within(unsigned cls, uint32_t max_blocks, uint32_t max_bytes) {
  uint32_t limit = max_bytes / (uint32_t)hak_class_size(cls);
  return limit < max_blocks ? limit : max_blocks;
}

static uint32_t base_limit(unsigned cls) {
  return HAK_CLASS_CACHE ? limit_within(cls, CACHE_MAX_BLOCKS, CACHE_MAX_BYTES) : 0;
}

/* The class's allocations and frees its pages took (the list's misses and overflows): its counts less
 * what the folds added. Blocks a drain hands back count as page frees once their pages flush: at most
 * one list's worth of overflows in the window after a drain. */
static void page_counts(const hak_heap *heap, unsigned cls, int64_t *allocs, int64_t *frees) {
  const hak_class_cache_state *st = &heap->cache_state[cls];
  *allocs = (int64_t)(atomic_load_explicit(&heap->counters.allocs[cls], memory_order_relaxed) - st->cache_allocs);
  *frees = (int64_t)(atomic_load_explicit(&heap->counters.frees[cls], memory_order_relaxed) - st->cache_frees);
}

/* Start a sizing window for the class: from here on, its pushes and its pages' counts. */
static void start_window(hak_heap *heap, unsigned cls) {
  hak_class_cache_state *st = &heap->cache_state[cls];
  st->pushes_at_window = st->pushes_seen;
  page_counts(heap, cls, &st->page_allocs_at_window, &st->page_frees_at_window);
}

void hak_class_cache_reset(hak_heap *heap) {
  for (unsigned cls = 0; cls < HAK_CACHE_CLASSES; cls++) {
    uint32_t limit = base_limit(cls);
    heap->cache_state[cls] = (hak_class_cache_state){.limit = limit};
    heap->cache[cls] = (hak_class_cache){.head = NULL, .counts = counts_word(limit, 0)};
    start_window(heap, cls); /* a reused heap's counters keep its earlier threads' counts */
  }
}

/* A new limit for the class's list, which holds `len` blocks, no more than either limit, after a fold. */
static void set_limit(hak_heap *heap, unsigned cls, uint32_t limit, uint32_t len) {
  heap->cache_state[cls].limit = limit;
  heap->cache[cls].counts = counts_word(limit, len);
}

static void fold_class(hak_heap *heap, unsigned cls) {
  hak_class_cache_state *st = &heap->cache_state[cls];
  uint64_t counts = heap->cache[cls].counts;
  uint32_t pushes = (uint32_t)(counts >> 32) + HAK_CACHE_TICK_PUSHES; /* counted from 2^32 - TICK */
  uint32_t len = cache_len(heap, cls);
  int64_t pops = (int64_t)pushes - ((int64_t)len - st->len_at_fold) - st->drained;
  int64_t frees = (int64_t)pushes - st->drained; /* the drained blocks' page frees are counted there */
  if (pops != 0) HAK_COUNT_N(heap->counters.allocs[cls], (uint64_t)pops);
  if (frees != 0) HAK_COUNT_N(heap->counters.frees[cls], (uint64_t)frees);
  st->cache_allocs += (uint64_t)pops;
  st->cache_frees += (uint64_t)frees;
  st->pushes_seen += pushes;
  st->drained = 0;
  st->len_at_fold = len;
  heap->cache[cls].counts = counts_word(st->limit, len);
}

/* The sizing rule of CACHE_GROW_SHARE, after a fold of the class, once its window holds enough pushes.
 * The pages' counts are those their last flush saw: the current page is flushed first; the others'
 * counts may land in a later window. */
static void size_list(hak_heap *heap, unsigned cls) {
  hak_class_cache_state *st = &heap->cache_state[cls];
  uint32_t pushes = st->pushes_seen - st->pushes_at_window;
  if (pushes < HAK_CACHE_TICK_PUSHES) return;
  hak_page *current = heap->pages[cls].first;
  if (current != NULL) hak_page_flush_counts(heap, current);
  int64_t allocs, frees;
  page_counts(heap, cls, &allocs, &frees);
  int64_t misses = allocs - st->page_allocs_at_window, overflows = frees - st->page_frees_at_window;
  start_window(heap, cls);
  uint32_t grown_max = limit_within(cls, CACHE_GROWN_MAX_BLOCKS, CACHE_GROWN_MAX_BYTES);
  int64_t share = (int64_t)(pushes / CACHE_GROW_SHARE);
  if (misses >= share && overflows >= share && st->limit < grown_max) {
    uint32_t limit = st->limit * 2 < grown_max ? st->limit * 2 : grown_max;
    set_limit(heap, cls, limit, cache_len(heap, cls));
  }
}

void hak_class_cache_fold(hak_heap *heap) {
  if (!HAK_CLASS_CACHE) return;
  for (unsigned cls = 0; cls < HAK_CACHE_CLASSES; cls++) {
    fold_class(heap, cls);
    size_list(heap, cls);
  }
}

static hak_page *page_of_block(const hak_block *block) { return hak_segment_page_of(hak_segment_of(block), block); }

void hak_class_cache_double_free(const hak_block *block) {
  hak_fatal("double free (or free of a block not allocated) detected of", block, page_of_block(block)->size_class);
}

void hak_class_cache_tick(hak_heap *heap, hak_block *block) {
  hak_class_cache_fold(heap);
  /* as the page tick does: its remote frees, checked. Not a page in the full list: its remote frees are
   * what tells the owner to take it back (rescue_full_pages), and collected here they would not. */
  hak_page *page = page_of_block(block);
  if (!page->in_full) hak_page_collect(heap, page);
  hak_heap_tick(heap);
}

/* Hand every block of the class's list back to its page, and set its limit back to the first size: a
 * drain ends the pattern a grown limit served. The list is emptied first: a page free may run
 * maintenance, which drains lists too. */
static void drain_class(hak_heap *heap, unsigned cls) {
  hak_class_cache *cache = &heap->cache[cls];
  hak_block *list = cache->head;
  uint32_t n = cache_len(heap, cls);
  cache->head = NULL;
  cache->counts -= n;
  heap->cache_state[cls].drained += n;
  if (heap->cache_state[cls].limit != base_limit(cls)) {
    fold_class(heap, cls);
    set_limit(heap, cls, base_limit(cls), 0);
  }
  start_window(heap, cls);
  while (list != NULL) {
    hak_block *next = list->next;
    hak_page_free_owned(heap, page_of_block(list), list);
    list = next;
  }
}

void hak_class_cache_drain(hak_heap *heap, bool idle_only) {
  if (!HAK_CLASS_CACHE) return;
  for (unsigned cls = 0; cls < HAK_CACHE_CLASSES; cls++) {
    if (idle_only) {
      hak_class_cache_state *st = &heap->cache_state[cls];
      fold_class(heap, cls);
      bool idle = st->pushes_seen == st->pushes_at_pass;
      st->pushes_at_pass = st->pushes_seen;
      if (!idle) {
        size_list(heap, cls);
        continue;
      }
    }
    drain_class(heap, cls);
  }
}

bool hak_class_cache_is_head(const hak_heap *heap, const hak_segment *seg, const void *p) {
  unsigned slot = seg->slice_cache_slot[hak_segment_slice_of(p)];
  return slot != 0 && heap->cache[slot - 1].head == p;
}
