/* size_class.h — the size classes of the small and medium tiers and the mapping from a request size to
 * a class.
 *
 * Classes: 16 (hardened builds start at 32), 32, ..., 128 in steps of 16 (classes 0-7), then four classes
 * per doubling up to 512 KiB (160, 192, 224, 256, 320, ...): a request wastes at most 25 % at the start of
 * a doubling and 12.5 % at its end. Requests up to HAK_SMALL_MAX map to a class through one table lookup,
 * larger ones through a bit scan. Above HAK_MEDIUM_MAX the large tier (large.c) takes over. */
#ifndef HAK_SIZE_CLASS_H
#define HAK_SIZE_CLASS_H

#include <stddef.h>
#include <stdint.h>

#define HAK_CLASS_COUNT 56                 /* classes 0 .. 55: 16 B .. 512 KiB */
/* Sizes served through the direct table (and, in default builds, the class cache): requests up to 1040
 * bytes, the lab's largest small request; in hardened builds that is 1024 bytes with their 8-byte canary
 * added, rounded up to the table's 16-byte step. (At 1024, the default build's requests of 1025-1040 bytes,
 * 1.6 % of random_mixed's, took the page path: its frees' p99 was 50 TSC cycles against 38 without
 * them: docs/notes/2026-11-25-class-cache.md.) */
#define HAK_SMALL_MAX ((size_t)1040)
#define HAK_DIRECT_CLASS_MAX 20u /* class of HAK_SMALL_MAX: classes up to 20 are reachable from the table */
#if defined(HAK_SECURE) && HAK_SECURE
#define HAK_MIN_CLASS 1u         /* 32 bytes: room for the free-list link, the freed tag and the canary */
#else
#define HAK_MIN_CLASS 0u
#endif
#define HAK_DIRECT_COUNT (HAK_SMALL_MAX / 16 + 1)
#define HAK_MEDIUM_MAX ((size_t)512 << 10) /* largest class */

/** Index into the direct table for a size <= HAK_SMALL_MAX. */
static inline size_t hak_direct_index(size_t size) { return (size + 15) >> 4; }

/** Class of a size in 1 .. HAK_MEDIUM_MAX (size 0 is treated as 1). */
static inline unsigned hak_size_class(size_t size) {
  if (size <= 128) return size <= 16 ? HAK_MIN_CLASS : (unsigned)((size - 1) >> 4);
  size_t n = size - 1;
  unsigned top = 63u - (unsigned)__builtin_clzll(n); /* 2^top <= n < 2^(top+1), top >= 7 */
  return 8u + (top - 7u) * 4u + (unsigned)((n >> (top - 2u)) & 3u);
}

/** Block size of a class. */
static inline size_t hak_class_size(unsigned cls) {
  if (cls < 8) return (size_t)(cls + 1) * 16;
  unsigned k = cls - 8, top = 7 + k / 4;
  return ((size_t)1 << top) + (size_t)(k % 4 + 1) * ((size_t)1 << (top - 2));
}

#endif
