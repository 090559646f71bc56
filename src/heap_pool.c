/* heap_pool.c — where heaps come from and where they go: the pool of heaps (a thread's heap made or
 * reused at its first allocation, given back at its exit through a key destructor), the late heap for
 * threads past their destructors, the sweeps that find heaps of threads gone without that destructor,
 * the thread counts, the fork handlers' part, and collections over every heap. What a heap does with its
 * pages is heap.c. */
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alloc.h"

static __thread bool tls_heap_done; /* this thread's heap was abandoned at thread exit */
/* This thread's heap filled the pool to where a sweep is due; its next slow allocation runs it (a sweep
 * may start the purger thread, which a heap made inside free must not: see purger.c). */
__thread bool hak_tls_sweep_due;

/* A thread that finds no free heap in the pool sweeps for heaps of vanished threads once the heaps in
 * use have doubled since the last sweep (and number at least twice this): each sweep probes every heap in
 * use, and at least as many heaps were taken since the one before, so a heap costs O(1) probes on
 * average, and heaps of vanished threads never outnumber the live ones (plus this) by much. */
#define SWEEP_FLOOR_MIN 8u

static struct {
  pthread_mutex_t lock;
  hak_heap *all;
  pthread_key_t key;
  bool key_ready;
  uint32_t in_use;      /* heaps in use (threads', the late heap's) */
  uint32_t sweep_floor; /* heaps in use after the last sweep, at least SWEEP_FLOOR_MIN */
  _Atomic uint64_t started, exited;
} heaps = {.lock = PTHREAD_MUTEX_INITIALIZER, .sweep_floor = SWEEP_FLOOR_MIN};

/* Allocations by a thread whose heap was already abandoned at exit (a destructor of another key that runs
 * after ours) come from one shared heap under a mutex: a heap made for such a thread could never be
 * abandoned, since the thread's destructors are over. Blocks from it are freed through the remote path. */
static struct {
  pthread_mutex_t lock;
  /* written once under the lock; atomic because hak_heaps_is_late reads it without the lock, for
   * find_page (heap.c) (a ThreadSanitizer report, harmless on x86 but a data race in C11) */
  _Atomic(hak_heap *) heap;
} late = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Lock order: late, heaps, then the segment and large-cache locks. */
void hak_heaps_lock(void) {
  pthread_mutex_lock(&late.lock);
  pthread_mutex_lock(&heaps.lock);
}
void hak_heaps_unlock(void) {
  pthread_mutex_unlock(&heaps.lock);
  pthread_mutex_unlock(&late.lock);
}
void hak_heaps_after_fork_child(void) {
  pthread_mutex_init(&heaps.lock, NULL);
  pthread_mutex_init(&late.lock, NULL);
  /* Only the forking thread lives on in the child: the parent's other threads count as exited (their
   * heaps stay in use, their blocks reachable), so other_threads_live() is false until the child starts one.
   * No sweep takes their heaps: their ids are the parent's threads', and they are counted exited already. */
  for (hak_heap *h = heaps.all; h != NULL; h = h->next_all) h->tid = 0;
  if (hak_tls_heap != &hak_heap_empty) { /* the child's own ids */
    hak_tls_heap->pid = getpid();
    hak_tls_heap->tid = (pid_t)syscall(SYS_gettid);
  }
  uint64_t started = atomic_load_explicit(&heaps.started, memory_order_relaxed);
  atomic_store_explicit(&heaps.exited, started - (hak_tls_heap != &hak_heap_empty ? 1 : 0),
                        memory_order_relaxed);
}

void hak_heaps_send_frozen_chains(void) {
  /* the other threads' remote frees still waiting in their tables would wait for good: no thread runs
   * those heaps again (the child's own thread is the only one, so no lock is needed) */
  for (hak_heap *h = heaps.all; h != NULL; h = h->next_all)
    if (h != hak_tls_heap) hak_remote_batches_flush_frozen(h, hak_tls_heap);
}
hak_heap *hak_heaps_first(void) { return heaps.all; }

void hak_heaps_thread_counts(uint64_t *started, uint64_t *exited) {
  *started = atomic_load_explicit(&heaps.started, memory_order_relaxed);
  *exited = atomic_load_explicit(&heaps.exited, memory_order_relaxed);
}

void hak_heaps_init_key(void) {
  hak_heap_init_tables();
  if (pthread_key_create(&heaps.key, hak_heap_thread_done) == 0) heaps.key_ready = true;
}

/* A heap from the pool (or freshly mapped), reset and marked in use by thread `tid` of process `pid` (0:
 * none); NULL if none could be mapped. `sweep` (NULL: the caller runs no sweep): set when the pool ran
 * out with the heaps in use doubled since the last sweep. */
static hak_heap *heap_acquire(pid_t pid, pid_t tid, bool *sweep) {
  pthread_mutex_lock(&heaps.lock);
  hak_heap *heap = heaps.all;
  while (heap != NULL && heap->in_use) heap = heap->next_all;
  if (heap == NULL) {
    if (sweep != NULL && heaps.in_use >= 2 * heaps.sweep_floor) {
      *sweep = true;
      heaps.sweep_floor = heaps.in_use; /* no other thread's sweep until this one sets it */
    }
    size_t bytes = (sizeof(hak_heap) + HAK_OS_PAGE - 1) & ~(HAK_OS_PAGE - 1);
    heap = hak_os_map(bytes, HAK_OS_PAGE, false);
    if (heap != NULL) {
      heap->next_all = heaps.all;
      heaps.all = heap;
    }
  }
  if (heap != NULL) {
    heap->in_use = true;
    heap->pid = pid;
    heap->tid = tid;
    heaps.in_use++;
  }
  pthread_mutex_unlock(&heaps.lock);
  if (heap == NULL) return NULL;
  hak_heap_reset(heap);
  heap->random =
      (uint64_t)(uintptr_t)heap ^ (hak_clock_ms() * 0x9e3779b97f4a7c15ull) ^ (uint64_t)__builtin_ia32_rdtsc();
  return heap;
}

hak_heap *hak_heap_for_thread(void) {
  hak_init();
  bool sweep = false;
  hak_heap *heap = heap_acquire(getpid(), (pid_t)syscall(SYS_gettid), &sweep);
  if (heap == NULL) return NULL;
  hak_tls_sweep_due = sweep;
  atomic_fetch_add_explicit(&heaps.started, 1, memory_order_relaxed);
  hak_tls_heap = heap;
  /* may allocate (glibc, keys >= 32): the heap is already in place, so that is a normal allocation */
  if (heaps.key_ready) pthread_setspecific(heaps.key, heap);
  return heap;
}

/* Whether the calling thread, which has no heap, is in glibc's thread exit past its TSD destructors.
 * There an exiting detached thread may free other cached stacks' TLS blocks (glibc's stack cache, once
 * over 40 MiB), and a heap made for that free would never see its key destructor run: it stayed live
 * for good, so a purger kept a pthread_exit program alive, and after 64 such frees into an exited
 * thread's segment it took the segment over and pinned it (test_reclaim dying-frees). glibc blocks
 * every signal there but SIGSETXID (33), its own SIGCANCEL (32) included, which a program cannot block
 * through pthread_sigmask; SIGKILL and SIGSTOP the kernel never blocks. The whole mask is compared:
 * SIGCANCEL alone is blocked where a thread still runs its destructors (async cancellation's cleanup
 * handlers, a main thread whose parent blocked it across exec), and such a thread took every malloc
 * through the late heap (test_reclaim sigcancel). One system call on a thread's first call; on every
 * call only while the thread is in this state. */
static bool thread_past_destructors(void) {
  uint64_t mask = 0;
  if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &mask, sizeof mask) != 0) return false;
  const uint64_t left_open = (1ull << (SIGKILL - 1)) | (1ull << (SIGSTOP - 1)) | (1ull << (33 - 1));
  return (mask | left_open) == ~0ull;
}

hak_heap *hak_heap_for_counting(void) {
  if (tls_heap_done || thread_past_destructors()) return &hak_heap_empty;
  hak_heap *heap = hak_heap_for_thread();
  return heap != NULL ? heap : &hak_heap_empty;
}

void *hak_heaps_late_alloc(unsigned cls) {
  pthread_mutex_lock(&late.lock);
  if (late.heap == NULL) late.heap = heap_acquire(0, 0, NULL); /* no sweep under late.lock */
  void *p = late.heap != NULL ? hak_heap_alloc_from(late.heap, cls) : NULL;
  pthread_mutex_unlock(&late.lock);
  if (p == NULL) errno = ENOMEM;
  return p;
}

bool hak_heaps_is_late(const hak_heap *heap) {
  return heap == atomic_load_explicit(&late.heap, memory_order_relaxed);
}

bool hak_heap_thread_gone(void) { return tls_heap_done || thread_past_destructors(); }

static void heap_release_to_pool(hak_heap *heap) {
  pthread_mutex_lock(&heaps.lock);
  heap->in_use = false;
  heap->tid = 0;
  heaps.in_use--;
  pthread_mutex_unlock(&heaps.lock);
}

void hak_heap_thread_done(void *arg) {
  hak_heap *heap = arg;
  if (heap == NULL || heap == &hak_heap_empty) return;
  hak_heap_retire(heap);
  atomic_fetch_add_explicit(&heaps.exited, 1, memory_order_relaxed);
  if (hak_tls_heap == heap) hak_tls_heap = &hak_heap_empty;
  tls_heap_done = true;
  heap_release_to_pool(heap);
  /* its abandoned segments may have asked for the purger, and the other threads may all be idle; from here
   * this thread's allocations (pthread_create's) go to the late heap. A purger waiting for work looks
   * again whether any thread is left to give it some. */
  hak_purger_start_pending();
  hak_purger_thread_exited();
}

/* A thread that runs no more code: the kernel knows no such thread in the process. A thread id taken
 * again by a new thread makes the old heap look alive (it then stays, as it would without sweeps); a
 * dead one never looks alive to the kernel's probe. A zombie group leader (a main thread that left
 * through pthread_exit) looks alive: a heap it made in its last round of destructors stays. */
static bool thread_vanished(pid_t pid, pid_t tid) {
  return syscall(SYS_tgkill, pid, tid, 0) != 0 && errno == ESRCH;
}

/* Heaps one pass of a sweep takes at most; a pass that took that many is followed by another. */
#define SWEEP_BATCH 32

void hak_heaps_sweep_dead(void) {
  pid_t pid = getpid();
  int saved_errno = errno;
  hak_heap *dead[SWEEP_BATCH];
  unsigned n;
  /* heaps are only ever added at the head of `all`, never removed: a pass goes on where the last stopped */
  pthread_mutex_lock(&heaps.lock);
  hak_heap *next = heaps.all;
  pthread_mutex_unlock(&heaps.lock);
  do {
    n = 0;
    pthread_mutex_lock(&heaps.lock);
    for (; next != NULL && n < SWEEP_BATCH; next = next->next_all) {
      hak_heap *h = next;
      /* a heap of another process (a child made without the fork handlers: _Fork, a raw clone) names
       * threads the probe cannot see from here */
      if (!h->in_use || h->tid == 0 || h->pid != pid || h == hak_tls_heap || !thread_vanished(pid, h->tid))
        continue;
      h->tid = 0; /* taken: no other sweep picks it */
      dead[n++] = h;
    }
    pthread_mutex_unlock(&heaps.lock);
    /* The thread is gone: its last writes to the heap came before its exit, which the kernel completed
     * before the probe saw it gone (no C11 happens-before, which ThreadSanitizer would not see). */
    for (unsigned i = 0; i < n; i++) {
      hak_heap_retire(dead[i]);
      atomic_fetch_add_explicit(&heaps.exited, 1, memory_order_relaxed);
      heap_release_to_pool(dead[i]);
      hak_purger_thread_exited();
    }
    if (n > 0) hak_purger_start_pending();
  } while (n == SWEEP_BATCH);
  pthread_mutex_lock(&heaps.lock);
  heaps.sweep_floor = heaps.in_use > SWEEP_FLOOR_MIN ? heaps.in_use : SWEEP_FLOOR_MIN;
  pthread_mutex_unlock(&heaps.lock);
  errno = saved_errno;
}

bool hak_heaps_flush_large_last(bool if_seen) {
  bool marked = false;
  hak_large *taken[SWEEP_BATCH];
  pthread_mutex_lock(&heaps.lock);
  hak_heap *next = heaps.all;
  pthread_mutex_unlock(&heaps.lock);
  while (next != NULL) {
    unsigned n = 0;
    pthread_mutex_lock(&heaps.lock); /* heaps are only added at the head of `all`: `next` stays valid */
    for (; next != NULL && n < SWEEP_BATCH; next = next->next_all) {
      hak_large *h = hak_large_last_claim(next, if_seen, &marked);
      if (h != NULL) taken[n++] = h;
    }
    pthread_mutex_unlock(&heaps.lock);
    for (unsigned i = 0; i < n; i++) hak_large_last_cache(taken[i]); /* takes the large tier's lock */
  }
  return marked;
}

uint64_t hak_heaps_live(void) {
  return atomic_load_explicit(&heaps.started, memory_order_relaxed) -
         atomic_load_explicit(&heaps.exited, memory_order_relaxed);
}

void hak_heaps_collect(bool force) {
  hak_heap *heap = hak_tls_heap;
  /* Memory of exited threads is reclaimed into the caller's heap, so a thread that never allocated gets
   * one here, as its first malloc would (a hunt: remote frees into an exited thread's segment stayed live
   * and their pages committed after a malloc_trim by such a thread). Not past its destructors. */
  if (force && heap == &hak_heap_empty) heap = hak_heap_for_counting();
  if (heap != &hak_heap_empty) {
    if (force) {
      hak_segment *seg;
      while ((seg = hak_segment_reclaim_one()) != NULL) hak_heap_adopt(heap, seg);
    }
    hak_heap_collect(heap, force);
  }
  /* The late heap allocates only when a thread past its destructors asks; blocks of it freed since (by
   * other threads: remote frees) would otherwise stay until then (a review: 16 MiB that key destructors
   * had allocated stayed live and resident after the program freed it and called malloc_trim). A
   * try-lock: a mapping that fails inside hak_heaps_late_alloc collects with late.lock held. */
  if (force && pthread_mutex_trylock(&late.lock) == 0) {
    if (late.heap != NULL) hak_heap_collect(late.heap, true);
    pthread_mutex_unlock(&late.lock);
  }
  if (force) hak_heaps_flush_large_last(false);
  hak_segments_collect(force);
  hak_large_collect(force);
}
