/* sync.h — process-wide locks and counters that cost no atomic instruction while the process has one
 * thread.
 *
 * glibc's __libc_single_threaded (<sys/single_threaded.h>) is non-zero only while the calling thread is
 * the process's only thread: pthread_create clears it in the parent before the new thread exists. A
 * thread that reads it non-zero cannot race anyone until it creates a thread itself, which hakmem never
 * does inside a section these guard, so it may skip the lock and update shared counters with a plain
 * load and store. Before glibc's early initialisation the flag reads 0, so the lock is taken.
 *
 * This matters more than the lock's own few cycles: a locked instruction first waits for every pending
 * store of the thread to reach the cache, and after a loop that touched a large block page by page that
 * wait was hundreds of cycles in each large free (docs/notes/2026-11-23-performance-log.md, vm).
 *
 * hak_lock returns whether it locked, and hak_unlock takes that answer back: glibc 2.36 never sets the
 * flag again once it is cleared (a forked child of a threaded parent keeps locking), but a later glibc
 * may, after the last join, and a lock taken must be released.
 *
 * hakmem creates threads of its own outside these sections: the region module's release thread (on first
 * use of regions) and the background purger (purger.c, once hakmem's memory passes 32 MiB, and by
 * default only in a process that already has a second thread). From then on every guarded section
 * locks, for the rest of the process.
 *
 * Not seen: threads made with a raw clone() rather than pthread_create. And a signal handler that calls
 * malloc or free for a large block while the only thread is inside a guarded section corrupts the cache
 * instead of deadlocking on the mutex (neither is allowed: malloc is not async-signal-safe). glibc's
 * malloc skips its arena lock in single-threaded processes on the same idea. */
#ifndef HAK_SYNC_H
#define HAK_SYNC_H

#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/single_threaded.h>

/** Whether the calling thread is the only thread of the process. */
static inline bool hak_single_threaded(void) { return __libc_single_threaded != 0; }

/** Lock `m` unless the process has one thread. Returns whether it locked; pass that to hak_unlock. */
static inline bool hak_lock(pthread_mutex_t *m) {
  if (hak_single_threaded()) return false;
  pthread_mutex_lock(m);
  return true;
}

/** Undo hak_lock: unlock `m` if `locked`. */
static inline void hak_unlock(pthread_mutex_t *m, bool locked) {
  if (locked) pthread_mutex_unlock(m);
}

/** Add `n` (two's complement: subtracting works too) to a counter that other threads may update and
 *  read with relaxed atomics. */
static inline void hak_counter_add(_Atomic uint64_t *counter, uint64_t n) {
  if (hak_single_threaded())
    HAK_COUNT_N(*counter, n);
  else
    atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
}

#endif
