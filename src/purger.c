/* purger.c — the background purger: one thread that returns freed memory to the OS once its purge delay
 * has passed — large.c's cached mappings, and the free slices of every segment (segment_purge.c: cached,
 * abandoned, and those of live threads) — so a program that goes idle after a burst gets its RSS back
 * without calling into hakmem again. While the program allocates, the threads' own maintenance passes do
 * the same work (heap.c); the purger covers the silence after, full pages whose blocks other threads all
 * freed included (orphaned pages, segment_purge.c). Not covered: empty pages a thread has not retired yet
 * (owner data, retired on that thread's slow paths: under 2 MiB of them, besides each class's first page,
 * since a page its owner empties past that retires at once), and pages in a thread's queues, not full,
 * that other threads' frees emptied: they wait for their owner to collect them.
 *
 * When: the thread is asked for (state PENDING) by a note from the large cache or the segments once
 * hakmem's memory there holds more than HAK_PURGER_START_BYTES, and ahead of time by the growth of its
 * committed memory past the same size (hak_purger_note_growth: a new page or large block), so that it
 * already runs when that memory is freed; never with HAKMEM_BACKGROUND_PURGE=0 or a purge delay of 0 or
 * -1, nor while the process has one thread unless HAKMEM_BACKGROUND_PURGE=on (below). Small programs
 * therefore stay single-threaded and keep sync.h's lock-free paths; once the thread runs, every
 * large-tier call takes its lock (HAKMEM_BACKGROUND_PURGE documents the cost).
 * The thread is created only on allocation paths (hak_purger_start_pending: the top of the small/medium
 * slow path, the end of a large allocation) and at a thread's exit, never inside free: glibc frees a dead
 * thread's TLS blocks holding its stack-cache lock, which pthread_create takes too, so a purger created
 * from such a free hung the process (a review's reproducer: a dlopen'd library with 1 MiB of TLS, threads
 * joined while the large cache filled up). Nor inside the note, which may come from a heap walk.
 * If it cannot be created (a sandbox refusing clone), idle purging stays off for the process.
 *
 * How: it sleeps until the earliest deadline reported and is woken only when a note brings an earlier
 * one. A collect that leaves a deadline already past is retried one delay later, not at once (a cached
 * large mapping the kernel refused to purge, locked memory, is not tried again until it is freed again:
 * large.c). It touches nothing but the large cache and the segments' free slices, under their
 * locks (and the heaps of threads gone without their destructor: SWEEP_WAIT_FIRST_MS). With no deadline
 * left it waits for the next note as long as hakmem's committed memory stays
 * over the start size and some thread with a heap lives (a free cannot start a thread, so a purger that
 * ended while a program kept memory it would free later left that memory resident once the program went
 * idle); otherwise it ends, and the next allocation after a note starts another. It must end: a process
 * whose main thread called pthread_exit lives until its last thread ends, and an idle purger must not be
 * that thread, so each thread's exit wakes it to look again (hak_purger_thread_exited), and once no
 * thread with a heap is left it gives back the large cache and the cached segments at once and ends
 * (it stayed for the whole delay, up to an hour). That count must reach zero: a thread past its TSD
 * destructors gets no heap (heap_pool.c, hak_heap_for_counting).
 * A forked child that inherits over the start size waiting for deadlines asks for its own at its first
 * allocation path a delay after the fork; any child asks when a note of its own does.
 *
 * Without the thread (HAKMEM_BACKGROUND_PURGE=auto, the default, while the process has one thread): a
 * thread would make a single-threaded program multi-threaded for good (sync.h's locks, the C library's
 * stdio locks: a putc loop ten times slower; unshare(CLONE_NEWUSER) refused), so none is started while
 * glibc's __libc_single_threaded holds; the notes still ask for it, and the first allocation after the
 * program's first pthread_create starts it. Until it runs, the frees trim (hak_purger_trim_if_alone):
 * each tier keeps waiting for its deadline at most the larger of its bound and what its live blocks hold
 * (large.c: the cached mappings beyond it are purged, oldest first, the newest always kept; segment_purge.c:
 * every waiting slice once the pages they hold resident pass it, measured with mincore before a trim,
 * empty pages not handed back yet not counted). A bound starts at
 * HAK_PURGER_START_BYTES and grows (up to 1 GiB) by the trimmed memory the tier takes back within a
 * purge delay of its last trim (or of the last such take-back since: one that goes on counts whole), as
 * the trim found it (a mapping's reach, at most the request that takes
 * it; a slice's resident pages: counted whole, a few MiB taken back raised the bound by 500 MiB in a
 * review) (hak_purger_note_refault; memory its deadline purged does not count: a review's program raised
 * the bound at every burst that way), and halves for every ten delays in which no trim found over half of
 * it waiting. So memory freed in a burst and then left alone stays resident up to the bound, not for
 * good, while a program that frees and allocates the same memory in cycles stops being trimmed after its
 * first cycle (doubling the bound once per trim took three cycles of 200 MiB, each faulted in again; a
 * fixed 32 MiB made cycles of six 8 MiB blocks 17x slower, every cycle faulting them in again; with no
 * live term the lab's `big` was 5.6x slower: docs/notes/2026-11-25-one-thread.md). The bound never grows
 * by more than the tier has faulted in again, so a small block reused at every burst raises it by its
 * own size, not twofold (as doubling did). The price: a program that takes back, within a delay, most of
 * a burst its frees trimmed keeps that much once idle (up to 1 GiB per tier). Trims also run in a
 * program with threads until the purger runs: memory freed between the first pthread_create and the next
 * allocation waited for good otherwise. */
#include <errno.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sync.h"

/* Cached bytes above which a note asks for the thread. */
#define HAK_PURGER_START_BYTES ((uint64_t)32 << 20)
/* Slack added to every sleep: deadlines are read with the coarse clock (hak_clock_ms), which lags the one
 * the sleep is timed with by up to a tick; waking a little late spares a second wake-up. */
#define SLEEP_SLACK_MS 10

enum { IDLE, PENDING, RUNNING, FAILED }; /* purger.state */

static struct {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  uint64_t due_ms;                 /* earliest deadline the thread knows of; 0: none (sleeps until told) */
  _Atomic uint64_t sleep_until_ms; /* due_ms, for notes to read without the lock */
  _Atomic int state;
  _Atomic bool ending; /* the thread is deciding whether to end (may_end): growth notes take the lock */
  _Atomic uint64_t inherited_due_ms; /* a forked child's: what it inherited waiting asks for a thread then */
} purger = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t wake_once = PTHREAD_ONCE_INIT;

static void init_wake(void) { hak_os_cond_init_monotonic(&purger.wake); }

/* Whether the options let the thread run at all (HAKMEM_BACKGROUND_PURGE, a purge delay above 0). */
static bool idle_purging_on(void) {
  return hak_opts.value[HAK_OPT_BACKGROUND_PURGE] != 0 && hak_opts.value[HAK_OPT_PURGE_DELAY_MS] > 0;
}

bool hak_purger_alone(void) { return hak_opts.value[HAK_OPT_BACKGROUND_PURGE] == 2 && hak_single_threaded(); }

static uint64_t earliest(uint64_t a, uint64_t b) { return a == 0 ? b : b == 0 ? a : a < b ? a : b; }

/* Wait on purger.wake (its lock held) until `due_ms`, with SLEEP_SLACK_MS; true if the time ran out rather
 * than a note or an exit waking the thread. */
static bool sleep_until(uint64_t due_ms) {
  uint64_t now = hak_clock_ms();
  struct timespec until = hak_os_deadline_in((due_ms > now ? due_ms - now : 0) + SLEEP_SLACK_MS);
  return pthread_cond_timedwait(&purger.wake, &purger.lock, &until) == ETIMEDOUT;
}

/* Whether the thread, with no deadline left, should wait for the next note rather than end: hakmem still
 * holds enough memory that a burst of frees could fill the caches, and some thread is left to free it. */
static bool worth_waiting(void) {
  return atomic_load_explicit(&hak_os_counters.committed_bytes, memory_order_seq_cst) >
             (int64_t)HAK_PURGER_START_BYTES &&
         hak_heaps_live() > 0;
}

/* Whether the thread may end now (purger.lock held); if so its state is IDLE, and a later note starts
 * another. A growth past the start size that read RUNNING asks for no thread (hak_purger_note_growth),
 * and the program may free that memory without another allocation to start one. So the decision is
 * flagged first and the committed bytes read after: a growth either reads the flag and waits for the
 * lock, or its bytes are read here and the thread stays (each side stores, then reads the other's word,
 * all seq_cst). The state stays RUNNING until the decision, so no other note sees a passing IDLE. */
static bool may_end(void) {
  atomic_store_explicit(&purger.ending, true, memory_order_seq_cst);
  bool end = !worth_waiting();
  if (end) atomic_store_explicit(&purger.state, IDLE, memory_order_relaxed);
  atomic_store_explicit(&purger.ending, false, memory_order_release);
  return end;
}

/* A heap made by a thread's first allocation in glibc's last round of key destructors never sees its
 * destructor run, so it counts as live until a sweep (heap_pool.c, hak_heaps_sweep_dead) finds its thread
 * gone. With one such heap, a process whose main thread left through pthread_exit never ended: the purger
 * waited for good, blocking every signal, so that only SIGKILL ended it (a hunt's reproducer). So with no
 * deadline the purger sweeps before it waits, and while it waits, at intervals from SWEEP_WAIT_FIRST_MS
 * doubling up to SWEEP_WAIT_MAX_MS (one tgkill per heap in use); the main thread's exit wakes it at once
 * (hak_purger_thread_exited). */
#define SWEEP_WAIT_FIRST_MS 1000u
#define SWEEP_WAIT_MAX_MS 8000u

/* When a pass should look at the threads' last large blocks again (hak_heaps_flush_large_last marked one):
 * within a delay. */
static uint64_t look_again_ms(uint64_t now) {
  long delay = hak_opts.value[HAK_OPT_PURGE_DELAY_MS];
  return now + (uint64_t)(delay > 0 ? delay : SLEEP_SLACK_MS);
}

/* hak_heaps_sweep_dead from the purger, which holds purger.lock: a retired heap's exit takes it. The
 * threads' last large blocks too: an idle thread's leaves its heap at the second sweep or pass that finds
 * it there. */
static void sweep_unlocked(void) {
  pthread_mutex_unlock(&purger.lock);
  hak_heaps_sweep_dead();
  bool marked = hak_heaps_flush_large_last(true);
  pthread_mutex_lock(&purger.lock);
  if (marked) purger.due_ms = earliest(purger.due_ms, look_again_ms(hak_clock_ms()));
}

static void *purger_main(void *arg) {
  hak_os_name_this_thread("hakmem-purger");
  pthread_mutex_lock(&purger.lock);
  uint32_t sweep_wait_ms = 0; /* 0: sweep before the next untimed wait */
  for (;;) {
    /* A thread that stayed would keep alive a process whose main thread left through pthread_exit, and
     * that waits for its last thread: with no thread with a heap left, give back now what waits for a
     * deadline (threads without a heap may live on) and end, instead of waiting (up to an hour). */
    if (hak_heaps_live() == 0) {
      pthread_mutex_unlock(&purger.lock);
      hak_large_collect(true);
      hak_segments_collect(true);
      pthread_mutex_lock(&purger.lock);
      if (may_end()) break;
    }
    if (purger.due_ms == 0) {
      if (!worth_waiting() && may_end()) break;
      if (sweep_wait_ms == 0) {
        sweep_unlocked();
        sweep_wait_ms = SWEEP_WAIT_FIRST_MS;
        continue; /* it may have left no thread with a heap */
      }
      if (sleep_until(hak_clock_ms() + sweep_wait_ms)) { /* or until a note, or an exit */
        sweep_unlocked();
        sweep_wait_ms = sweep_wait_ms * 2 < SWEEP_WAIT_MAX_MS ? sweep_wait_ms * 2 : SWEEP_WAIT_MAX_MS;
      } else {
        sweep_wait_ms = 0;
      }
      continue;
    }
    uint64_t due = purger.due_ms;
    if (hak_clock_ms() < due) {
      sleep_until(due);
      continue; /* woken early by an earlier deadline, or on time: look again */
    }
    purger.due_ms = 0;
    atomic_store_explicit(&purger.sleep_until_ms, 0, memory_order_relaxed);
    pthread_mutex_unlock(&purger.lock);
    bool marked = hak_heaps_flush_large_last(true);
    hak_large_collect(false);
    hak_segments_collect(false);
    uint64_t next = earliest(hak_large_purge_due(), hak_segments_purge_due());
    uint64_t now = hak_clock_ms();
    if (next != 0 && next <= now) next = look_again_ms(now); /* no progress */
    if (marked) next = earliest(next, look_again_ms(now));
    pthread_mutex_lock(&purger.lock);
    purger.due_ms = earliest(purger.due_ms, next);
    atomic_store_explicit(&purger.sleep_until_ms, purger.due_ms, memory_order_relaxed);
  }
  pthread_mutex_unlock(&purger.lock);
  return arg;
}

/* What a tier may keep waiting for its deadline while no purger runs, on top of what its live blocks
 * hold. Relaxed atomics: between a program's first pthread_create and the purger's start, threads may
 * trim at once, and a lost update only moves a heuristic. */
static struct trim_bound {
  _Atomic uint64_t bytes;      /* 0: HAK_PURGER_START_BYTES */
  /* the tier's last trim that purged something, or the last take-back of trimmed memory counted since; 0:
   * none. A take-back within a delay of it counts (hak_purger_note_refault) */
  _Atomic uint64_t counted_ms;
  _Atomic uint64_t needed_ms;  /* the last raise, or the last trim that found over half the bound waiting */
} bounds[HAK_TRIM_TIERS];

/* The most a bound reaches: what a single-threaded program that goes idle may keep waiting per tier. */
#define TRIM_BOUND_MAX ((uint64_t)1 << 30)

/* Whether time `t` lies more than `span` ms before `now` (signed: another thread may have stored a time
 * read after `now`). */
static bool older_than(uint64_t t, uint64_t now, uint64_t span) { return (int64_t)(now - t) > (int64_t)span; }

/* The tier's bound now: halved for every ten purge delays in which it was not needed, never below the
 * start size. */
static uint64_t bound_now(struct trim_bound *b, uint64_t now, long delay) {
  uint64_t bytes = atomic_load_explicit(&b->bytes, memory_order_relaxed);
  if (bytes <= HAK_PURGER_START_BYTES) return HAK_PURGER_START_BYTES;
  uint64_t needed = atomic_load_explicit(&b->needed_ms, memory_order_relaxed), span = 10 * (uint64_t)delay;
  if (older_than(needed, now, span)) {
    uint64_t halvings = (now - needed) / span;
    bytes = halvings >= 63 ? 0 : bytes >> halvings;
    atomic_store_explicit(&b->bytes, bytes, memory_order_relaxed);
    atomic_store_explicit(&b->needed_ms, now, memory_order_relaxed);
  }
  return bytes > HAK_PURGER_START_BYTES ? bytes : HAK_PURGER_START_BYTES;
}

/* A take-back counts within a delay of the tier's last trim, or of the last take-back counted since: a
 * working set faulted in again over longer than a delay (a single-threaded program cycling 4,000 blocks
 * of 4-256 KiB, 520 MB, whose every round's allocations take about 400 ms) raised the bound by only what
 * came back in the first 100 ms, about 45 MiB a round, and each round's frees trimmed it again: 0.82-1.04
 * M page faults in 10 rounds, 3-4x tcmalloc's time; counted through, 0.37 M (docs/notes/2026-11-26-cliff-
 * hunt.md). Only take-backs of trimmed memory extend the window: a first version that let any allocation
 * of the tier keep it open (a 1 MiB scratch buffer every 20 ms of a computation between cycles) made a
 * batch loop keep its 800 MiB working set once idle, where a purger would have purged it (a review). */
void hak_purger_note_refault(enum hak_trim_tier tier, uint64_t bytes_back) {
  struct trim_bound *b = &bounds[tier];
  uint64_t counted = atomic_load_explicit(&b->counted_ms, memory_order_relaxed);
  if (counted == 0) return;
  uint64_t now = hak_clock_ms();
  long delay = hak_opts.value[HAK_OPT_PURGE_DELAY_MS];
  if (delay <= 0 || older_than(counted, now, (uint64_t)delay)) return; /* its deadline was past anyway */
  uint64_t raised = bound_now(b, now, delay) + (bytes_back < TRIM_BOUND_MAX ? bytes_back : TRIM_BOUND_MAX);
  atomic_store_explicit(&b->bytes, raised < TRIM_BOUND_MAX ? raised : TRIM_BOUND_MAX, memory_order_relaxed);
  atomic_store_explicit(&b->needed_ms, now, memory_order_relaxed);
  atomic_store_explicit(&b->counted_ms, now, memory_order_relaxed);
}

/* Trim each tier to its bound (hak_purger_trim_if_alone has decided to). */
static __attribute__((noinline)) void trim_tiers(long delay) {
  uint64_t now = hak_clock_ms();
  uint64_t live[HAK_TRIM_TIERS] = {[HAK_TRIM_LARGE] = hak_large_live_bytes(),
                                   [HAK_TRIM_SLICES] = hak_segments_used_bytes()};
  for (int tier = 0; tier < HAK_TRIM_TIERS; tier++) {
    struct trim_bound *b = &bounds[tier];
    uint64_t bound = bound_now(b, now, delay), keep = live[tier] > bound ? live[tier] : bound, waiting;
    bool trimmed = tier == HAK_TRIM_LARGE ? hak_large_trim(keep, &waiting) : hak_segments_trim(keep, &waiting);
    if (trimmed) atomic_store_explicit(&b->counted_ms, now, memory_order_relaxed);
    if (waiting > bound / 2) atomic_store_explicit(&b->needed_ms, now, memory_order_relaxed);
  }
}

bool hak_purger_trim_if_alone(void) {
  if (hak_opts.value[HAK_OPT_BACKGROUND_PURGE] != 2) return false;
  bool single = hak_single_threaded();
  long delay = hak_opts.value[HAK_OPT_PURGE_DELAY_MS];
  /* below the start size nothing can wait beyond a bound; a program that has just created its first
   * thread has no purger until its next allocation: its frees trim until then, or memory it frees
   * before that allocation would wait for good */
  if (atomic_load_explicit(&hak_os_counters.committed_bytes, memory_order_relaxed) > (int64_t)HAK_PURGER_START_BYTES &&
      delay > 0 && (single || atomic_load_explicit(&purger.state, memory_order_acquire) != RUNNING))
    trim_tiers(delay);
  return single;
}

/* The purger (running, or pending with `state` read as such) learns deadline `due_ms`. */
static void tell(uint64_t due_ms, int state) {
  uint64_t planned = atomic_load_explicit(&purger.sleep_until_ms, memory_order_relaxed);
  if (state == RUNNING && planned != 0 && planned <= due_ms) return; /* it wakes before then anyway */
  pthread_once(&wake_once, init_wake);
  pthread_mutex_lock(&purger.lock);
  bool earlier = purger.due_ms == 0 || due_ms < purger.due_ms;
  purger.due_ms = earliest(purger.due_ms, due_ms);
  atomic_store_explicit(&purger.sleep_until_ms, purger.due_ms, memory_order_relaxed);
  /* the state as of now, not as read above: a thread started since then may already wait, untimed */
  state = atomic_load_explicit(&purger.state, memory_order_relaxed);
  if (state == IDLE) atomic_store_explicit(&purger.state, PENDING, memory_order_relaxed);
  pthread_mutex_unlock(&purger.lock);
  if (earlier && state == RUNNING) pthread_cond_signal(&purger.wake);
}

void hak_purger_note(uint64_t due_ms, uint64_t cached_bytes) {
  if (hak_purger_trim_if_alone()) return;
  int state = atomic_load_explicit(&purger.state, memory_order_acquire);
  if (state == FAILED || (state == IDLE && cached_bytes <= HAK_PURGER_START_BYTES) || !idle_purging_on()) return;
  tell(due_ms, state);
}

void hak_purger_note_merged(uint64_t due_ms) {
  int state = atomic_load_explicit(&purger.state, memory_order_acquire);
  if (state == RUNNING) tell(due_ms, state);
}

bool hak_purger_running(void) { return atomic_load_explicit(&purger.state, memory_order_acquire) == RUNNING; }

bool hak_purger_covers_idle(void) {
  return idle_purging_on() &&
         atomic_load_explicit(&hak_os_counters.committed_bytes, memory_order_relaxed) > (int64_t)HAK_PURGER_START_BYTES;
}

void hak_purger_note_growth(void) {
  /* while alone too: hak_purger_start_pending waits for a second thread, and the first allocation after
   * it starts the purger */
  /* seq_cst: pairs with may_end, which flags its decision and then reads the committed bytes this growth
   * added to before the call */
  if (atomic_load_explicit(&purger.state, memory_order_seq_cst) != IDLE &&
      !atomic_load_explicit(&purger.ending, memory_order_seq_cst))
    return;
  if (atomic_load_explicit(&hak_os_counters.committed_bytes, memory_order_relaxed) <= (int64_t)HAK_PURGER_START_BYTES)
    return;
  if (!idle_purging_on()) return;
  pthread_once(&wake_once, init_wake);
  pthread_mutex_lock(&purger.lock);
  if (atomic_load_explicit(&purger.state, memory_order_relaxed) == IDLE)
    atomic_store_explicit(&purger.state, PENDING, memory_order_relaxed);
  pthread_mutex_unlock(&purger.lock);
}

/* A forked child's inherited work now asks for the thread, due at once (see hak_purger_after_fork_child). */
static void ask_for_inherited(uint64_t now) {
  pthread_mutex_lock(&purger.lock);
  atomic_store_explicit(&purger.inherited_due_ms, 0, memory_order_relaxed);
  if (atomic_load_explicit(&purger.state, memory_order_relaxed) == IDLE) {
    purger.due_ms = now;
    atomic_store_explicit(&purger.sleep_until_ms, now, memory_order_relaxed);
    atomic_store_explicit(&purger.state, PENDING, memory_order_relaxed);
  }
  pthread_mutex_unlock(&purger.lock);
}

void hak_purger_start_pending(void) {
  if (likely(atomic_load_explicit(&purger.state, memory_order_relaxed) != PENDING)) {
    uint64_t inherited = atomic_load_explicit(&purger.inherited_due_ms, memory_order_relaxed);
    if (likely(inherited == 0)) return;
    uint64_t now = hak_clock_ms();
    if (now < inherited) return;
    ask_for_inherited(now);
  }
  if (hak_purger_alone()) return;
  pthread_mutex_lock(&purger.lock);
  bool start = atomic_load_explicit(&purger.state, memory_order_relaxed) == PENDING;
  if (start) {
    atomic_store_explicit(&purger.state, RUNNING, memory_order_relaxed);
    /* started by a forked child's own note (a growth, which sets no deadline): it covers what the child
     * inherited too */
    uint64_t inherited = atomic_exchange_explicit(&purger.inherited_due_ms, 0, memory_order_relaxed);
    purger.due_ms = earliest(purger.due_ms, inherited);
    atomic_store_explicit(&purger.sleep_until_ms, purger.due_ms, memory_order_relaxed);
  }
  pthread_mutex_unlock(&purger.lock);
  if (start && hak_os_thread_start(purger_main) != 0)
    atomic_store_explicit(&purger.state, FAILED, memory_order_release); /* retrying could cost a clone per free */
}

void hak_purger_thread_exited(void) {
  /* the only change an exit makes to the purger's choice is to leave no thread with a heap, or only heaps
   * of threads gone without their destructor (purger_main), which a sweep finds once the main thread has
   * left; the state is tested under the lock, where it is settled */
  if ((hak_heaps_live() != 0 && syscall(SYS_gettid) != getpid()) ||
      atomic_load_explicit(&purger.state, memory_order_acquire) == FAILED)
    return;
  pthread_mutex_lock(&purger.lock); /* so the signal cannot fall between its test and its wait */
  if (atomic_load_explicit(&purger.state, memory_order_relaxed) == RUNNING) pthread_cond_signal(&purger.wake);
  pthread_mutex_unlock(&purger.lock);
}

void hak_purger_lock(void) { pthread_mutex_lock(&purger.lock); }
void hak_purger_unlock(void) { pthread_mutex_unlock(&purger.lock); }

void hak_purger_after_fork_child(void) {
  pthread_mutex_init(&purger.lock, NULL);
  int state = atomic_load_explicit(&purger.state, memory_order_relaxed);
  if (state == RUNNING) init_wake(); /* may be mid-wait */
  /* What the child inherited waiting for its deadlines (brought to at most one delay away by the segments
   * and the large cache, whose handlers ran first, but for big large blocks held for their size: hold_ms
   * in large.c; the purger wakes for those when it runs): past the start size, the child asks for a purger of
   * its own, since its notes would not (what the parent freed before the fork was noted already, and a
   * child that frees little notes nothing: 200 MB its parent freed just before the fork stayed in the
   * child for good, docs/notes/2026-11-25-idle-empty-pages.md). It asks at its first allocation path
   * from one delay on (the child's own notes ask as in any process): a child that execs, or calls
   * unshare(CLONE_NEWUSER), within that time gets no thread (a review: with one, a malloc then exec cost
   * 26 % more per fork). A child glibc counts single-threaded gets none, as any such process. */
  long delay = hak_opts.value[HAK_OPT_PURGE_DELAY_MS];
  uint64_t waiting = hak_segments_waiting_bytes() + hak_large_waiting_bytes();
  bool wanted = state != FAILED && idle_purging_on() && waiting > HAK_PURGER_START_BYTES;
  purger.due_ms = 0;
  atomic_store_explicit(&purger.sleep_until_ms, 0, memory_order_relaxed);
  atomic_store_explicit(&purger.inherited_due_ms, wanted ? hak_clock_ms() + (uint64_t)delay : 0, memory_order_relaxed);
  if (state != FAILED) atomic_store_explicit(&purger.state, IDLE, memory_order_relaxed);
}
