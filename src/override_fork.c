/* override_fork.c — where hakmem's fork handlers stand among the program's. glibc runs the prepare
 * handlers in the reverse order of their registration, the parent and child handlers in that order.
 * hakmem's prepare handler takes every lock of the allocator, so it must run after every other prepare
 * handler (those may allocate, or join a thread that frees on its way out), and its child handler before
 * every other child handler (those may allocate in the child): hakmem's handlers must be registered
 * first. The constructors of preloaded libraries run last, so a library that registers handlers in its
 * constructor came first and its prepare handler deadlocked fork (a bug hunt's finding; tests/test_fork.py
 * test_fork_with_an_earlier_prepare_handler). hakmem therefore takes the entry point pthread_atfork
 * calls, __register_atfork, and finishes its own initialisation, which registers its handlers, before it
 * passes a registration on. The definition is weak: a fully static program keeps the C library's.
 * Compiled to nothing with -DHAK_NO_OVERRIDE=1. */
#include <dlfcn.h>
#include <errno.h>

#include "internal.h"

#if !HAK_NO_OVERRIDE
typedef int register_atfork_fn(void (*)(void), void (*)(void), void (*)(void), void *);

/** glibc's registration of fork handlers (what pthread_atfork calls), after hakmem's own. */
HAK_API __attribute__((weak)) int __register_atfork(void (*prepare)(void), void (*parent)(void),
                                                    void (*child)(void), void *dso_handle) {
  static _Atomic(register_atfork_fn *) next;
  hak_init(); /* registers hakmem's handlers, through here, unless they are being registered now */
  register_atfork_fn *fn = atomic_load_explicit(&next, memory_order_acquire);
  if (fn == NULL) {
    fn = (register_atfork_fn *)dlsym(RTLD_NEXT, "__register_atfork");
    if (fn == NULL) return ENOMEM;
    atomic_store_explicit(&next, fn, memory_order_release);
  }
  return fn(prepare, parent, child, dso_handle);
}
#endif
