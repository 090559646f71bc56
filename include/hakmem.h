/* hakmem.h — public interface of libhakmem, a general-purpose allocator for Linux x86-64.
 *
 * Three ways to use it:
 *   - LD_PRELOAD=libhakmem.so prog     (or `hakmem run -- prog`): replaces malloc for a whole process;
 *   - link with -lhakmem (shared or static): the standard names resolve to hakmem;
 *   - call the hak_* functions below directly.
 *
 * Every hak_* allocation function has the semantics of its standard counterpart as glibc documents it:
 * malloc(0) returns a unique pointer, sizes are 16-byte aligned for requests >= 16, every size or count
 * overflow returns NULL with errno = ENOMEM, and memory from one hak_* function may be released by free()
 * or hak_free() alike.
 */
#ifndef HAKMEM_H
#define HAKMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Version of this header and library: major, minor, patch, and the three combined as one integer. */
#define HAKMEM_VERSION_MAJOR 0
#define HAKMEM_VERSION_MINOR 8
#define HAKMEM_VERSION_PATCH 0
#define HAKMEM_VERSION (HAKMEM_VERSION_MAJOR * 10000 + HAKMEM_VERSION_MINOR * 100 + HAKMEM_VERSION_PATCH)

/* ---- Allocation ------------------------------------------------------------------------------------ */

/** Allocate `size` bytes (16-byte aligned when size >= 16). NULL with errno = ENOMEM on failure. */
void *hak_malloc(size_t size);
/** Allocate `count * size` zeroed bytes; NULL with errno = ENOMEM if the product overflows. */
void *hak_calloc(size_t count, size_t size);
/** Resize `ptr` to `size` bytes keeping its contents. realloc(NULL, n) is malloc(n); realloc(p, 0) frees p
 *  and returns NULL. On failure the old block stays valid and NULL is returned with errno = ENOMEM. A
 *  block above 512 KiB that cannot grow where it lies moves to a new mapping, which needs address space
 *  for the old and the new size at once (glibc's needs the new size only): under a tight RLIMIT_AS such a
 *  realloc can fail where glibc's succeeds. */
void *hak_realloc(void *ptr, size_t size);
/** realloc(ptr, count * size) with overflow check (NULL, errno = ENOMEM, old block intact). */
void *hak_reallocarray(void *ptr, size_t count, size_t size);
/** Release a block from any hak_ or standard allocation function. NULL is ignored. A pointer that
 *  hakmem never returned is reported on stderr and the process aborts. */
void hak_free(void *ptr);
/** free() with the size the block was requested with (C23). Hardened builds report a size larger than the
 *  block's usable size and abort; a smaller wrong size is not detected (the class, not the request, is kept). */
void hak_free_sized(void *ptr, size_t size);
/** free() with the alignment and size the block was requested with (C23). */
void hak_free_aligned_sized(void *ptr, size_t alignment, size_t size);
/** Allocate with `alignment` (a power of two). NULL with errno = EINVAL for a bad alignment; alignments up
 *  to 4 MiB and beyond are supported. Unlike C11, any size is accepted. */
void *hak_aligned_alloc(size_t alignment, size_t size);
/** calloc with `alignment` (a power of two; since 0.5.0): `count * size` zeroed bytes aligned as
 *  hak_aligned_alloc's.
 *  NULL with errno = EINVAL for a bad alignment, ENOMEM when the product overflows or memory runs out.
 *  Memory fresh from the OS is not written (a large request stays uncommitted until used). */
void *hak_aligned_calloc(size_t alignment, size_t count, size_t size);
/** POSIX: store an allocation aligned to `alignment` (a power of two multiple of sizeof(void*)) in *out.
 *  Returns 0, EINVAL for a bad alignment or ENOMEM; *out is untouched on every error. */
int hak_posix_memalign(void **out, size_t alignment, size_t size);
/** Obsolete memalign, as glibc's: the alignment is raised to 16 if below, and to the next power of two if
 *  it is not one (no EINVAL for that); an alignment above 2^62 fails with ENOMEM, one above SIZE_MAX/2+1
 *  (which no power of two can meet) with EINVAL. */
void *hak_memalign(size_t alignment, size_t size);
/** Page-aligned allocation of `size` bytes. */
void *hak_valloc(size_t size);
/** Page-aligned allocation of `size` rounded up to whole pages (pvalloc(0) allocates one page). */
void *hak_pvalloc(size_t size);
/** Number of bytes usable at `ptr` (>= the size requested); all of them may be written. 0 for NULL. */
size_t hak_usable_size(const void *ptr);

/* ---- Maintenance and statistics ------------------------------------------------------------------ */

/** Return free memory to the OS now. With force = false only memory whose purge delay has expired is
 *  released; with force = true every free page of the calling thread's heap and of every shared cache is
 *  released, and memory of exited threads is reclaimed first, into the calling thread's heap (a thread that
 *  has none gets one, as its first allocation would). Another live thread's empty pages are its own:
 *  they go back at its next allocator calls, its own hak_collect, or its exit. force = true covers free regions too: every thread's cached regions go back to the
 *  global pools and all of them are purged (areas left wholly free are unmapped), whatever the region
 *  configuration. malloc_trim does the same as hak_collect(true). */
void hak_collect(bool force);

/** Size tiers, as counted in struct hak_stats. */
enum hak_tier {
  HAK_TIER_SMALL = 0,  /**< 1 .. 1024 bytes: per-thread pages of 64 KiB (256 KiB above 512 bytes) */
  HAK_TIER_MEDIUM = 1, /**< 1 KiB .. 512 KiB: per-thread runs of 64 KiB slices */
  HAK_TIER_LARGE = 2,  /**< above 512 KiB, and any size aligned above 64 KiB: dedicated mappings, cached
                            after free */
  HAK_TIER_COUNT = 3
};

/** A snapshot of the allocator's counters since the process started. New fields are only ever appended;
 *  hak_stats_get tells the library the size of the caller's struct, so a program and a library of
 *  different versions exchange exactly the fields both know. */
struct hak_stats {
  uint64_t allocs[HAK_TIER_COUNT];      /**< allocations per tier */
  uint64_t alloc_bytes[HAK_TIER_COUNT]; /**< bytes handed out per tier (block sizes, not requests) */
  uint64_t frees;                       /**< blocks freed, all tiers */
  uint64_t remote_frees;                /**< of those, freed by a thread other than the owner (frees into
                                             the memory of an exited thread count here until the freeing
                                             thread adopts that segment, after 64 of them; local after).
                                             In default builds small blocks count once the freeing thread
                                             sends them to their page: a chain of up to 4 KiB per page, sent
                                             when full, when another page needs its slot, and at that
                                             thread's maintenance passes, hak_collect, hak_stats_get and exit
                                             (so the caller's own are always counted) */
  uint64_t committed_bytes;             /**< bytes mapped and not given back (purged, or the released tail
                                             of a reused large mapping); pages never touched count too */
  uint64_t peak_committed_bytes;        /**< high-water mark of committed_bytes */
  uint64_t mapped_bytes;                /**< bytes of address space currently mapped */
  uint64_t mmap_calls, munmap_calls, madvise_calls, mprotect_calls, mremap_calls; /**< OS calls made */
  uint64_t large_cache_hits, large_cache_misses; /**< large tier: reuse of a cached mapping or not */
  uint64_t threads_started, threads_exited;      /**< thread heaps created and abandoned */
  uint64_t segments_reclaimed;          /**< segments of exited threads taken over by live threads (at
                                             the first free of one of their blocks, or for room) */
  uint64_t minor_faults, major_faults;  /**< page faults of the process (getrusage) */
  uint64_t peak_rss_bytes;              /**< peak resident set of the process (getrusage) */
  uint64_t current_rss_bytes;           /**< resident set now (/proc/self/statm) */
  /* since 0.2.0 */
  uint64_t slow_allocs;                 /**< small/medium allocations that found no free block in their
                                             thread's class cache (requests up to 1040 B, default build)
                                             or current page (page switch, collection or a new page) */
  uint64_t slow_frees;                  /**< frees by the owning thread that left the fast path (page
                                             leaving the full list, becoming empty, or a double-free check),
                                             blocks the class cache hands back to their pages included */
  /* since 0.4.0 */
  uint64_t live_blocks[HAK_TIER_COUNT]; /**< blocks allocated and not yet freed, per tier. Large blocks
                                             are counted exactly. Small and medium ones are counted per
                                             thread, on its slow paths: exact for the calling thread's own
                                             allocations and frees; another running thread's latest ones
                                             show at the first of its maintenance passes after 1024 more of
                                             its slow paths, at hak_collect called by that thread, or when
                                             it exits. A block freed by a thread other than its owner counts
                                             as live until the freeing thread sends it (see remote_frees)
                                             and the owner collects it (when it next takes that
                                             page's remote frees, or at hak_collect(true) in the owner; for
                                             an owner that exited, once a thread takes its memory over: at
                                             that thread's next new page, or hak_collect(true) in any
                                             thread), or until the page goes back to the OS with every
                                             block freed by other threads (orphaned_pages: a purge delay
                                             after its last block was freed). In a fork child, blocks of
                                             threads that did not survive the fork and are freed there stay
                                             counted as live but for such pages. */
  uint64_t live_bytes[HAK_TIER_COUNT];  /**< bytes of those blocks: block sizes (small, medium); for large
                                             blocks their mappings, header page included, less tails given
                                             back to the OS (the bytes they hold committed) */
  /* since 0.7.0 */
  uint64_t mincore_calls;               /**< OS calls counting resident pages: a single-threaded program's
                                             frees measure what freed slices still hold before purging
                                             them (HAKMEM_BACKGROUND_PURGE) */
  /* since 0.8.0 */
  uint64_t orphaned_pages;              /**< full pages whose blocks other threads all freed, given back to
                                             the OS a purge delay later while their owner had not looked
                                             (a thread that allocated for others and went to sleep) */
};

/** Fill *out with current counters (merged from every thread), up to `size` bytes: the fields of this
 *  library's struct hak_stats that fit whole in them (a field cut by `size` is left as it was); bytes past
 *  the library's own struct are zeroed (a newer program on an older library reads zeroes for the fields
 *  the library does not know). Returns 0, or EINVAL if out is NULL. Call it through hak_stats_get. */
int hak_stats_get_sized(struct hak_stats *out, size_t size);
/** Fill *out with current counters: hak_stats_get_sized(out, sizeof *out). Returns 0, or EINVAL if out
 *  is NULL. (Inline since 0.3.0. The exported symbol of this name, which programs built against 0.1.0
 *  and 0.2.0 call and dlsym finds, fills only the 25 counters of 0.1.0: it never writes past an older
 *  caller's struct.) */
static inline int hak_stats_get(struct hak_stats *out) { return hak_stats_get_sized(out, sizeof *out); }
/** Print the counters in a human-readable block to `out` (stderr if NULL). This is what HAKMEM_STATS=1
 *  prints at exit. The first line starts with "hakmem stats:" so tools can check hakmem was in use. */
void hak_stats_print(FILE *out);

/* ---- Options ------------------------------------------------------------------------------------- */

/** Run-time options. Each is read once from its environment variable (HAKMEM_<NAME>) on first use of the
 *  allocator; hak_option_set changes it later. The README has the table with defaults. */
enum hak_option {
  HAK_OPT_STATS = 0,       /**< HAKMEM_STATS: 1 = print statistics to stderr at exit (default 0) */
  HAK_OPT_VERBOSE,         /**< HAKMEM_VERBOSE: 0 silent, 1 warnings, 2 also the options in force (one
                                line at start: "hakmem: options: HAKMEM_STATS=0 ...") and a line per
                                mallopt call */
  HAK_OPT_PROFILE,         /**< HAKMEM_PROFILE: 0 fast, 1 balanced (default), 2 lean; sets the defaults of
                                the options below (hak_option_set too: every option not given a value
                                by the environment or hak_option_set takes the new profile's); names
                                fast|balanced|lean in the environment */
  HAK_OPT_PURGE_DELAY_MS,  /**< HAKMEM_PURGE_DELAY_MS: how long free memory stays committed before it is
                                returned to the OS; -1 never, 0 at once. Unless the process has one
                                thread and HAKMEM_BACKGROUND_PURGE is auto, each tier's delay rises to 5/4
                                of the interval at which its freed memory comes back after its purge (large
                                blocks: each block; pages of small and medium blocks: the mean interval,
                                which replaces the delay, once what comes back within a window, counted
                                in resident pages, reaches 1 MiB, an eighth of their live memory and an
                                eighth of what was purged), up to 32 times this (at
                                most 10 s unless this is longer), and halves back once for every ten such
                                delays in which no freed memory came back; a forked child starts from this
                                value */
  HAK_OPT_PURGE_MODE,      /**< HAKMEM_PURGE_MODE: 0 = MADV_DONTNEED (RSS drops at once), 1 = MADV_FREE */
  HAK_OPT_HUGE_PAGES,      /**< HAKMEM_HUGE_PAGES: 1 = ask for transparent huge pages on big mappings */
  HAK_OPT_DRAIN_INTERVAL,  /**< HAKMEM_DRAIN_INTERVAL (also HAKMEM_TINY_SLL_DRAIN_INTERVAL): slow-path
                                events (a page running out of blocks or becoming empty) between the passes
                                in which a thread hands its empty pages back to its segments, 1..1000000;
                                0 (the default) = self-tuned per thread: the interval doubles when a page
                                handed back is soon needed again and shrinks while pages sit unused */
  HAK_OPT_LARGE_CACHE_MB,  /**< HAKMEM_LARGE_CACHE_MB: most megabytes of freed large blocks kept with their
                                 pages; past it the oldest are purged (MADV_DONTNEED), kept mapped up
                                 to four times as many megabytes (once under a finite RLIMIT_AS or
                                 vm.overcommit_memory=2) and 4096 blocks; unmapped instead with
                                 HAKMEM_PURGE_MODE=free or locked memory (since 0.7.0; before, always
                                 unmapped). Besides these, each thread keeps its last freed block of
                                 at most 4 MiB and a quarter of this for its next large malloc */
  HAK_OPT_BACKGROUND_PURGE, /**< HAKMEM_BACKGROUND_PURGE: whether a background thread purges freed large
                                 blocks and the free slices of every segment (idle threads' too) after
                                 the purge delay even while the program makes no call; started only once
                                 hakmem holds over 32 MiB. Once it runs the process is no longer
                                 single-threaded, which makes each large-tier call a few tens of ns
                                 dearer (locks and atomic counters), makes the C library lock its stdio
                                 streams and makes unshare(CLONE_NEWUSER) fail. 0 (off): never; memory
                                 waits for the program's next call after its delay. 1 (on): as soon as
                                 hakmem holds over 32 MiB. 2 (auto): only once the program has created a
                                 thread; until the purger runs, frees trim each tier (large blocks;
                                 small and medium pages, counted by the pages they hold resident, a
                                 mincore call per segment) when what waits passes the larger of a
                                 bound and what its live blocks hold: the bound starts at 32 MiB and
                                 grows by the trimmed memory taken back within the purge delay (up to
                                 1 GiB), so memory a program reuses in cycles stays after the first
                                 cycle; the newest freed large block always stays. Names off|on|auto in
                                 the environment. 0 in the fast profile, 2 otherwise (since 0.6.0; 1
                                 from 0.4.0) */
  HAK_OPT_COUNT
};

/** Current value of an option, or -1 for an unknown option. */
long hak_option_get(enum hak_option option);
/** Set an option; returns 0, or EINVAL for an unknown option or a value out of its range. */
int hak_option_set(enum hak_option option, long value);
/** Name of an option's environment variable ("HAKMEM_STATS"...), or NULL for an unknown option. */
const char *hak_option_name(enum hak_option option);

/* ---- Regions: big buffers that page well ----------------------------------------------------------- */

/** A region: `ptr` points at `capacity` bytes, a power of two from 2 MiB (HAK_REGION_MIN) to 64 GiB
 *  (HAK_REGION_MAX). Treat the fields as read-only; pass the struct back to hak_region_free. */
struct hak_region {
  void *ptr;             /**< start of the memory, 2 MiB aligned */
  size_t capacity;       /**< usable bytes: the class size */
  uint32_t size_class;   /**< index of the class: capacity == HAK_REGION_MIN << size_class */
  uint32_t generation;   /**< stamp checked by hak_region_free and hak_region_prefetch: no two allocations in
                              the process share one (until 2^32 generations are used up), so a stale copy of a
                              freed handle is rejected with EINVAL */
};

#define HAK_REGION_MIN ((size_t)2 << 20)  /**< smallest region class: 2 MiB */
#define HAK_REGION_MAX ((size_t)64 << 30) /**< largest region class: 64 GiB */
#define HAK_REGION_CLASSES 16             /**< number of classes: 2 MiB, 4 MiB, ... 64 GiB */

/** Allocate a region of at least `bytes` bytes. Returns 0 and fills *out, or an errno code:
 *  EINVAL (bytes == 0, out == NULL), EOVERFLOW (bytes above HAK_REGION_MAX), ENOMEM (the OS refused),
 *  ENOTSUP (regions disabled by configuration). */
int hak_region_alloc(size_t bytes, struct hak_region *out);
/** Give a region back. Returns 0, or EINVAL if `region` is not a live region (already freed, never
 *  allocated, or its fields were changed); nothing is freed then. */
int hak_region_free(struct hak_region *region);
/** Ask the OS to read in [offset, offset + len) of the region ahead of use (MADV_WILLNEED). Returns 0,
 *  EINVAL when the range does not lie inside the region or the region is not live, or the errno of a
 *  madvise the kernel refused (e.g. EAGAIN; the region is unchanged, only the hint is lost). */
int hak_region_prefetch(const struct hak_region *region, size_t offset, size_t len);

/** Configuration of the region allocator; get the current one with hak_region_get_config. */
struct hak_region_config {
  bool enabled;                    /**< false: hak_region_alloc returns ENOTSUP */
  uint32_t release_interval_ms;    /**< background release period; 0 stops the background thread (named
                                        hakmem-regions, which also ends whenever no pool holds a dirty
                                        region and no thread cache a region or took one in the last
                                        period, and starts again when one does; a forked child starts
                                        its own at its first region call; where no thread can be
                                        created, caches keep their regions) */
  size_t release_bytes_per_tick;   /**< dirty bytes the background thread releases per period (at
                                        least one region, so regions bigger than this still progress);
                                        the classes take turns at being looked at first */
  bool eager_return;               /**< true: hak_region_free returns the pages to the OS at once (a
                                        region the kernel refuses, e.g. with mlock'd pages, is counted in
                                        release_errors and stays committed, not retried until reused) */
  size_t thread_cache_bytes;       /**< most bytes per class kept in each thread's cache (default 64
                                        MiB); lowering it moves what caches hold above the new limit to
                                        the global pools. Each period the background thread moves the
                                        regions a cache has not needed since the previous period (the
                                        fewest it held in that period) to the pools, where they are
                                        released; with release_interval_ms 0 caches keep them until
                                        their thread reuses them or exits, or hak_collect(true) */
  uint32_t growth_dampener;        /**< a new area holds max(1, regions_in_class >> dampener) regions */
  bool huge_pages;                 /**< ask for transparent huge pages on areas */
};

/** Copy the configuration in force to *out. Returns 0 or EINVAL (out == NULL). */
int hak_region_get_config(struct hak_region_config *out);
/** Replace the configuration. Returns 0 or EINVAL (cfg == NULL or a field out of range). */
int hak_region_configure(const struct hak_region_config *cfg);

/** Counters of one region class. */
struct hak_region_class_stats {
  size_t class_bytes;        /**< capacity of a region of this class */
  uint64_t areas;            /**< areas mapped now */
  uint64_t mapped_bytes;     /**< bytes of those areas */
  uint64_t free_regions;     /**< regions not in use (dirty + clean) */
  uint64_t dirty_regions;    /**< free regions whose pages are still committed */
  uint64_t clean_regions;    /**< free regions already returned to the OS */
  uint64_t allocations;      /**< hak_region_alloc calls served */
  uint64_t slow_path;        /**< allocations that missed the thread cache */
  uint64_t refills;          /**< areas mapped to serve allocations */
  uint64_t frees;            /**< hak_region_free calls accepted */
  uint64_t bytes_released;   /**< bytes of freed regions purged (madvise); unmapping an area whose
                                  regions are all clean adds nothing */
  uint64_t release_errors;   /**< madvise calls that failed (never fatal); such a region is not tried
                                  again until it is allocated and freed again */
};

/** Fill out[0 .. max) with the counters of classes 0 .. max-1; returns the number filled
 *  (at most HAK_REGION_CLASSES), or 0 if out is NULL. */
size_t hak_region_stats(struct hak_region_class_stats *out, size_t max);

#ifdef __cplusplus
}
#endif
#endif /* HAKMEM_H */
