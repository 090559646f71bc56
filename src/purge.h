/* purge.h — what the rest of hakmem calls of the two modules that decide when free memory goes back to
 * the OS: the background purger and the single-threaded trims (purger.c), and each tier's learned purge
 * delay (purge_delay.c). Included by internal.h, where it was a section; no file includes it alone. */
#ifndef HAK_PURGE_H
#define HAK_PURGE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* ---- Background purger (purger.c) ------------------------------------------------------------------ */
/* A process-wide cache took memory whose purge is due at `due_ms` and now holds `cached_bytes`: wake the
 * purger if that deadline comes first; ask for it if the cache is big enough. Call it holding no lock of
 * the caches (the late heap's mutex may be held: the purger's lock comes after it). */
void hak_purger_note(uint64_t due_ms, uint64_t cached_bytes);
/* A running purger learns `due_ms`, the earliest deadline a collection found while it walked the
 * segments (hak_segments_collect): the purger, its own collection done, may have read the segments'
 * deadline as taken by that walk, and waited untimed. No trim, no purger started; no lock held. */
void hak_purger_note_merged(uint64_t due_ms);
/* With HAKMEM_BACKGROUND_PURGE=auto and no purger running, trim the caches to their bounds (purger.c);
 * return whether the process has one thread (the note then asks for no purger). hak_purger_note calls it
 * first; a free that adds waiting memory without a note calls it itself. The same locks as
 * hak_purger_note. */
bool hak_purger_trim_if_alone(void);
/* Whether the purger must wait for a second thread: HAKMEM_BACKGROUND_PURGE=auto while the process has
 * one thread (its frees trim instead). */
bool hak_purger_alone(void);
/* The tiers that trim while no purger runs. */
enum hak_trim_tier { HAK_TRIM_LARGE, HAK_TRIM_SLICES, HAK_TRIM_TIERS };
/* A tier takes back memory that a trim had purged (a trimmed cached mapping or trimmed slices), of which
 * the trim found `bytes_back` bytes resident: if its last trim, or the last such take-back since, was
 * less than a purge delay ago, its bound grows by them (purger.c). */
void hak_purger_note_refault(enum hak_trim_tier tier, uint64_t bytes_back);
/* hakmem's committed memory may have grown (a new page or large block): ask for the purger ahead of the
 * frees once it is over the start size. The same locks as hak_purger_note. */
void hak_purger_note_growth(void);
/* Whether memory given to the segments or the large cache now goes back to the OS by its deadline even
 * if the program then makes no call: idle purging is on and hakmem holds more than the start size (the
 * purger runs or is asked for; or, in a lone program, its frees trim). */
bool hak_purger_covers_idle(void);
/* Whether the purger thread runs (a note then wakes it by its deadline). */
bool hak_purger_running(void);
/* Create the purger thread if a note asked for it. Only on allocation paths holding nothing (the top of
 * the small/medium slow path, the end of a large allocation) and at a thread's exit: pthread_create
 * allocates, and it takes glibc's stack-cache lock, under which glibc frees a dead thread's TLS, so never
 * inside free (purger.c). */
void hak_purger_start_pending(void);
/* A thread with a heap exited: an idle purger looks again whether to end. */
void hak_purger_thread_exited(void);
void hak_purger_lock(void);
void hak_purger_unlock(void);
void hak_purger_after_fork_child(void);
/* ---- Learned purge delay (purge_delay.c) ----------------------------------------------------------- */
/* A tier's purge delay, which learns the interval at which its program reuses freed memory the deadline
 * purged (purge_delay.c). Zeroes: the option's delay. The large tier and the segments' slices keep one
 * each. */
typedef struct hak_learned_delay {
  _Atomic uint64_t ms;         /* the learned delay; 0: the option's */
  _Atomic uint64_t learned_at; /* hak_clock_ms of the last reuse it learned from (or of its last halving) */
  _Atomic uint64_t forked_at;  /* memory freed before this time (the fork that made the process) teaches nothing */
  /* the slices' share rule, under `lock` (zeroes are an unlocked default mutex): the current window */
  pthread_mutex_t lock;
  uint64_t window_at;                 /* when it started; 0: none yet */
  uint64_t purged_bytes;              /* purged by the deadline in this window (resident pages) */
  uint64_t purged_before;             /* the same in the window before */
  uint64_t taken_bytes, taken_kib_ms; /* purged memory taken back, not counted yet, and its KiB x ms */
  uint64_t kept_bytes, kept_max_ms;   /* kept memory taken back after longer than the option's delay, and
                                         the longest interval it came back after in this window */
  uint64_t kept_max_before;           /* that interval in the window before */
} hak_learned_delay;
/* What one page's take of free slices brings to the slices' learned delay (segment.c). */
typedef struct hak_slices_taken {
  uint64_t purged_bytes;  /* slices the deadline purged: the OS pages they held resident then, in bytes */
  uint64_t purged_kib_ms; /* the sum over those of KiB times the interval since their free */
  uint64_t kept_bytes;    /* dirty slices kept past the option's delay, whole */
  uint64_t kept_max_ms;   /* the longest interval since their free among those */
  uint64_t live_bytes;    /* what the tier's pages hold */
  uint64_t waiting_bytes; /* what waits to be purged */
} hak_slices_taken;
/* The purge delay in force at `now`: HAKMEM_PURGE_DELAY_MS (0 and -1 as the option says), or a longer
 * learned one, first halved for the time gone by without a reuse to learn from and held under the
 * ceiling of the option in force (hak_option_set may have lowered it). */
long hak_learned_delay_in_force(hak_learned_delay *d, uint64_t now);
/* Whether a learned delay stands (a tier then watches kept memory taken back). */
bool hak_learned_delay_stands(const hak_learned_delay *d);
/* The interval in ms from `freed_ms` to `now` if memory freed then may teach `d` (within the ceiling, not
 * before a fork, learning on), else 0. */
uint64_t hak_learned_delay_interval(const hak_learned_delay *d, uint64_t now, uint64_t freed_ms);
/* A block of its own (a large mapping) freed at `freed_ms` was taken back at `now`; `purged`: its
 * deadline had purged it. */
void hak_learned_delay_note_block(hak_learned_delay *d, uint64_t now, uint64_t freed_ms, bool purged);
/* The tier's deadline purged `bytes` (resident pages). */
void hak_learned_delay_note_purged(hak_learned_delay *d, uint64_t now, uint64_t bytes);
/* Slices taken back at `now` (each interval from hak_learned_delay_interval): learns once a window's
 * takes reach the share (purge_delay.c). */
void hak_learned_delay_note_slices(hak_learned_delay *d, uint64_t now, const hak_slices_taken *taken);
/* The longest delay a tier may keep free memory for under the option in force: 32 times it, at most 10 s
 * unless the option is longer; 0 when the option is 0 or -1. */
uint64_t hak_learned_delay_ceiling(void);
/* In a forked child: back to the option, and memory freed before `now` teaches nothing. */
void hak_learned_delay_after_fork(hak_learned_delay *d, uint64_t now);

#endif
