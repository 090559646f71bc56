/* secure.c — the error reports of hardened builds (HAK_SECURE=1, libhakmem-secure.so) for a free that
 * failed its checks; the checks themselves are inline in alloc.h. Default builds
 * compile this file empty. */
#include "alloc.h"

#if HAK_SECURE
void hak_secure_bad_free(const hak_page *page, hak_block *b) {
  if (page->slice_count == 0) hak_fatal("free of a pointer that is not an allocated block:", b, -1);
  if ((uintptr_t)b - (uintptr_t)page->start >= page->span)
    hak_fatal("free of a pointer that is not an allocated block:", b, page->size_class);
  if (!hak_page_is_block_start(page, (uintptr_t)b)) hak_fatal("free of an interior pointer", b, page->size_class);
  if (*hak_canary_word(page, b) != hak_canary(page, b))
    hak_fatal("heap overflow (canary overwritten) in block", b, page->size_class);
  hak_fatal("double free (or free of a block not allocated) detected of", b, page->size_class);
}
#endif
