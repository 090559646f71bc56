/* override_mlock.c — mlockall and munlockall, passed to the kernel unchanged and noted by hakmem: after
 * mlockall(MCL_FUTURE) the kernel populates and locks every new writable mapping whole, so a 4 MiB segment
 * mapped for a thread's first small block became 4 MiB of locked memory (100 threads: 432 MB resident,
 * glibc 11). While the note stands, segments are mapped read-only and their slices made writable as pages
 * take them (segment.c), which populates and locks just those, as the C library's heap does when it grows.
 * A program that calls the system call directly is not seen; its segments are populated whole, and their
 * purges, which madvise refuses on locked memory, still release the slices (hak_os_decommit). Compiled to
 * nothing with -DHAK_NO_OVERRIDE=1. */
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

#if !HAK_NO_OVERRIDE
/** mlockall(2); hakmem notes whether future mappings are now populated. */
HAK_API int mlockall(int flags) {
  if (syscall(SYS_mlockall, flags) != 0) return -1;
  hak_os_note_mlockall(flags);
  return 0;
}

/** munlockall(2); future mappings are no longer locked. */
HAK_API int munlockall(void) {
  if (syscall(SYS_munlockall) != 0) return -1;
  hak_os_note_mlockall(0);
  return 0;
}
#endif
