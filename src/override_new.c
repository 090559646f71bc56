/* override_new.c — C++ operator new (plain, array, aligned) and delete in every form (plain, array,
 * nothrow, sized, aligned), written in C under their Itanium-ABI names so libhakmem needs no C++ runtime.
 * Failing `new` calls the installed new_handler and retries, then throws std::bad_alloc through the C++
 * runtime. Sized delete goes straight to the fast free.
 *
 * The nothrow forms of new are left to the C++ runtime, whose own versions call the throwing operator
 * new above inside a try block and return NULL on any exception, as the standard asks: a new_handler may
 * throw std::bad_alloc, and C code cannot catch it (ours let it escape a noexcept function, and the
 * program terminated; a review's reproducer, tests/c/fault_oom_new.cc).
 *
 * The runtime's symbols are weak references in the shared library (a C program loads no C++ runtime)
 * and strong ones in the static archive, built with HAK_STATIC_ARCHIVE: a weak reference does not pull
 * an archive member into a static link, so `g++ -static` left both NULL and a failed new aborted
 * instead of throwing. The archive's member holding this file is linked only into programs that call
 * operator new, which link the C++ runtime anyway. */
#include "alloc.h"

#if !HAK_NO_OVERRIDE
#include <stdlib.h>

typedef void (*new_handler_fn)(void);
#if HAK_STATIC_ARCHIVE
#define CXX_RUNTIME_REF
#define CXX_RUNTIME_HAS(fn) true
#else
#define CXX_RUNTIME_REF __attribute__((weak))
#define CXX_RUNTIME_HAS(fn) ((fn) != NULL) /* NULL: no C++ runtime loaded */
#endif
extern new_handler_fn _ZSt15get_new_handlerv(void) CXX_RUNTIME_REF;     /* std::get_new_handler */
extern void _ZSt17__throw_bad_allocv(void) CXX_RUNTIME_REF __attribute__((noreturn)); /* throws bad_alloc */

/* Retry an allocation through the new_handler (which may throw); throw std::bad_alloc when there is none. */
static void *new_fail(size_t size, size_t align) {
  for (;;) {
    new_handler_fn handler = CXX_RUNTIME_HAS(_ZSt15get_new_handlerv) ? _ZSt15get_new_handlerv() : NULL;
    if (handler == NULL) break;
    handler();
    void *p = align ? hak_aligned_alloc(align, size) : hak_malloc_inline(size);
    if (p != NULL) return p;
  }
  if (CXX_RUNTIME_HAS(_ZSt17__throw_bad_allocv)) _ZSt17__throw_bad_allocv();
  hak_fatal("operator new failed and no C++ runtime is loaded to throw; size", (void *)size, -1);
}

static inline void *new_plain(size_t size) {
  void *p = hak_malloc_inline(size);
  return likely(p != NULL) ? p : new_fail(size, 0);
}

static inline void *new_aligned(size_t size, size_t align) {
  void *p = hak_aligned_alloc(align, size);
  return likely(p != NULL) ? p : new_fail(size, align);
}

#define NOTHROW_T const void * /* const std::nothrow_t & */

HAK_API void *_Znwm(size_t n) { return new_plain(n); }
HAK_API void *_Znam(size_t n) { return new_plain(n); }
HAK_API void *_ZnwmSt11align_val_t(size_t n, size_t a) { return new_aligned(n, a); }
HAK_API void *_ZnamSt11align_val_t(size_t n, size_t a) { return new_aligned(n, a); }

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
