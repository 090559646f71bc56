/* stats.c — hak_stats_get(_sized) and hak_stats_print: per-thread counters merged from every heap, the OS
 * call counters of os.c, the large-tier counters, and the process's page faults and RSS. */
#include "internal.h"

#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* classes 0..19 are the small tier (<= 1024 bytes); in hardened builds the canary moves requests of
 * 1017-1024 bytes to class 20, so they count as medium */
#define SMALL_CLASS_MAX 19

static uint64_t current_rss(void) {
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[128];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char *p = buf;
  while (*p && *p != ' ') p++; /* skip total size */
  uint64_t pages = 0;
  while (*p == ' ') p++;
  while (*p >= '0' && *p <= '9') pages = pages * 10 + (uint64_t)(*p++ - '0');
  return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

static uint64_t load(const _Atomic uint64_t *v) { return atomic_load_explicit(v, memory_order_relaxed); }

_Static_assert(sizeof(struct hak_stats) == 35 * sizeof(uint64_t), "rust/ffi.rs mirrors 35 counters");

/* The size of struct hak_stats in 0.1.0: the most the exported hak_stats_get writes, since programs built
 * against 0.1.0 and 0.2.0 call it with no size. */
#define STATS_SIZE_0_1 offsetof(struct hak_stats, slow_allocs)

/* process: also the page faults and RSS (three system calls) */
static void stats_fill(struct hak_stats *out, bool process) {
  *out = (struct hak_stats){0};
  if (hak_tls_heap != &hak_heap_empty) hak_heap_flush_counts(hak_tls_heap); /* exact for the caller */
  hak_heaps_lock();
  for (hak_heap *h = hak_heaps_first(); h != NULL; h = h->next_all) {
    for (unsigned c = 0; c < HAK_CLASS_COUNT; c++) {
      uint64_t n = load(&h->counters.allocs[c]), freed = load(&h->counters.frees[c]);
      unsigned tier = c <= SMALL_CLASS_MAX ? HAK_TIER_SMALL : HAK_TIER_MEDIUM;
      out->allocs[tier] += n;
      out->alloc_bytes[tier] += n * hak_class_size(c);
      out->frees += freed;
      /* wraps while a block allocated by one heap is freed through another that adopted its segment;
       * the sum over heaps is right */
      uint64_t live = n - freed - load(&h->counters.collected[c]);
      out->live_blocks[tier] += live;
      out->live_bytes[tier] += live * hak_class_size(c);
    }
    out->remote_frees += load(&h->counters.remote_frees);
    out->slow_allocs += load(&h->counters.slow_allocs);
    out->slow_frees += load(&h->counters.slow_frees);
  }
  for (unsigned c = 0; c < HAK_CLASS_COUNT; c++) { /* freed, and collected by no heap */
    uint64_t orphans = hak_segments_orphan_blocks(c);
    unsigned tier = c <= SMALL_CLASS_MAX ? HAK_TIER_SMALL : HAK_TIER_MEDIUM;
    out->live_blocks[tier] -= orphans;
    out->live_bytes[tier] -= orphans * hak_class_size(c);
  }
  out->remote_frees += hak_orphan_remote_frees();
  out->frees += out->remote_frees;
  hak_heaps_unlock();
  uint64_t large_frees;
  hak_large_counters(&out->large_cache_hits, &out->large_cache_misses, &out->allocs[HAK_TIER_LARGE],
                     &out->alloc_bytes[HAK_TIER_LARGE], &large_frees);
  out->frees += large_frees;
  out->live_blocks[HAK_TIER_LARGE] = out->allocs[HAK_TIER_LARGE] - large_frees;
  out->live_bytes[HAK_TIER_LARGE] = hak_large_live_bytes();
  /* counters other threads move while they are read can make a sum dip below zero for a moment */
  for (int t = 0; t < HAK_TIER_COUNT; t++) {
    if ((int64_t)out->live_blocks[t] < 0) out->live_blocks[t] = 0;
    if ((int64_t)out->live_bytes[t] < 0) out->live_bytes[t] = 0;
  }
  hak_heaps_thread_counts(&out->threads_started, &out->threads_exited);
  out->segments_reclaimed = hak_segments_reclaimed();
  out->orphaned_pages = hak_segments_orphaned_pages();
  struct hak_os_counters *os = &hak_os_counters;
  out->mmap_calls = load(&os->mmap_calls);
  out->munmap_calls = load(&os->munmap_calls);
  out->madvise_calls = load(&os->madvise_calls);
  out->mprotect_calls = load(&os->mprotect_calls);
  out->mremap_calls = load(&os->mremap_calls);
  out->mincore_calls = load(&os->mincore_calls);
  int64_t committed = atomic_load_explicit(&os->committed_bytes, memory_order_relaxed);
  int64_t peak = atomic_load_explicit(&os->peak_committed_bytes, memory_order_relaxed);
  int64_t mapped = atomic_load_explicit(&os->mapped_bytes, memory_order_relaxed);
  out->committed_bytes = committed > 0 ? (uint64_t)committed : 0;
  out->peak_committed_bytes = peak > 0 ? (uint64_t)peak : 0;
  out->mapped_bytes = mapped > 0 ? (uint64_t)mapped : 0;
  if (!process) return;
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) == 0) {
    out->minor_faults = (uint64_t)ru.ru_minflt;
    out->major_faults = (uint64_t)ru.ru_majflt;
    out->peak_rss_bytes = (uint64_t)ru.ru_maxrss * 1024u;
  }
  out->current_rss_bytes = current_rss();
  /* the kernel updates ru_maxrss lazily: a peak below the current size is stale */
  if (out->peak_rss_bytes < out->current_rss_bytes) out->peak_rss_bytes = out->current_rss_bytes;
}

HAK_API int hak_stats_get_sized(struct hak_stats *out, size_t size) {
  if (out == NULL) return EINVAL;
  hak_init();
  /* the caller's own remote frees still waiting in its table are sent, so that its counts are exact */
  if (hak_tls_heap != &hak_heap_empty) hak_remote_batches_flush(hak_tls_heap);
  struct hak_stats all;
  stats_fill(&all, true);
  size_t known = sizeof all < size ? sizeof all : size;
  known -= known % sizeof(uint64_t); /* whole fields only */
  memcpy(out, &all, known);
  if (size > sizeof all) memset((char *)out + sizeof all, 0, size - sizeof all);
  return 0;
}

/* The exported symbol "hak_stats_get" (hakmem.h's inline function of that name is never emitted here). */
HAK_API int hak_stats_get_0_1(struct hak_stats *out) __asm__("hak_stats_get");
HAK_API int hak_stats_get_0_1(struct hak_stats *out) { return hak_stats_get_sized(out, STATS_SIZE_0_1); }

void hak_stats_memory(struct hak_stats *out) {
  hak_init();
  stats_fill(out, false);
}

static double mib(uint64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

HAK_API void hak_stats_print(FILE *out) {
  struct hak_stats s;
  hak_stats_get_sized(&s, sizeof s);
  char buf[2048];
  static const char *tiers[HAK_TIER_COUNT] = {"small (<= 1 KiB)", "medium (<= 512 KiB)", "large (> 512 KiB)"};
  uint64_t ops = s.frees, calls = s.mmap_calls + s.munmap_calls + s.madvise_calls + s.mprotect_calls + s.mremap_calls +
                           s.mincore_calls;
  for (int t = 0; t < HAK_TIER_COUNT; t++) ops += s.allocs[t];
  long profile = hak_opts.value[HAK_OPT_PROFILE];
  const char *pname = hak_option_value_name(HAK_OPT_PROFILE, profile);
  int n = snprintf(buf, sizeof buf,
                   "hakmem stats: version %d.%d.%d%s, profile %s, purge delay %ld ms\n"
                   "  %-20s %14s %14s %14s %14s\n",
                   HAKMEM_VERSION_MAJOR, HAKMEM_VERSION_MINOR, HAKMEM_VERSION_PATCH, HAK_SECURE ? " (hardened)" : "",
                   pname ? pname : "?", (long)hak_opts.value[HAK_OPT_PURGE_DELAY_MS], "tier", "allocations", "MiB",
                   "live blocks", "live MiB");
  for (int t = 0; t < HAK_TIER_COUNT && n < (int)sizeof buf; t++)
    n += snprintf(buf + n, sizeof buf - (size_t)n, "  %-20s %14llu %14.1f %14llu %14.1f\n", tiers[t],
                  (unsigned long long)s.allocs[t], mib(s.alloc_bytes[t]), (unsigned long long)s.live_blocks[t],
                  mib(s.live_bytes[t]));
  if (n < (int)sizeof buf)
    n += snprintf(buf + n, sizeof buf - (size_t)n,
                  "  frees %llu (remote %llu); threads started %llu, exited %llu; segments reclaimed %llu; orphaned pages %llu\n"
                  "  slow paths: allocations %llu, frees %llu\n"
                  "  committed now %.1f MiB, peak %.1f MiB; mapped %.1f MiB\n"
                  "  os calls: mmap %llu, munmap %llu, madvise %llu, mprotect %llu, mremap %llu, mincore %llu (%.3g per op)\n"
                  "  large cache: hits %llu, misses %llu\n"
                  "  process: page faults minor %llu, major %llu; rss now %.1f MiB, peak %.1f MiB\n",
                  (unsigned long long)s.frees, (unsigned long long)s.remote_frees,
                  (unsigned long long)s.threads_started, (unsigned long long)s.threads_exited,
                  (unsigned long long)s.segments_reclaimed, (unsigned long long)s.orphaned_pages,
                  (unsigned long long)s.slow_allocs,
                  (unsigned long long)s.slow_frees, mib(s.committed_bytes), mib(s.peak_committed_bytes),
                  mib(s.mapped_bytes), (unsigned long long)s.mmap_calls, (unsigned long long)s.munmap_calls,
                  (unsigned long long)s.madvise_calls, (unsigned long long)s.mprotect_calls,
                  (unsigned long long)s.mremap_calls, (unsigned long long)s.mincore_calls, ops ? (double)calls / (double)ops : 0.0,
                  (unsigned long long)s.large_cache_hits, (unsigned long long)s.large_cache_misses,
                  (unsigned long long)s.minor_faults, (unsigned long long)s.major_faults, mib(s.current_rss_bytes),
                  mib(s.peak_rss_bytes));
  if (n > (int)sizeof buf - 1) n = (int)sizeof buf - 1;
  if (out == NULL) {
    ssize_t r = write(hak_report_fd(), buf, (size_t)n);
    (void)r;
  } else {
    fwrite(buf, 1, (size_t)n, out);
    fflush(out);
  }
}
