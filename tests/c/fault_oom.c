/* fault_oom.c — allocation failure under an address-space limit. The program lowers its own RLIMIT_AS
 * to (address space in use) + HEADROOM, then for malloc, calloc, posix_memalign and aligned_alloc of
 * several sizes allocates until the call fails, and checks: the failure is NULL (or the error code) with
 * ENOMEM and no crash, the blocks obtained are intact, and after freeing them the same allocations succeed
 * again. realloc is checked to fail with ENOMEM while the space is exhausted, leaving the old block
 * intact, and to succeed once space is free. Exit 0 when every check passes; one line per scenario on
 * stdout. Usage: fault_oom [HEADROOM_MIB]. tests/test_robust.py runs it under hakmem and glibc. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

/* After a failed realloc the old block is still valid, which gcc's use-after-free analysis ignores. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuse-after-free"
#endif

#define MIB ((size_t)1 << 20)

static size_t headroom;
static void **slots;     /* pointer array, mapped before the limit is set */
static size_t slot_cap;
static int failures;

enum kind { K_MALLOC, K_CALLOC, K_MEMALIGN, K_ALIGNED };
static const char *const kind_names[] = {"malloc", "calloc", "posix_memalign", "aligned_alloc"};

static void check(int ok, const char *scenario, const char *what) {
  if (!ok) {
    printf("FAIL %s: %s\n", scenario, what);
    failures++;
  }
}

static size_t vm_size_bytes(void) {
  char buf[128];
  int fd = open("/proc/self/statm", O_RDONLY);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0) close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  return strtoull(buf, NULL, 10) * (size_t)sysconf(_SC_PAGESIZE);
}

/* One allocation of the given kind; NULL on failure, errno then holds the error. */
static void *allocate(enum kind kind, size_t size, size_t align) {
  void *p = NULL;
  errno = 0;
  switch (kind) {
  case K_MALLOC: return malloc(size);
  case K_CALLOC: return calloc(1, size);
  case K_ALIGNED: return aligned_alloc(align, size);
  case K_MEMALIGN: {
    void *const sentinel = &p;
    p = sentinel;
    int rc = posix_memalign(&p, align, size);
    if (rc != 0) {
      errno = p == sentinel ? rc : EFAULT; /* EFAULT marks "*out was modified on failure" */
      return NULL;
    }
    return p;
  }
  }
  return NULL;
}

/* Allocate until failure; returns the count, or 0 after reporting a problem. */
static size_t exhaust(const char *scenario, enum kind kind, size_t size, size_t align) {
  size_t n = 0;
  for (;;) {
    if (n == slot_cap) {
      check(0, scenario, "allocation never failed under the limit");
      return n;
    }
    void *p = allocate(kind, size, align);
    if (!p) {
      check(errno == ENOMEM, scenario, "failed allocation did not report ENOMEM (or touched *out)");
      return n;
    }
    if (align) check(((uintptr_t)p & (align - 1)) == 0, scenario, "misaligned block");
    unsigned char *b = p;
    if (kind == K_CALLOC) check(b[0] == 0 && b[size / 2] == 0 && b[size - 1] == 0, scenario, "calloc not zeroed");
    b[0] = (unsigned char)n;
    b[size - 1] = (unsigned char)(n >> 8);
    slots[n++] = p;
  }
}

static void release(const char *scenario, size_t n, size_t size) {
  size_t damaged = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char *b = slots[i];
    if (b[0] != (unsigned char)i || b[size - 1] != (unsigned char)(i >> 8)) damaged++;
    free(b);
  }
  check(damaged == 0, scenario, "blocks damaged while memory was exhausted");
}

static void scenario(enum kind kind, size_t size, size_t align) {
  char name[96];
  if (align)
    snprintf(name, sizeof name, "%s(%zu, align %zu)", kind_names[kind], size, align);
  else
    snprintf(name, sizeof name, "%s(%zu)", kind_names[kind], size);
  size_t first = exhaust(name, kind, size, align);
  release(name, first, size);
  size_t again = exhaust(name, kind, size, align);
  release(name, again, size);
  printf("%s: %zu blocks (%zu MiB) before ENOMEM, %zu again after freeing\n", name, first,
         first * size / MIB, again);
  check(first * size >= headroom / 8, name,
        "less than 1/8 of the headroom usable after the earlier scenarios freed all their blocks");
  check(again >= first / 2, name, "allocation did not work again after freeing");
  /* blocks of 64-512 KiB: hakmem's pages of them (up to 2 MiB) once fit one to a 4 MiB segment, and a
   * one-size program got half the address space glibc gives it */
  if (size >= 64 * 1024 && size <= 512 * 1024)
    check(first * size >= headroom / 4 * 3, name, "less than 3/4 of the headroom usable in blocks of this size");
}

static void realloc_scenario(void) {
  const char *name = "realloc";
  size_t big_size = headroom / 24, grow = headroom / 3;
  unsigned char *keep = malloc(100), *big = malloc(big_size);
  if (!keep || !big) {
    check(0, name, "setup allocation failed");
    return;
  }
  memset(keep, 0xa5, 100);
  memset(big, 0x5a, big_size);
  size_t n = exhaust(name, K_MALLOC, MIB, 0);
  errno = 0;
  void *r = realloc(keep, grow);
  check(r == NULL && errno == ENOMEM, name, "small realloc under exhaustion did not fail with ENOMEM");
  errno = 0;
  r = realloc(big, 2 * grow);
  check(r == NULL && errno == ENOMEM, name, "large realloc under exhaustion did not fail with ENOMEM");
  for (size_t i = 0; i < 100; i++) check(keep[i] == 0xa5, name, "old small block damaged by failed realloc");
  for (size_t i = 0; i < big_size; i += 4096) check(big[i] == 0x5a, name, "old large block damaged by failed realloc");
  release(name, n, MIB);
  free(big);
  unsigned char *grown = realloc(keep, grow);
  check(grown != NULL, name, "realloc failed after memory was freed");
  if (grown) {
    for (size_t i = 0; i < 100; i++) check(grown[i] == 0xa5, name, "contents lost by realloc");
    free(grown);
  }
  printf("realloc: failed with ENOMEM after %zu MiB, old blocks intact, grew after freeing\n", n);
}

/* A large realloc that fits only once the blocks the allocator keeps for reuse are given back: hakmem's
 * large cache held a freed block of half the headroom and realloc failed with ENOMEM (malloc_trim then let
 * it through); it now gives its caches back and tries again, as a new mapping does. */
static void realloc_past_cache_scenario(void) {
  const char *name = "realloc past cache";
  size_t small = headroom / 6, cached = headroom / 2, grow = headroom / 8 * 5;
  unsigned char *a = malloc(small), *c = malloc(cached);
  if (!a || !c) {
    check(0, name, "setup allocation failed");
    free(a);
    free(c);
    return;
  }
  memset(a, 0x3c, small);
  free(c);
  errno = 0;
  unsigned char *r = realloc(a, grow);
  check(r != NULL, name, "realloc failed while the freed block's address space could be given back");
  if (r == NULL) {
    free(a);
    return;
  }
  for (size_t i = 0; i < small; i += 4096) check(r[i] == 0x3c, name, "contents lost by realloc");
  free(r);
  printf("realloc past cache: %zu -> %zu MiB with a freed %zu MiB block kept for reuse\n", small / MIB, grow / MIB,
         cached / MIB);
}

int main(int argc, char **argv) {
  static char outbuf[4096];
  setvbuf(stdout, outbuf, _IOLBF, sizeof outbuf);
  headroom = (argc > 1 ? strtoull(argv[1], NULL, 10) : 192) * MIB;
  slot_cap = (headroom + 128 * MIB) / 32; /* 64-byte blocks may also fill what the allocator kept mapped */
  slots = mmap(NULL, slot_cap * sizeof *slots, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
               -1, 0);
  if (slots == MAP_FAILED) return 2;
  for (size_t s = 16; s <= 32 * MIB; s *= 4) free(malloc(s)); /* bring every tier up before the limit */

  struct rlimit rl;
  getrlimit(RLIMIT_AS, &rl);
  size_t limit = vm_size_bytes() + headroom;
  if (rl.rlim_max != RLIM_INFINITY && limit > rl.rlim_max) limit = rl.rlim_max;
  rl.rlim_cur = limit;
  if (setrlimit(RLIMIT_AS, &rl) != 0) return 2;
  printf("RLIMIT_AS set to %zu MiB (headroom %zu MiB)\n", limit / MIB, headroom / MIB);

  scenario(K_MALLOC, 64, 0);
  scenario(K_MALLOC, 3000, 0);
  scenario(K_MALLOC, 100000, 0);
  scenario(K_MALLOC, MIB, 0);
  scenario(K_MALLOC, 24 * MIB, 0);
  scenario(K_CALLOC, 50000, 0);
  scenario(K_CALLOC, 3 * MIB, 0);
  scenario(K_MEMALIGN, 200000, 4096);
  scenario(K_ALIGNED, 300000, 65536);
  realloc_scenario();
  realloc_past_cache_scenario();
  printf("%s (%d failures)\n", failures ? "FAILED" : "all scenarios passed", failures);
  return failures ? 1 : 0;
}
