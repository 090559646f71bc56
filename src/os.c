/* os.c — mmap/munmap/madvise/mremap wrappers with call counters and aligned mapping. See os.h. */
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

struct hak_os_counters hak_os_counters;

/* Aligned mappings first try an address hint in an area the kernel leaves alone by default (above
 * 32 TiB); when the kernel honours the hint the mapping costs one mmap call instead of three. */
#define HINT_BASE ((uintptr_t)32 << 40)
#define HINT_END ((uintptr_t)64 << 40)
static _Atomic uintptr_t hint_next = HINT_BASE;

static void count_commit(int64_t delta) {
  /* seq_cst (one locked add on x86 either way): the purger's end pairs with a growth on this word */
  int64_t now = atomic_fetch_add_explicit(&hak_os_counters.committed_bytes, delta, memory_order_seq_cst) + delta;
  int64_t peak = atomic_load_explicit(&hak_os_counters.peak_committed_bytes, memory_order_relaxed);
  while (now > peak && !atomic_compare_exchange_weak_explicit(&hak_os_counters.peak_committed_bytes, &peak, now,
                                                              memory_order_relaxed, memory_order_relaxed)) {
  }
}

/* `reserve`: MAP_NORESERVE, for address space reserved ahead of use (region areas). Without it the kernel's
 * overcommit check sees the mapping, so a request no machine could back fails with ENOMEM, as under glibc,
 * instead of returning memory that kills the process when touched (a review: malloc of 1 TiB succeeded). */
static void *raw_map(void *hint, size_t size, bool reserve, int prot) {
  atomic_fetch_add_explicit(&hak_os_counters.mmap_calls, 1, memory_order_relaxed);
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | (reserve ? MAP_NORESERVE : 0);
  void *p = mmap(hint, size, prot, flags, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static void raw_unmap(void *p, size_t size) {
  if (size == 0) return;
  atomic_fetch_add_explicit(&hak_os_counters.munmap_calls, 1, memory_order_relaxed);
  munmap(p, size);
}

void hak_os_randomize_hints(uint64_t random) {
  const uintptr_t chunk = (uintptr_t)4 << 20, slots = ((uintptr_t)16 << 40) / chunk; /* in the window's first half */
  atomic_store_explicit(&hint_next, HINT_BASE + (uintptr_t)(random % slots) * chunk, memory_order_relaxed);
}

/* The hints walk the window and start again at its base once they reach its end (the kernel passes over
 * a hint that is taken): they used to stop there for good, and every aligned mapping after 32 TiB of
 * them, or a thousand 2^34-aligned ones, cost three calls (a review: 8 MiB pairs 31 % slower). */
static void *hinted_map(size_t size, size_t align, bool reserve, int prot) {
  size_t step = (size + align - 1) & ~(align - 1);
  uintptr_t walked = atomic_fetch_add_explicit(&hint_next, step, memory_order_relaxed) - HINT_BASE;
  uintptr_t hint = HINT_BASE + walked % (HINT_END - HINT_BASE);
  hint = (hint + align - 1) & ~(uintptr_t)(align - 1);
  if (hint + size > HINT_END) return NULL;
  void *p = raw_map((void *)hint, size, reserve, prot);
  if (p == NULL) return NULL;
  if (((uintptr_t)p & (align - 1)) == 0) return p;
  raw_unmap(p, size);
  return NULL;
}

/* `prot` PROT_READ: the read-only mappings of hak_os_map_guarded_read_only, not counted as committed. */
static void *map_aligned(size_t used, size_t guard, size_t align, bool huge, bool reserve, int prot) {
  size_t size = used + guard;
  if (used == 0 || size < used || size > ((size_t)1 << 46)) {
    errno = ENOMEM;
    return NULL;
  }
  int saved = errno; /* a refused hint must not change errno of a call that succeeds */
  void *p = NULL;
  if (align <= HAK_OS_PAGE) {
    p = raw_map(NULL, size, reserve, prot);
  } else {
    p = hinted_map(size, align, reserve, prot);
    if (p == NULL) {
      size_t over = size + align;
      if (over < size) {
        errno = ENOMEM;
        return NULL;
      }
      uint8_t *raw = raw_map(NULL, over, reserve, prot);
      if (raw == NULL) return NULL;
      uint8_t *aligned = (uint8_t *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
      raw_unmap(raw, (size_t)(aligned - raw));
      raw_unmap(aligned + size, (size_t)(raw + over - (aligned + size)));
      p = aligned;
    }
  }
  if (p == NULL) return NULL;
  errno = saved;
  if (huge) hak_os_advise(p, used, MADV_HUGEPAGE);
  atomic_fetch_add_explicit(&hak_os_counters.mapped_bytes, (int64_t)size, memory_order_relaxed);
  if (prot & PROT_WRITE) count_commit((int64_t)used);
  return p;
}

#define PROT_RW (PROT_READ | PROT_WRITE)

void *hak_os_map_guarded(size_t used, size_t guard, size_t align, bool huge) {
  return map_aligned(used, guard, align, huge, false, PROT_RW);
}

void *hak_os_map(size_t size, size_t align, bool huge) { return map_aligned(size, 0, align, huge, false, PROT_RW); }

void *hak_os_reserve(size_t size, size_t align, bool huge) {
  return map_aligned(size, 0, align, huge, true, PROT_RW);
}

void *hak_os_map_guarded_read_only(size_t used, size_t guard, size_t align) {
  return map_aligned(used, guard, align, false, false, PROT_READ);
}

/* 0, or the errno of a call that `failed`, with the caller's errno put back (`saved`): these calls' failures
 * are handled here, and must not show through malloc or free. */
static int failure(bool failed, int saved) {
  if (!failed) return 0;
  int err = errno;
  errno = saved;
  return err;
}

/* Set by the program's mlockall(MCL_FUTURE) (without MCL_ONFAULT), cleared by munlockall, another
 * mlockall without MCL_FUTURE, and in a forked child, which the kernel does not let inherit it. */
static _Atomic bool populates_mappings;

void hak_os_note_mlockall(int flags) {
  atomic_store_explicit(&populates_mappings, (flags & MCL_FUTURE) && !(flags & MCL_ONFAULT), memory_order_relaxed);
}

bool hak_os_mappings_populated(void) { return atomic_load_explicit(&populates_mappings, memory_order_relaxed); }

int hak_os_commit(void *addr, size_t size) {
  atomic_fetch_add_explicit(&hak_os_counters.mprotect_calls, 1, memory_order_relaxed);
  int saved = errno;
  return failure(mprotect(addr, size, PROT_RW) != 0, saved);
}

int hak_os_protect_none(void *addr, size_t size) {
  atomic_fetch_add_explicit(&hak_os_counters.mprotect_calls, 1, memory_order_relaxed);
  int saved = errno;
  return failure(mprotect(addr, size, PROT_NONE) != 0, saved);
}

int hak_os_map_guard_at(void *addr, size_t size) {
  int saved = errno;
  void *p = raw_map(addr, size, true, PROT_NONE); /* a hint, which the kernel takes when the range is free */
  errno = saved;
  if (p != addr) {
    if (p != NULL) raw_unmap(p, size);
    return EEXIST;
  }
  atomic_fetch_add_explicit(&hak_os_counters.mapped_bytes, (int64_t)size, memory_order_relaxed);
  count_commit((int64_t)size);
  return 0;
}

int hak_os_decommit(void *addr, size_t size) {
  atomic_fetch_add_explicit(&hak_os_counters.mmap_calls, 1, memory_order_relaxed);
  int saved = errno;
  int err = failure(mmap(addr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED, saved);
  if (err == 0) count_commit(-(int64_t)size);
  return err;
}

void hak_os_unmap_guarded(void *addr, size_t used, size_t guard, bool committed) {
  raw_unmap(addr, used + guard);
  atomic_fetch_sub_explicit(&hak_os_counters.mapped_bytes, (int64_t)(used + guard), memory_order_relaxed);
  if (committed) count_commit(-(int64_t)used);
}

void hak_os_unmap(void *addr, size_t size, bool committed) { hak_os_unmap_guarded(addr, size, 0, committed); }

int hak_os_advise(void *addr, size_t size, int advice) {
  atomic_fetch_add_explicit(&hak_os_counters.madvise_calls, 1, memory_order_relaxed);
  int saved = errno;
  return failure(madvise(addr, size, advice) != 0, saved);
}

int hak_os_resident(void *addr, size_t size, unsigned char *vec) {
  atomic_fetch_add_explicit(&hak_os_counters.mincore_calls, 1, memory_order_relaxed);
  int saved = errno;
  return failure(mincore(addr, size, vec) != 0, saved);
}

/* Pages zeroed per mincore call (hak_os_zero): 4 MiB, its vector on the stack. */
#define ZERO_WINDOW_PAGES 1024
/* Shorter runs of non-resident pages are zeroed with the pages around them, faulted in once: a block
 * written on every other page left a gap per 8 KiB that every later calloc gave back with a madvise of its
 * own, 6-8x the time of a memset (a review: 600 KiB, 13-16 us -> 100-120 us a calloc, 73 madvise calls
 * each: about 1.3 us a call). From 16 pages (64 KiB) on, that is less than a memset of the run once it is
 * resident (a resident 128 MiB block: 7.2-7.6 ms, about 3.7 us per 64 KiB). */
#define ZERO_GAP_MIN_PAGES 16

/* The bytes hak_os_zero will memset: adjacent ranges joined, so that a resident range is one memset (in
 * 4 MiB pieces, a 128 MiB one took about twice as long: glibc's memset chooses its stores by size). */
typedef struct zero_range {
  uint8_t *at;
  size_t len;
} zero_range;

static void zero_range_add(zero_range *r, uint8_t *at, size_t len) {
  if (r->len != 0 && r->at + r->len == at) {
    r->len += len;
    return;
  }
  if (r->len != 0) memset(r->at, 0, r->len);
  r->at = at;
  r->len = len;
}

void hak_os_zero(void *addr, size_t size) {
  uint8_t *at = addr, *end = at + size;
  uint8_t *first = (uint8_t *)(((uintptr_t)at + HAK_OS_PAGE - 1) & ~(uintptr_t)(HAK_OS_PAGE - 1));
  uint8_t *last = (uint8_t *)((uintptr_t)end & ~(uintptr_t)(HAK_OS_PAGE - 1));
  if (last < first + ZERO_GAP_MIN_PAGES * HAK_OS_PAGE) { /* no run long enough for a madvise */
    memset(addr, 0, size);
    return;
  }
  zero_range pending = {at, (size_t)(first - at)}; /* the partial pages at both ends, whoever else holds them */
  unsigned char vec[ZERO_WINDOW_PAGES];
  for (uint8_t *window = first; window < last;) {
    size_t pages = (size_t)(last - window) / HAK_OS_PAGE;
    if (pages > ZERO_WINDOW_PAGES) pages = ZERO_WINDOW_PAGES;
    if (hak_os_resident(window, pages * HAK_OS_PAGE, vec) != 0) {
      zero_range_add(&pending, window, pages * HAK_OS_PAGE);
    } else {
      for (size_t i = 0, j; i < pages; i = j) {
        bool resident = vec[i] & 1;
        for (j = i + 1; j < pages && (bool)(vec[j] & 1) == resident; j++) {}
        uint8_t *from = window + i * HAK_OS_PAGE;
        /* locked pages refuse the madvise, but they are resident */
        if (resident || j - i < ZERO_GAP_MIN_PAGES || hak_os_advise(from, (j - i) * HAK_OS_PAGE, MADV_DONTNEED) != 0)
          zero_range_add(&pending, from, (j - i) * HAK_OS_PAGE);
      }
    }
    window += pages * HAK_OS_PAGE;
  }
  zero_range_add(&pending, last, (size_t)(end - last));
  if (pending.len != 0) memset(pending.at, 0, pending.len);
}

int hak_os_purge(void *addr, size_t size, bool lazy) {
  int err = hak_os_advise(addr, size, lazy ? MADV_FREE : MADV_DONTNEED);
  if (err == EINVAL && lazy) err = hak_os_advise(addr, size, MADV_DONTNEED); /* kernels without MADV_FREE */
  if (err == 0) count_commit(-(int64_t)size);
  return err;
}

void hak_os_recommit(size_t size) { count_commit((int64_t)size); }

bool hak_os_address_space_tight(void) {
  static _Atomic int answer; /* 0: not read yet, 1: tight, 2: not */
  int known = atomic_load_explicit(&answer, memory_order_relaxed);
  if (known != 0) return known == 1;
  struct rlimit limit;
  bool tight = getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY;
  char mode = '0';
  int fd = open("/proc/sys/vm/overcommit_memory", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    if (read(fd, &mode, 1) != 1) mode = '0';
    close(fd);
  }
  tight |= mode == '2';
  atomic_store_explicit(&answer, tight ? 1 : 2, memory_order_relaxed);
  return tight;
}

void hak_os_uncommit(size_t size) { count_commit(-(int64_t)size); }

void *hak_os_remap(void *addr, size_t old_size, size_t new_size, void *target) {
  atomic_fetch_add_explicit(&hak_os_counters.mremap_calls, 1, memory_order_relaxed);
  void *p = target == NULL ? mremap(addr, old_size, new_size, 0)
                           : mremap(addr, old_size, new_size, MREMAP_MAYMOVE | MREMAP_FIXED, target);
  if (p == MAP_FAILED) return NULL;
  /* in place the mapping changed size; moved, the target (already counted) replaced the old range */
  int64_t delta = target == NULL ? (int64_t)new_size - (int64_t)old_size : -(int64_t)old_size;
  atomic_fetch_add_explicit(&hak_os_counters.mapped_bytes, delta, memory_order_relaxed);
  count_commit(delta);
  return p;
}

uint64_t hak_clock_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int hak_os_thread_start(void *(*main)(void *)) {
  pthread_attr_t attr;
  pthread_t th;
  sigset_t all, old;
  sigfillset(&all);
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* the new thread inherits the mask */
  int rc = pthread_create(&th, &attr, main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  return rc;
}

void hak_os_name_this_thread(const char *name) { prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0); }

void hak_os_cond_init_monotonic(pthread_cond_t *cond) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(cond, &ca);
  pthread_condattr_destroy(&ca);
}

struct timespec hak_os_deadline_in(uint64_t ms) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  t.tv_sec += (time_t)(ms / 1000);
  t.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec++;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}
