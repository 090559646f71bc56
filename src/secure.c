/* secure.c — the error reports of hardened builds (HAK_SECURE=1, libhakmem-secure.so) for a freed
 * pointer that is not a block start; the checks themselves are inline in alloc.h. Default builds
 * compile this file empty. */
#include "alloc.h"

#if HAK_SECURE
void hak_secure_bad_pointer(const hak_page *page, const hak_block *b) {
  if (page->slice_count == 0) hak_fatal("free of a pointer that is not an allocated block:", b, -1);
  if ((uintptr_t)b - (uintptr_t)page->start >= page->span)
    hak_fatal("free of a pointer that is not an allocated block:", b, page->size_class);
  hak_fatal("free of an interior pointer", b, page->size_class);
}
#endif
