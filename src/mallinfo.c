/* mallinfo.c — glibc's malloc introspection and tuning calls (mallinfo, mallinfo2, malloc_stats,
 * malloc_info, mallopt) answered from hakmem's own counters. Without them a program that preloads or links
 * hakmem would reach glibc's versions, which describe glibc's unused arena (zeros), and a fully static link
 * that calls one of them would pull glibc's malloc in beside ours. Compiled to nothing with
 * -DHAK_NO_OVERRIDE=1, like override.c.
 *
 * mallinfo2's fields, from struct hak_stats (hak_stats_memory: no system call) and hak_region_stats:
 *   hblks     blocks with mappings of their own, as glibc's mmapped chunks: live large blocks and live
 *             regions (hak_region_alloc)
 *   hblkhd    bytes those hold committed (large: mappings less tails given back; regions: their class size)
 *   uordblks  bytes of live small and medium blocks (block sizes)
 *   arena     every other committed byte of hakmem's: segments (blocks in use, free blocks, never-carved
 *             room), metadata, cached large mappings and free regions not yet released; at least uordblks
 *   fordblks  arena - uordblks
 *   ordblks, smblks, usmblks, fsmblks, keepcost: 0 (no equivalent).
 * The small/medium numbers carry the delays documented at struct hak_stats' live_blocks. */
#include "internal.h"

#if !HAK_NO_OVERRIDE
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>

/* Live regions and the bytes they hold, summed over the region classes. */
static void live_regions(uint64_t *count, uint64_t *bytes) {
  struct hak_region_class_stats rs[HAK_REGION_CLASSES];
  size_t n = hak_region_stats(rs, HAK_REGION_CLASSES);
  *count = *bytes = 0;
  for (size_t c = 0; c < n; c++) {
    uint64_t live = rs[c].allocations > rs[c].frees ? rs[c].allocations - rs[c].frees : 0;
    *count += live;
    *bytes += live * rs[c].class_bytes;
  }
}

static struct mallinfo2 info_from(const struct hak_stats *s) {
  uint64_t regions, region_bytes;
  live_regions(&regions, &region_bytes);
  struct mallinfo2 mi = {0};
  mi.hblks = s->live_blocks[HAK_TIER_LARGE] + regions;
  mi.hblkhd = s->live_bytes[HAK_TIER_LARGE] + region_bytes;
  mi.uordblks = s->live_bytes[HAK_TIER_SMALL] + s->live_bytes[HAK_TIER_MEDIUM];
  uint64_t others = s->committed_bytes > mi.hblkhd ? s->committed_bytes - mi.hblkhd : 0;
  mi.arena = others > mi.uordblks ? others : mi.uordblks;
  mi.fordblks = mi.arena - mi.uordblks;
  return mi;
}

static struct mallinfo2 info_from_stats(void) {
  struct hak_stats s;
  hak_stats_memory(&s);
  return info_from(&s);
}

/** mallinfo2 (glibc 2.33): hakmem's memory in glibc's terms, as in the table above. */
HAK_API struct mallinfo2 mallinfo2(void) { return info_from_stats(); }

static int saturate(size_t v) { return v > (size_t)INT_MAX ? INT_MAX : (int)v; }

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
/** mallinfo: mallinfo2's numbers in int fields, each capped at INT_MAX on its own (glibc's wrap around
 *  instead), so arena = uordblks + fordblks holds only while all three are below 2 GiB. */
HAK_API struct mallinfo mallinfo(void) {
  struct mallinfo2 m = info_from_stats();
  struct mallinfo mi = {0};
  mi.arena = saturate(m.arena);
  mi.hblks = saturate(m.hblks);
  mi.hblkhd = saturate(m.hblkhd);
  mi.uordblks = saturate(m.uordblks);
  mi.fordblks = saturate(m.fordblks);
  return mi;
}
#pragma GCC diagnostic pop

/** malloc_stats: prints hakmem's statistics block (hak_stats_print, live blocks per tier included) to
 *  stderr. */
HAK_API void malloc_stats(void) { hak_stats_print(stderr); }

/** malloc_info: an XML description of hakmem's memory in glibc's shape, to `fp`:
 *    <malloc version="hakmem-X.Y.Z">
 *    <total type="small|medium" count="live blocks" size="their bytes"/>
 *    <total type="mmap" count="hblks" size="hblkhd"/>   (large blocks and regions, as in mallinfo2)
 *    <system type="current|max" size="committed bytes now | at their peak"/>
 *    <aspace type="total" size="bytes of address space mapped"/>
 *    </malloc>
 *  The totals describe blocks in use (glibc's fast/rest totals count free chunks); no total repeats
 *  another. Returns 0; -1 with errno EINVAL when options is not 0 or fp is NULL (the contract of the
 *  manual page: glibc 2.36 returns EINVAL itself), or -1 when writing to fp fails. */
HAK_API int malloc_info(int options, FILE *fp) {
  if (options != 0 || fp == NULL) {
    errno = EINVAL;
    return -1;
  }
  struct hak_stats s;
  hak_stats_memory(&s);
  struct mallinfo2 mi = info_from(&s); /* the same snapshot as the totals below */
  int failed = fprintf(fp, "<malloc version=\"hakmem-%d.%d.%d\">\n", HAKMEM_VERSION_MAJOR, HAKMEM_VERSION_MINOR,
                       HAKMEM_VERSION_PATCH) < 0;
  static const char *tiers[2] = {"small", "medium"};
  for (int t = HAK_TIER_SMALL; t <= HAK_TIER_MEDIUM; t++)
    failed |= fprintf(fp, "<total type=\"%s\" count=\"%llu\" size=\"%llu\"/>\n", tiers[t],
                      (unsigned long long)s.live_blocks[t], (unsigned long long)s.live_bytes[t]) < 0;
  failed |= fprintf(fp, "<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>\n", mi.hblks, mi.hblkhd) < 0;
  failed |= fprintf(fp, "<system type=\"current\" size=\"%llu\"/>\n<system type=\"max\" size=\"%llu\"/>\n"
                        "<aspace type=\"total\" size=\"%llu\"/>\n</malloc>\n",
                    (unsigned long long)s.committed_bytes, (unsigned long long)s.peak_committed_bytes,
                    (unsigned long long)s.mapped_bytes) < 0;
  failed |= fflush(fp) != 0; /* a buffered stream reports a failed write only when it is flushed */
  return failed ? -1 : 0;
}

/** mallopt: glibc's tuning parameters (M_ARENA_MAX -8, M_ARENA_TEST -7, M_PERTURB -6, M_CHECK_ACTION -5,
 *  M_MMAP_MAX -4, M_MMAP_THRESHOLD -3, M_TOP_PAD -2, M_TRIM_THRESHOLD -1, M_MXFAST 1, and the SVID
 *  M_NLBLKS 2, M_GRAIN 3, M_KEEP 4) are accepted whatever the value and have no effect: hakmem's HAKMEM_*
 *  options govern the same behaviour. Returns 1 for those (as glibc does on success), so programs that
 *  set them as hints keep working, and 0 for any other parameter (glibc 2.36 returns 1 there too).
 *  HAKMEM_VERBOSE=2 prints a line for each call. */
HAK_API int mallopt(int param, int value) {
  bool known = param >= -8 && param <= 4 && param != 0;
  hak_init();
  if (hak_opts.value[HAK_OPT_VERBOSE] >= 2) {
    char line[128];
    int n = snprintf(line, sizeof line, "hakmem: mallopt(%d, %d) %s\n", param, value,
                     known ? "has no effect (HAKMEM_* options apply)" : "refused: unknown parameter");
    if (n > 0) hak_warn_raw(line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
  }
  return known ? 1 : 0;
}
#endif
