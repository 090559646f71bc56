/* fault_overcommit.c — requests larger than the machine's memory and swap together, with no resource
 * limit: under the kernel's default overcommit policy (vm.overcommit_memory 0, heuristic) and under
 * strict accounting (2) every allocation call must fail with ENOMEM, as glibc's do, rather than return
 * memory that kills the process when touched; realloc leaves the old block intact. Under policy 1 (grant
 * everything) glibc's calls succeed and so must these. Then an ordinary allocation still works. One line
 * per call on stdout, "all scenarios passed" at the end. tests/test_robust.py runs it under hakmem, the
 * hardened build and glibc. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

static int failures;
static int policy;

/* Check one call's result against the policy: NULL with ENOMEM, or (policy 1) a block. */
static void expect(const char *what, void *p, int err) {
  bool ok = policy == 1 ? p != NULL : p == NULL && err == ENOMEM;
  printf("%s %s: %p, errno %d\n", ok ? "ok" : "FAIL", what, p, err);
  if (!ok) failures++;
  free(p);
}

int main(void) {
  FILE *f = fopen("/proc/sys/vm/overcommit_memory", "r");
  if (f == NULL || fscanf(f, "%d", &policy) != 1) policy = 0;
  if (f != NULL) fclose(f);
  struct sysinfo si;
  if (sysinfo(&si) != 0) return 2;
  size_t gib = (size_t)1 << 30;
  size_t total = ((size_t)si.totalram + (size_t)si.totalswap) * si.mem_unit;
  size_t huge = (2 * total + gib - 1) / gib * gib; /* twice memory and swap: refused by any policy but 1 */
  printf("overcommit policy %d, memory and swap %zu MiB, asking for %zu MiB\n", policy, total >> 20, huge >> 20);

  errno = 0;
  void *p = malloc(huge);
  expect("malloc", p, errno);
  errno = 0;
  p = calloc(huge / 4096, 4096);
  expect("calloc", p, errno);
  errno = 0;
  p = aligned_alloc((size_t)4 << 20, huge);
  expect("aligned_alloc 4 MiB", p, errno);
  p = NULL;
  int rc = posix_memalign(&p, 4096, huge);
  expect("posix_memalign", rc == 0 ? p : NULL, rc);
  errno = 0;
  p = valloc(huge);
  expect("valloc", p, errno);

  char *old = malloc(100);
  memset(old, 'x', 100);
  errno = 0;
  void *grown = realloc(old, huge);
  int err = errno;
  if (grown == NULL) {
    bool intact = true;
    for (int i = 0; i < 100; i++) intact &= old[i] == 'x';
    printf("%s realloc left the old block intact\n", intact ? "ok" : "FAIL");
    if (!intact) failures++;
    free(old);
  }
  expect("realloc", grown, err);

  char *small = malloc(1 << 20);
  bool works = small != NULL;
  if (works) memset(small, 1, 1 << 20);
  free(small);
  printf("%s an ordinary allocation afterwards\n", works ? "ok" : "FAIL");
  if (!works) failures++;
  if (failures) return 1;
  printf("all scenarios passed\n");
  return 0;
}
