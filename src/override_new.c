/* override_new.c — C++ operator new and delete in every form (plain, array, nothrow, sized, aligned),
 * written in C under their Itanium-ABI names so libhakmem needs no C++ runtime. Failing `new` calls the
 * installed new_handler and retries, then throws std::bad_alloc through libstdc++ (looked up weakly: a
 * program that calls operator new has libstdc++ loaded). Sized delete goes straight to the fast free.
 *
 * A new_handler may throw std::bad_alloc, which the nothrow forms must turn into NULL, and C cannot
 * catch: with a handler installed they hand the request to the C++ runtime's own nothrow form, which
 * calls the throwing operator new (ours) inside a try block (the exception escaped ours, and the program
 * terminated: a review's reproducer, tests/c/test_new.cc). Without a handler nothing can throw, and they
 * return NULL themselves: also when the runtime is invisible to this library (linked statically into the
 * program or a plugin), where the runtime's nothrow form, calling our throwing one, would abort.
 *
 * A fully static program (`g++ -static` with libhakmem.a) gets none of the runtime through these weak
 * references, which pull nothing from an archive: a failed new then aborts with a message instead of
 * throwing, unless the program is linked with -Wl,-u,_ZSt17__throw_bad_allocv -Wl,-u,_ZSt15get_new_handlerv
 * (README). Strong references would break C programs that link the whole archive (a review's finding),
 * and leaving new to the runtime's own versions would leave C++ programs on glibc's malloc whenever
 * nothing else pulled hakmem's malloc from the archive. */
#include "alloc.h"

#if !HAK_NO_OVERRIDE
#include <dlfcn.h>
#include <stdlib.h>

typedef void (*new_handler_fn)(void);
extern new_handler_fn _ZSt15get_new_handlerv(void) __attribute__((weak));      /* std::get_new_handler */
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn)); /* throws std::bad_alloc */

static new_handler_fn installed_handler(void) {
  return _ZSt15get_new_handlerv != NULL ? _ZSt15get_new_handlerv() : NULL;
}

/* Retry an allocation through the new_handler (which may throw); throw std::bad_alloc when there is none. */
static void *new_fail(size_t size, size_t align) {
  for (;;) {
    new_handler_fn handler = installed_handler();
    if (handler == NULL) break;
    handler();
    void *p = align ? hak_aligned_alloc(align, size) : hak_malloc_inline(size);
    if (p != NULL) return p;
  }
  if (_ZSt17__throw_bad_allocv != NULL) _ZSt17__throw_bad_allocv();
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

/* The C++ runtime's nothrow operator `name` (the next definition after ours), looked up once; NULL if
 * there is none. */
static void *runtime_nothrow(const char *name, _Atomic(void *) *cache) {
  void *fn = atomic_load_explicit(cache, memory_order_acquire);
  if (fn == NULL) {
    fn = dlsym(RTLD_NEXT, name);
    atomic_store_explicit(cache, fn, memory_order_release);
  }
  return fn;
}

/* A failed nothrow new of the unaligned forms: NULL, or with a new_handler installed what the runtime's
 * nothrow form `name` makes of the request (it runs the handler, which may throw, and catches). */
static void *nothrow_plain_fail(size_t size, const void *tag, const char *name, _Atomic(void *) *cache) {
  if (installed_handler() == NULL) return NULL;
  void *(*fn)(size_t, const void *) = (void *(*)(size_t, const void *))runtime_nothrow(name, cache);
  return fn != NULL ? fn(size, tag) : NULL; /* no runtime to catch for us: the handler is not called */
}

/* The same for the aligned forms. */
static void *nothrow_aligned_fail(size_t size, size_t align, const void *tag, const char *name,
                                  _Atomic(void *) *cache) {
  if (installed_handler() == NULL) return NULL;
  void *(*fn)(size_t, size_t, const void *) = (void *(*)(size_t, size_t, const void *))runtime_nothrow(name, cache);
  return fn != NULL ? fn(size, align, tag) : NULL;
}

#define NOTHROW_T const void * /* const std::nothrow_t & */

/* One nothrow form: hakmem's allocation, then the failure path above under the form's own name. */
#define NOTHROW_PLAIN(sym)                                                  \
  HAK_API void *sym(size_t n, NOTHROW_T t) {                                \
    static _Atomic(void *) runtime;                                         \
    void *p = hak_malloc_inline(n);                                         \
    return likely(p != NULL) ? p : nothrow_plain_fail(n, t, #sym, &runtime); \
  }
#define NOTHROW_ALIGNED(sym)                                                          \
  HAK_API void *sym(size_t n, size_t a, NOTHROW_T t) {                                \
    static _Atomic(void *) runtime;                                                   \
    void *p = hak_aligned_alloc(a, n);                                                \
    return likely(p != NULL) ? p : nothrow_aligned_fail(n, a, t, #sym, &runtime);     \
  }

HAK_API void *_Znwm(size_t n) { return new_plain(n); }
HAK_API void *_Znam(size_t n) { return new_plain(n); }
HAK_API void *_ZnwmSt11align_val_t(size_t n, size_t a) { return new_aligned(n, a); }
HAK_API void *_ZnamSt11align_val_t(size_t n, size_t a) { return new_aligned(n, a); }
NOTHROW_PLAIN(_ZnwmRKSt9nothrow_t)
NOTHROW_PLAIN(_ZnamRKSt9nothrow_t)
NOTHROW_ALIGNED(_ZnwmSt11align_val_tRKSt9nothrow_t)
NOTHROW_ALIGNED(_ZnamSt11align_val_tRKSt9nothrow_t)

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
