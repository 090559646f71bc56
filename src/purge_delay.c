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
 * deadline purges purged in this window or the one before; the delay then rises to 5/4 of the mean
 * interval, weighted by bytes. A review of a first version, which learned from any slice taken back, found
 * a 200-byte malloc by another thread teaching the delay for a 400 MB burst, held 3.2 s instead of 0.12 s
 * (docs/notes/2026-11-25-learned-slices-delay.md). The same share is needed for kept memory to count.
 *
 * Not in a single-threaded program under HAKMEM_BACKGROUND_PURGE=auto (hak_purger_alone): its trims bound
 * what waits, and memory the option's deadline no longer purged went to a trim instead, whose refault
 * raised the trims' bound at every burst of a review's program (test_one_thread unrelated-reuse). A
 * forked child starts from the option and does not learn from memory freed before the fork (its first
 * takes of what the parent had purged measured the parent's sleeps). */
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

/* Learn an interval of `interval` ms (> 0, within the ceiling) at which purged memory came back. */
static void learn(hak_learned_delay *d, uint64_t now, uint64_t interval) {
  uint64_t want = interval + interval / 4, most = learn_ceiling(hak_opts.value[HAK_OPT_PURGE_DELAY_MS]);
  if (want > most) want = most;
  if (want > atomic_load_explicit(&d->ms, memory_order_relaxed))
    atomic_store_explicit(&d->ms, want, memory_order_relaxed);
  atomic_store_explicit(&d->learned_at, now, memory_order_relaxed);
}

void hak_learned_delay_note_block(hak_learned_delay *d, uint64_t now, uint64_t freed_ms, bool purged) {
  uint64_t interval = hak_learned_delay_interval(d, now, freed_ms);
  if (interval == 0) return;
  if (purged) learn(d, now, interval);
  else if (interval > (uint64_t)hak_opts.value[HAK_OPT_PURGE_DELAY_MS]) /* kept, and the reuse goes on */
    atomic_store_explicit(&d->learned_at, now, memory_order_relaxed);
}

/* Start a new window if the current one is older than a ceiling: what a window saw is forgotten after
 * two, so neither a trickle of takes nor one old burst of purges weighs on later decisions. One thread
 * rolls it; takes and purges counted meanwhile may land in either window. */
static void roll_window(hak_learned_delay *d, uint64_t now) {
  uint64_t span = learn_ceiling(hak_opts.value[HAK_OPT_PURGE_DELAY_MS]);
  uint64_t at = atomic_load_explicit(&d->window_at, memory_order_relaxed);
  if (at != 0 && now >= at && now - at <= span) return;
  if (!atomic_compare_exchange_strong_explicit(&d->window_at, &at, now, memory_order_relaxed, memory_order_relaxed))
    return;
  uint64_t purged = atomic_exchange_explicit(&d->purged_bytes, 0, memory_order_relaxed);
  atomic_store_explicit(&d->purged_before, at != 0 && now >= at && now - at <= 2 * span ? purged : 0,
                        memory_order_relaxed);
  atomic_store_explicit(&d->taken_bytes, 0, memory_order_relaxed);
  atomic_store_explicit(&d->taken_kib_ms, 0, memory_order_relaxed);
  atomic_store_explicit(&d->kept_bytes, 0, memory_order_relaxed);
}

void hak_learned_delay_note_purged(hak_learned_delay *d, uint64_t now, uint64_t bytes) {
  if (hak_opts.value[HAK_OPT_PURGE_DELAY_MS] <= 0 || bytes == 0) return;
  roll_window(d, now);
  atomic_fetch_add_explicit(&d->purged_bytes, bytes, memory_order_relaxed);
}

/* The share of memory a window's takes must reach before they count. */
static uint64_t share(const hak_learned_delay *d, uint64_t live_bytes) {
  uint64_t purged = atomic_load_explicit(&d->purged_bytes, memory_order_relaxed);
  uint64_t before = atomic_load_explicit(&d->purged_before, memory_order_relaxed);
  uint64_t most = purged > before ? purged : before;
  if (most < live_bytes) most = live_bytes;
  return most / 8 > SHARE_MIN_BYTES ? most / 8 : SHARE_MIN_BYTES;
}

void hak_learned_delay_note_slices(hak_learned_delay *d, uint64_t now, uint64_t purged_bytes, uint64_t purged_kib_ms,
                                   uint64_t kept_bytes, uint64_t live_bytes) {
  if (purged_bytes == 0 && kept_bytes == 0) return;
  roll_window(d, now);
  uint64_t need = share(d, live_bytes);
  if (purged_bytes != 0) {
    atomic_fetch_add_explicit(&d->taken_kib_ms, purged_kib_ms, memory_order_relaxed);
    if (atomic_fetch_add_explicit(&d->taken_bytes, purged_bytes, memory_order_relaxed) + purged_bytes >= need) {
      uint64_t bytes = atomic_exchange_explicit(&d->taken_bytes, 0, memory_order_relaxed);
      uint64_t kib_ms = atomic_exchange_explicit(&d->taken_kib_ms, 0, memory_order_relaxed);
      if (bytes >= need && kib_ms != 0) learn(d, now, kib_ms / (bytes >> 10) + 1);
    }
  }
  if (kept_bytes != 0 &&
      atomic_fetch_add_explicit(&d->kept_bytes, kept_bytes, memory_order_relaxed) + kept_bytes >= need) {
    atomic_store_explicit(&d->kept_bytes, 0, memory_order_relaxed);
    atomic_store_explicit(&d->learned_at, now, memory_order_relaxed); /* the reuse goes on */
  }
}

void hak_learned_delay_after_fork(hak_learned_delay *d, uint64_t now) {
  *d = (hak_learned_delay){0};
  atomic_store_explicit(&d->forked_at, now, memory_order_relaxed);
}
