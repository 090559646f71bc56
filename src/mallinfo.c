/* mallinfo.c — glibc's malloc introspection and tuning calls (mallinfo, mallinfo2, malloc_stats,
 * malloc_info, mallopt) answered from hakmem's own counters. Without them a program that preloads or links
 * hakmem would reach glibc's versions, which describe glibc's unused arena (zeros), and a fully static link
 * that calls one of them would pull glibc's malloc in beside ours. Compiled to nothing with
 * -DHAK_NO_OVERRIDE=1, like override.c.
 *
 * mallinfo2's fields, from struct hak_stats:
 *   hblks     live large blocks (their own mappings, as glibc's mmapped chunks)
 *   hblkhd    bytes those blocks hold committed (mapping sizes less tails given back)
 *   uordblks  bytes of live small and medium blocks (block sizes)
 *   arena     every committed byte of hakmem's but the live large blocks': segments (blocks in use, free
 *             blocks, never-carved room), metadata and cached large mappings; at least uordblks
 *   fordblks  arena - uordblks
 *   ordblks, smblks, usmblks, fsmblks, keepcost: 0 (no equivalent).
 * The small/medium numbers carry the lag documented at struct hak_stats' live_blocks. */
#include "internal.h"

#if !HAK_NO_OVERRIDE
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>

static struct mallinfo2 info_from_stats(void) {
  struct hak_stats s;
  hak_stats_get_sized(&s, sizeof s);
  struct mallinfo2 mi = {0};
  mi.hblks = s.live_blocks[HAK_TIER_LARGE];
  mi.hblkhd = s.live_bytes[HAK_TIER_LARGE];
  mi.uordblks = s.live_bytes[HAK_TIER_SMALL] + s.live_bytes[HAK_TIER_MEDIUM];
  uint64_t others = s.committed_bytes > mi.hblkhd ? s.committed_bytes - mi.hblkhd : 0;
  mi.arena = others > mi.uordblks ? others : mi.uordblks;
  mi.fordblks = mi.arena - mi.uordblks;
  return mi;
}

/** mallinfo2 (glibc 2.33): hakmem's memory in glibc's terms, as in the table above. */
HAK_API struct mallinfo2 mallinfo2(void) { return info_from_stats(); }

static int saturate(size_t v) { return v > (size_t)INT_MAX ? INT_MAX : (int)v; }

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
/** mallinfo: mallinfo2's numbers in int fields, each capped at INT_MAX (glibc's wrap around instead). */
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

/** malloc_stats: prints hakmem's statistics block (hak_stats_print) to stderr. */
HAK_API void malloc_stats(void) { hak_stats_print(NULL); }

/** malloc_info: an XML description of hakmem's memory shaped like glibc's (<malloc version=...> with
 *  <total>, <system> and <aspace> elements), to `fp`. Returns 0, or -1 with errno EINVAL when options is
 *  not 0 or fp is NULL (glibc defines no option either). */
HAK_API int malloc_info(int options, FILE *fp) {
  if (options != 0 || fp == NULL) {
    errno = EINVAL;
    return -1;
  }
  struct hak_stats s;
  hak_stats_get_sized(&s, sizeof s);
  static const char *tiers[HAK_TIER_COUNT] = {"small", "medium", "large"};
  fprintf(fp, "<malloc version=\"hakmem-%d.%d.%d\">\n", HAKMEM_VERSION_MAJOR, HAKMEM_VERSION_MINOR,
          HAKMEM_VERSION_PATCH);
  for (int t = 0; t < HAK_TIER_COUNT; t++)
    fprintf(fp, "<total type=\"%s\" count=\"%llu\" size=\"%llu\"/>\n", tiers[t],
            (unsigned long long)s.live_blocks[t], (unsigned long long)s.live_bytes[t]);
  /* glibc's name for blocks with mappings of their own, which tools read */
  fprintf(fp, "<total type=\"mmap\" count=\"%llu\" size=\"%llu\"/>\n",
          (unsigned long long)s.live_blocks[HAK_TIER_LARGE], (unsigned long long)s.live_bytes[HAK_TIER_LARGE]);
  fprintf(fp, "<system type=\"current\" size=\"%llu\"/>\n<system type=\"max\" size=\"%llu\"/>\n"
              "<aspace type=\"total\" size=\"%llu\"/>\n</malloc>\n",
          (unsigned long long)s.committed_bytes, (unsigned long long)s.peak_committed_bytes,
          (unsigned long long)s.mapped_bytes);
  return ferror(fp) ? -1 : 0;
}

/** mallopt: glibc's tuning parameters (M_MXFAST 1, M_TRIM_THRESHOLD -1, M_TOP_PAD -2, M_MMAP_THRESHOLD
 *  -3, M_MMAP_MAX -4, M_CHECK_ACTION -5, M_PERTURB -6, M_ARENA_TEST -7, M_ARENA_MAX -8) are accepted and
 *  have no effect: hakmem's HAKMEM_* options govern the same behaviour. Returns 1 for those (as glibc
 *  does on success), so programs that set them as hints keep working; 0 for any other parameter.
 *  HAKMEM_VERBOSE=2 prints a line for each call. */
HAK_API int mallopt(int param, int value) {
  bool known = param >= -8 && param <= 1;
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
