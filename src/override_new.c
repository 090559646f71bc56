/* override_new.c — C++ operator new and delete in every form (plain, array, nothrow, sized, aligned),
 * written in C under their Itanium-ABI names so libhakmem needs no C++ runtime. Failing `new` calls the
 * installed new_handler and retries, then throws std::bad_alloc through libstdc++ (looked up weakly: a
 * program that calls operator new has libstdc++ loaded). Sized delete goes straight to the fast free. */
#include "alloc.h"

#if !HAK_NO_OVERRIDE
#include <stdlib.h>

typedef void (*new_handler_fn)(void);
extern new_handler_fn _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

/* Retry an allocation through the new_handler; throw or return NULL (nothrow) when there is none. */
static void *new_fail(size_t size, size_t align, bool nothrow) {
  for (;;) {
    new_handler_fn handler = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
    if (handler == NULL) break;
    handler();
    void *p = align ? hak_aligned_alloc(align, size) : hak_malloc_inline(size);
    if (p != NULL) return p;
  }
  if (nothrow) return NULL;
  if (_ZSt17__throw_bad_allocv) _ZSt17__throw_bad_allocv();
  hak_fatal("operator new failed and no C++ runtime is loaded to throw; size", (void *)size, -1);
}

static inline void *new_plain(size_t size, bool nothrow) {
  void *p = hak_malloc_inline(size);
  return likely(p != NULL) ? p : new_fail(size, 0, nothrow);
}

static inline void *new_aligned(size_t size, size_t align, bool nothrow) {
  void *p = hak_aligned_alloc(align, size);
  return likely(p != NULL) ? p : new_fail(size, align, nothrow);
}

#define NOTHROW_T const void * /* const std::nothrow_t & */

HAK_API void *_Znwm(size_t n) { return new_plain(n, false); }
HAK_API void *_Znam(size_t n) { return new_plain(n, false); }
HAK_API void *_ZnwmRKSt9nothrow_t(size_t n, NOTHROW_T t) { (void)t; return new_plain(n, true); }
HAK_API void *_ZnamRKSt9nothrow_t(size_t n, NOTHROW_T t) { (void)t; return new_plain(n, true); }
HAK_API void *_ZnwmSt11align_val_t(size_t n, size_t a) { return new_aligned(n, a, false); }
HAK_API void *_ZnamSt11align_val_t(size_t n, size_t a) { return new_aligned(n, a, false); }
HAK_API void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, NOTHROW_T t) { (void)t; return new_aligned(n, a, true); }
HAK_API void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, NOTHROW_T t) { (void)t; return new_aligned(n, a, true); }

HAK_API void _ZdlPv(void *p) { hak_free_inline(p); }
HAK_API void _ZdaPv(void *p) { hak_free_inline(p); }
HAK_API void _ZdlPvm(void *p, size_t n) { hak_free_sized(p, n); }
HAK_API void _ZdaPvm(void *p, size_t n) { hak_free_sized(p, n); }
HAK_API void _ZdlPvRKSt9nothrow_t(void *p, NOTHROW_T t) { (void)t; hak_free_inline(p); }
HAK_API void _ZdaPvRKSt9nothrow_t(void *p, NOTHROW_T t) { (void)t; hak_free_inline(p); }
HAK_API void _ZdlPvSt11align_val_t(void *p, size_t a) { (void)a; hak_free_inline(p); }
HAK_API void _ZdaPvSt11align_val_t(void *p, size_t a) { (void)a; hak_free_inline(p); }
HAK_API void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a) { hak_free_aligned_sized(p, a, n); }
HAK_API void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a) { hak_free_aligned_sized(p, a, n); }
HAK_API void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, NOTHROW_T t) { (void)a; (void)t; hak_free_inline(p); }
HAK_API void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, NOTHROW_T t) { (void)a; (void)t; hak_free_inline(p); }
#endif
