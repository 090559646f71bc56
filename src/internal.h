/* internal.h — the data structures of libhakmem and the design they implement.
 *
 * DESIGN
 * ------
 * Memory comes from the OS (os.c) in two shapes:
 *
 *   Segments: 4 MiB, 4 MiB-aligned, cut into 64 slices of 64 KiB. Slice 0 holds the segment header,
 *   which contains one page descriptor per slice. A *page* is a run of 1..31 slices carrying blocks of
 *   one size class (size_class.h): classes up to 512 bytes use one slice, the direct table's larger
 *   classes (640-1280 bytes) four, larger classes a run sized to hold about 32 blocks (segment.c). A
 *   segment belongs to exactly one thread heap, its owner.
 *
 *   Large mappings: requests above 512 KiB (or with alignment above 64 KiB) get a mapping of their own
 *   with a one-page header in front, 4 MiB-aligned (large.c). Freed ones go to a process-wide cache
 *   and are reused by later requests of similar size; cached memory is returned to the OS in batches
 *   after HAKMEM_PURGE_DELAY_MS.
 *
 * Every chunk of 4 MiB that contains blocks is registered in the pagemap (pagemap.h), so free() finds
 * the header of any pointer in O(1), and a pointer hakmem never returned is recognised as such.
 *
 * Thread heaps (heap.c; the pool they come from, heap_pool.c): each thread has a heap, reached through
 * one initial-exec TLS load. A heap has, per size class, a queue of pages with free blocks and a list of
 * full pages, and a direct table that maps every request size up to 1040 bytes (in steps of 16) to the
 * page currently used for its class.
 *
 * Each page keeps three free lists:
 *   free        blocks ready to hand out (owner only, no atomics); the owner's frees go straight back
 *               here (LIFO), so a malloc after a free reuses a block still in cache;
 *   local_free  collected remote frees parked while `free` is not empty (owner only);
 *   remote      blocks freed by other threads: a lock-free stack, one CAS per push; its two low bits
 *               hold the page's full-state (see REMOTE_* below).
 *
 * In front of the pages of each class of the direct table, a heap keeps (default builds) a *class cache*:
 * a short list of blocks its own thread freed, whatever their page (class_cache.c; see hak_class_cache).
 *
 * malloc(24) (alloc.h): heap = TLS; pop heap->cache[class of 24]; if that list is empty, page =
 * heap->direct[(24 + 15) / 16] and pop page->free. When that list is empty too the slow path (heap.c)
 * collects local_free and remote into free, carves more blocks, moves an exhausted page to the back of
 * its queue (the first time) or to the full list (the second), or takes a new page from one of the
 * heap's segments.
 *
 * free(p) (alloc.h): header = pagemap[p]; if it is a segment whose owner is this thread's heap, push p
 * on its class cache (when that list is full, and for larger classes, on page->free); otherwise push it on page->remote. Since the owner's frees can keep a list from ever
 * running dry, every 4096 allocations from a page, and every 4096 pushes on a class cache, without a slow
 * path take one anyway (hak_page_tick, hak_class_cache_tick).
 * When a page in the full list receives a remote free, the freeing thread sets the class's bit in its
 * owner's `full_notified` mask, so the owner looks at its full pages again only when one of them has
 * something to give.
 *
 * Thread exit (heap_pool.c's key destructor, heap.c's hak_heap_retire): the class caches are emptied
 * and the heap's pages collected; empty pages and segments go back; segments that still hold live blocks
 * are *abandoned* to a global list, with their owner cleared. A thread that has freed 64 of their blocks
 * *reclaims* the segment (page.c), and so does a heap that needs a new page.
 *
 * Memory goes back to the OS in three places, always after the purge delay: free slices of a segment
 * (MADV_DONTNEED or MADV_FREE of the run), empty segments in the global segment cache (unmapped when
 * the cache is full), and cached large mappings. The owning threads' maintenance passes do it while
 * they allocate; the background purger (purger.c) purges the large cache and every segment's free slices
 * when the program goes idle.
 *
 * Hardened builds (HAK_SECURE=1, libhakmem-secure.so) store free-list pointers xored with a per-page key
 * and the block's address, end every small/medium block with a canary
 * written once at carving (overflows), mark free blocks with a tag in their second word (double
 * frees), and check that a freed pointer is the start of a block through the address-dependent canary
 * (each segment is followed by an untouched guard, HAK_SEGMENT_GUARD, so that read needs no range test).
 */
#ifndef HAK_INTERNAL_H
#define HAK_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hakmem.h"
#include "os.h"
#include "pagemap.h"
#include "size_class.h"

#ifndef HAK_SECURE
#define HAK_SECURE 0
#endif

#define HAK_API __attribute__((visibility("default")))
/* malloc and free start on a cache line: where the linker happened to put them moved the hot pair by
 * 4 % between two builds whose fast paths were the same instructions (docs/notes, 2026-11-23 evening). */
#define HAK_HOT_ENTRY __attribute__((aligned(64)))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* ---- Geometry -------------------------------------------------------------------------------------- */
#define HAK_SEGMENT_SIZE HAK_CHUNK_SIZE /* 4 MiB */
#define HAK_SLICE_SHIFT 16
#define HAK_SLICE_SIZE ((size_t)1 << HAK_SLICE_SHIFT) /* 64 KiB */
#define HAK_SLICES (HAK_SEGMENT_SIZE / HAK_SLICE_SIZE) /* 64, slice 0 is the header */
#define HAK_MAX_PAGE_SLICES 31 /* two of the largest pages fit a segment's 63 free slices */
#define HAK_LARGE_ALIGN_MAX HAK_SLICE_SIZE /* larger alignments go to the large tier */

/* Canary bytes reserved at the end of every small/medium block in hardened builds. */
#define HAK_CANARY_SIZE (HAK_SECURE ? sizeof(uintptr_t) : 0)
/* Hardened builds map this much more read-write memory after each segment and never touch it (it costs
 * address space, not memory). A hardened free reads the canary at p + block_size - 8 before it knows
 * that p is a block start: for any p in a segment, whatever page descriptor covers it, that read stays
 * inside the mapping, so the check needs no range test first. */
#define HAK_SEGMENT_GUARD (HAK_SECURE ? HAK_MEDIUM_MAX : 0)

enum { HAK_KIND_SEGMENT = 0x5e67u, HAK_KIND_LARGE = 0x1a26eu };

/* States kept in the two low bits of page->remote. */
enum {
  REMOTE_NORMAL = 0,   /* page is in its class queue */
  REMOTE_FULL = 1,     /* page is in the full list; the next remote free must notify the owner */
  REMOTE_NOTIFIED = 2, /* page is in the full list and its owner has been notified; or its owner exited
                          (hak_page_abandon_state): no one to notify */
  REMOTE_PURGED = 3,   /* page is in the full list, other threads freed every block of it and the collection
                          gave its memory back (segment_purge.c: orphaned pages); the list is gone, and the owner
                          hands the page to its segment when it next looks (heap.c) */
  REMOTE_STATE_MASK = 3
};

typedef struct hak_block {
  struct hak_block *next;
} hak_block;

/* page->remote packs three things in one word, so a remote free is one CAS and the owner learns the
 * list's length without walking it: bits 48-63 the number of blocks in the list (at most 4096 fit in a
 * page), bits 2-47 the list head (blocks are 16-byte aligned, below 2^47), bits 0-1 the REMOTE_* state. */
#define HAK_REMOTE_COUNT_SHIFT 48
#define HAK_REMOTE_PTR_MASK ((((uintptr_t)1 << 47) - 1) & ~(uintptr_t)REMOTE_STATE_MASK)
#define HAK_REMOTE_LOW_MASK (((uintptr_t)1 << HAK_REMOTE_COUNT_SHIFT) - 1) /* the list head and the state */

static inline hak_block *hak_remote_list(uintptr_t word) { return (hak_block *)(word & HAK_REMOTE_PTR_MASK); }
static inline uint32_t hak_remote_count(uintptr_t word) { return (uint32_t)(word >> HAK_REMOTE_COUNT_SHIFT); }
static inline uintptr_t hak_remote_word(hak_block *list, uint32_t count, uintptr_t state) {
  return ((uintptr_t)count << HAK_REMOTE_COUNT_SHIFT) | (uintptr_t)list | state;
}

typedef struct hak_heap hak_heap;

/* Slots of a heap's table of frees into abandoned segments (page.c). */
#define HAK_ADOPT_SLOTS 64

/* Default builds (HAK_REMOTE_CHAINS): a thread's remote frees of small blocks (classes up to
 * HAK_DIRECT_CLASS_MAX) wait in a small table, a chain of blocks per page, and go to the page's remote
 * list with one CAS for the whole chain: when
 * the chain holds HAK_REMOTE_BATCH_BYTES of blocks (HAK_REMOTE_BATCH_MAX at most), when a free into
 * another page takes its slot, and at the thread's maintenance passes, collections (hak_collect,
 * malloc_trim, hak_stats_get), exit, and in a forked child for the threads that did not survive. The
 * CAS on a line the owner also writes was most of a remote free's cost (`prodcons`: 81 % of the samples
 * of hak_page_remote_free on it). A waiting block counts as live for its page, which therefore cannot go
 * away under the chain. So a thread that stops running keeps up to SLOTS pages of other threads in use
 * (their blocks' own bytes are at most SLOTS x BYTES) until it runs again or exits: 2 MiB of 64 KiB
 * pages, up to 8 MiB if all were the 256 KiB pages of 640-1280 bytes (whose descriptors usually fall on
 * every fourth slot). Nothing outside the thread can send them; the class cache's lists keep pages in
 * use the same way. */
/* Hardened builds push each remote free at once: with chains their `prodcons` ran 1.119 behind over 21
 * rounds, although they executed fewer instructions (docs/notes/2026-11-25-remote-chains.md). */
#define HAK_REMOTE_CHAINS (!HAK_SECURE)
#define HAK_REMOTE_BATCH_SLOTS 32
#define HAK_REMOTE_BATCH_MAX 32
#define HAK_REMOTE_BATCH_BYTES 4096
typedef struct hak_remote_batch {
  struct hak_page *page; /* NULL: the slot is empty */
  struct hak_block *first, *last; /* the chain, linked with the page's encoding; `last` ends it */
  uint32_t count, limit;
} hak_remote_batch;

/* A run of slices holding blocks of one class, laid out in three cache lines by who writes them, so that
 * neither the owner's fast paths nor other threads' frees read a line the other side keeps writing. */
typedef struct hak_page {
  /* Line 1, written by the owner only. The default build's malloc and local-free fast paths touch
   * nothing else. */
  hak_block *free;          /* ready to allocate */
  hak_block *local_free;    /* collected remote frees, parked while `free` is not empty */
  /* `used` and `allocs` share one word that the fast paths only access whole: malloc adds 2^32 + 1,
   * free stores the word less one. Every load is then forwarded from a store of the same width (a
   * 4-byte store of `used` followed by an 8-byte load costs a dozen cycles), and malloc counts with one
   * add instead of two (docs/notes/2026-11-23-performance-log.md, evening). */
  union {
    struct {
      uint32_t used;        /* blocks allocated and not (locally or collected) freed */
      uint32_t allocs;      /* allocations since the counters were last flushed to the heap */
    };
    uint64_t used_allocs;
  };
  uint32_t capacity;        /* blocks carved so far */
  uint32_t used_at_flush;   /* `used` at that flush: local frees = allocs - (used - used_at_flush) */
  uint8_t in_full;          /* in the heap's full list */
  uint8_t is_head;          /* first page of its queue: becoming empty needs no bookkeeping (small
                               classes; medium ones once their emptied first page is kept: heap.c) */
  uint8_t is_empty_listed;  /* counted in heap->empty_slices (1), or heap->empty_head_bytes (2) */
  uint8_t found_exhausted;  /* a page scan found no free block in it and left it at the queue's back */
  uint32_t empty_since;     /* heap->slow_events when the page last became empty */
  /* The owner's free takes its fast path only while `used` is above this: 1 normally, 0 for the first
   * page of its queue (it may become empty without bookkeeping: small classes, and medium ones once
   * listed empty), UINT32_MAX in the full list. One compare
   * in free instead of three tests; kept by hak_page_set_head and hak_page_set_full. A descriptor not in
   * use has `used` 0, which is above nothing, whatever this holds (a fresh segment's zeroes included). */
  uint32_t free_fast_above;
  /* Medium classes: every block on `free` was carved from zeroed memory and never handed out, so it reads
   * as zeroes but for the link carving wrote (calloc then clears only that: api.c). The first free into
   * the page, or a collection of other threads' frees, clears it; while it is set, owner frees take the
   * slow path (free_fast_above), where that happens. */
  uint8_t fresh;
  struct hak_page *next, *prev;
  /* Line 2, fixed while the page is in use: read by everyone (the hardened checks of both fast paths, a
   * remote free), written only when the page is set up or given back. */
  _Alignas(64) uint8_t *start; /* first block */
  uint32_t block_size;      /* class size */
  uint32_t reserved;        /* blocks that fit in the page */
  uint8_t size_class;
  uint8_t slice_count;      /* 0 when the page is not in use */
  uintptr_t key;            /* hardened builds: free-list key */
  uint32_t span;            /* reserved * block_size: bytes of the page that hold blocks; 0 when not in use */
  uint32_t block_limit;     /* (span - block_size) / 16 + 1, 0 when not in use: see hak_page_block_range */
  uint64_t divisor_magic;   /* floor((2^64 - 1) / block_size) + 1: divisibility by one multiply (hardened) */
  uintptr_t canary_key;     /* hardened builds: canary key, from a secret of its own (see secure.c) */
  /* Line 3, written by other threads: the remote list. */
  _Alignas(64) _Atomic uintptr_t remote; /* remote-freed blocks, their count and the REMOTE_* state */
  /* In the full state: the remote count at which other threads have freed every live block of the page,
   * `reserved` while its owner holds it full, its live blocks once its owner exited
   * (segment_purge.c, orphaned pages). Set before the CAS that enters the state. */
  _Atomic uint32_t orphan_target;
} __attribute__((aligned(256))) hak_page; /* a power of two: the page of a slice is found with a shift */

/* The only writers of page->is_head and page->in_full (outside the zeroes of a fresh segment, where
 * `used` is 0 too), with heap.c's note_empty and unnote_empty: they keep free_fast_above in step. */
static inline void hak_page_update_fast_above(hak_page *page) {
  page->free_fast_above = page->in_full || page->fresh ? UINT32_MAX
                          : page->is_head && (page->size_class <= HAK_DIRECT_CLASS_MAX || page->is_empty_listed) ? 0u
                                                                                                            : 1u;
}
/* A block other than a fresh one goes on the page's `free` (or will): the page is no longer fresh. */
static inline void hak_page_clear_fresh(hak_page *page) {
  if (page->fresh) {
    page->fresh = 0;
    hak_page_update_fast_above(page);
  }
}
static inline void hak_page_set_head(hak_page *page, bool head) {
  page->is_head = head;
  hak_page_update_fast_above(page);
}
static inline void hak_page_set_full(hak_page *page, bool full) {
  page->in_full = full;
  hak_page_update_fast_above(page);
}

typedef struct hak_segment {
  uint32_t kind;                     /* HAK_KIND_SEGMENT */
  uint32_t used_pages;
  _Atomic(hak_heap *) owner;         /* NULL when abandoned or cached */
  bool abandoned;                    /* in the abandoned list (segment.c, under its lock) */
  /* The slice words and the purge deadline below change under slices_lock: the owner's page-level slow
   * paths take it, and so does the collection that purges every segment's due slices, the owner's
   * included, so that a thread gone idle gets its freed slices purged too (segment_purge.c). A zeroed
   * mutex is a default one, and a fresh segment is zeroes. */
  pthread_mutex_t slices_lock;
  uint64_t free_slices;              /* bit i set: slice i is free */
  uint64_t dirty_slices;             /* free slices used since their last purge */
  uint64_t purged_slices;            /* free slices returned to the OS */
  uint64_t zero_slices;              /* free slices known to read as zeroes: never used since the mapping,
                                        or purged with MADV_DONTNEED or into read-only zero memory (not
                                        MADV_FREE, which may leave the old contents) */
  uint64_t read_only_slices;         /* purged slices that are read-only zero memory (hak_os_decommit, or
                                        never made writable): a page must commit them first */
  uint64_t trimmed_slices;           /* purged slices that a trim purged (hak_segments_trim) */
  uint64_t measured_slices;          /* dirty slices whose resident pages a trim counted (slice_resident) */
  uint64_t deadline_purged_slices;   /* purged slices that their deadline purged (not a trim, nor a forced
                                        purge): taking one back teaches the slices' purge delay */
  _Atomic uint64_t purge_due_ms;     /* when dirty free slices may be purged (0: nothing pending); read
                                        without the lock to skip a segment with nothing due */
  _Atomic uint64_t orphan_hint;      /* bit i: a remote free emptied the full page at slice i (segment_purge.c) */
  _Atomic uint64_t orphan_seen;      /* bit i: a collection found that page emptied, at orphan_seen_ms[i]
                                        (segment_purge.c; a free that empties it anew clears the bit) */
  uint64_t orphan_waited;            /* bit i: a collection found that noted page full, not emptied yet
                                        (under slices_lock, as the times below) */
  uint64_t orphan_seen_ms[HAK_SLICES]; /* hak_clock_ms when a collection found page i emptied */
  struct hak_segment *all_next, *all_prev; /* every mapped segment (segment.c, under hak_segs.lock) */
  struct hak_segment *next, *prev;   /* in the owner's list, the abandoned list or the cache */
  /* slice -> 1 + the class of the page covering it if that class has a class cache (default builds), else
   * 0 (free slices and the header too): an owner's free of a small block reads this and no page
   * descriptor. On a line of its own, next to slice_page. */
  _Alignas(64) uint8_t slice_cache_slot[HAK_SLICES];
  uint8_t slice_page[HAK_SLICES];    /* slice -> first slice of the page covering it */
  uint8_t slice_class[HAK_SLICES];   /* class of the last page on the slice (meaningful while it is dirty) */
  uint8_t slice_resident[HAK_SLICES]; /* OS pages of a measured slice that were resident when counted; of a
                                        trimmed slice, those it held when the trim purged it */
  uint64_t slice_freed_ms[HAK_SLICES]; /* hak_clock_ms when each free slice was last freed */
  hak_page pages[HAK_SLICES];        /* descriptor of the page starting at each slice */
} hak_segment;

_Static_assert(sizeof(hak_segment) <= HAK_SLICE_SIZE, "segment header must fit in slice 0");

/* Whether the collection gave `page` back (REMOTE_PURGED: every block of it freed by other threads,
 * orphaned pages in segment.c); acquire, so that the purge's writes come with it. */
static inline bool hak_page_given_back(const hak_page *page) {
  return (atomic_load_explicit(&((hak_page *)page)->remote, memory_order_acquire) & REMOTE_STATE_MASK) == REMOTE_PURGED;
}

typedef struct hak_page_queue {
  hak_page *first, *last;
} hak_page_queue;

/* Per-thread counters. Only the owner writes them (plain load+store); readers merge them with relaxed
 * loads, so counting costs no atomic read-modify-write. The fast paths count only in page->used_allocs;
 * hak_page_flush_counts folds a page's allocations and local frees into these on slow paths. */
typedef struct hak_heap_counters {
  _Atomic uint64_t allocs[HAK_CLASS_COUNT];
  _Atomic uint64_t frees[HAK_CLASS_COUNT];     /* frees by the owner */
  _Atomic uint64_t collected[HAK_CLASS_COUNT]; /* remote frees of its blocks the owner collected */
  _Atomic uint64_t remote_frees; /* frees by this thread of blocks other heaps own */
  _Atomic uint64_t slow_allocs;  /* allocations whose page had no free block (find_page) */
  _Atomic uint64_t slow_frees;   /* owner frees that took hak_free_local_slow */
} hak_heap_counters;

/* The class cache (class_cache.c): per small class, a list of blocks the heap's own thread freed, in
 * front of the class's pages. An owner's free of a block of the direct table's classes (requests up to
 * HAK_SMALL_MAX) pushes it here instead of on its page, and malloc pops here first: a block stays
 * allocated as far as its page knows until the list is drained. Blocks freed into many pages are reused
 * wherever they sit, and malloc switches pages only
 * when the class has no freed block at all (random_mixed: 26,865 page switches in 10 M operations
 * without it, 1,820 with it). A full list takes no more: further frees go to their pages, so a burst of
 * frees costs a test per block and no copying (handing the oldest half back at each overflow cost
 * random_mixed 4 % and churn 20 %: docs/notes/2026-11-25-class-cache.md). The limit sizes itself per
 * class (class_cache.c: grown for batches larger than the list, set back by a drain).
 * Default builds only (HAK_CLASS_CACHE): the hardened checks of a pop need the block's page.
 *
 * `counts` packs, so that free touches one word besides the head:
 *   bits 0-31   HAK_CACHE_LEN_BIAS - limit + (blocks in the list): the sign bit of the low half is set
 *               exactly when the list is full, so free tests it without loading the limit;
 *   bits 32-63  pushes since the counts were last folded into the statistics, counted from
 *               2^32 - HAK_CACHE_TICK_PUSHES: the add that carries out of bit 63 is the tick that gives
 *               the heap a slow path (maintenance, statistics) in a loop that only frees and reuses. */
#define HAK_CLASS_CACHE (!HAK_SECURE)
#define HAK_CACHE_CLASSES (HAK_DIRECT_CLASS_MAX + 1)
#define HAK_CACHE_LEN_BIAS ((uint32_t)1 << 31)
#define HAK_CACHE_TICK_PUSHES 4096u
#define HAK_CACHE_PUSH (((uint64_t)1 << 32) | 1)

typedef struct hak_class_cache {
  hak_block *head; /* most recently freed first; links stored plainly */
  uint64_t counts; /* see above */
} hak_class_cache;

/* What only the cache's slow paths read. */
typedef struct hak_class_cache_state {
  uint32_t limit;          /* blocks the list holds at most (sized at run time: class_cache.c) */
  uint32_t drained;        /* blocks handed back to their pages since the last fold */
  uint32_t len_at_fold;    /* blocks in the list at the last fold */
  uint32_t pushes_seen;    /* pushes folded so far (wrapping) */
  uint32_t pushes_at_pass; /* pushes_seen at the previous maintenance pass: equal means the class is idle */
  /* The sizing of the limit (class_cache.c): */
  uint32_t pushes_at_window;      /* pushes_seen when the current window started */
  uint64_t cache_allocs;          /* pops and frees the folds counted so far: the rest of the class's */
  uint64_t cache_frees;           /* counts are its pages' (the list's misses and overflows) */
  int64_t page_allocs_at_window;  /* the pages' counts when the window started */
  int64_t page_frees_at_window;
} hak_class_cache_state;

#define HAK_COUNT_N(field, n) atomic_store_explicit(&(field), atomic_load_explicit(&(field), memory_order_relaxed) + (n), memory_order_relaxed)

struct hak_heap {
  hak_page *direct[HAK_DIRECT_COUNT];  /* request size / 16 -> current page of its class */
  _Alignas(64) hak_class_cache cache[HAK_CACHE_CLASSES]; /* owner-freed small blocks, per class */
  hak_class_cache_state cache_state[HAK_CACHE_CLASSES];
  hak_page_queue pages[HAK_CLASS_COUNT];
  hak_page_queue full[HAK_CLASS_COUNT];
  uint64_t empty_classes;              /* classes with empty pages kept in their queue */
  uint32_t empty_slices;               /* slices of the empty pages kept in their queues */
  uint32_t empty_head_bytes;           /* what the medium classes' first pages kept empty hold (heap.c) */
  uint32_t empty_head_noted[HAK_CLASS_COUNT]; /* each one's share of that, as counted when it emptied */
  uint64_t kept_heads;                 /* the classes of those pages */
  uint64_t heads_retired;              /* medium classes whose emptied first page retired, not taken again yet */
  uint64_t hot_heads;                  /* medium classes that took a page soon after retiring their first one */
  uint32_t head_ms[HAK_CLASS_COUNT];   /* when (hak_clock_ms, low half) each one last retired it, or took a
                                          page after that */
  uint32_t slow_events;                /* slow-path visits, the heap's clock for page retirement */
  uint32_t next_maintenance;           /* slow_events value of the next maintenance pass */
  uint32_t counts_folded_at;           /* slow_events when a pass last folded every page's counts */
  uint32_t auto_interval;              /* self-tuned maintenance interval (HAKMEM_DRAIN_INTERVAL=0) */
  uint32_t thrash_events;              /* since the last pass: new pages for a class that just retired one */
  bool work_pending;                   /* the last pass left empty pages or purges waiting */
  uint64_t retired_classes;            /* classes that retired a page since the last pass */
  uint32_t segment_count;
  hak_segment *segments;               /* owned segments */
  /* Frees of this thread into abandoned segments, per segment (page.c's adopt_on_free): a small table
   * indexed by the segment's address, each slot an address only and a count */
  struct {
    uintptr_t seg;
    uint32_t frees;
  } abandoned_seen[HAK_ADOPT_SLOTS];
  /* Remote frees of small blocks on their way to their pages, a chain per page sent with one CAS
   * (page.c: hak_page_remote_free; hak_remote_batches_flush) */
  hak_remote_batch remote_batch[HAK_REMOTE_BATCH_SLOTS];
  uint64_t random;                     /* hardened builds: key generator state */
  hak_heap_counters counters;
  struct hak_heap *next_all;           /* every heap ever made; heaps are recycled, never unmapped */
  bool in_use;
  /* The kernel thread id of the thread using the heap, so that a sweep can tell that the thread is gone
   * although its key destructor never ran (heap_pool.c, hak_heaps_sweep_dead); 0 where no sweep may take the
   * heap (the late heap, a forked child's copies of the parent's other threads' heaps, a heap being
   * taken by a sweep). `pid`: the process that made it the thread's, so that a child made without the
   * fork handlers (_Fork, a raw clone) takes no heap of its parent's for gone. */
  pid_t pid, tid;
  /* The thread's last freed large block, kept out of the large cache for its next large malloc (large.c,
   * LAST_MAX); 0 if none. Bit 0: a pass has seen it there (hak_large_flush_last). */
  _Atomic uintptr_t large_last;
  uint32_t large_last_frees;           /* frees into large_last (the owner's count) */
  /* Written by other threads (remote frees into full pages): last, on a cache line of its own. */
  _Alignas(64) _Atomic uint64_t full_notified; /* classes whose full list got remote frees */
};

/* ---- Globals ------------------------------------------------------------------------------------- */
extern hak_page hak_page_empty;
extern hak_heap hak_heap_empty;
extern __thread hak_heap *hak_tls_heap;

/* Options in force (options.c), filled once by hak_options_init. */
typedef struct hak_options {
  _Atomic long value[HAK_OPT_COUNT];
} hak_options;
extern hak_options hak_opts;
void hak_options_init(void);
/* One line on stderr with every option's value in force (HAKMEM_VERBOSE=2, at start). */
void hak_options_print(void);
/* Symbolic name of an option's value ("balanced"...), or NULL if it has none. */
const char *hak_option_value_name(enum hak_option option, long value);

/* ---- Init (init.c) ------------------------------------------------------------------------------- */
void hak_init(void);
/* Print one line "hakmem: <what> <ptr> (size class N: B bytes)" to stderr and abort. cls < 0: no class. */
__attribute__((noreturn, cold)) void hak_fatal(const char *what, const void *ptr, int cls);
/* The same for a block of the large tier: "... (large block of N bytes)". */
__attribute__((noreturn, cold)) void hak_fatal_large(const char *what, const void *ptr, size_t bytes);
/* The report for a pointer that is no live block of ours, then abort: a use after free (a double free
 * when `freeing`) with its class or size when it lies where one of our pages or large blocks was given
 * back (hak_segment_was_released, hak_large_was_released), else "<otherwise> <ptr>". */
__attribute__((noreturn, cold)) void hak_fatal_unknown(const void *ptr, bool freeing, const char *otherwise);
/* File descriptor for reports to stderr (a duplicate that survives the program closing fd 2). */
int hak_report_fd(void);
#if HAK_SECURE
/* Hardened builds (secure.c): read the key secrets (once, from hak_init), and make the keys of a new page. */
void hak_secure_init(void);
void hak_secure_page_keys(hak_heap *heap, uintptr_t *key, uintptr_t *canary_key);
/* A new salt for a large block's canaries, and the canary value of the large block at `user` with that
 * salt (both of its canary words hold it). */
uintptr_t hak_secure_large_salt(void);
uintptr_t hak_secure_large_canary(const void *user, uintptr_t salt);
#endif
/* struct hak_stats without the process's page faults and RSS (left 0): no system call (stats.c). */
void hak_stats_memory(struct hak_stats *out);
#include "purge.h" /* the purger, the trims and the learned purge delay */

/* Write a preformatted warning line to stderr unless HAKMEM_VERBOSE=0; no allocation. */
void hak_warn_raw(const char *line, size_t len);

/* ---- Heap (heap.c): what one heap does with its pages --------------------------------------------- */
void *hak_alloc_slow(hak_heap *heap, size_t size, unsigned cls);
void hak_free_local_slow(hak_heap *heap, hak_page *page, hak_block *block);
/* Every HAK_PAGE_TICK_ALLOCS allocations from a page without a slow path (alloc.h): collect the page,
 * count a slow event and run maintenance when due. Returns `block`, the block just allocated, so the
 * fast path can end in a tail call. */
__attribute__((noinline, cold, returns_nonnull)) hak_block *hak_page_tick(hak_heap *heap, hak_page *page, hak_block *block);
/* A slow event without a slow path: count it and run maintenance when due (the page and cache ticks). */
void hak_heap_tick(hak_heap *heap);
/* The size-to-entry tables of the direct table and the class caches (once, at init). */
void hak_heap_init_tables(void);
/* Empty queues, lists and counters: a heap as the pool hands it out. */
void hak_heap_reset(hak_heap *heap);
/* One allocation of class `cls` from `heap` through its slow path (the late heap's, under its lock);
 * NULL when out of memory. */
void *hak_heap_alloc_from(hak_heap *heap, unsigned cls);
/* Give back what `heap` holds: its lists, empty pages and segments; segments with live blocks are
 * abandoned to other threads. The heap is reset; the caller counts it exited and returns it to the pool. */
void hak_heap_retire(hak_heap *heap);
/* A collection of `heap` by the thread that may touch its pages: its owner, or for the late heap the
 * holder of its lock. `force`: every page is looked at and every empty page and segment given back. */
void hak_heap_collect(hak_heap *heap, bool force);
void hak_heap_flush_counts(hak_heap *heap);

/* ---- Heap pool (heap_pool.c): where heaps come from and go ------------------------------------------ */
/* Set when this thread's heap filled the pool to where a sweep is due; its next slow allocation runs it
 * (a sweep may start the purger thread, which a heap made inside free must not: see purger.c). */
extern __thread bool hak_tls_sweep_due;
/* The key destructor: the exiting thread's heap is retired and goes back to the pool. */
void hak_heap_thread_done(void *heap);
/* Threads whose heap is live (started and not exited). */
uint64_t hak_heaps_live(void);
void hak_heaps_init_key(void);
hak_heap *hak_heap_for_thread(void);
/* The calling thread, which has no heap, may not get one: its heap was retired at its exit, or it is in
 * glibc's thread exit past its key destructors. Its allocations then go to hak_heaps_late_alloc. */
bool hak_heap_thread_gone(void);
/* An allocation of class `cls` from the one heap shared, under a mutex, by threads that may not get a
 * heap of their own (hak_heap_thread_gone: past their heap's retirement, or past glibc's key destructors
 * without ever having had one); NULL with errno ENOMEM. */
void *hak_heaps_late_alloc(unsigned cls);
/* Whether `heap` is that shared late heap. */
bool hak_heaps_is_late(const hak_heap *heap);
/* The calling thread's heap, created if the thread has none and is not exiting; &hak_heap_empty
 * otherwise. Lets threads that only free count in plain per-thread counters, and gives a thread that
 * never allocated a heap to reclaim exited threads' memory into at hak_collect(true). */
hak_heap *hak_heap_for_counting(void);
void hak_heaps_collect(bool force);
/* Give back the heaps of threads that are gone without their key destructor having run (their first
 * allocation came in glibc's last round of destructors): each in-use heap's thread id is probed with
 * tgkill(pid, tid, 0). One system call per heap in use; run by hak_collect(true) and as the heap pool
 * grows. */
void hak_heaps_sweep_dead(void);
/* hak_large_flush_last for every heap (`if_seen` as there); true when one was marked, so that a later
 * pass should look again. For the purger and hak_heaps_collect(true). */
bool hak_heaps_flush_large_last(bool if_seen);
void hak_heaps_lock(void);
void hak_heaps_unlock(void);
void hak_heaps_after_fork_child(void);
/* In a forked child, after every fork handler: the remote-free chains of the threads the fork did not
 * copy are sent on their behalf (page.c, hak_remote_batches_flush_frozen). */
void hak_heaps_send_frozen_chains(void);
hak_heap *hak_heaps_first(void);
void hak_heaps_thread_counts(uint64_t *started, uint64_t *exited);

/* ---- Class cache (class_cache.c) ------------------------------------------------------------------ */
/* Request size / 16 -> size class, for sizes up to HAK_SMALL_MAX (filled at init; zeroes before, which
 * lead to the empty heap's empty lists). */
extern uint8_t hak_direct_class[HAK_DIRECT_COUNT];
void hak_class_cache_init_table(void);
/* Empty lists with their limits: a new or reset heap. */
void hak_class_cache_reset(hak_heap *heap);
/* Report the free of `block`, found at the head of its class's list: a double free. */
__attribute__((noreturn, cold)) void hak_class_cache_double_free(const hak_block *block);
/* Every HAK_CACHE_TICK_PUSHES pushes of a class: fold the counts, collect the page of `block` (the block
 * just pushed) and give the heap a tick. */
__attribute__((noinline)) void hak_class_cache_tick(hak_heap *heap, hak_block *block);
/* Fold every class's pops and pushes into the heap's counters. */
void hak_class_cache_fold(hak_heap *heap);
/* Hand back every block of every list (`idle_only`: only of the classes with no push since the previous
 * call with `idle_only`, the maintenance pass). */
void hak_class_cache_drain(hak_heap *heap, bool idle_only);
/* Whether `p`, a block of segment `seg`, heads its class's list in `heap`: the cheap use-after-free
 * test of realloc and the usable-size calls. */
bool hak_class_cache_is_head(const hak_heap *heap, const hak_segment *seg, const void *p);

/* ---- Pages (page.c) ------------------------------------------------------------------------------ */
/* Set up `page` on `slices` slices of `seg` from `slice` for class `cls`; `zeroed`: its memory reads as
 * zeroes (fresh for calloc, medium classes). */
void hak_page_init(hak_page *page, hak_segment *seg, unsigned slice, unsigned slices, unsigned cls, uintptr_t key,
                   uintptr_t canary_key, bool zeroed);
void hak_page_collect(hak_heap *heap, hak_page *page);
void hak_page_flush_counts(hak_heap *heap, hak_page *page);
/* How many bytes of fresh blocks one extension carves (more means fewer slow paths, but touches
 * memory earlier). */
#define HAK_EXTEND_BYTES ((size_t)16 << 10)

/* Blocks one extension carves (while the page has that much room): HAK_EXTEND_BYTES worth, at least 4.
 * A fresh page's first extension of blocks up to an OS page carves only its first OS page, since carving
 * writes every block: a thread that keeps a block or two of many classes then holds one OS page per class
 * instead of four (1000 threads each keeping one block of each of 8 classes of 16 B-2 KiB: 150 -> 54 MB
 * RSS; the lab A/B in docs/notes/2026-11-25-thread-footprint.md). */
static inline uint32_t hak_extend_count(uint32_t block_size, bool first) {
  if (first && block_size <= HAK_OS_PAGE) return (uint32_t)(HAK_OS_PAGE / block_size);
  uint32_t n = (uint32_t)(HAK_EXTEND_BYTES / block_size);
  return n < 4 ? 4 : n;
}
static inline uint32_t hak_page_extend_count(const hak_page *page) {
  return hak_extend_count(page->block_size, page->capacity == 0);
}
/* Carve the next hak_page_extend_count() blocks (fewer at the page's end) onto `free`; false when the
 * page is fully carved. */
bool hak_page_extend(hak_page *page);
void hak_page_remote_free(hak_heap *heap, hak_segment *seg, hak_page *page, hak_block *block);
/* Send every chain waiting in the heap's remote-free table to its page (the owner's thread, or whoever
 * retires a vanished thread's heap). */
void hak_remote_batches_flush(hak_heap *heap);
/* In a forked child: send the chains of `frozen`, the heap of a thread that did not survive the fork, on
 * behalf of `self`, the child's thread's heap (or hak_heap_empty: then nothing is taken over). */
void hak_remote_batches_flush_frozen(hak_heap *frozen, hak_heap *self);
uint64_t hak_orphan_remote_frees(void);
bool hak_page_set_full_state(hak_page *page);
/* The exiting owner leaves `page` of `seg`, its remote frees collected and `used` blocks live, in the
 * notified state with those blocks as its orphan target; true when other threads have freed them all
 * already (the caller then asks for the collection: hak_segments_orphan_due). */
bool hak_page_abandon_state(hak_segment *seg, hak_page *page);
/* The page leaves the full state (REMOTE_NORMAL, its remote list kept); returns the state it had. */
uintptr_t hak_page_clear_full_state(hak_page *page);

/* ---- Segments (segment.c, segment_purge.c) ------------------------------------------------------- */
/* A new page of class `cls` from the free slices of the heap's segments; with `add_segment`, failing
 * that, from a cached or newly mapped segment. NULL when there is no room (or no memory). */
hak_page *hak_segment_page_alloc(hak_heap *heap, unsigned cls, bool add_segment);
/* The slices of `page` become free in its segment: dirty, purged after the delay (but those the purger
 * gave back already: a REMOTE_PURGED page). */
void hak_segment_page_free(hak_heap *heap, hak_page *page);
/* A remote free is about to empty the full page `page` of `seg` (its caller still holds a block in it):
 * the collection gives the page's memory back once it stays so for a purge delay. */
void hak_segment_note_orphan(hak_segment *seg, const hak_page *page);
/* After that free: the collection is asked for, a purge delay away (touches no segment). */
void hak_segments_orphan_due(void);
/* Purge the dirty free slices of `seg` if their delay has passed (or `force`); whether a purge is still
 * pending afterwards. */
bool hak_segment_purge(hak_segment *seg, uint64_t now_ms, bool force);
void hak_segment_release(hak_heap *heap, hak_segment *seg);
/* Whether `p` lies where a page of ours was and has been given back (free slices of a mapped segment,
 * or one of the latest unmapped segments); sets *cls to the class of the last page there. For reports
 * only: no lock. */
bool hak_segment_was_released(const void *p, int *cls);
void hak_segment_abandon(hak_heap *heap, hak_segment *seg);
/* Take the most recently abandoned segment off the global list; NULL if the list is empty. */
hak_segment *hak_segment_reclaim_one(void);
/* Take `seg` off the abandoned list if it is there (false: it is not, or no longer, abandoned). The caller
 * keeps `seg` mapped: it holds a live block in it. */
bool hak_segment_reclaim(hak_segment *seg);
void hak_heap_adopt(hak_heap *heap, hak_segment *seg);
/* The collection: purge the free slices of every mapped segment (cached, abandoned, owned) whose delay has
 * passed; with `force`, every waiting free slice, and unmap every cached segment. Run by the purger, by maintenance passes (when a
 * deadline is due) and by hak_collect. */
void hak_segments_collect(bool force);
/* Bytes of the free slices waiting for their purge, over all segments (resident pages where a trim
 * counted them, whole slices otherwise). */
uint64_t hak_segments_waiting_bytes(void);
/* Earliest purge deadline among all segments (hak_clock_ms time); 0 when none waits. */
uint64_t hak_segments_purge_due(void);
/* If the free slices waiting for their purge, over all segments, hold more than `keep_bytes`, purge them
 * all now, whatever their deadlines. Returns whether it purged any; `*waiting` gets what they held
 * before. For a process without the purger (purger.c). */
bool hak_segments_trim(uint64_t keep_bytes, uint64_t *waiting);
/* Bytes of the slices under pages, over all segments: what small and medium blocks can occupy. */
uint64_t hak_segments_used_bytes(void);
void hak_segments_lock(void);
void hak_segments_unlock(void);
void hak_segments_after_fork_child(void);
uint64_t hak_segments_reclaimed(void);
/* Orphaned pages the collection gave back so far (hak_stats.orphaned_pages). */
uint64_t hak_segments_orphaned_pages(void);
/* Blocks of class `cls` in those pages: freed by other threads, collected by no heap (hak_stats' live
 * counts subtract them). */
uint64_t hak_segments_orphan_blocks(unsigned cls);

/* The segment `p` would lie in (4 MiB-aligned): a segment only if the pagemap says so. */
static inline hak_segment *hak_segment_of(const void *p) {
  return (hak_segment *)((uintptr_t)p & ~(HAK_SEGMENT_SIZE - 1));
}

static inline size_t hak_segment_slice_of(const void *p) {
  return ((uintptr_t)p >> HAK_SLICE_SHIFT) & (HAK_SLICES - 1);
}

static inline hak_page *hak_segment_page_of(hak_segment *seg, const void *p) {
  return &seg->pages[seg->slice_page[hak_segment_slice_of(p)]];
}

/* The first page of `seg` that starts at slice *at or after it, with *at moved past its slices; NULL when
 * none is left. A walk over a segment's pages starts at 1 (slice 0 is the header); the caller may free
 * the page it is given before it asks for the next. */
static inline hak_page *hak_segment_next_page(hak_segment *seg, unsigned *at) {
  for (unsigned i = *at; i < HAK_SLICES; i++) {
    hak_page *page = &seg->pages[i];
    if (page->slice_count != 0) {
      *at = i + page->slice_count;
      return page;
    }
  }
  *at = HAK_SLICES;
  return NULL;
}

/* ---- Large tier (large.c) ------------------------------------------------------------------------ */
typedef struct hak_large {
  uint32_t kind;          /* HAK_KIND_LARGE */
  uint32_t cached;        /* 1 while in the cache (freed) */
  size_t map_size;        /* bytes mapped from the header on */
  size_t resident_end;    /* bytes from the header on that blocks may have touched since the last release
                           * (each block's request, or the whole usable size once it was asked) */
  size_t released_tail;   /* bytes at the end given back while mapped: not counted as committed */
  uint8_t *user;          /* block handed out */
  uint64_t freed_ms;
  bool zero;              /* every byte after the header is known to be zero */
  bool purged;            /* in the cache and its pages were returned to the OS */
  bool purge_refused;     /* in the cache, and the kernel refused to purge it (locked memory): not tried
                           * again until the mapping is freed again */
  size_t trimmed_bytes;   /* purged by a trim (hak_large_trim), not by its deadline: what it could hold
                           * then (resident_end); 0 otherwise */
  bool deadline_purged;   /* purged by its deadline (the tier's delay learns from its reuse: large.c) */
  bool size_held;         /* cached while the cache held at most half its cap: kept past the delay for its
                           * size (hold_ms in large.c) */
  struct hak_large *next, *prev;         /* in the cache's list of unpurged or of purged mappings */
  struct hak_large *bin_next, *bin_prev; /* in the cache's list of mappings of its size bin */
#if HAK_SECURE
  size_t request;         /* bytes the live block was asked for; its end canary follows them (large.c) */
  uintptr_t canary_salt;  /* the live block's share of its canary value (hak_secure_large_canary) */
  bool unguarded;         /* the mapping has no guard page at its end: another mapping took its place while
                           * a resize that then failed had it unmapped (large.c, mapping_resize) */
#endif
} hak_large;

void *hak_large_alloc(size_t size, size_t align, bool zero);
void hak_large_free(hak_large *hdr, void *p);
size_t hak_large_usable(const hak_large *hdr);
/* The usable size told to the program (malloc_usable_size): it may write all of it from now on, so the
 * mapping counts every byte as touched and committed. */
size_t hak_large_usable_claim(hak_large *hdr);
/* Whether `p` was the block of one of the latest large mappings given back to the OS (a use after free
 * or double free, then); sets *bytes to its usable size. For reports only: no lock. */
bool hak_large_was_released(const void *p, size_t *bytes);
/* The report for `p`, which the page map leads to large header `hdr` but which is not its live block:
 * an overwritten header, a use after free, or a pointer never returned; aborts. */
__attribute__((noreturn, cold)) void hak_large_bad_pointer(const hak_large *hdr, const void *p, bool freeing);
#if HAK_SECURE
/* Hardened builds: abort with a report unless both canary words of live block `hdr->user` are intact.
 * `freeing`: the report is free's (realloc and the usable-size calls name themselves otherwise). */
void hak_large_check(const hak_large *hdr, bool freeing);
#endif
void *hak_large_realloc(hak_large *hdr, void *p, size_t size);
void hak_large_collect(bool force);
/* Move `heap`'s last freed large block (heap->large_last), if it holds one, into the large cache. With
 * `if_seen`, only one that an earlier call saw there: one seen for the first time is marked, and the
 * call returns true, so that the caller looks again later. Any thread may call it, for any heap. */
bool hak_large_flush_last(hak_heap *heap, bool if_seen);
/* hak_large_flush_last in two steps, for a caller that takes many under a lock of its own: the block to
 * pass to hak_large_last_cache (or NULL; *marked is set where the call returns true above). */
hak_large *hak_large_last_claim(hak_heap *heap, bool if_seen, bool *marked);
void hak_large_last_cache(hak_large *h);
/* Earliest purge deadline among the cached large mappings (hak_clock_ms time); 0 when none waits. */
uint64_t hak_large_purge_due(void);
/* Purge cached mappings, oldest first, until what the unpurged ones may hold resident is at most
 * `keep_bytes`, whatever their deadlines; the most recently freed one is kept in any case (the next
 * request of its size reuses it). Returns whether it purged any; `*waiting` gets what they held before.
 * For a process without the purger (purger.c). */
bool hak_large_trim(uint64_t keep_bytes, uint64_t *waiting);
void hak_large_lock(void);
void hak_large_unlock(void);
void hak_large_after_fork_child(void);
void hak_large_counters(uint64_t *hits, uint64_t *misses, uint64_t *allocs, uint64_t *bytes, uint64_t *frees);
/* Bytes the live large blocks hold: their mappings less the tails given back (as counted in committed). */
uint64_t hak_large_live_bytes(void);
/* What the large cache's mappings not purged yet may hold resident (the sum of their reach). */
uint64_t hak_large_waiting_bytes(void);

/* ---- Hardened-mode block helpers ------------------------------------------------------------------ */
/* Whether `p` is the start of a block of `page` (carved or not). The offset is below 2^32, so it is a
 * multiple of the block size exactly when its product with divisor_magic, modulo 2^64, is below the magic
 * (Lemire, Kaser and Kurz, "Faster remainder by direct computation", 2019): one multiply, no division. */
static inline bool hak_page_is_block_start(const hak_page *page, uintptr_t p) {
  uintptr_t off = p - (uintptr_t)page->start; /* wraps to a huge value when p < start */
  return (off < page->span) & (off * page->divisor_magic < page->divisor_magic); /* one branch for the caller */
}

static inline uintptr_t hak_rotr(uintptr_t x, unsigned r) { return (x >> r) | (x << (64 - r)); }

/* Whether `p` is 16-byte aligned and no further into the page than its last block start: every block
 * start passes (class sizes are multiples of 16), and a block read at `p` stays inside the page's blocks.
 * One compare: rotating the offset right by 4 moves misaligned low bits to the top. */
static inline bool hak_page_block_range(const hak_page *page, uintptr_t p) {
  return hak_rotr(p - (uintptr_t)page->start, 4) < page->block_limit;
}

#if HAK_SECURE
/* Hardened free-list links are stored as next ^ key ^ block: the key is per page and random, so the
 * stored word tells nothing of the address without it. A link changed while its block was free decodes
 * out of the page's block starts (caught here; malloc's pop tests only that it stays in the segment,
 * hak_secure_pop_link), or to some other address, whose missing freed tag
 * malloc catches when it pops that address (alloc.h), as it catches a link redirected to another free
 * block once the list reaches a block it popped already. (The links used to be rotated by 16 bits as
 * well, so that a changed low byte decoded out of range at once; with the pop's tag check that only moved
 * the report one malloc earlier, and it cost 5 % on a malloc+free pair: docs/notes, 2026-11-25.)
 *
 * The link stored in free block `b`, decoded (not checked). */
static inline uintptr_t hak_next_decoded(const hak_page *page, const hak_block *b) {
  return (uintptr_t)b->next ^ (page->key ^ (uintptr_t)b);
}

/* Decode the link stored in free block `b` into *next; false when it decodes out of the page's blocks
 * (and is not the end of the list): the block was overwritten while free. */
static inline bool hak_next_decode_checked(const hak_page *page, const hak_block *b, hak_block **next) {
  uintptr_t n = hak_next_decoded(page, b);
  *next = (hak_block *)n;
  return hak_page_block_range(page, n) || n == 0;
}
#endif

static inline hak_block *hak_next_decode(const hak_page *page, const hak_block *b) {
#if HAK_SECURE
  hak_block *next;
  if (unlikely(!hak_next_decode_checked(page, b, &next)))
    hak_fatal("free-list corruption (a freed block was overwritten) at", b, page->size_class);
  return next;
#else
  (void)page;
  return b->next;
#endif
}

static inline void hak_next_encode(const hak_page *page, hak_block *b, hak_block *next) {
#if HAK_SECURE
  uintptr_t mask = page->key ^ (uintptr_t)b;
  __asm__("" : "+r"(mask)); /* opaque to the compiler, so it cannot reassociate: one xor after loading `next` */
  b->next = (hak_block *)((uintptr_t)next ^ mask);
#else
  (void)page;
  b->next = next;
#endif
}

#endif
