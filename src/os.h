/* os.h — the platform layer: every call hakmem makes to the kernel for memory goes through here, so it
 * is counted (for HAKMEM_STATS and hak_stats_get) and so the rest of the allocator never sees errno
 * handling or alignment tricks. Thread-safe; none of it allocates but hak_os_thread_start. */
#ifndef HAK_OS_H
#define HAK_OS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define HAK_OS_PAGE ((size_t)4096)

/** Process-wide counters of OS calls and of memory mapped/committed by hakmem. */
struct hak_os_counters {
  _Atomic uint64_t mmap_calls, munmap_calls, madvise_calls, mprotect_calls, mremap_calls, mincore_calls;
  _Atomic int64_t mapped_bytes;        /* address space mapped now */
  _Atomic int64_t committed_bytes;     /* mapped and not purged */
  _Atomic int64_t peak_committed_bytes;
};
extern struct hak_os_counters hak_os_counters;

/** Map `size` bytes (a multiple of the page size) of fresh zeroed read-write memory aligned to `align`
 *  (a power of two >= page size). `huge` adds a transparent-huge-page hint. NULL on failure (errno
 *  from the kernel, normally ENOMEM). The kernel's overcommit check applies, as to glibc's mappings. */
void *hak_os_map(size_t size, size_t align, bool huge);
/** hak_os_map for address space reserved ahead of use (MAP_NORESERVE: no overcommit check; region areas,
 *  which may hold many more bytes than are ever touched). */
void *hak_os_reserve(size_t size, size_t align, bool huge);
/** hak_os_map of `used` + `guard` bytes where the last `guard` bytes are never touched: mapped, but not
 *  counted as committed (the huge-page hint covers `used` only). */
void *hak_os_map_guarded(size_t used, size_t guard, size_t align, bool huge);
/** Record the flags of a successful mlockall (0 for munlockall; the interposed calls in
 *  override_mlock.c). Since mlockall(MCL_FUTURE) without MCL_ONFAULT the kernel populates and locks every
 *  new writable mapping whole, so segments are then mapped read-only and made writable a page at a time
 *  (hak_os_mappings_populated). */
void hak_os_note_mlockall(int flags);
/** Whether new writable mappings are populated whole when mapped (mlockall(MCL_FUTURE) is in force). */
bool hak_os_mappings_populated(void);
/** hak_os_map_guarded, but read-only and counted as not committed: reads see zeroes and cost no memory
 *  (even under mlockall, which maps the shared zero page), and hak_os_commit makes parts writable. */
void *hak_os_map_guarded_read_only(size_t used, size_t guard, size_t align);
/** Make [addr, addr+size) of a mapping writable (mprotect; under mlockall(MCL_FUTURE) this populates it,
 *  the mapping being locked already: the kernel charges a locked mapping to RLIMIT_MEMLOCK whole, read-only
 *  or not). Not counted: the caller counts the range committed again (hak_os_recommit), as after a purge.
 *  Returns 0 or the errno of mprotect (ENOMEM). */
int hak_os_commit(void *addr, size_t size);
/** Make [addr, addr+size) of a mapping inaccessible (mprotect PROT_NONE): a guard that faults on any
 *  access. Not counted as committed or not (the caller keeps counting it as it did). Returns 0 or errno. */
int hak_os_protect_none(void *addr, size_t size);
/** Map an inaccessible range (PROT_NONE) at exactly `addr`, only if nothing is mapped there (the
 *  address is a hint; a mapping placed elsewhere is undone): a guard page put back after its mapping's
 *  resize failed. Counted as mapped and committed, as the guard page of a hak_os_map mapping that
 *  hak_os_protect_none made is. Returns 0, or EEXIST when the range is taken. */
int hak_os_map_guard_at(void *addr, size_t size);
/** Start the address hints of aligned mappings at a 4 MiB boundary chosen by `random` (hardened builds, at
 *  init): otherwise every run puts the heap at the same addresses, which an attack need not guess. */
void hak_os_randomize_hints(uint64_t random);
/** Replace [addr, addr+size) by fresh read-only zero memory (mmap MAP_FIXED), releasing its pages even
 *  when they are locked, where madvise fails; counted as no longer committed. Returns 0 or errno. */
int hak_os_decommit(void *addr, size_t size);
/** Unmap a range obtained from hak_os_map (or part of one). `committed` says whether it was still
 *  counted as committed. */
void hak_os_unmap(void *addr, size_t size, bool committed);
/** Unmap a whole mapping from hak_os_map_guarded, given the same `used` and `guard`. */
void hak_os_unmap_guarded(void *addr, size_t used, size_t guard, bool committed);
/** Release the physical pages of [addr, addr+size) while keeping the mapping: MADV_DONTNEED, or
 *  MADV_FREE when `lazy`. Returns 0 or the errno of a failed madvise (counted, never fatal). */
int hak_os_purge(void *addr, size_t size, bool lazy);
/** Record that a purged range is about to be used again (committed accounting only, no syscall). */
void hak_os_recommit(size_t size);
/** Record that a range was given back by hak_os_advise rather than hak_os_purge (accounting only). */
void hak_os_uncommit(size_t size);
/** Which pages of [addr, addr+size) (page-aligned, mapped) are resident: one byte per page in `vec`,
 *  bit 0 set if resident (mincore). Returns 0 or errno. */
int hak_os_resident(void *addr, size_t size, unsigned char *vec);
/** Whether address space or commit charge is scarce for this process: a finite RLIMIT_AS, or the
 *  kernel's strict overcommit (vm.overcommit_memory=2), where every writable private mapping is charged
 *  whether or not it holds pages. Read once, at the first call; later calls return that answer. */
bool hak_os_address_space_tight(void);
/** Zero [addr, addr+size) of a private anonymous mapping without faulting in what is not resident: the
 *  resident pages (mincore) and short runs of others are memset, longer runs (16 pages or more) get
 *  MADV_DONTNEED, which reads as zero afterwards (a swapped-out page too, which mincore does not count as
 *  resident). Partial pages at both ends are memset: others may hold the rest of them. Only for memory no
 *  other thread writes meanwhile (large.c: calloc from a cached mapping). */
void hak_os_zero(void *addr, size_t size);
/** Counted madvise with any advice (MADV_WILLNEED, MADV_HUGEPAGE, ...). Returns 0 or errno. */
int hak_os_advise(void *addr, size_t size, int advice);
/** Resize a mapping with mremap. With target NULL only in place; otherwise the pages move onto
 *  `target`, a mapping of new_size bytes from hak_os_map that is replaced. NULL on failure (the old
 *  mapping and the target stay intact). */
void *hak_os_remap(void *addr, size_t old_size, size_t new_size, void *target);
/** Monotonic clock in milliseconds (vDSO, no syscall). The coarse clock: it reads in about 5 ns where the
 *  precise one takes 23 (this VM), and its resolution of one kernel tick (1-10 ms) is finer than any
 *  purge delay needs. */
uint64_t hak_clock_ms(void);
/** Start a detached background thread running main(NULL) with every signal blocked (the program's
 *  handlers never run on it). Returns 0 or pthread_create's error. May allocate: call it holding no allocator lock. */
int hak_os_thread_start(void *(*main)(void *));
/** Name the calling thread (at most 15 characters) as ps, top and /proc/PID/task/TID/comm show it: each
 *  background thread names itself first, so users can tell hakmem's threads from their own. */
void hak_os_name_this_thread(const char *name);
/** Initialise `cond` to time its waits with CLOCK_MONOTONIC (immune to wall-clock changes). */
void hak_os_cond_init_monotonic(pthread_cond_t *cond);
/** The CLOCK_MONOTONIC time `ms` milliseconds from now, for pthread_cond_timedwait on such a cond. */
struct timespec hak_os_deadline_in(uint64_t ms);

#endif
