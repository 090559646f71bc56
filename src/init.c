/* init.c — process-level life cycle: one-time initialisation (options, the thread-exit key, fork
 * handlers), the statistics report at exit, fork safety, and the fatal-error reporter. Initialisation
 * is lazy and re-entrant: the first malloc may come from the dynamic loader, a constructor of another
 * library, dlsym or a thread-exit destructor. Nothing here allocates but pthread_atfork, whose malloc the
 * initialising thread lets through. */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

enum { INIT_NONE = 0, INIT_RUNNING = 1, INIT_DONE = 2 };
static _Atomic int init_state = INIT_NONE;
/* This thread is running the initialisation: its own allocations (pthread_atfork may allocate) go ahead
 * while other threads wait for INIT_DONE. Volatile: the variable's address never escapes, so the compiler
 * took pthread_atfork for unable to read it and dropped the store before the call; a re-entry through
 * it then waited for itself for good (override_fork.c re-enters every time). */
static __thread volatile bool tls_initializing;

/* A private duplicate of stderr taken at start: programs such as sort close fd 2 before exit, and the
 * statistics printed at exit must still get through. A program may also close every descriptor and
 * reuse the number for a file of its own: the report then goes to fd 2 instead, never into that file
 * (report_dev and report_ino tell the duplicate from a stranger; a review's finding). */
static int report_fd = STDERR_FILENO;
static dev_t report_dev;
static ino_t report_ino;

int hak_report_fd(void) {
  if (report_fd == STDERR_FILENO) return report_fd;
  struct stat st;
  if (fstat(report_fd, &st) != 0 || st.st_dev != report_dev || st.st_ino != report_ino) return STDERR_FILENO;
  return report_fd;
}

static void fork_prepare(void) {
  hak_heaps_lock();
  hak_segments_lock();
  hak_large_lock();
  hak_purger_lock();
}

static void fork_parent(void) {
  hak_purger_unlock();
  hak_large_unlock();
  hak_segments_unlock();
  hak_heaps_unlock();
}

#if HAK_NO_OVERRIDE
#include <dlfcn.h>

/* hakmem's background threads (the purger, the region release) and its thread-exit destructors run its
 * code whenever they come, so the object holding it must stay loaded: a plugin embedding hakmem (the Rust
 * crate in a cdylib) crashed its host at the region release thread's first wake-up after dlclose
 * (tests/test_early_init.py). libhakmem.so is linked -z nodelete; an embedded copy (built with
 * HAK_NO_OVERRIDE) pins its object here, at initialisation, which its constructor runs inside the
 * dlopen that loads it: the loader's lock is this thread's already. (Pinning when the first background
 * thread starts deadlocked a malloc that waited for that lock while a constructor holding it joined the
 * malloc's thread: a review's finding.) dlopen and dladdr are weak: a static program has neither. */
#pragma weak dlopen
#pragma weak dladdr
static void pin_own_object(void) {
  Dl_info info;
  if (dlopen != NULL && dladdr != NULL && dladdr((void *)&pin_own_object, &info) != 0 && info.dli_fname != NULL)
    dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
}
#else
static void pin_own_object(void) {}
#endif

static void fork_child(void) {
  hak_os_note_mlockall(0); /* the kernel does not let a child inherit mlockall(MCL_FUTURE) */
  hak_large_after_fork_child();
  hak_segments_after_fork_child();
  hak_heaps_after_fork_child();
  hak_purger_after_fork_child(); /* it reads what the tiers keep waiting */
  /* last, with every lock the child's own: a chain that frees a page's last blocks asks for the purger
   * (orphaned pages, segment_purge.c), whose lock fork_prepare took (a review: the child hung there for good) */
  hak_heaps_send_frozen_chains();
}

void hak_init(void) {
  if (likely(atomic_load_explicit(&init_state, memory_order_acquire) == INIT_DONE)) return;
  if (tls_initializing) return;
  int expected = INIT_NONE;
  if (atomic_compare_exchange_strong(&init_state, &expected, INIT_RUNNING)) {
    hak_options_init();
#if HAK_SECURE
    hak_secure_init();
#endif
    if (hak_opts.value[HAK_OPT_STATS]) {
      int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 100);
      struct stat st;
      if (fd >= 0 && fstat(fd, &st) == 0) {
        report_dev = st.st_dev;
        report_ino = st.st_ino;
        report_fd = fd;
      } else if (fd >= 0) {
        close(fd);
      }
    }
    hak_heaps_init_key();
    /* The fork handlers are in place before any other thread may go on: a thread let through first
     * could hold a lock of ours while a third one forks, and the child would inherit it held. */
    tls_initializing = true;
    pthread_atfork(fork_prepare, fork_parent, fork_child); /* may allocate: this thread's malloc goes ahead */
    pin_own_object();                                      /* may allocate too (dlopen) */
    tls_initializing = false;
    atomic_store_explicit(&init_state, INIT_DONE, memory_order_release);
    if (hak_opts.value[HAK_OPT_VERBOSE] >= 2) hak_options_print();
    return;
  }
  while (atomic_load_explicit(&init_state, memory_order_acquire) != INIT_DONE) sched_yield();
}

__attribute__((constructor)) static void hak_constructor(void) { hak_init(); }

__attribute__((destructor)) static void hak_destructor(void) {
  if (atomic_load_explicit(&init_state, memory_order_acquire) == INIT_DONE && hak_opts.value[HAK_OPT_STATS])
    hak_stats_print(NULL);
}

void hak_warn_raw(const char *line, size_t len) {
  if (hak_opts.value[HAK_OPT_VERBOSE] == 0) return;
  ssize_t r = write(STDERR_FILENO, line, len);
  (void)r;
}

static size_t put_str(char *buf, size_t n, size_t cap, const char *s) {
  while (*s && n < cap) buf[n++] = *s++;
  return n;
}

static size_t put_num(char *buf, size_t n, size_t cap, uint64_t v, unsigned base) {
  char tmp[24];
  size_t k = 0;
  do tmp[k++] = "0123456789abcdef"[v % base]; while ((v /= base) != 0);
  if (base == 16) n = put_str(buf, n, cap, "0x");
  while (k && n < cap) buf[n++] = tmp[--k];
  return n;
}

/* "hakmem: <what> <ptr>" followed by a block description, one line, then abort. */
static __attribute__((noreturn)) void report_and_abort(const char *what, const void *ptr, const char *kind,
                                                       int cls, uint64_t bytes) {
  char line[256];
  size_t n = 0, cap = sizeof line - 1;
  n = put_str(line, n, cap, "hakmem: ");
  n = put_str(line, n, cap, what);
  n = put_str(line, n, cap, " ");
  n = put_num(line, n, cap, (uintptr_t)ptr, 16);
  if (kind != NULL) {
    n = put_str(line, n, cap, kind);
    if (cls >= 0) {
      n = put_num(line, n, cap, (uint64_t)cls, 10);
      n = put_str(line, n, cap, ": ");
    }
    n = put_num(line, n, cap, bytes, 10);
    n = put_str(line, n, cap, " bytes)");
  }
  line[n++] = '\n';
  ssize_t r = write(hak_report_fd(), line, n);
  (void)r;
  abort();
}

void hak_fatal(const char *what, const void *ptr, int cls) {
  if (cls < 0) report_and_abort(what, ptr, NULL, -1, 0);
  report_and_abort(what, ptr, " (size class ", cls, hak_class_size((unsigned)cls));
}

void hak_fatal_large(const char *what, const void *ptr, size_t bytes) {
  report_and_abort(what, ptr, " (large block of ", -1, bytes);
}

void hak_fatal_unknown(const void *ptr, bool freeing, const char *otherwise) {
  int cls;
  size_t bytes;
  if (hak_segment_was_released(ptr, &cls))
    hak_fatal(freeing ? "double free (or a wild pointer): the block's page was given back, at"
                      : "realloc or usable size of a freed block (its page was given back) at",
              ptr, cls);
  if (hak_large_was_released(ptr, &bytes))
    hak_fatal_large(freeing ? "double free (the block's memory was released since) of"
                            : "realloc or usable size of a freed block (use after free) at",
                    ptr, bytes);
  hak_fatal(otherwise, ptr, -1);
}
