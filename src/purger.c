/* purger.c — the background purger: one thread that returns the memory of the process-wide caches (large.c's
 * cached mappings, segment.c's cached segments) to the OS once their purge delay has passed, so a program
 * that goes idle after a burst gets its RSS back without calling into hakmem again. While the program
 * allocates, the threads' own maintenance passes do the same work (heap.c); the purger only covers the
 * silence after.
 *
 * The thread starts the first time the caches hold more than HAK_PURGER_START_BYTES waiting to be purged
 * (never with HAKMEM_PURGE_DELAY_MS of 0 or -1), so small programs stay single-threaded and keep sync.h's
 * lock-free paths. It sleeps until the earliest deadline the caches report, is woken only when a new
 * deadline comes earlier than the one it sleeps for, and touches nothing but those two lock-protected
 * caches. Memory still in a thread's own pages (empty pages not yet retired) is not its business: that
 * thread's next allocations, hak_collect or malloc_trim return it.
 *
 * Fork: the child has no purger; the next note starts one. */
#include <pthread.h>
#include <time.h>

#include "internal.h"

/* Cached bytes above which the first note starts the thread. */
#define HAK_PURGER_START_BYTES ((uint64_t)32 << 20)
/* Slack added to every sleep: deadlines are read with the coarse clock (hak_clock_ms), which lags the one
 * the sleep is timed with by up to a tick; waking a little late spares a second wake-up. */
#define SLEEP_SLACK_MS 10

static struct {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  uint64_t due_ms;        /* earliest deadline the thread knows of; 0: none (sleeps until told) */
  _Atomic uint64_t sleep_until_ms; /* read without the lock by notes: 0 while no deadline is known */
  _Atomic bool running;
} purger = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void init_wake(void) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&purger.wake, &ca);
  pthread_condattr_destroy(&ca);
}

static pthread_once_t wake_once = PTHREAD_ONCE_INIT;

static uint64_t earliest(uint64_t a, uint64_t b) { return a == 0 ? b : b == 0 ? a : a < b ? a : b; }

static void sleep_until(uint64_t due_ms) {
  uint64_t now = hak_clock_ms();
  uint64_t wait_ms = (due_ms > now ? due_ms - now : 0) + SLEEP_SLACK_MS;
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_sec += (time_t)(wait_ms / 1000);
  until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  pthread_cond_timedwait(&purger.wake, &purger.lock, &until);
}

static void *purger_main(void *arg) {
  pthread_mutex_lock(&purger.lock);
  for (;;) {
    while (purger.due_ms == 0) pthread_cond_wait(&purger.wake, &purger.lock);
    uint64_t due = purger.due_ms;
    if (hak_clock_ms() < due) {
      sleep_until(due);
      continue; /* woken early by an earlier deadline, or on time: look again */
    }
    purger.due_ms = 0;
    atomic_store_explicit(&purger.sleep_until_ms, 0, memory_order_relaxed);
    pthread_mutex_unlock(&purger.lock);
    hak_large_collect(false);
    hak_segment_cache_collect(false);
    uint64_t next = earliest(hak_large_purge_due(), hak_segment_cache_purge_due());
    pthread_mutex_lock(&purger.lock);
    purger.due_ms = earliest(purger.due_ms, next);
    atomic_store_explicit(&purger.sleep_until_ms, purger.due_ms, memory_order_relaxed);
  }
  pthread_mutex_unlock(&purger.lock);
  return arg;
}

static void start(void) {
  if (hak_os_thread_start(purger_main) != 0)
    atomic_store_explicit(&purger.running, false, memory_order_release); /* a later note retries */
}

void hak_purger_note(uint64_t due_ms, uint64_t cached_bytes) {
  bool running = atomic_load_explicit(&purger.running, memory_order_acquire);
  if (!running && cached_bytes <= HAK_PURGER_START_BYTES) return;
  if (hak_opts.value[HAK_OPT_PURGE_DELAY_MS] <= 0) return;
  uint64_t planned = atomic_load_explicit(&purger.sleep_until_ms, memory_order_relaxed);
  if (running && planned != 0 && planned <= due_ms) return; /* it wakes before then anyway: the usual case */
  pthread_once(&wake_once, init_wake);
  pthread_mutex_lock(&purger.lock);
  bool signal = running && (purger.due_ms == 0 || due_ms < purger.due_ms);
  purger.due_ms = earliest(purger.due_ms, due_ms);
  atomic_store_explicit(&purger.sleep_until_ms, purger.due_ms, memory_order_relaxed);
  bool launch = !atomic_load_explicit(&purger.running, memory_order_relaxed);
  if (launch) atomic_store_explicit(&purger.running, true, memory_order_relaxed);
  pthread_mutex_unlock(&purger.lock);
  if (signal) pthread_cond_signal(&purger.wake);
  if (launch) start(); /* without the lock: pthread_create may allocate */
}

bool hak_purger_running(void) { return atomic_load_explicit(&purger.running, memory_order_acquire); }

void hak_purger_lock(void) { pthread_mutex_lock(&purger.lock); }
void hak_purger_unlock(void) { pthread_mutex_unlock(&purger.lock); }

void hak_purger_after_fork_child(void) {
  pthread_mutex_init(&purger.lock, NULL);
  if (atomic_load_explicit(&purger.running, memory_order_relaxed)) init_wake(); /* the parent's may be mid-wait */
  purger.due_ms = 0;
  atomic_store_explicit(&purger.sleep_until_ms, 0, memory_order_relaxed);
  atomic_store_explicit(&purger.running, false, memory_order_relaxed);
}
