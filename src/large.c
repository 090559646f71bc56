/* large.c — the large tier's blocks: above 512 KiB (or aligned above 64 KiB) a block gets a mapping of its
 * own, 4 MiB-aligned, with a one-page header in front of the block. Freed mappings go to the cache
 * (large_cache.c), but for each thread's last one of a few MiB, which waits for the thread's next large
 * malloc (LAST_MAX). Realloc grows in place or moves the pages with mremap instead of copying; calloc from
 * a cached mapping zeroes only what its last blocks reached (zero_block). */
#include <sys/mman.h>

#include "alloc.h"
#include "large_internal.h"
#include "sync.h"

#if HAK_SECURE
/* Hardened builds guard each large block with two canary words of the same value (secure.c): one just
 * before the block, at the end of the header's page (or of the alignment padding), against underflows;
 * one right after the bytes asked for, at any alignment, against overflows. The usable size is then the
 * request. free, realloc and the usable-size calls check both. */
#define LARGE_END_CANARY sizeof(uintptr_t)
/* Hardened builds also end every large mapping with a page that cannot be touched (PROT_NONE), counted in
 * map_size: an overflow that runs past a block and its canary faults there instead of reaching whatever
 * is mapped next. Mappings touch (the address hints step by their size), and a review overwrote the next
 * mapping's header with 24 bytes past a block's end and no key: malloc then handed out memory over a live
 * block. A resize makes the guard writable first (mremap needs the mapping whole) and sets it again at the
 * new end. */
#define LARGE_GUARD HAK_OS_PAGE
#else
#define LARGE_END_CANARY 0
#define LARGE_GUARD 0
#endif
#define HUGE_PAGE ((size_t)2 << 20)

/* The tier's statistics (hak_large_counters) and what its live blocks hold. */
static struct {
  _Atomic uint64_t hits, misses, allocs, alloc_bytes, frees;
  _Atomic uint64_t live_held; /* what live blocks hold: the sum of held() over them */
} counts;

void hak_large_counters(uint64_t *hits, uint64_t *misses, uint64_t *allocs, uint64_t *bytes, uint64_t *frees) {
  *hits = atomic_load_explicit(&counts.hits, memory_order_relaxed);
  *misses = atomic_load_explicit(&counts.misses, memory_order_relaxed);
  *allocs = atomic_load_explicit(&counts.allocs, memory_order_relaxed);
  *bytes = atomic_load_explicit(&counts.alloc_bytes, memory_order_relaxed);
  *frees = atomic_load_explicit(&counts.frees, memory_order_relaxed);
}

uint64_t hak_large_live_bytes(void) { return atomic_load_explicit(&counts.live_held, memory_order_relaxed); }

/* Bytes of a mapping counted as committed while its block is live: all of it but the released tail.
 * Every change to a live block's map_size or released_tail is bracketed by live_add(h, false) and
 * live_add(h, true). */
static size_t held(const hak_large *h) { return h->map_size - h->released_tail; }
static void live_add(const hak_large *h, bool add) {
  hak_counter_add(&counts.live_held, add ? (uint64_t)held(h) : (uint64_t)0 - held(h));
}

#if HAK_SECURE
/* The block's canaries for a request of `size` bytes, with a new salt (every malloc and realloc). */
static void arm_canaries(hak_large *h, size_t size) {
  h->canary_salt = hak_secure_large_salt();
  uintptr_t canary = hak_secure_large_canary(h->user, h->canary_salt);
  h->request = size;
  memcpy(h->user - sizeof canary, &canary, sizeof canary);
  memcpy(h->user + size, &canary, sizeof canary);
}

/* A realloc that may grow the block first wipes its end canary, which would otherwise become readable
 * contents (arm_canaries writes the new one). */
static void wipe_end_canary(hak_large *h) { memset(h->user + h->request, 0, sizeof(uintptr_t)); }

void hak_large_check(const hak_large *h, bool freeing) {
  uintptr_t canary = hak_secure_large_canary(h->user, h->canary_salt), before, after;
  memcpy(&before, h->user - sizeof before, sizeof before);
  memcpy(&after, h->user + h->request, sizeof after);
  if (after != canary)
    hak_fatal_large(freeing ? "heap overflow (canary overwritten) in block" :
                    "realloc or usable size: heap overflow (canary overwritten) in block", h->user, h->request);
  if (before != canary)
    hak_fatal_large(freeing ? "heap underflow (canary before the block overwritten) in block" :
                    "realloc or usable size: heap underflow (canary before the block overwritten) in block",
                    h->user, h->request);
}
#endif

static size_t page_round(size_t n) { return (n + HAK_OS_PAGE - 1) & ~(HAK_OS_PAGE - 1); }
/* Make the last page of `h`'s mapping its guard (hardened builds): inaccessible. Returns false when
 * mprotect failed (the page stays writable, but nothing of the block's lies there). */
static bool set_guard(hak_large *h) {
  if (LARGE_GUARD == 0) return true;
  return hak_os_protect_none((uint8_t *)h + h->map_size - LARGE_GUARD, LARGE_GUARD) == 0;
}

static size_t user_offset(size_t align) { return align <= HAK_OS_PAGE ? HAK_OS_PAGE : align; }
static size_t map_align_for(size_t offset) { return offset > HAK_CHUNK_SIZE ? offset : HAK_CHUNK_SIZE; }

/* Committed-bytes accounting (os.h) of the mapping's last `tail` bytes, given back while it stays mapped. */
void hak_large_set_released_tail(hak_large *h, size_t tail) {
  if (tail > h->released_tail) hak_os_uncommit(tail - h->released_tail);
  else hak_os_recommit(h->released_tail - tail);
  h->released_tail = tail;
}

/* The mapping's block now reaches `need` bytes from the header: those may be touched and count as committed. */
static void block_reaches(hak_large *h, size_t need) {
  if (h->resident_end < need) h->resident_end = need;
  if (h->released_tail > h->map_size - need) hak_large_set_released_tail(h, h->map_size - need);
}

/* The latest large blocks whose mappings went back to the OS: a later free, realloc or usable-size call
 * of one of them is a use after free that the page map alone would call a pointer never returned. A
 * mapping made there since has its own page-map entry and is not looked up here. */
#define RELEASED_REMEMBERED 64
static struct {
  _Atomic uint64_t next;
  _Atomic(uintptr_t) user[RELEASED_REMEMBERED];
  _Atomic uint64_t bytes[RELEASED_REMEMBERED];
} released;

static void remember_released(const hak_large *h) {
  uint64_t i = atomic_fetch_add_explicit(&released.next, 1, memory_order_relaxed) % RELEASED_REMEMBERED;
  atomic_store_explicit(&released.user[i], 0, memory_order_relaxed);
  atomic_store_explicit(&released.bytes[i], hak_large_usable(h), memory_order_relaxed);
  atomic_store_explicit(&released.user[i], (uintptr_t)h->user, memory_order_release);
}

bool hak_large_was_released(const void *p, size_t *bytes) {
  for (unsigned i = 0; i < RELEASED_REMEMBERED; i++) {
    if (atomic_load_explicit(&released.user[i], memory_order_acquire) == (uintptr_t)p) {
      *bytes = atomic_load_explicit(&released.bytes[i], memory_order_relaxed);
      /* the entry may have been rewritten meanwhile: its size then belongs to another block */
      if (atomic_load_explicit(&released.user[i], memory_order_acquire) == (uintptr_t)p) return p != NULL;
    }
  }
  return false;
}

void hak_large_unmap(hak_large *h) {
  if (h->user) {
    remember_released(h); /* every block a mapping held was freed: a new one's is set after mapping */
    hak_pagemap_set(h->user, NULL);
  }
  if (h->purged) hak_os_recommit(h->map_size - HAK_OS_PAGE);
  hak_large_set_released_tail(h, 0);
  hak_os_unmap(h, h->map_size, true);
}

static bool fits(size_t map_size, size_t need) { return map_size >= need && map_size <= need + need / 2; }

/* A thread's last freed large block waits in the thread's heap (heap->large_last) instead of the cache,
 * if its mapping is at most LAST_MAX, and the thread's next large malloc takes it back if it fits. That
 * pair skips the cache's lock, size bins, lists and clock and the purger's bookkeeping: the lab's `vm`
 * (malloc 2 MiB, write a byte a page, free) went from about 70 + 210 to 35 + 100 ns for the malloc and
 * the free, where glibc takes about 50 + 110 (docs/notes/2026-11-26-large-last.md). The block leaves the
 * slot for the cache when the thread takes a block that it does not fit, frees another, exits, or
 * collects (malloc_trim), and when a pass finds it where an earlier pass saw it: the owner's maintenance
 * passes, and the purger's, which look at every heap (hak_heaps_flush_large_last) and come within a
 * delay, or at its sweeps while it waits with nothing due (1 to 8 s apart); where the purger does not
 * run, other threads' large frees and collections sweep every heap instead, once per delay at most
 * (hak_large_sweep_last). LAST_MAX bounds what an idle thread keeps that long; past a few MiB the
 * block's own use dwarfs what the pair saves. */
#define LAST_MAX ((size_t)4 << 20)
#define LAST_SEEN ((uintptr_t)1)
/* Frees into the slot between two looks at the cache's purge deadlines (hak_large_free). */
#define LAST_COLLECT_EVERY 64u

/* Whether freed mapping `h` may wait in its thread's heap: at most LAST_MAX, and a quarter of the cache's
 * cap (HAKMEM_LARGE_CACHE_MB counts the cache, not the threads' blocks), with a purge delay (0 gives
 * every freed mapping back at once). */
static bool waits_in_heap(const hak_large *h) {
  size_t cap = (size_t)hak_opts.value[HAK_OPT_LARGE_CACHE_MB] << 20;
  return h->map_size <= LAST_MAX && h->map_size <= cap / 4 && hak_opts.value[HAK_OPT_PURGE_DELAY_MS] != 0;
}

/* Put `v` in heap->large_last; returns what it held. Plain while the process has one thread: only the
 * owner can touch the slot then (the purger is a thread). */
static uintptr_t last_swap(hak_heap *heap, uintptr_t v) {
  if (hak_single_threaded()) {
    uintptr_t old = atomic_load_explicit(&heap->large_last, memory_order_relaxed);
    atomic_store_explicit(&heap->large_last, v, memory_order_relaxed);
    return old;
  }
  return atomic_exchange_explicit(&heap->large_last, v, memory_order_acq_rel);
}

/* The caller's last freed large block if it fits `need` (then the caller's); one that does not goes to
 * the cache. */
static hak_large *last_take(size_t need) {
  hak_heap *heap = hak_tls_heap;
  if (atomic_load_explicit(&heap->large_last, memory_order_relaxed) == 0) return NULL;
  hak_large *h = (hak_large *)(last_swap(heap, 0) & ~LAST_SEEN);
  if (h == NULL || fits(h->map_size, need)) return h;
  hak_large_cache_put(h);
  return NULL;
}

hak_large *hak_large_last_claim(hak_heap *heap, bool if_seen, bool *marked) {
  uintptr_t v = atomic_load_explicit(&heap->large_last, memory_order_acquire);
  if (v == 0) return NULL;
  if (if_seen && !(v & LAST_SEEN)) {
    /* a failure means the owner took it or put another there: seen again by a later pass */
    atomic_compare_exchange_strong_explicit(&heap->large_last, &v, v | LAST_SEEN, memory_order_acq_rel,
                                            memory_order_relaxed);
    *marked = true;
    return NULL;
  }
  if (!atomic_compare_exchange_strong_explicit(&heap->large_last, &v, 0, memory_order_acq_rel, memory_order_relaxed)) {
    *marked = true;
    return NULL;
  }
  return (hak_large *)(v & ~LAST_SEEN);
}

void hak_large_last_cache(hak_large *h) { hak_large_cache_put(h); }

/* Without it an idle thread's block stayed for good wherever the purger does not run (HAKMEM_BACKGROUND_PURGE
 * 0, the fast profile's; under 32 MiB; a purger that ended): four threads' 3 MiB each while a fifth worked
 * on (a review's program: 14.1 MiB kept, 2.4 before the slot). */
void hak_large_sweep_last(uint64_t now) {
  static _Atomic uint64_t swept_ms;
  long delay = hak_opts.value[HAK_OPT_PURGE_DELAY_MS];
  if (delay <= 0 || hak_purger_running()) return;
  uint64_t last = atomic_load_explicit(&swept_ms, memory_order_relaxed);
  if (now - last < (uint64_t)delay ||
      !atomic_compare_exchange_strong_explicit(&swept_ms, &last, now, memory_order_relaxed, memory_order_relaxed))
    return;
  hak_heaps_flush_large_last(true);
}

bool hak_large_flush_last(hak_heap *heap, bool if_seen) {
  bool marked = false;
  hak_large *h = hak_large_last_claim(heap, if_seen, &marked);
  if (h != NULL) hak_large_cache_put(h);
  return marked;
}

static hak_large *map_new(size_t need, size_t map_align) {
  bool huge = hak_opts.value[HAK_OPT_HUGE_PAGES] != 0 && need >= HUGE_PAGE;
  hak_large *h = hak_os_map(need, map_align, huge);
  if (h == NULL) { /* address space may be held by caches: give it back and try once more */
    hak_heaps_collect(true);
    h = hak_os_map(need, map_align, huge);
    if (h == NULL) return NULL;
  }
  h->kind = HAK_KIND_LARGE;
  h->map_size = need;
  h->resident_end = HAK_OS_PAGE; /* the header */
  h->released_tail = 0;
  h->zero = true;
#if HAK_SECURE
  h->unguarded = false;
#endif
  if (!set_guard(h)) {
    hak_os_unmap(h, need, true);
    return NULL;
  }
  return h;
}

static bool place_user(hak_large *h, uint8_t *user) {
  if (h->user == user) return true;
  if (h->user != NULL) remember_released(h); /* a freed block's mapping now serves another offset */
  if (h->user != NULL && ((uintptr_t)h->user >> HAK_CHUNK_SHIFT) != ((uintptr_t)user >> HAK_CHUNK_SHIFT))
    hak_pagemap_set(h->user, NULL);
  h->user = user;
  return hak_pagemap_set(user, (uint8_t *)h + HAK_PAGEMAP_LARGE_TAG);
}

/* Resize the mapping of h to `need` bytes, in place when the kernel can, else by moving its pages onto a
 * new mapping with the same alignment; the block keeps its offset and its pagemap entry follows it (a
 * cached mapping shrunk below its old block's offset loses that block: h->user becomes NULL).
 * Returns the header (moved or not), or NULL when memory ran out (h still mapped, at its old size, with
 * its released tail still counted as such). */
static hak_large *remap(hak_large *h, size_t need) {
  if (h->user != NULL && (size_t)(h->user - (uint8_t *)h) >= need) {
    /* a cached mapping whose last block lies past the new end: drop that block's pagemap entry before the
     * range goes, so a mapping the kernel places there meanwhile does not lose its own entry later */
    hak_pagemap_set(h->user, NULL);
    h->user = NULL;
  }
  size_t old_tail = h->released_tail;
  hak_large_set_released_tail(h, 0); /* the remap below counts the whole old size */
  if (hak_os_remap(h, h->map_size, need, NULL) != NULL) {
    h->map_size = need;
    if (h->resident_end > need) h->resident_end = need;
    return h;
  }
  if (need < h->map_size) { /* shrinking in place failed: keep the larger mapping, its tail still given back */
    hak_large_set_released_tail(h, old_tail);
    return h;
  }
  size_t off = (size_t)(h->user - (uint8_t *)h); /* growing: the block lies inside the old mapping */
  void *target = hak_os_map(need, map_align_for(off), hak_opts.value[HAK_OPT_HUGE_PAGES] != 0);
  /* the block's new entry is written now, while failing can still leave h as it was: a pagemap leaf
   * that cannot be mapped after the move would leave a block no entry leads to */
  uint8_t *new_user = target != NULL ? (uint8_t *)target + off : NULL;
  if (target != NULL && !hak_pagemap_set(new_user, (uint8_t *)target + HAK_PAGEMAP_LARGE_TAG)) {
    hak_os_unmap(target, need, true);
    target = NULL;
  }
  if (target == NULL) {
    hak_large_set_released_tail(h, old_tail);
    return NULL;
  }
  size_t old_size = h->map_size;
  void *old_user = h->user;
  /* forget the old chunk before the old range is gone, so a mapping made there meanwhile keeps its entry */
  hak_pagemap_set(old_user, NULL);
  hak_large *moved = hak_os_remap(h, old_size, need, target);
  if (moved == NULL) {
    hak_pagemap_set(new_user, NULL);
    hak_pagemap_set(old_user, (uint8_t *)h + HAK_PAGEMAP_LARGE_TAG);
    hak_os_unmap(target, need, true);
    hak_large_set_released_tail(h, old_tail);
    return NULL;
  }
  moved->map_size = need;
  moved->user = NULL;
  if (!place_user(moved, (uint8_t *)moved + off)) hak_fatal("out of memory for the page map at", moved, -1);
  return moved;
}

/* remap with the guard page (hardened builds) moved to the new end. mremap takes one mapping (VMA)
 * whole, and the guard is a mapping of its own once mprotect made it inaccessible. Made writable again it
 * merged back, but not in a forked child, where both parts also belong to the parent's copy: there every
 * growth of an inherited block failed with EFAULT, and realloc with ENOMEM (a hunt's finding,
 * tests/c/test_fork.c). So the guard page is unmapped, the block's part resized alone, and a guard set at
 * the end of whatever mapping holds the block afterwards. */
static hak_large *mapping_resize(hak_large *h, size_t need) {
#if HAK_SECURE
  uint8_t *guard = NULL;
  if (!h->unguarded) {
    guard = (uint8_t *)h + h->map_size - LARGE_GUARD;
    hak_os_unmap(guard, LARGE_GUARD, true);
    h->map_size -= LARGE_GUARD;
  }
  hak_large *resized = remap(h, need);
  if (resized != NULL && resized->map_size == need) {
    resized->unguarded = false;
    set_guard(resized); /* a failure leaves the block usable, its guard page writable */
    return resized;
  }
  /* the resize failed (NULL), or a shrink kept the old mapping (h): the guard goes back where it was, or if
   * another mapping took that page meanwhile, the block stays usable without one */
  if (guard != NULL) {
    if (hak_os_map_guard_at(guard, LARGE_GUARD) == 0) h->map_size += LARGE_GUARD;
    else h->unguarded = true;
  }
  return resized;
#else
  return remap(h, need);
#endif
}

/* calloc from a cached mapping: zero the block's `size` bytes at `user`. What lies at or past `dirty_end`
 * from the header (the mapping's resident_end before this block) is zero already: no block reached it
 * since the mapping was made or last released with MADV_DONTNEED. The rest goes to hak_os_zero, which
 * faults in no page that is not resident: a plain memset of a 256 MiB block whose last user touched one
 * byte a MiB faulted in all 65,536 pages (four rounds: 264 MiB resident and 0.25 s, against glibc's
 * 1.5 MiB and 3 ms; `test_reclaim calloc-large`). */
static void zero_block(hak_large *h, uint8_t *user, size_t size, size_t dirty_end) {
  size_t off = (size_t)(user - (uint8_t *)h);
  if (dirty_end > off) hak_os_zero(user, dirty_end - off < size ? dirty_end - off : size);
}

void *hak_large_alloc(size_t size, size_t align, bool zero) {
  hak_init();
  size_t off = user_offset(align);
  if (size > ((size_t)1 << 46) || off > ((size_t)1 << 46)) {
    errno = ENOMEM;
    return NULL;
  }
  /* reach: the bytes the block may touch from the header on, at least one past the block, so a zero-size
   * block at a chunk boundary stays in its mapping; need: the mapping, its guard page included */
  size_t reach = page_round(off + (size ? size : 1) + LARGE_END_CANARY), need = reach + LARGE_GUARD;
  size_t map_align = map_align_for(off);
  int saved_errno = errno; /* failed attempts that a fallback repairs must not show through malloc */
  hak_large *h = NULL;
  bool from_last = false;
  if (map_align == HAK_CHUNK_SIZE) {
    h = last_take(need);
    from_last = h != NULL;
    if (h == NULL) h = hak_large_cache_take(need);
  }
  if (h != NULL && !fits(h->map_size, need)) {
    hak_large *resized = mapping_resize(h, need);
    if (resized == NULL) hak_large_unmap(h); /* out of memory: give the old mapping back and map afresh */
    h = resized;
  } else if (h != NULL && h->resident_end > reach + reach / 4 && !h->zero) {
    /* earlier blocks may have touched over 1.25x the request: give back the pages past it (big: peak
     * RSS 37.0 -> 34.4 MiB, docs/notes 2026-11-23); a tail no block touched since needs no call */
    if (hak_os_advise((uint8_t *)h + reach, h->resident_end - reach, MADV_DONTNEED) == 0) {
      hak_large_set_released_tail(h, h->map_size - reach);
      h->resident_end = reach;
    }
  }
  if (h != NULL) {
    hak_counter_add(&counts.hits, 1);
  } else {
    hak_counter_add(&counts.misses, 1);
    h = map_new(need, map_align);
    if (h == NULL) {
      errno = ENOMEM;
      return NULL;
    }
  }
  uint8_t *user = (uint8_t *)h + off;
  if (!place_user(h, user)) {
    h->user = NULL; /* never handed out, and its page-map entry could not be made: nothing to forget */
    hak_large_unmap(h);
    errno = ENOMEM;
    return NULL;
  }
  h->cached = 0;
  size_t dirty_end = h->resident_end;
  block_reaches(h, reach);
  errno = saved_errno;
  if (zero && !h->zero) zero_block(h, user, size, dirty_end);
  h->zero = false;
#if HAK_SECURE
  arm_canaries(h, size);
#endif
  hak_counter_add(&counts.allocs, 1);
  hak_counter_add(&counts.alloc_bytes, h->map_size - LARGE_GUARD - off); /* the block's size, as in default builds */
  live_add(h, true);
  if (!from_last) hak_purger_note_growth(); /* a new mapping, or a cached one whose pages may have been purged */
  /* the block is the caller's already: a nested malloc cannot disturb it. From the slot too: a forked
   * child asks for its purger here, and one whose large mallocs all came from the slot it inherited kept
   * the parent's 190 MiB of freed memory for good (a review) */
  hak_purger_start_pending();
  return user;
}

size_t hak_large_usable(const hak_large *h) {
#if HAK_SECURE
  return h->request;
#else
  return h->map_size - (size_t)(h->user - (const uint8_t *)h);
#endif
}

size_t hak_large_usable_claim(hak_large *h) {
#if HAK_SECURE
  return h->request; /* the block already reaches its request and end canary: nothing more to count */
#else
  live_add(h, false);
  h->resident_end = h->map_size; /* the caller may now write all of it */
  hak_large_set_released_tail(h, 0);
  live_add(h, true);
  return hak_large_usable(h);
#endif
}

void hak_large_bad_pointer(const hak_large *h, const void *p, bool freeing) {
  if (h->kind != HAK_KIND_LARGE)
    hak_fatal(freeing ? "heap corruption (a large block's header was overwritten: an underflow?), freeing"
                      : "heap corruption (a large block's header was overwritten: an underflow?) at", p, -1);
  hak_fatal_unknown(p, freeing, freeing ? "free of a pointer that is not an allocated block:"
                                        : "usable size asked of a pointer hakmem never returned:");
}

void hak_large_free(hak_large *h, void *p) {
  if (unlikely(h->kind != HAK_KIND_LARGE || p != h->user)) hak_large_bad_pointer(h, p, true);
  /* taken atomically first: two threads freeing the block at once both read it live before either set
   * it, and the cache got the header twice (a review: the same block from two mallocs, 7 runs in 200) */
  if (unlikely(__atomic_exchange_n(&h->cached, 1, __ATOMIC_ACQ_REL)))
    hak_fatal_large("double free detected of", p, hak_large_usable(h));
#if HAK_SECURE
  hak_large_check(h, true);
#endif
  hak_counter_add(&counts.frees, 1);
  live_add(h, false);
  hak_heap *heap = hak_tls_heap;
  if (waits_in_heap(h)) {
    if (unlikely(heap == &hak_heap_empty)) heap = hak_heap_for_counting(); /* none past the thread's exit */
    uintptr_t prev = heap != &hak_heap_empty ? last_swap(heap, (uintptr_t)h) : (uintptr_t)h;
    if (prev == 0) {
      /* the cache's deadlines, which a free into the cache would have looked at (unless the purger runs):
       * a lone program looping on its last block kept a freed 24 MiB one resident for good (test_large_last
       * lone-hot) */
      if (unlikely(++heap->large_last_frees % LAST_COLLECT_EVERY == 0) && !hak_purger_running())
        hak_large_collect(false);
      return;
    }
    h = (hak_large *)(prev & ~LAST_SEEN);
  }
  hak_large_cache_put(h);
  hak_large_sweep_last(hak_clock_ms());
}

void *hak_large_realloc(hak_large *h, void *p, size_t size) {
  size_t off = (size_t)((uint8_t *)p - (uint8_t *)h);
  if (size > ((size_t)1 << 46)) {
    errno = ENOMEM;
    return NULL;
  }
  size_t reach = page_round(off + size + LARGE_END_CANARY), need = reach + LARGE_GUARD; /* as in hak_large_alloc */
  live_add(h, false);
#if HAK_SECURE
  wipe_end_canary(h);
#endif
  if (need <= h->map_size && need >= h->map_size / 2) {
    block_reaches(h, reach);
#if HAK_SECURE
    arm_canaries(h, size);
#endif
    live_add(h, true);
    return p;
  }
  int saved_errno = errno;
  hak_large *resized = mapping_resize(h, need);
  if (resized == NULL) {
    /* address space may be held by caches, as for a new mapping (map_new): give it back and try once
     * more (a review: realloc said ENOMEM while the large cache held a freed 400 MiB under RLIMIT_AS,
     * and malloc_trim then let it through) */
    hak_heaps_collect(true);
    resized = mapping_resize(h, need);
  }
  errno = resized != NULL ? saved_errno : ENOMEM;
  if (resized == NULL) {
#if HAK_SECURE
    arm_canaries(h, h->request);
#endif
    live_add(h, true); /* still mapped as it was */
    return NULL;
  }
  block_reaches(resized, reach);
#if HAK_SECURE
  arm_canaries(resized, size);
#endif
  live_add(resized, true);
  return resized->user;
}
