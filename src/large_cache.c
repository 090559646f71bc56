/* large_cache.c — the large tier's cache of freed mappings (the blocks themselves are large.c's).
 * Freed mappings (most recent first) serve later requests up to 1.25x smaller without any system call,
 * up to 1.5x smaller after releasing the pages of the unused tail (one madvise); a request that no cached
 * mapping fits takes the nearest one (a larger one, or a smaller one of at least half its size), which
 * large.c resizes with mremap, its faulted-in pages coming along, rather than mapping fresh memory beside
 * a cache that keeps growing.
 * Cached mappings are purged (MADV_DONTNEED, or MADV_FREE) after the purge delay (a big one later: as
 * long as faulting its pages in again would take, hold_ms), or at once, oldest first, with MADV_DONTNEED,
 * when what they may hold passes HAKMEM_LARGE_CACHE_MB (unmapped then under MADV_FREE or locked memory);
 * they are unmapped when the cache maps four times that (once where address space is scarce) or reaches
 * its entry limit, purged ones first, oldest first. The cache is indexed by size (bins of a quarter power
 * of two), so a request finds its mapping without walking it. */
#include <limits.h>
#include <pthread.h>

#include "large_internal.h"
#include "sync.h"

/* At 64, a program cycling through 200 blocks of 1 MiB unmapped and faulted in 136 of them at every
 * cycle: 3x mimalloc's time, at the same peak RSS (docs/notes/2026-11-25-large-cache-bins.md); at 1024,
 * one cycling through 2000 mapped and unmapped half of them (docs/notes/2026-11-25-large-cache-purge.md).
 * Each cached mapping is one VMA (two with a guard page), of the kernel's 65,530 by default. */
#define LARGE_CACHE_ENTRIES 4096
/* The cache's mappings may hold at most HAKMEM_LARGE_CACHE_MB resident (large.resident), and it maps at
 * most this many times as much in all (address space, and commit charge under strict overcommit; once
 * the cap where those are scarce: mapped_cap). */
#define CACHE_MAPPED_CAPS 4
/* Size bins: four per power of two of pages (bin_of), up to the largest mapping (2^47 bytes). */
#define CACHE_BINS 144

/* A list of cached mappings, most recent first. */
typedef struct cache_list {
  hak_large *head, *tail;
} cache_list;

static struct {
  pthread_mutex_t lock;
  cache_list fresh;  /* cached mappings not purged, most recently freed first */
  cache_list purged; /* purged ones and those whose purge was refused, most recently purged first */
  hak_large *bin[CACHE_BINS]; /* every cached mapping by size (bin_of), most recently cached first */
  uint64_t bin_used[(CACHE_BINS + 63) / 64]; /* bit b set: bin[b] holds a mapping */
  /* count and unpurged are read without the lock but written only under it (or by the only thread), so
   * they are updated with HAK_COUNT_N's plain load and store */
  _Atomic uint64_t count;    /* cached mappings: read without the lock to skip an empty cache */
  size_t bytes;
  _Atomic uint64_t unpurged; /* cached mappings not purged yet (nor refused) */
  _Atomic uint64_t unpurged_bytes; /* what they may hold resident: the sum of their resident_end */
  size_t resident; /* what every cached mapping may hold resident (lazily purged and refused ones too):
                      the sum of their resident_end, a page for each one purged with MADV_DONTNEED */
} large = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The tier's purge delay learns from each mapping its deadline purged and a request took back
 * (purge_delay.c): a 64 MiB block every 200 ms against a 100 ms delay was faulted in at every round. */
static hak_learned_delay learned_delay;

static long large_delay(uint64_t now) { return hak_learned_delay_in_force(&learned_delay, now); }

/* A cached mapping is kept unpurged as long as faulting its pages in again would take, if that is longer
 * than the tier's delay: about a millisecond for each MiB it may hold resident (a page fault cost about
 * 4 us of system time on the AMD VM type the lab uses; 1,024 KiB is 256 of them). A block of a few MiB
 * keeps the tier's delay; a big one that a program takes back soon after the delay no longer costs more
 * than keeping it did. The lab's `realistic` there reuses its first 227 MB buffer about 150 ms after its
 * free: under the 100 ms delay the purger gave it back first, and the third buffer faulted 56 K pages in
 * again, 0.5 s against tcmalloc's 0.35 (docs/notes/2026-11-26-large-hold.md). At most the tier's learning
 * ceiling (32 delays, 10 s), and only
 * - if the cache held at most half of HAKMEM_LARGE_CACHE_MB, the mapping included, when it was freed
 *   (decided then, so that later frees do not end the hold of a mapping already past the delay, which
 *   their own collection would then purge): past the cap, a free purges the oldest mappings itself, and
 *   a held 600 MiB block purged so by a free 300 ms later took that free 52-81 ms, where the purger had
 *   given it back long before (a review). A free that takes the cache past its cap all the same (a held
 *   400 MiB block, then a 700 MiB free) ends the holds of those past the delay and leaves them to the
 *   purger, which it wakes at once (the cache holds more than its cap until then): purged by that free
 *   itself, they took it 41-55 ms (a second review). While the purger runs, frees leave every deadline
 *   purge to it (hak_large_cache_put);
 * - while the purger runs by the clock (not hak_purger_alone): a single-threaded program's trims bound what
 *   waits instead, and memory held past the delay went to a trim, whose refault raised the trims' bound to
 *   1 GiB of idle memory in a review's program (as it did for the learned delay, purge_delay.c). */
#define HOLD_MS_SHIFT 20

/* The hold in ms that mapping `h`'s resident pages earn it (the option's delay > 0). */
static uint64_t hold_ms(const hak_large *h) {
  if (!h->size_held || hak_purger_alone()) return 0;
  uint64_t hold = (uint64_t)h->resident_end >> HOLD_MS_SHIFT, most = hak_learned_delay_ceiling();
  return hold < most ? hold : most;
}

/* When cached mapping `h` falls due for its purge under a delay of `delay` ms (> 0). */
static uint64_t due_ms(const hak_large *h, long delay) {
  uint64_t hold = hold_ms(h);
  return h->freed_ms + (hold > (uint64_t)delay ? hold : (uint64_t)delay);
}

void hak_large_lock(void) { pthread_mutex_lock(&large.lock); }
void hak_large_unlock(void) { pthread_mutex_unlock(&large.lock); }
void hak_large_after_fork_child(void) {
  pthread_mutex_init(&large.lock, NULL);
  hak_learned_delay_after_fork(&learned_delay, hak_clock_ms());
}

uint64_t hak_large_waiting_bytes(void) { return atomic_load_explicit(&large.unpurged_bytes, memory_order_relaxed); }

static void list_push_head(cache_list *list, hak_large *h) {
  h->prev = NULL;
  h->next = list->head;
  if (list->head) list->head->prev = h;
  else list->tail = h;
  list->head = h;
}

static void list_unlink(cache_list *list, hak_large *h) {
  if (h->prev) h->prev->next = h->next;
  else list->head = h->next;
  if (h->next) h->next->prev = h->prev;
  else list->tail = h->prev;
  h->next = h->prev = NULL;
}

/* The size bin of a mapping of `bytes`: pages below 4 each their own, then four bins per power of two
 * (each spans a quarter of its power: [(4 + k) << (e - 2), (5 + k) << (e - 2)) pages, e = log2(pages)). */
static unsigned bin_of(size_t bytes) {
  size_t pages = bytes / HAK_OS_PAGE;
  if (pages < 4) return (unsigned)pages;
  unsigned e = 63u - (unsigned)__builtin_clzll(pages);
  return 4 * (e - 1) + (unsigned)((pages >> (e - 2)) & 3);
}

static void bin_insert(hak_large *h) {
  unsigned b = bin_of(h->map_size);
  h->bin_prev = NULL;
  h->bin_next = large.bin[b];
  if (large.bin[b]) large.bin[b]->bin_prev = h;
  large.bin[b] = h;
  large.bin_used[b / 64] |= (uint64_t)1 << (b % 64);
}

static void bin_remove(hak_large *h) {
  unsigned b = bin_of(h->map_size);
  if (h->bin_prev) h->bin_prev->bin_next = h->bin_next;
  else large.bin[b] = h->bin_next;
  if (h->bin_next) h->bin_next->bin_prev = h->bin_prev;
  if (large.bin[b] == NULL) large.bin_used[b / 64] &= ~((uint64_t)1 << (b % 64));
  h->bin_next = h->bin_prev = NULL;
}

/* The nearest bin after `b` (up) or before it (down) that holds a mapping; -1 if none. */
static int bin_nearest(unsigned b, bool up) {
  for (int i = up ? (int)b + 1 : (int)b - 1; i >= 0 && i < CACHE_BINS;) {
    uint64_t word = large.bin_used[i / 64];
    word = up ? word >> (i % 64) : word << (63 - i % 64);
    if (word != 0) return up ? i + __builtin_ctzll(word) : i - __builtin_clzll(word);
    i = up ? (i / 64 + 1) * 64 : (i / 64) * 64 - 1;
  }
  return -1;
}

static void cache_unlink(hak_large *h) {
  list_unlink(h->purged || h->purge_refused ? &large.purged : &large.fresh, h);
  bin_remove(h);
  HAK_COUNT_N(large.count, (uint64_t)-1);
  large.bytes -= h->map_size;
  large.resident -= h->resident_end;
  if (!h->purged && !h->purge_refused) {
    HAK_COUNT_N(large.unpurged, (uint64_t)-1);
    HAK_COUNT_N(large.unpurged_bytes, (uint64_t)0 - h->resident_end);
  }
}

/* Put an unpurged mapping at the head of the cache: the most recently freed end. */
static void cache_push_head(hak_large *h) {
  list_push_head(&large.fresh, h);
  bin_insert(h);
  HAK_COUNT_N(large.count, 1);
  large.bytes += h->map_size;
  large.resident += h->resident_end;
  h->purge_refused = false;
  h->trimmed_bytes = 0;
  h->deadline_purged = false;
  HAK_COUNT_N(large.unpurged, 1);
  HAK_COUNT_N(large.unpurged_bytes, h->resident_end);
}

/* Put back in the cache a mapping that hak_large_cache_put took out and purged with MADV_DONTNEED outside the
 * lock: at the head of the purged list, most recently purged first. */
static void cache_push_purged(hak_large *h) {
  h->purged = true;
  h->zero = true;
  h->purge_refused = false;
  h->trimmed_bytes = 0;
  h->deadline_purged = false;
  h->resident_end = HAK_OS_PAGE;
  hak_large_set_released_tail(h, 0); /* the purge took the whole mapping off the count */
  bool locked = hak_lock(&large.lock);
  list_push_head(&large.purged, h);
  bin_insert(h);
  HAK_COUNT_N(large.count, 1);
  large.bytes += h->map_size;
  large.resident += h->resident_end;
  hak_unlock(&large.lock, locked);
}

/* The most bytes the cache keeps mapped for a cap of `cap` on what it holds: CACHE_MAPPED_CAPS times it,
 * or the cap itself where address space or commit charge is scarce (hak_os_address_space_tight: under
 * `ulimit -v` the program's own mmap and pthread_create failed beside a cache that held four caps). */
static size_t mapped_cap(size_t cap) { return hak_os_address_space_tight() ? cap : CACHE_MAPPED_CAPS * cap; }

/* Mappings of need's own bin looked at before the next bin up is taken, when that bin holds any. */
#define BIN_SCAN_MAX 16

/* The cached mapping nearest to `need` bytes, unlinked: the smallest one of at least `need` bytes, or else
 * the largest if it has at least half of `need`; NULL if there is none. It fits (no resize needed) when
 * it has need .. 1.5 * need. Growing a smaller mapping saves the faults of its pages and keeps the cache
 * from filling with mappings too small to serve anything, but every growth faults the new tail in: below
 * half the request that costs more than it saves (big: 5-25 MiB blocks, docs/notes).
 * Nearest within a bin: need's own bin is searched (an exact size ends the search; past BIN_SCAN_MAX
 * mappings only if the next bin up is empty, since its mappings are at most about 1.56x need), then the
 * most recently cached mapping of the nearest bin above, or below. Stopping at 16 whatever the next bin
 * held passed over an exact fit behind 16 smaller mappings and cut a cached 100 MiB mapping down
 * instead (a review). */
hak_large *hak_large_cache_take(size_t need) {
  if (atomic_load_explicit(&large.count, memory_order_relaxed) == 0) return NULL;
  hak_large *above = NULL, *below = NULL;
  bool locked = hak_lock(&large.lock);
  unsigned b = bin_of(need), looked = 0;
  int up = bin_nearest(b, true);
  unsigned limit = up == (int)b + 1 ? BIN_SCAN_MAX : UINT_MAX;
  for (hak_large *h = large.bin[b]; h != NULL && looked < limit; h = h->bin_next, looked++) {
    if (h->map_size >= need) {
      if (above == NULL || h->map_size < above->map_size) above = h;
      if (h->map_size == need) break;
    } else if (below == NULL || h->map_size > below->map_size) {
      below = h;
    }
  }
  int near;
  if (above == NULL && up >= 0) above = large.bin[up];
  if (above == NULL && below == NULL && (near = bin_nearest(b, false)) >= 0) below = large.bin[near];
  hak_large *best = above != NULL ? above : (below != NULL && below->map_size >= need / 2 ? below : NULL);
  if (best != NULL) cache_unlink(best);
  hak_unlock(&large.lock, locked);
  if (best != NULL && !best->purged && hak_learned_delay_stands(&learned_delay)) /* else a cached pair reads no clock */
    hak_learned_delay_note_block(&learned_delay, hak_clock_ms(), best->freed_ms, false);
  if (best != NULL && best->purged) {
    hak_os_recommit(best->map_size - HAK_OS_PAGE);
    best->purged = false;
    if (best->deadline_purged) hak_learned_delay_note_block(&learned_delay, hak_clock_ms(), best->freed_ms, true);
    /* what the request takes back of what the trim purged: a mapping cut down to a small request is
     * not faulted in whole */
    if (best->trimmed_bytes != 0)
      hak_purger_note_refault(HAK_TRIM_LARGE, best->trimmed_bytes < need ? best->trimmed_bytes : need);
  }
  return best;
}

static void collect_at(bool force, uint64_t now);
static bool purge_cached_locked(hak_large *h, bool lazy);

/* Cache mapping `h`, whose block was freed (or unmap it, if the cache keeps none of its size). */
void hak_large_cache_put(hak_large *h) {
  size_t cap = (size_t)hak_opts.value[HAK_OPT_LARGE_CACHE_MB] << 20;
  if (hak_opts.value[HAK_OPT_PURGE_DELAY_MS] == 0 || h->map_size > cap) {
    hak_large_unmap(h);
    return;
  }
  uint64_t now = hak_clock_ms(); /* kept here: once unlocked, h may be taken or unmapped by another thread */
  long delay = large_delay(now);
  h->freed_ms = now;
  hak_large *evict = NULL, *purge = NULL;
  bool lazy = hak_opts.value[HAK_OPT_PURGE_MODE] == 1;
  bool locked = hak_lock(&large.lock);
  cache_push_head(h);
  h->size_held = large.resident <= cap / 2;
  uint64_t due = due_ms(h, delay); /* h's own: the newest mapping's, but it may fall before older ones' */
  while ((large.bytes > cap && large.bytes > mapped_cap(cap)) ||
         atomic_load_explicit(&large.count, memory_order_relaxed) > LARGE_CACHE_ENTRIES) {
    hak_large *old = large.purged.tail != NULL ? large.purged.tail : large.fresh.tail; /* the cheapest to lose */
    cache_unlink(old);
    old->next = evict;
    evict = old;
  }
  /* over the cap, the oldest unpurged mappings are purged, not unmapped: a mapping that holds nothing
   * costs no memory, and a later request takes it without two system calls. Out of the cache while the
   * lock is dropped: purging 900 MiB under it stalled every other large malloc for 30 ms (a review).
   * With MADV_FREE (which leaves the pages counted) mappings are unmapped instead, purged and refused ones
   * first, as they are when locked memory refuses the purge */
  bool hand_over = !lazy && delay > 0 && hak_purger_running();
  size_t handed = 0; /* what the mappings left to the purger hold */
  hak_large *oldest = large.fresh.tail;
  while (large.resident - handed > cap) {
    hak_large *old = oldest;
    if (hand_over && old != NULL && old != h && old->size_held && old->freed_ms + (uint64_t)delay <= now) {
      old->size_held = false; /* due now */
      handed += old->resident_end;
      oldest = old->prev;
      continue;
    }
    bool purging = !lazy && old != NULL && old != h;
    if (!purging) old = large.purged.tail != NULL ? large.purged.tail : old;
    if (old == NULL || old == h) break; /* h alone fits the cap */
    if (old == oldest) oldest = old->prev;
    cache_unlink(old);
    old->next = purging ? purge : evict;
    *(purging ? &purge : &evict) = old;
  }
  uint64_t cached_bytes = large.bytes;
  hak_unlock(&large.lock, locked);
  while (purge != NULL) {
    hak_large *next = purge->next;
    if (hak_os_purge((uint8_t *)purge + HAK_OS_PAGE, purge->map_size - HAK_OS_PAGE, false) == 0) {
      cache_push_purged(purge);
    } else {
      purge->next = evict;
      evict = purge;
    }
    purge = next;
  }
  while (evict != NULL) {
    hak_large *next = evict->next;
    hak_large_unmap(evict);
    evict = next;
  }
  /* while the purger runs, deadline purges are its work, not a free's: a free that came first took as
   * long as the madvise, tens of ms for a big block */
  if (!hak_purger_running()) collect_at(false, now);
  hak_purger_note(handed > 0 ? now : due, cached_bytes); /* delay > 0 here or the purger ignores it */
}

void hak_large_collect(bool force) {
  uint64_t now = hak_clock_ms();
  if (!force) hak_large_sweep_last(now);
  collect_at(force, now);
}

uint64_t hak_large_purge_due(void) {
  long delay = large_delay(hak_clock_ms());
  if (delay <= 0 || atomic_load_explicit(&large.unpurged, memory_order_relaxed) == 0) return 0;
  uint64_t due = 0;
  bool locked = hak_lock(&large.lock);
  /* oldest first: the first mapping that its size holds no longer than the delay is due before every
   * newer one, and those before it are each held for their own size */
  for (const hak_large *h = large.fresh.tail; h != NULL; h = h->prev) {
    uint64_t at = due_ms(h, delay);
    if (due == 0 || at < due) due = at;
    if (at == h->freed_ms + (uint64_t)delay) break;
  }
  hak_unlock(&large.lock, locked);
  return due;
}

/* Purge cached mapping `h` unless it is purged already or its purge was refused (large.lock held). */
static bool purge_cached_locked(hak_large *h, bool lazy) {
  if (h->purged || h->purge_refused) return false;
  HAK_COUNT_N(large.unpurged_bytes, (uint64_t)0 - h->resident_end);
  HAK_COUNT_N(large.unpurged, (uint64_t)-1);
  /* off the unpurged list either way: its walks from the oldest end would pass a refused one at every free */
  list_unlink(&large.fresh, h);
  list_push_head(&large.purged, h);
  if (hak_os_purge((uint8_t *)h + HAK_OS_PAGE, h->map_size - HAK_OS_PAGE, lazy) == 0) {
    h->purged = true;
    h->zero = !lazy;
    if (!lazy) { /* MADV_FREE pages stay until the kernel needs them */
      large.resident -= h->resident_end - HAK_OS_PAGE;
      h->resident_end = HAK_OS_PAGE;
    }
    hak_large_set_released_tail(h, 0); /* the purge took the whole mapping off the count */
  } else {
    /* refused (locked memory): not tried again while it stays cached, and no deadline of its own
     * (retried a delay later, it cost a failing madvise and a purger wake-up every delay, for good) */
    h->purge_refused = true;
  }
  return h->purged;
}

/* hak_large_collect with the clock already read (a free has just read it). */
static void collect_at(bool force, uint64_t now) {
  if (!force && atomic_load_explicit(&large.unpurged, memory_order_relaxed) == 0) return;
  long delay = large_delay(now);
  if (!force && delay < 0) return;
  bool lazy = hak_opts.value[HAK_OPT_PURGE_MODE] == 1;
  hak_large *unmap = NULL;
  bool locked = hak_lock(&large.lock);
  if (force) {
    for (hak_large *h; (h = large.fresh.tail != NULL ? large.fresh.tail : large.purged.tail) != NULL;) {
      cache_unlink(h);
      h->next = unmap;
      unmap = h;
    }
  } else {
    /* an entry may carry a later time than `now`: its free read the clock after this caller did. Purged
     * entries, and those whose purge was refused, move to the other list: the walk passes only due ones */
    for (hak_large *h = large.fresh.tail, *prev; h != NULL && h->freed_ms + (uint64_t)delay <= now; h = prev) {
      prev = h->prev;
      if (due_ms(h, delay) > now) continue; /* held for its size (hold_ms): the walk passes it */
      if (purge_cached_locked(h, lazy)) h->deadline_purged = true;
    }
  }
  hak_unlock(&large.lock, locked);
  while (unmap != NULL) {
    hak_large *next = unmap->next;
    hak_large_unmap(unmap);
    unmap = next;
  }
}

bool hak_large_trim(uint64_t keep_bytes, uint64_t *waiting) {
  *waiting = atomic_load_explicit(&large.unpurged_bytes, memory_order_relaxed);
  if (*waiting <= keep_bytes || atomic_load_explicit(&large.unpurged, memory_order_relaxed) < 2) return false;
  bool lazy = hak_opts.value[HAK_OPT_PURGE_MODE] == 1, trimmed = false;
  bool locked = hak_lock(&large.lock);
  /* oldest first, until what waits fits: a walk from the newest end passed every mapping kept, at every
   * free (1000 of them, once the cache held more than 64) */
  for (hak_large *h = large.fresh.tail, *prev; h != NULL && h != large.fresh.head &&
                                               atomic_load_explicit(&large.unpurged_bytes, memory_order_relaxed) > keep_bytes;
       h = prev) {
    prev = h->prev; /* a purge moves h to the other list */
    size_t reach = h->resident_end;
    if (purge_cached_locked(h, lazy)) {
      h->trimmed_bytes = reach;
      trimmed = true;
    }
  }
  hak_unlock(&large.lock, locked);
  return trimmed;
}
