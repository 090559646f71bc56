/* purge_delay.c — the purge delay that learns. Each tier that purges its free memory by a deadline (the
 * large cache, large.c; the segments' free slices, segment.c) keeps one hak_learned_delay. It starts at
 * HAKMEM_PURGE_DELAY_MS. When the tier takes back memory that its deadline purged, within the learning
 * ceiling (DELAY_LEARN_MAX times the option, at most 10 s unless the option is longer) of its free, the
 * program reuses that memory at that interval and the purge only turned the reuse into page faults (a
 * 64 MiB block every 200 ms against a 100 ms delay: 16,384 faults a round; 800 blocks of 256 KiB: 39,000
 * faults a round, 4x tcmalloc's time). The delay then rises to 5/4 of that interval. Memory kept unpurged
 * and taken back after longer than the option's delay shows the reuse goes on. Without either for ten
 * learned delays, the delay halves, once for every ten that went by, down to the option.
 *
 * The large tier learns from each mapping taken back (a mapping is a block of its own). The slices learn
 * from a share (hak_learned_delay_note_slices): within one window of a ceiling's length, the purged memory
 * taken back must reach the larger of 1 MiB, an eighth of the tier's live memory and an eighth of what its
 * deadline purges purged in this window or the one before, all counted in the pages that were resident
 * when the deadline purged them (a 56 KiB malloc takes a page of 28 slices, 1.8 MB, and faults in one OS
 * page). The delay then becomes 5/4 of the share's mean interval, weighted by those bytes, whether longer
 * or shorter than before. A review of a first version, which learned from any slice taken back, found a
 * 200-byte malloc by another thread teaching the delay for a 400 MB burst, held 3.2 s instead of 0.12 s
 * (docs/notes/2026-11-25-learned-slices-delay.md). Kept memory refreshes the delay once it reaches the
 * same share and an eighth of what waits to be purged, and brings it down to 5/4 of the longest interval
 * it came back after in this window or the one before.
 *
 * Not in a single-threaded program under HAKMEM_BACKGROUND_PURGE=auto (hak_purger_alone): its trims bound
 * what waits, and memory the option's deadline no longer purged went to a trim instead, whose refault
 * raised the trims' bound at every burst of a review's program (test_one_thread unrelated-reuse). A
 * forked child starts from the option and does not learn from memory freed before the fork (its first
 * takes of what the parent had purged measured the parent's sleeps). */
#include <pthread.h>

#include "internal.h"

#define DELAY_LEARN_MAX 32
#define DELAY_LEARN_CEILING_MS 10000
/* The smallest share of purged memory taken back that teaches the slices' delay. */
#define SHARE_MIN_BYTES ((uint64_t)1 << 20)

/* The longest delay learning may reach for an option of `delay` ms (> 0). */
static uint64_t learn_ceiling(long delay) {
  uint64_t most = (uint64_t)delay * DELAY_LEARN_MAX;
  if (most > DELAY_LEARN_CEILING_MS) most = DELAY_LEARN_CEILING_MS;
  return most > (uint64_t)delay ? most : (uint64_t)delay;
}

uint64_t hak_learned_delay_ceiling(void) {
  long delay = hak_opts.value[HAK_OPT_PURGE_DELAY_MS];
  return delay > 0 ? learn_ceiling(delay) : 0;
}

long hak_learned_delay_in_force(hak_learned_delay *d, uint64_t now) {
  long delay = hak_opts.value[HAK_OPT_PURGE_DELAY_MS];
  uint64_t learned = atomic_load_explicit(&d->ms, memory_order_relaxed);
  if (delay <= 0 || learned <= (uint64_t)delay || hak_purger_alone()) return delay;
  uint64_t at = atomic_load_explicit(&d->learned_at, memory_order_relaxed);
  if ((int64_t)(now - at) > (int64_t)(10 * learned)) {
    while (learned > (uint64_t)delay && (int64_t)(now - at) > (int64_t)(10 * learned)) {
      at += 10 * learned;
      learned /= 2;
    }
    atomic_store_explicit(&d->ms, learned > (uint64_t)delay ? learned : 0, memory_order_relaxed);
    atomic_store_explicit(&d->learned_at, now, memory_order_relaxed);
  }
  uint64_t most = learn_ceiling(delay);
  if (learned > most) learned = most;
  return learned > (uint64_t)delay ? (long)learned : delay;
}

bool hak_learned_delay_stands(const hak_learned_delay *d) {
  return atomic_load_explicit(&d->ms, memory_order_relaxed) != 0;
}

uint64_t hak_learned_delay_interval(const hak_learned_delay *d, uint64_t now, uint64_t freed_ms) {
  long delay = hak_opts.value[HAK_OPT_PURGE_DELAY_MS];
  if (delay <= 0 || hak_purger_alone() || freed_ms < atomic_load_explicit(&d->forked_at, memory_order_relaxed) ||
      now < freed_ms || now - freed_ms > learn_ceiling(delay))
    return 0;
  return now - freed_ms;
}

/* The delay for memory that came back after `interval` ms (> 0): 5/4 of it, within the ceiling; 0 if
 * that is not above the option (the option's delay then stands). */
static uint64_t delay_for(uint64_t interval) {
  long delay = hak_opts.value[HAK_OPT_PURGE_DELAY_MS];
  uint64_t want = interval + interval / 4, most = learn_ceiling(delay);
  if (want > most) want = most;
  return want > (uint64_t)delay ? want : 0;
}

void hak_learned_delay_note_block(hak_learned_delay *d, uint64_t now, uint64_t freed_ms, bool purged) {
  uint64_t interval = hak_learned_delay_interval(d, now, freed_ms);
  if (interval == 0) return;
  if (purged) { /* the large tier keeps the longest interval a block came back after */
    uint64_t want = delay_for(interval);
    if (want > atomic_load_explicit(&d->ms, memory_order_relaxed)) atomic_store_explicit(&d->ms, want, memory_order_relaxed);
    atomic_store_explicit(&d->learned_at, now, memory_order_relaxed);
  } else if (interval > (uint64_t)hak_opts.value[HAK_OPT_PURGE_DELAY_MS]) { /* kept, and the reuse goes on */
    atomic_store_explicit(&d->learned_at, now, memory_order_relaxed);
  }
}

/* Start a new window if the current one is older than a ceiling (d->lock held): what a window saw is
 * forgotten after two, so that neither a trickle of takes nor one old burst of purges weighs on later
 * decisions. A clock read before the window started (a collection that read it, then purged for a
 * while) counts in the current window. */
static void roll_window(hak_learned_delay *d, uint64_t now) {
  uint64_t span = learn_ceiling(hak_opts.value[HAK_OPT_PURGE_DELAY_MS]), at = d->window_at;
  if (at != 0 && (now < at || now - at <= span)) return;
  bool recent = at != 0 && now - at <= 2 * span; /* the window ending now began within two spans */
  d->purged_before = recent ? d->purged_bytes : 0;
  d->kept_max_before = recent ? d->kept_max_ms : 0;
  d->window_at = now;
  d->purged_bytes = d->taken_bytes = d->taken_kib_ms = d->kept_bytes = d->kept_max_ms = 0;
}

void hak_learned_delay_note_purged(hak_learned_delay *d, uint64_t now, uint64_t bytes) {
  if (hak_opts.value[HAK_OPT_PURGE_DELAY_MS] <= 0 || bytes == 0) return;
  pthread_mutex_lock(&d->lock);
  roll_window(d, now);
  d->purged_bytes += bytes;
  pthread_mutex_unlock(&d->lock);
}

/* The share of memory a window's takes must reach before they count (d->lock held). */
static uint64_t share(const hak_learned_delay *d, uint64_t live_bytes) {
  uint64_t most = d->purged_bytes > d->purged_before ? d->purged_bytes : d->purged_before;
  if (most < live_bytes) most = live_bytes;
  return most / 8 > SHARE_MIN_BYTES ? most / 8 : SHARE_MIN_BYTES;
}

void hak_learned_delay_note_slices(hak_learned_delay *d, uint64_t now, const hak_slices_taken *taken) {
  if (taken->purged_bytes == 0 && taken->kept_bytes == 0) return;
  pthread_mutex_lock(&d->lock);
  roll_window(d, now);
  uint64_t need = share(d, taken->live_bytes);
  d->taken_bytes += taken->purged_bytes;
  d->taken_kib_ms += taken->purged_kib_ms;
  if (d->taken_bytes >= need) { /* the delay becomes the share's own: a longer one learned before goes */
    uint64_t want = delay_for(d->taken_kib_ms / (d->taken_bytes >> 10) + 1);
    atomic_store_explicit(&d->ms, want, memory_order_relaxed);
    atomic_store_explicit(&d->learned_at, now, memory_order_relaxed);
    d->taken_bytes = d->taken_kib_ms = 0;
  }
  /* kept memory weighs against what the learned delay keeps waiting too, and holds the delay at 5/4 of
   * the longest interval it came back after, in this window and the one before, at most (a pause taught
   * the ceiling; the rounds after it come back sooner). Not its mean, nor the longest of one share: a
   * sweep that reuses a burst block by block takes its last blocks back a sweep's length after its first,
   * and 5/4 of the mean, or of the first share's longest, purged them just before (64 MiB in 256 blocks
   * every 3 delays: a few segments faulted in again every other round) */
  d->kept_bytes += taken->kept_bytes;
  if (taken->kept_max_ms > d->kept_max_ms) d->kept_max_ms = taken->kept_max_ms;
  if (d->kept_bytes >= need && d->kept_bytes >= taken->waiting_bytes / 8) {
    uint64_t longest = d->kept_max_ms > d->kept_max_before ? d->kept_max_ms : d->kept_max_before;
    uint64_t want = delay_for(longest);
    if (want < atomic_load_explicit(&d->ms, memory_order_relaxed)) atomic_store_explicit(&d->ms, want, memory_order_relaxed);
    atomic_store_explicit(&d->learned_at, now, memory_order_relaxed);
    d->kept_bytes = 0;
  }
  pthread_mutex_unlock(&d->lock);
}

void hak_learned_delay_after_fork(hak_learned_delay *d, uint64_t now) {
  *d = (hak_learned_delay){.lock = PTHREAD_MUTEX_INITIALIZER};
  atomic_store_explicit(&d->forked_at, now, memory_order_relaxed);
}
