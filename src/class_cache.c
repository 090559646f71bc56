/* class_cache.c — the slow paths of the class cache, the per-heap lists of owner-freed small blocks in
 * front of the pages (the fast paths, pop and push, are in alloc.h; the layout and its reasons in
 * internal.h): the size-to-class table, the tick, the statistics' fold, the double-free report and the
 * drains at maintenance, collection and thread exit.
 *
 * A block in a list is free for the program and allocated for its page. The statistics count a pop as an
 * allocation and a push as a free; the page's own counts see a block handed back from the list as one
 * more local free, which the fold takes off again. In a forked child the lists of the parent's other
 * threads stay with their heaps, as those threads' live blocks do. */
#include "alloc.h"

uint8_t hak_direct_class[HAK_DIRECT_COUNT];

/* Blocks a list holds at most: 64, or fewer above 512 bytes so that a full list holds at most 32 KiB.
 * Each block keeps its page in use: after a shuffled burst of frees the list's blocks sit in as many
 * pages (1024-byte pages are 256 KiB). At 128 blocks and 64 KiB, 200 MB of 1000-byte blocks freed in
 * shuffled order left 52 MB resident instead of 19 (test_one_thread auto, with lists that handed their
 * oldest half back when full); at 64 and 32 KiB, 19 MB. */
#define CACHE_MAX_BLOCKS 64u
#define CACHE_MAX_BYTES ((uint32_t)32 << 10)

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

void hak_class_cache_reset(hak_heap *heap) {
  for (unsigned cls = 0; cls < HAK_CACHE_CLASSES; cls++) {
    uint32_t limit = 0;
    if (HAK_CLASS_CACHE) {
      limit = CACHE_MAX_BYTES / (uint32_t)hak_class_size(cls);
      if (limit > CACHE_MAX_BLOCKS) limit = CACHE_MAX_BLOCKS;
    }
    heap->cache_state[cls] = (hak_class_cache_state){.limit = limit};
    heap->cache[cls] = (hak_class_cache){.head = NULL, .counts = counts_word(limit, 0)};
  }
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
  st->pushes_seen += pushes;
  st->drained = 0;
  st->len_at_fold = len;
  heap->cache[cls].counts = counts_word(st->limit, len);
}

void hak_class_cache_fold(hak_heap *heap) {
  if (!HAK_CLASS_CACHE) return;
  for (unsigned cls = 0; cls < HAK_CACHE_CLASSES; cls++) fold_class(heap, cls);
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

/* Hand every block of the class's list back to its page. The list is emptied first: a page free may run
 * maintenance, which drains lists too. */
static void drain_class(hak_heap *heap, unsigned cls) {
  hak_class_cache *cache = &heap->cache[cls];
  hak_block *list = cache->head;
  if (list == NULL) return;
  uint32_t n = cache_len(heap, cls);
  cache->head = NULL;
  cache->counts -= n;
  heap->cache_state[cls].drained += n;
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
      if (!idle) continue;
    }
    drain_class(heap, cls);
  }
}

bool hak_class_cache_is_head(const hak_heap *heap, const hak_segment *seg, const void *p) {
  unsigned slot = seg->slice_cache_slot[hak_segment_slice_of(p)];
  return slot != 0 && heap->cache[slot - 1].head == p;
}
