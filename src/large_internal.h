/* large_internal.h — private to large.c and large_cache.c, included by no other file: the functions one
 * of them calls in the other. */
#ifndef HAK_LARGE_INTERNAL_H
#define HAK_LARGE_INTERNAL_H

#include "internal.h"

/* large_cache.c: the cached mapping nearest to `need` bytes (its guard page included), taken out of the
 * cache, its pages committed again if they were purged; NULL if none suits. It may be smaller than
 * `need` (half of it at least) or over 1.5x larger: the caller resizes it then. */
hak_large *hak_large_cache_take(size_t need);
/* large_cache.c: cache mapping `h`, whose block was freed (or unmap it, if the cache keeps none of its
 * size); older mappings past HAKMEM_LARGE_CACHE_MB are purged or unmapped. */
void hak_large_cache_put(hak_large *h);
/* large.c: while the purger does not run, and at most once per purge delay, what the purger's passes do
 * with the threads' last large blocks (hak_heaps_flush_large_last: each one goes to the cache at the
 * second sweep that finds it), so that an idle thread's block comes back through other threads' calls. */
void hak_large_sweep_last(uint64_t now);
/* large.c: give mapping `h` back to the OS; its last block, if it had one, is remembered as released
 * (hak_large_was_released). */
void hak_large_unmap(hak_large *h);
/* large.c: committed-bytes accounting (os.h) of the mapping's last `tail` bytes, given back while it
 * stays mapped. */
void hak_large_set_released_tail(hak_large *h, size_t tail);

#endif
