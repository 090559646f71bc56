/* override.c — the standard allocation names (malloc, free, ..., the glibc __libc_* entry points and
 * malloc_trim) defined on top of hakmem, so LD_PRELOAD or linking -lhakmem replaces the C library's
 * allocator. Compiled to nothing with -DHAK_NO_OVERRIDE=1 (embedding, e.g. the Rust crate). */
#include "alloc.h"

#if !HAK_NO_OVERRIDE
#include <malloc.h>
#include <stdlib.h>

HAK_API HAK_HOT_ENTRY void *malloc(size_t size) { return hak_malloc_inline(size); }
HAK_API HAK_HOT_ENTRY void free(void *p) { hak_free_inline(p); }
HAK_API void *calloc(size_t count, size_t size) { return hak_calloc(count, size); }
HAK_API void *realloc(void *p, size_t size) { return hak_realloc(p, size); }
HAK_API void *reallocarray(void *p, size_t count, size_t size) { return hak_reallocarray(p, count, size); }
HAK_API void *aligned_alloc(size_t alignment, size_t size) { return hak_aligned_alloc(alignment, size); }
HAK_API int posix_memalign(void **out, size_t alignment, size_t size) { return hak_posix_memalign(out, alignment, size); }
HAK_API void *memalign(size_t alignment, size_t size) { return hak_memalign(alignment, size); }
HAK_API void *valloc(size_t size) { return hak_valloc(size); }
HAK_API void *pvalloc(size_t size) { return hak_pvalloc(size); }
HAK_API size_t malloc_usable_size(void *p) { return hak_usable_size_of(p); }
HAK_API void free_sized(void *p, size_t size) { hak_free_sized(p, size); }
HAK_API void free_aligned_sized(void *p, size_t alignment, size_t size) { hak_free_aligned_sized(p, alignment, size); }
HAK_API void cfree(void *p) { hak_free_inline(p); }

/* Releases what hak_collect(true) does. Returns 1 when that gave memory back (hakmem's committed or
 * mapped bytes fell), 0 when there was nothing to give back or the kernel refused it (mlock'd pages), as
 * glibc's does; `pad` is ignored. Another thread's allocations meanwhile can hide a release. */
HAK_API int malloc_trim(size_t pad) {
  (void)pad;
  int64_t committed = atomic_load(&hak_os_counters.committed_bytes);
  int64_t mapped = atomic_load(&hak_os_counters.mapped_bytes);
  hak_collect(true);
  return atomic_load(&hak_os_counters.committed_bytes) < committed || atomic_load(&hak_os_counters.mapped_bytes) < mapped;
}

HAK_API void *__libc_malloc(size_t size) { return hak_malloc_inline(size); }
HAK_API void __libc_free(void *p) { hak_free_inline(p); }
HAK_API void *__libc_calloc(size_t count, size_t size) { return hak_calloc(count, size); }
HAK_API void *__libc_realloc(void *p, size_t size) { return hak_realloc(p, size); }
HAK_API void *__libc_memalign(size_t alignment, size_t size) { return hak_memalign(alignment, size); }
HAK_API void *__libc_valloc(size_t size) { return hak_valloc(size); }
HAK_API void *__libc_pvalloc(size_t size) { return hak_pvalloc(size); }
#endif
