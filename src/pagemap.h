/* pagemap.h — pointer to metadata in O(1). The 128 TiB user address space is cut into 4 MiB chunks;
 * a two-level table maps each chunk that holds hakmem blocks to the header that owns them (a segment
 * of the small/medium tiers or a large mapping). A pointer whose chunk maps to nothing is not ours.
 *
 * The top level is a static array of 2048 pointers; each leaf (128 KiB, mapped on first use) covers
 * 64 GiB. Unused top entries point at a static all-zero leaf, so a lookup is two dependent loads with
 * no branch and no lock. Bits above 47 are ignored by the lookup: callers compare the entry with the
 * header they expect, which a non-canonical pointer never matches. Updates happen only when a segment
 * or large mapping is created or destroyed. */
#ifndef HAK_PAGEMAP_H
#define HAK_PAGEMAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HAK_CHUNK_SHIFT 22
#define HAK_CHUNK_SIZE ((size_t)1 << HAK_CHUNK_SHIFT)
#define HAK_PAGEMAP_LEAF_SHIFT 14
#define HAK_PAGEMAP_TOP_SHIFT (47 - HAK_CHUNK_SHIFT - HAK_PAGEMAP_LEAF_SHIFT)

/* Entries for large mappings carry this tag in their low bit, so a segment's entry (the segment
 * address, equal to the pointer rounded down to 4 MiB) is never mistaken for a large header. */
#define HAK_PAGEMAP_LARGE_TAG 1

typedef _Atomic(void *) hak_pagemap_leaf[1u << HAK_PAGEMAP_LEAF_SHIFT];
extern _Atomic(hak_pagemap_leaf *) hak_pagemap_top[1u << HAK_PAGEMAP_TOP_SHIFT];

/** The header owning the chunk that contains the low 47 bits of `p`, or NULL if hakmem has nothing
 *  there. */
static inline void *hak_pagemap_get(const void *p) {
  uintptr_t a = (uintptr_t)p;
  hak_pagemap_leaf *leaf = atomic_load_explicit(
      &hak_pagemap_top[(a >> (HAK_CHUNK_SHIFT + HAK_PAGEMAP_LEAF_SHIFT)) & ((1u << HAK_PAGEMAP_TOP_SHIFT) - 1)],
      memory_order_acquire);
  return atomic_load_explicit(&(*leaf)[(a >> HAK_CHUNK_SHIFT) & ((1u << HAK_PAGEMAP_LEAF_SHIFT) - 1)],
                              memory_order_acquire);
}

/** Make the chunk containing `p` map to `owner` (NULL to forget it). Returns false only if the leaf
 *  for that range could not be mapped. */
bool hak_pagemap_set(const void *p, void *owner);

#endif
