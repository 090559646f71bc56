/* pagemap.c — installs leaves of the chunk-to-header map (see pagemap.h). */
#include "pagemap.h"

#include "os.h"

static hak_pagemap_leaf empty_leaf; /* never written: maps every chunk to nothing */
_Atomic(hak_pagemap_leaf *) hak_pagemap_top[1u << HAK_PAGEMAP_TOP_SHIFT] = {
    [0 ... (1u << HAK_PAGEMAP_TOP_SHIFT) - 1] = &empty_leaf};

bool hak_pagemap_set(const void *p, void *owner) {
  uintptr_t a = (uintptr_t)p;
  if (a >> 47) return false;
  _Atomic(hak_pagemap_leaf *) *slot = &hak_pagemap_top[a >> (HAK_CHUNK_SHIFT + HAK_PAGEMAP_LEAF_SHIFT)];
  hak_pagemap_leaf *leaf = atomic_load_explicit(slot, memory_order_acquire);
  if (leaf == &empty_leaf) {
    if (owner == NULL) return true;
    hak_pagemap_leaf *fresh = hak_os_map(sizeof(hak_pagemap_leaf), HAK_OS_PAGE, false);
    if (fresh == NULL) return false;
    if (atomic_compare_exchange_strong_explicit(slot, &leaf, fresh, memory_order_acq_rel, memory_order_acquire)) {
      leaf = fresh;
    } else {
      hak_os_unmap(fresh, sizeof(hak_pagemap_leaf), true);
    }
  }
  atomic_store_explicit(&(*leaf)[(a >> HAK_CHUNK_SHIFT) & ((1u << HAK_PAGEMAP_LEAF_SHIFT) - 1)], owner,
                        memory_order_release);
  return true;
}
