/* secure.c — the checks of hardened builds (HAK_SECURE=1, libhakmem-secure.so) on every free: the
 * pointer is the start of a block of a page in use, the block is not already free (freed-block tag),
 * and its canary is intact (no overflow into the neighbour). Default builds compile this file empty. */
#include "alloc.h"

#if HAK_SECURE
void hak_secure_check_free(hak_segment *seg, hak_page *page, hak_block *b) {
  (void)seg;
  if (page->slice_count == 0) hak_fatal("free of a pointer that is not an allocated block:", b, -1);
  /* start, block_size and reserved are fixed while the page is in use; capacity is not (the owner carves
   * concurrently), so the bounds check uses reserved and the canary catches never-carved blocks */
  if ((uintptr_t)b < (uintptr_t)page->start ||
      (uintptr_t)b - (uintptr_t)page->start >= (uintptr_t)page->reserved * page->block_size)
    hak_fatal("free of a pointer that is not an allocated block:", b, page->size_class);
  if (!hak_page_is_block_start(page, (uintptr_t)b)) hak_fatal("free of an interior pointer", b, page->size_class);
  uintptr_t *words = (uintptr_t *)b;
  if (words[1] == (HAK_FREED_TAG ^ page->key)) hak_fatal("double free detected of", b, page->size_class);
  uintptr_t *canary = (uintptr_t *)((uint8_t *)b + page->block_size - HAK_CANARY_SIZE);
  if (*canary != hak_canary(page, b)) hak_fatal("heap overflow (canary overwritten) in block", b, page->size_class);
  words[1] = HAK_FREED_TAG ^ page->key;
}
#endif
