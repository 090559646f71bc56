/* api.c — the public hak_* allocation functions of hakmem.h: size and alignment validation, overflow
 * checks, and dispatch to the inline fast paths (alloc.h) or the large tier. The standard names
 * (override.c) call the same code. */
#include "alloc.h"
#include "region.h"

/* Allocation with alignment `align` (a power of two). Small and medium requests with alignments up to
 * 64 KiB use the smallest class whose block size is a multiple of the alignment: pages start on 64 KiB
 * boundaries, so every block of such a class is aligned. */
static void *alloc_aligned(size_t align, size_t size, bool zero) {
  if (align <= 16) return zero ? hak_calloc(1, size) : hak_malloc_inline(size);
  if (align <= HAK_LARGE_ALIGN_MAX && size <= HAK_MEDIUM_MAX - HAK_CANARY_SIZE) {
    size_t want = size + HAK_CANARY_SIZE;
    unsigned cls = hak_size_class(want < align ? align : want);
    while (cls < HAK_CLASS_COUNT && hak_class_size(cls) % align != 0) cls++;
    if (cls < HAK_CLASS_COUNT) {
      void *p = hak_alloc_inline(hak_class_size(cls));
      if (zero && p != NULL) memset(p, 0, size);
      return p;
    }
  }
  return hak_large_alloc(size, align, zero); /* zero: a fresh mapping is not written */
}

static bool valid_alignment(size_t align) { return align != 0 && (align & (align - 1)) == 0; }

HAK_API HAK_HOT_ENTRY void *hak_malloc(size_t size) { return hak_malloc_inline(size); }

HAK_API HAK_HOT_ENTRY void hak_free(void *p) { hak_free_inline(p); }

HAK_API void *hak_calloc(size_t count, size_t size) {
  size_t total;
  if (unlikely(__builtin_mul_overflow(count, size, &total))) {
    errno = ENOMEM;
    return NULL;
  }
  if (total > HAK_MEDIUM_MAX - HAK_CANARY_SIZE) return hak_large_alloc(total, 0, true);
  void *p = hak_alloc_inline(total + HAK_CANARY_SIZE);
  if (unlikely(p == NULL)) return NULL;
  /* A medium block popped from a fresh page was carved from zeroed memory and never handed out (the page
   * is its own: nothing else puts a block on its `free`): only carving's link (and in hardened builds the
   * freed tag, which malloc cleared already) was written. Zeroing the rest would make all of it resident
   * (gcc's cc1: 480 callocs of 64-512 KiB, 157 MB peak against glibc's 91: docs/notes). Not for a block
   * of the shared late heap (a thread past its destructors has no heap of its own), whose pages other
   * threads may touch once its lock is dropped. */
  if (total + HAK_CANARY_SIZE > HAK_SMALL_MAX && hak_tls_heap != &hak_heap_empty &&
      hak_segment_page_of(hak_segment_of(p), p)->fresh)
    memset(p, 0, 2 * sizeof(void *));
  else
    memset(p, 0, total);
  return p;
}

/* Usable size of live block `p` (0 for NULL); aborts on a pointer that is not one. `claim`: the caller
 * may now write all of it (a large block's whole mapping then counts as touched); realloc, which only
 * copies the old contents, does not claim. Hardened builds also refuse a freed block or an interior
 * pointer here, as free would. */
static size_t usable_size(const void *p, bool claim) {
  if (p == NULL) return 0;
  void *owner = hak_pagemap_get(p);
  hak_segment *seg = hak_segment_of(p);
  if (owner == (void *)seg) {
    hak_page *page = hak_segment_page_of(seg, p);
    if (page->slice_count == 0) hak_fatal_unknown(p, false, "usable size asked of a pointer that is not an allocated block:");
#if HAK_SECURE
    if (unlikely(!hak_secure_is_live(page, (const hak_block *)p))) hak_secure_bad_use(page, p);
#else
    /* the cheap case, as in free: the block its owner freed last */
    if (atomic_load_explicit(&seg->owner, memory_order_relaxed) == hak_tls_heap &&
        (p == page->free || hak_class_cache_is_head(hak_tls_heap, seg, p)))
      hak_fatal("realloc or usable size of a freed block (use after free) at", p, page->size_class);
#endif
    return page->block_size - HAK_CANARY_SIZE;
  }
  if (owner != NULL && ((uintptr_t)owner & HAK_PAGEMAP_LARGE_TAG)) {
    hak_large *h = (hak_large *)((uintptr_t)owner - HAK_PAGEMAP_LARGE_TAG);
    if (h->user == p && h->cached)
      hak_fatal_large("realloc or usable size of a freed block (use after free) at", p, hak_large_usable(h));
    if (h->user == p && h->kind == HAK_KIND_LARGE) {
#if HAK_SECURE
      hak_large_check(h, false);
#endif
      return claim ? hak_large_usable_claim(h) : hak_large_usable(h);
    }
    hak_large_bad_pointer(h, p, false);
  }
  hak_fatal_unknown(p, false, "usable size asked of a pointer hakmem never returned:");
}

size_t hak_usable_size_of(const void *p) { return usable_size(p, true); }

HAK_API size_t hak_usable_size(const void *p) { return hak_usable_size_of(p); }

HAK_API void *hak_realloc(void *p, size_t size) {
  if (p == NULL) return hak_malloc_inline(size);
  if (size == 0) {
    hak_free_inline(p);
    return NULL;
  }
  size_t usable = usable_size(p, false);
  void *owner = hak_pagemap_get(p);
  bool is_large = ((uintptr_t)owner & HAK_PAGEMAP_LARGE_TAG) != 0;
  if (is_large && size > HAK_MEDIUM_MAX) {
    return hak_large_realloc((hak_large *)((uintptr_t)owner - HAK_PAGEMAP_LARGE_TAG), p, size);
  }
  if (!is_large && size <= usable && size >= usable / 2) return p;
  void *q = hak_malloc_inline(size);
  if (q == NULL) return NULL;
  memcpy(q, p, size < usable ? size : usable);
  hak_free_inline(p);
  return q;
}

HAK_API void *hak_reallocarray(void *p, size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return hak_realloc(p, total);
}

HAK_API void hak_free_sized(void *p, size_t size) {
#if HAK_SECURE
  if (p != NULL && size > usable_size(p, false)) hak_fatal("free_sized with a size larger than the block at", p, -1);
#else
  (void)size;
#endif
  hak_free_inline(p);
}

HAK_API void hak_free_aligned_sized(void *p, size_t alignment, size_t size) {
#if HAK_SECURE
  if (p != NULL && ((uintptr_t)p & (alignment - 1)) != 0)
    hak_fatal("free_aligned_sized with an alignment the block does not have:", p, -1);
#else
  (void)alignment;
#endif
  hak_free_sized(p, size);
}

HAK_API void *hak_aligned_alloc(size_t alignment, size_t size) {
  if (!valid_alignment(alignment)) {
    errno = EINVAL;
    return NULL;
  }
  return alloc_aligned(alignment, size, false);
}

HAK_API void *hak_aligned_calloc(size_t alignment, size_t count, size_t size) {
  size_t total;
  if (!valid_alignment(alignment)) {
    errno = EINVAL;
    return NULL;
  }
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return alloc_aligned(alignment, total, true);
}

HAK_API int hak_posix_memalign(void **out, size_t alignment, size_t size) {
  if (!valid_alignment(alignment) || alignment % sizeof(void *) != 0) return EINVAL;
  int saved = errno;
  void *p = alloc_aligned(alignment, size, false);
  if (p == NULL) {
    errno = saved;
    return ENOMEM;
  }
  *out = p;
  return 0;
}

HAK_API void *hak_memalign(size_t alignment, size_t size) {
  if (alignment > SIZE_MAX / 2 + 1) { /* glibc: no power of two can satisfy it */
    errno = EINVAL;
    return NULL;
  }
  if (alignment > ((size_t)1 << 62)) { /* glibc: cannot be satisfied */
    errno = ENOMEM;
    return NULL;
  }
  size_t a = 16;
  while (a < alignment) a <<= 1; /* glibc raises a non-power-of-two alignment to the next power */
  return alloc_aligned(a, size, false);
}

HAK_API void *hak_valloc(size_t size) { return alloc_aligned(HAK_OS_PAGE, size, false); }

HAK_API void *hak_pvalloc(size_t size) {
  size_t rounded = (size + HAK_OS_PAGE - 1) & ~(HAK_OS_PAGE - 1);
  if (rounded < size) {
    errno = ENOMEM;
    return NULL;
  }
  return alloc_aligned(HAK_OS_PAGE, rounded ? rounded : HAK_OS_PAGE, false);
}

HAK_API void hak_collect(bool force) {
  hak_init();
  if (force) hak_heaps_sweep_dead(); /* first: their segments then go back with the rest */
  hak_heaps_collect(force);
  if (force) hak_regions_collect();
}

void hak_free_other(void *p) {
  if (p == NULL) return;
  void *owner = hak_pagemap_get(p);
  if (owner != NULL && ((uintptr_t)owner & HAK_PAGEMAP_LARGE_TAG)) {
    hak_large_free((hak_large *)((uintptr_t)owner - HAK_PAGEMAP_LARGE_TAG), p);
    return;
  }
  hak_fatal_unknown(p, true, "free of a pointer hakmem never returned:");
}
