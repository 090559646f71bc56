/* test_api.c — conformance of every standard allocation entry point (owner: tests suite).
 *
 * The same checks run against three sets of functions: the standard names (malloc, free, ...), the
 * glibc-internal __libc_* names, and, when hakmem is in the process, the hak_* names. C23 free_sized and
 * free_aligned_sized, and the hak_* functions, are looked up with dlsym so the .glibc build links too.
 * Checks that glibc itself does not meet (aligned_alloc EINVAL before glibc 2.38) run only under hakmem.
 * Exit status 0 when every check passed; each failure prints file:line, expected and got. */
#define _GNU_SOURCE
#include <errno.h>
#include <gnu/libc-version.h>
#include <malloc.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcheck.h"

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* One set of allocation functions; a NULL member means the set has no such function. */
struct api {
  const char *name;
  void *(*malloc)(size_t);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  void *(*reallocarray)(void *, size_t, size_t);
  void (*free)(void *);
  void *(*aligned_alloc)(size_t, size_t);
  int (*posix_memalign)(void **, size_t, size_t);
  void *(*memalign)(size_t, size_t);
  void *(*valloc)(size_t);
  void *(*pvalloc)(size_t);
  size_t (*usable)(const void *);
  void (*free_sized)(void *, size_t);
  void (*free_aligned_sized)(void *, size_t, size_t);
};

static size_t std_usable(const void *p) { return malloc_usable_size((void *)p); }

/* Sizes pass through a volatile so the compiler cannot fold any call. */
static size_t hide(size_t n) {
  volatile size_t v = n;
  return v;
}

/* Fill n bytes with b; return the offset of the first byte that is not b, or (size_t)-1. */
static int on_hakmem; /* set by main: the allocator under test is hakmem */

static size_t first_not(const void *p, size_t n, unsigned char b) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++)
    if (c[i] != b) return i;
  return (size_t)-1;
}

/* ---- malloc(0), small sizes, 16-byte alignment ------------------------------------------------- */

static void check_malloc_zero(const struct api *a) {
  enum { N = 200 };
  void *p[N];
  for (int i = 0; i < N; i++) {
    p[i] = a->malloc(hide(0));
    REQUIRE(p[i] != NULL, "[%s] malloc(0) #%d returned NULL", a->name, i);
  }
  for (int i = 0; i < N; i++)
    for (int j = i + 1; j < N; j++)
      CHECK(p[i] != p[j], "[%s] malloc(0) #%d and #%d both returned %p", a->name, i, j, p[i]);
  for (int i = 0; i < N; i++) a->free(p[i]);
  a->free(NULL);
}

static void check_alignment_sweep(const struct api *a) {
  enum { NSMALL = 4096 };
  static void *blocks[NSMALL + 1];
  for (size_t n = 1; n <= NSMALL; n++) {
    unsigned char *p = a->malloc(hide(n));
    REQUIRE(p != NULL, "[%s] malloc(%zu) returned NULL", a->name, n);
    if (n >= 16) CHECK(((uintptr_t)p & 15) == 0, "[%s] malloc(%zu) = %p is not 16-byte aligned", a->name, n, (void *)p);
    else if (n >= 8) CHECK(((uintptr_t)p & 7) == 0, "[%s] malloc(%zu) = %p is not 8-byte aligned", a->name, n, (void *)p);
    if (a->usable) CHECK(a->usable(p) >= n, "[%s] usable(malloc(%zu)) = %zu", a->name, n, a->usable(p));
    p[n - 1] = (unsigned char)(n >> 3);
    p[0] = (unsigned char)n;
    blocks[n] = p;
  }
  for (size_t n = 1; n <= NSMALL; n++) {
    unsigned char *p = blocks[n];
    CHECK(p[0] == (unsigned char)n && (n == 1 || p[n - 1] == (unsigned char)(n >> 3)),
          "[%s] malloc(%zu) block at %p was overwritten by another block", a->name, n, (void *)p);
    a->free(p);
  }
  /* Geometric sweep up to 8 MiB, each size also with small offsets around it. */
  for (size_t base = 4096; base <= 8 * MiB; base += base / 7 + 16) {
    static const long offs[] = {-17, -1, 0, 1, 15, 16, 33};
    void *live[7];
    for (int k = 0; k < 7; k++) {
      size_t n = base + (size_t)offs[k];
      unsigned char *p = a->malloc(hide(n));
      REQUIRE(p != NULL, "[%s] malloc(%zu) returned NULL", a->name, n);
      CHECK(((uintptr_t)p & 15) == 0, "[%s] malloc(%zu) = %p is not 16-byte aligned", a->name, n, (void *)p);
      if (a->usable) CHECK(a->usable(p) >= n, "[%s] usable(malloc(%zu)) = %zu", a->name, n, a->usable(p));
      p[0] = 0x5a;
      p[n - 1] = 0xa5;
      live[k] = p;
    }
    for (int k = 0; k < 7; k++) a->free(live[k]);
  }
}

/* ---- realloc ----------------------------------------------------------------------------------- */

static void check_realloc(const struct api *a) {
  /* realloc(NULL, n) behaves as malloc(n). */
  unsigned char *p = a->realloc(NULL, hide(100));
  REQUIRE(p != NULL, "[%s] realloc(NULL, 100) returned NULL", a->name);
  CHECK(((uintptr_t)p & 15) == 0, "[%s] realloc(NULL, 100) = %p not 16-byte aligned", a->name, (void *)p);
  if (a->usable) CHECK(a->usable(p) >= 100, "[%s] usable(realloc(NULL,100)) = %zu", a->name, a->usable(p));
  memset(p, 0x11, 100);
  a->free(p);

  /* Growth and shrink across every tier keep the common prefix. */
  /* (odd large sizes move the end canary of hakmem's hardened build: in place, across a page, moved) */
  static const size_t steps[] = {1,        7,        16,       100,     1000,    1024,   1025,   4000,
                                 64 * KiB, 100 * KiB, 512 * KiB, 513 * KiB, 513 * KiB + 5, 3 * MiB + 13,
                                 3 * MiB + 21, 3 * MiB + 4090, 9 * MiB + 1, 9 * MiB, 2 * MiB + 4093, 2 * MiB,
                                 600 * KiB, 70 * KiB, 5000,     300,     17,      1};
  size_t cur = 0;
  p = NULL;
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    size_t n = steps[i];
    unsigned char *q = a->realloc(p, hide(n));
    REQUIRE(q != NULL, "[%s] realloc(%p, %zu) returned NULL", a->name, (void *)p, n);
    CHECK(n < 16 || ((uintptr_t)q & 15) == 0, "[%s] realloc to %zu = %p not 16-byte aligned", a->name, n, (void *)q);
    size_t keep = cur < n ? cur : n;
    size_t bad = tc_verify(q, keep, 77);
    CHECK(bad == (size_t)-1, "[%s] realloc %zu -> %zu lost contents at offset %zu", a->name, cur, n, bad);
    tc_fill(q, n, 77);
    p = q;
    cur = n;
  }
  a->free(p);

  /* hakmem's hardened build: a large block grown in place shows no trace of its old end canary */
  if (on_hakmem && a->usable) {
    unsigned char *b = a->malloc(hide(56));
    REQUIRE(b != NULL, "[%s] malloc(56) returned NULL", a->name);
    int hardened = a->usable(b) == 56; /* a 64-byte block less the hardened canary */
    a->free(b);
    unsigned char *big = hardened ? a->malloc(hide(MiB + 3)) : NULL;
    if (hardened) {
      REQUIRE(big != NULL, "[%s] malloc(1 MiB + 3) returned NULL", a->name);
      memset(big, 0x6b, MiB + 3);
      unsigned char *grown = a->realloc(big, hide(MiB + 64));
      REQUIRE(grown == big, "[%s] realloc(1 MiB + 3 -> + 64) moved the block", a->name);
      CHECK(first_not(grown + MiB + 3, 8, 0) == (size_t)-1, "[%s] the old end canary is readable after realloc",
            a->name);
      a->free(grown);
    }
  }

  /* realloc(p, 0) frees p and returns NULL. */
  for (size_t n = 1; n <= 3 * MiB; n = n * 5 + 3) {
    void *b = a->malloc(hide(n));
    REQUIRE(b != NULL, "[%s] malloc(%zu) returned NULL", a->name, n);
    void *r = a->realloc(b, hide(0));
    CHECK(r == NULL, "[%s] realloc(malloc(%zu), 0) returned %p, expected NULL", a->name, n, r);
    if (r) a->free(r);
  }
}

/* Run `op` many times and check the resident set does not grow: op must release what it allocates.
 * Leaking would grow it by iterations * 4 KiB (400 MB), the limit is 64 MB. */
static void check_no_growth(const struct api *a, const char *what, void (*op)(const struct api *, size_t)) {
  const size_t iterations = 100000;
  for (size_t i = 0; i < 1000; i++) op(a, i);
  size_t before = tc_rss_bytes();
  for (size_t i = 0; i < iterations; i++) op(a, i);
  size_t after = tc_rss_bytes();
  CHECK(after < before + 64 * MiB, "[%s] %s does not release memory: RSS grew from %zu to %zu bytes", a->name, what,
        before, after);
}

static void op_realloc_zero(const struct api *a, size_t i) {
  void *p = a->malloc(hide(4096));
  if (!p) return;
  memset(p, (int)i, 4096);
  void *r = a->realloc(p, hide(0));
  if (r) a->free(r);
}

static void op_free_sized(const struct api *a, size_t i) {
  size_t n = 4096 + (i & 63);
  void *p = a->malloc(hide(n));
  if (!p) return;
  memset(p, (int)i, n);
  a->free_sized(p, n);
}

static void op_free_aligned_sized(const struct api *a, size_t i) {
  size_t n = 4096 + (i & 63) * 16;
  void *p = a->aligned_alloc(hide(256), hide(n));
  if (!p) return;
  memset(p, (int)i, n);
  a->free_aligned_sized(p, 256, n);
}

/* ---- overflow and huge sizes -------------------------------------------------------------------- */

#define EXPECT_NOMEM(a, call, desc)                                                                        \
  do {                                                                                                     \
    errno = 0;                                                                                             \
    void *r_ = (call);                                                                                     \
    int e_ = errno;                                                                                        \
    CHECK(r_ == NULL, "[%s] %s returned %p, expected NULL", (a)->name, desc, r_);                          \
    CHECK(e_ == ENOMEM, "[%s] %s: errno expected ENOMEM (%d), got %d (%s)", (a)->name, desc, ENOMEM, e_,  \
          strerror(e_));                                                                                   \
    if (r_) (a)->free(r_);                                                                                 \
  } while (0)

static void check_overflow(const struct api *a) {
  const size_t max = hide(SIZE_MAX), huge = hide((size_t)1 << 62), half = hide(SIZE_MAX / 2 + 1);
  EXPECT_NOMEM(a, a->malloc(max), "malloc(SIZE_MAX)");
  EXPECT_NOMEM(a, a->malloc(max - 4096), "malloc(SIZE_MAX - 4096)");
  EXPECT_NOMEM(a, a->malloc(hide((size_t)PTRDIFF_MAX + 1)), "malloc(PTRDIFF_MAX + 1)");
  EXPECT_NOMEM(a, a->malloc(huge), "malloc(1 << 62)");
  EXPECT_NOMEM(a, a->malloc(hide((size_t)1 << 47)), "malloc(1 << 47)");
  EXPECT_NOMEM(a, a->calloc(2, half), "calloc(2, SIZE_MAX/2 + 1)");
  EXPECT_NOMEM(a, a->calloc(half, 2), "calloc(SIZE_MAX/2 + 1, 2)");
  EXPECT_NOMEM(a, a->calloc(hide((size_t)1 << 32), hide((size_t)1 << 32)), "calloc(1 << 32, 1 << 32)");
  EXPECT_NOMEM(a, a->calloc(max, max), "calloc(SIZE_MAX, SIZE_MAX)");
  EXPECT_NOMEM(a, a->calloc(1, huge), "calloc(1, 1 << 62)");
  EXPECT_NOMEM(a, a->realloc(NULL, max), "realloc(NULL, SIZE_MAX)");

  /* A failing realloc/reallocarray leaves the old block valid and unchanged, in every tier. */
  static const size_t olds[] = {24, 5000, 200 * KiB, 2 * MiB};
  for (size_t i = 0; i < sizeof olds / sizeof olds[0]; i++) {
    size_t n = olds[i];
    unsigned char *p = a->malloc(hide(n));
    REQUIRE(p != NULL, "[%s] malloc(%zu) returned NULL", a->name, n);
    tc_fill(p, n, n);
    char desc[96];
    snprintf(desc, sizeof desc, "realloc(<%zu-byte block>, SIZE_MAX)", n);
    EXPECT_NOMEM(a, a->realloc(p, max), desc);
    snprintf(desc, sizeof desc, "realloc(<%zu-byte block>, 1 << 62)", n);
    EXPECT_NOMEM(a, a->realloc(p, huge), desc);
    if (a->reallocarray) {
      snprintf(desc, sizeof desc, "reallocarray(<%zu-byte block>, 2, SIZE_MAX/2 + 1)", n);
      EXPECT_NOMEM(a, a->reallocarray(p, 2, half), desc);
      snprintf(desc, sizeof desc, "reallocarray(<%zu-byte block>, 1 << 32, 1 << 32)", n);
      EXPECT_NOMEM(a, a->reallocarray(p, hide((size_t)1 << 32), hide((size_t)1 << 32)), desc);
    }
    size_t bad = tc_verify(p, n, n);
    CHECK(bad == (size_t)-1, "[%s] failed realloc changed the old %zu-byte block at offset %zu", a->name, n, bad);
    unsigned char *q = a->realloc(p, hide(n * 2));
    REQUIRE(q != NULL, "[%s] old block not usable after a failed realloc", a->name);
    bad = tc_verify(q, n, n);
    CHECK(bad == (size_t)-1, "[%s] realloc after failed realloc lost contents at %zu", a->name, bad);
    a->free(q);
  }
  if (a->reallocarray) EXPECT_NOMEM(a, a->reallocarray(NULL, 2, half), "reallocarray(NULL, 2, SIZE_MAX/2 + 1)");
  if (a->aligned_alloc) {
    EXPECT_NOMEM(a, a->aligned_alloc(64, max), "aligned_alloc(64, SIZE_MAX)");
    EXPECT_NOMEM(a, a->aligned_alloc(4096, huge), "aligned_alloc(4096, 1 << 62)");
  }
  if (a->memalign) {
    EXPECT_NOMEM(a, a->memalign(64, max), "memalign(64, SIZE_MAX)");
    /* glibc: an alignment above SIZE_MAX / 2 + 1 rounds up to no power of two (EINVAL); up to it, ENOMEM */
    static const size_t too_big[] = {SIZE_MAX / 2 + 2, SIZE_MAX - 15, SIZE_MAX};
    for (size_t i = 0; i < sizeof too_big / sizeof too_big[0]; i++) {
      errno = 0;
      void *p = a->memalign(hide(too_big[i]), hide(64));
      int e = errno;
      CHECK(p == NULL && e == EINVAL, "[%s] memalign(%zu, 64) = %p with errno %d, expected NULL with EINVAL (%d)",
            a->name, too_big[i], p, e, EINVAL);
      if (p) a->free(p);
    }
    EXPECT_NOMEM(a, a->memalign(hide(((size_t)1 << 62) + 1), hide(64)), "memalign(2^62 + 1, 64)");
  }
  if (a->valloc) EXPECT_NOMEM(a, a->valloc(max), "valloc(SIZE_MAX)");
  if (a->pvalloc) {
    EXPECT_NOMEM(a, a->pvalloc(max), "pvalloc(SIZE_MAX)");
    EXPECT_NOMEM(a, a->pvalloc(max - 100), "pvalloc(SIZE_MAX - 100) (rounding overflows)");
  }
  if (a->posix_memalign) {
    static const size_t sizes[] = {SIZE_MAX, SIZE_MAX - 4096, (size_t)1 << 62};
    for (size_t i = 0; i < 3; i++) {
      void *sentinel = (void *)(uintptr_t)0xdeadbeef, *out = sentinel;
      int rc = a->posix_memalign(&out, 64, hide(sizes[i]));
      CHECK_EQ(rc, ENOMEM, "posix_memalign(64, huge) return value");
      CHECK(out == sentinel, "[%s] posix_memalign(&p, 64, %zu) changed *p to %p on error", a->name, sizes[i], out);
    }
  }
}

/* ---- errno is left alone by calls that succeed (hakmem's promise; glibc makes none) --------------- */


/* A call that succeeds must not leave an errno from a failed first attempt it recovered from: growing a
 * cached large mapping whose neighbour blocks an in-place mremap, shrinking a cached mapping whose last
 * block was 4 MiB-aligned, and the small and medium tiers. */
static void check_errno_kept(const struct api *a) {
  enum { ROUNDS = 4 };
  for (int round = 0; round < ROUNDS; round++) {
    void *first = a->malloc(hide(8 * MiB)), *neighbour = a->malloc(hide(8 * MiB));
    REQUIRE(first != NULL && neighbour != NULL, "[%s] malloc(8 MiB) returned NULL", a->name);
    a->free(first); /* cached; growing it in place runs into its neighbour when the kernel placed them adjacent */
    static const size_t sizes[] = {24, 5000, 200 * KiB, 12 * MiB, 3 * MiB, 40 * MiB, 1 * MiB};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      errno = EDOM;
      unsigned char *p = a->malloc(hide(sizes[i]));
      int e = errno;
      REQUIRE(p != NULL, "[%s] malloc(%zu) returned NULL", a->name, sizes[i]);
      CHECK(e == EDOM, "[%s] round %d: successful malloc(%zu) changed errno to %d (%s)", a->name, round, sizes[i],
            e, strerror(e));
      tc_fill(p, sizes[i], (unsigned)i);
      errno = EDOM;
      unsigned char *q = a->realloc(p, hide(sizes[i] * 2 + 4096));
      e = errno;
      REQUIRE(q != NULL, "[%s] realloc to %zu returned NULL", a->name, sizes[i] * 2 + 4096);
      CHECK(e == EDOM, "[%s] round %d: successful realloc(%zu -> %zu) changed errno to %d (%s)", a->name, round,
            sizes[i], sizes[i] * 2 + 4096, e, strerror(e));
      size_t bad = tc_verify(q, sizes[i], (unsigned)i);
      CHECK(bad == (size_t)-1, "[%s] realloc of %zu bytes lost contents at %zu", a->name, sizes[i], bad);
      a->free(q);
    }
    if (a->aligned_alloc) { /* cache a mapping whose block starts 4 MiB in, then reuse it for a smaller block */
      malloc_trim(0);         /* empty the large cache, so that mapping is the only one to reuse */
      unsigned char *al = a->aligned_alloc(hide(4 * MiB), hide(6 * MiB));
      REQUIRE(al != NULL, "[%s] aligned_alloc(4 MiB, 6 MiB) returned NULL", a->name);
      a->free(al);
      errno = EDOM;
      unsigned char *p = a->malloc(hide(1 * MiB));
      int e = errno;
      REQUIRE(p != NULL, "[%s] malloc(1 MiB) after an aligned block returned NULL", a->name);
      CHECK(e == EDOM, "[%s] malloc(1 MiB) changed errno to %d (%s)", a->name, e, strerror(e));
      tc_fill(p, 1 * MiB, 7);
      size_t bad = tc_verify(p, 1 * MiB, 7);
      CHECK(bad == (size_t)-1, "[%s] 1 MiB block from a shrunk mapping lost contents at %zu", a->name, bad);
      a->free(p);
    }
    a->free(neighbour);
  }
}

/* ---- usable size ------------------------------------------------------------------------------- */

static void check_usable_writable(const struct api *a) {
  static const size_t sizes[] = {1,         8,        15,         16,        24,      100,     256,
                                 1000,      1024,     1100,       3000,      5000,    16 * KiB, 70 * KiB,
                                 100 * KiB, 500 * KiB, 600 * KiB, 1 * MiB,    3 * MiB + 7};
  enum { N = 24 };
  if (a->usable) CHECK_EQ(a->usable(NULL), 0, "usable size of NULL");
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t n = sizes[s];
    unsigned char *p[N];
    size_t u[N];
    int count = n > 500 * KiB ? 4 : N;
    for (int i = 0; i < count; i++) {
      p[i] = a->malloc(hide(n));
      REQUIRE(p[i] != NULL, "[%s] malloc(%zu) returned NULL", a->name, n);
      u[i] = a->usable(p[i]);
      CHECK(u[i] >= n, "[%s] usable(malloc(%zu)) = %zu, smaller than the request", a->name, n, u[i]);
      memset(p[i], 0x40 + i, u[i]);
    }
    for (int i = 0; i < count; i++) {
      size_t bad = first_not(p[i], u[i], (unsigned char)(0x40 + i));
      CHECK(bad == (size_t)-1,
            "[%s] malloc(%zu) block %d: byte %zu of its %zu usable bytes overwritten by a neighbour's usable bytes",
            a->name, n, i, bad, u[i]);
    }
    for (int i = 0; i < count; i++) a->free(p[i]);
  }
}

/* ---- calloc ------------------------------------------------------------------------------------ */

static void check_calloc_zero(const struct api *a) {
  static const struct { size_t size; int count; } cases[] = {
      {24, 64}, {200, 64}, {1000, 32}, {5000, 16}, {100 * KiB, 8}, {600 * KiB, 4}, {3 * MiB, 3}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    size_t n = cases[c].size;
    int count = cases[c].count;
    void *p[64];
    for (int round = 0; round < 4; round++) {
      for (int i = 0; i < count; i++) {
        p[i] = a->malloc(hide(n));
        REQUIRE(p[i] != NULL, "[%s] malloc(%zu) returned NULL", a->name, n);
        memset(p[i], 0xA5, a->usable ? a->usable(p[i]) : n);
      }
      for (int i = count - 1; i >= 0; i--) a->free(p[i]);
      for (int i = 0; i < count; i++) {
        /* Alternate the two ways of asking for n bytes. */
        p[i] = (round & 1) ? a->calloc(hide(n / 8), hide(8)) : a->calloc(hide(1), hide(n));
        size_t want = (round & 1) ? n / 8 * 8 : n;
        REQUIRE(p[i] != NULL, "[%s] calloc for %zu bytes returned NULL", a->name, want);
        size_t bad = first_not(p[i], want, 0);
        CHECK(bad == (size_t)-1, "[%s] calloc(%zu bytes) round %d block %d: byte %zu is not zero", a->name, want,
              round, i, bad);
        memset(p[i], 0x5A, want);
      }
      for (int i = 0; i < count; i++) a->free(p[i]);
    }
  }
  void *z = a->calloc(hide(0), hide(0));
  CHECK(z != NULL, "[%s] calloc(0, 0) returned NULL", a->name);
  a->free(z);
}

/* ---- aligned allocation ------------------------------------------------------------------------ */

enum { VIA_ALIGNED_ALLOC, VIA_POSIX_MEMALIGN, VIA_MEMALIGN };
static const char *const via_name[] = {"aligned_alloc", "posix_memalign", "memalign"};

static void *alloc_aligned(const struct api *a, int via, size_t align, size_t n) {
  if (via == VIA_ALIGNED_ALLOC) return a->aligned_alloc(hide(align), hide(n));
  if (via == VIA_MEMALIGN) return a->memalign(hide(align), hide(n));
  void *out = NULL;
  int rc = a->posix_memalign(&out, hide(align), hide(n));
  CHECK_EQ(rc, 0, "posix_memalign with a good alignment");
  return rc ? NULL : out;
}

static void check_aligned(const struct api *a) {
  for (int via = 0; via < 3; via++) {
    if ((via == VIA_ALIGNED_ALLOC && !a->aligned_alloc) || (via == VIA_POSIX_MEMALIGN && !a->posix_memalign) ||
        (via == VIA_MEMALIGN && !a->memalign))
      continue;
    for (size_t align = via == VIA_POSIX_MEMALIGN ? sizeof(void *) : 1; align <= 16 * MiB; align *= 2) {
      const size_t sizes[] = {1, 24, 1000, align / 2 + 1, align, align + 1, 3 * MiB + 5};
      void *p[7];
      size_t n[7];
      for (int i = 0; i < 7; i++) {
        n[i] = sizes[i];
        p[i] = alloc_aligned(a, via, align, n[i]);
        REQUIRE(p[i] != NULL, "[%s] %s(align %zu, size %zu) returned NULL", a->name, via_name[via], align, n[i]);
        size_t want = align < 16 && n[i] >= 16 && via == VIA_MEMALIGN ? 16 : align;
        CHECK(((uintptr_t)p[i] & (want - 1)) == 0, "[%s] %s(align %zu, size %zu) = %p is not %zu-aligned", a->name,
              via_name[via], align, n[i], p[i], want);
        if (a->usable)
          CHECK(a->usable(p[i]) >= n[i], "[%s] %s(align %zu, size %zu): usable %zu", a->name, via_name[via], align,
                n[i], a->usable(p[i]));
        memset(p[i], 0x30 + i, n[i]);
      }
      for (int i = 0; i < 7; i++) {
        size_t bad = first_not(p[i], n[i], (unsigned char)(0x30 + i));
        CHECK(bad == (size_t)-1, "[%s] %s(align %zu, size %zu): byte %zu overwritten", a->name, via_name[via], align,
              n[i], bad);
        if (via == VIA_ALIGNED_ALLOC && a->free_aligned_sized && (i & 1)) a->free_aligned_sized(p[i], align, n[i]);
        else a->free(p[i]);
      }
    }
  }
  if (a->posix_memalign) {
    static const size_t bad_aligns[] = {0, 1, 2, 3, sizeof(void *) / 2, 12, 24, 48, 96, 4097, (1 << 20) + 8};
    for (size_t i = 0; i < sizeof bad_aligns / sizeof bad_aligns[0]; i++) {
      void *sentinel = (void *)(uintptr_t)0xfeedface, *out = sentinel;
      int rc = a->posix_memalign(&out, hide(bad_aligns[i]), hide(64));
      CHECK(rc == EINVAL, "[%s] posix_memalign(&p, %zu, 64): expected EINVAL (%d), got %d", a->name, bad_aligns[i],
            EINVAL, rc);
      CHECK(out == sentinel, "[%s] posix_memalign(&p, %zu, 64) changed *p to %p on error", a->name, bad_aligns[i], out);
    }
    void *sentinel = (void *)(uintptr_t)0xfeedface, *out = sentinel;
    int rc = a->posix_memalign(&out, hide(SIZE_MAX / 2 + 1), hide(64));
    CHECK(rc == EINVAL || rc == ENOMEM, "[%s] posix_memalign(&p, 2^63, 64): expected EINVAL or ENOMEM, got %d",
          a->name, rc);
    CHECK(out == sentinel, "[%s] posix_memalign(&p, 2^63, 64) changed *p on error", a->name);
  }
  /* glibc before 2.38 rounds a bad aligned_alloc alignment up instead of failing. */
  int major = 0, minor = 0;
  sscanf(gnu_get_libc_version(), "%d.%d", &major, &minor);
  if (a->aligned_alloc && (tc_hakmem_active() || major > 2 || (major == 2 && minor >= 38))) {
    static const size_t bad_aligns[] = {0, 3, 24, 48, 1000, 4097};
    for (size_t i = 0; i < sizeof bad_aligns / sizeof bad_aligns[0]; i++) {
      errno = 0;
      void *p = a->aligned_alloc(hide(bad_aligns[i]), hide(64));
      int e = errno;
      CHECK(p == NULL, "[%s] aligned_alloc(%zu, 64) returned %p, expected NULL", a->name, bad_aligns[i], p);
      CHECK(e == EINVAL, "[%s] aligned_alloc(%zu, 64): errno expected EINVAL, got %d", a->name, bad_aligns[i], e);
      if (p) a->free(p);
    }
  } else if (a->aligned_alloc) {
    printf("   (aligned_alloc bad-alignment check skipped: glibc %s accepts them)\n", gnu_get_libc_version());
  }
}

static void check_page_aligned(const struct api *a) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  static const size_t sizes[] = {1, 100, 4095, 4096, 4097, 70000, 3 * MiB + 1};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i];
    if (a->valloc) {
      void *p = a->valloc(hide(n));
      REQUIRE(p != NULL, "[%s] valloc(%zu) returned NULL", a->name, n);
      CHECK(((uintptr_t)p & (page - 1)) == 0, "[%s] valloc(%zu) = %p not page aligned", a->name, n, p);
      memset(p, 1, n);
      a->free(p);
    }
    if (a->pvalloc) {
      size_t rounded = (n + page - 1) & ~(page - 1);
      unsigned char *p = a->pvalloc(hide(n));
      REQUIRE(p != NULL, "[%s] pvalloc(%zu) returned NULL", a->name, n);
      CHECK(((uintptr_t)p & (page - 1)) == 0, "[%s] pvalloc(%zu) = %p not page aligned", a->name, n, (void *)p);
      if (a->usable)
        CHECK(a->usable(p) >= rounded, "[%s] pvalloc(%zu): usable %zu < %zu", a->name, n, a->usable(p), rounded);
      memset(p, 2, rounded);
      a->free(p);
    }
  }
  /* hakmem documents that pvalloc(0) allocates one page; glibc allocates a minimal block. */
  if (a->pvalloc && tc_hakmem_active()) {
    unsigned char *p = a->pvalloc(hide(0));
    REQUIRE(p != NULL, "[%s] pvalloc(0) returned NULL", a->name);
    CHECK(((uintptr_t)p & (page - 1)) == 0, "[%s] pvalloc(0) = %p not page aligned", a->name, (void *)p);
    REQUIRE(a->usable(p) >= page, "[%s] pvalloc(0): usable %zu < one page", a->name, a->usable(p));
    memset(p, 3, page);
    a->free(p);
  }
}

/* ---- reallocarray, C23 sized frees --------------------------------------------------------------- */

static void check_reallocarray(const struct api *a) {
  unsigned char *p = a->reallocarray(NULL, hide(10), hide(10));
  REQUIRE(p != NULL, "[%s] reallocarray(NULL, 10, 10) returned NULL", a->name);
  if (a->usable) CHECK(a->usable(p) >= 100, "[%s] reallocarray(NULL, 10, 10): usable %zu", a->name, a->usable(p));
  tc_fill(p, 100, 5);
  unsigned char *q = a->reallocarray(p, hide(1000), hide(1000));
  REQUIRE(q != NULL, "[%s] reallocarray(p, 1000, 1000) returned NULL", a->name);
  size_t bad = tc_verify(q, 100, 5);
  CHECK(bad == (size_t)-1, "[%s] reallocarray growth lost contents at %zu", a->name, bad);
  q = a->reallocarray(q, hide(5), hide(10));
  REQUIRE(q != NULL, "[%s] reallocarray shrink returned NULL", a->name);
  bad = tc_verify(q, 50, 5);
  CHECK(bad == (size_t)-1, "[%s] reallocarray shrink lost contents at %zu", a->name, bad);
  a->free(q);
}

static void check_sized_frees(const struct api *a) {
  a->free_sized(NULL, 0);
  for (size_t n = 1; n <= 4 * MiB; n = n * 3 + 1) {
    void *p = a->malloc(hide(n));
    REQUIRE(p != NULL, "[%s] malloc(%zu) returned NULL", a->name, n);
    memset(p, 9, n);
    a->free_sized(p, n);
    p = a->calloc(hide(n), 1);
    REQUIRE(p != NULL, "[%s] calloc(%zu, 1) returned NULL", a->name, n);
    a->free_sized(p, n);
    p = a->realloc(NULL, hide(n));
    REQUIRE(p != NULL, "[%s] realloc(NULL, %zu) returned NULL", a->name, n);
    p = a->realloc(p, hide(n + 100));
    REQUIRE(p != NULL, "[%s] realloc(p, %zu) returned NULL", a->name, n + 100);
    a->free_sized(p, n + 100);
  }
  check_no_growth(a, "free_sized", op_free_sized);
  if (a->free_aligned_sized && a->aligned_alloc) {
    a->free_aligned_sized(NULL, 64, 0);
    for (size_t align = 16; align <= 4 * MiB; align *= 4) {
      void *p = a->aligned_alloc(hide(align), hide(align + 3));
      REQUIRE(p != NULL, "[%s] aligned_alloc(%zu, %zu) returned NULL", a->name, align, align + 3);
      memset(p, 7, align + 3);
      a->free_aligned_sized(p, align, align + 3);
    }
    check_no_growth(a, "free_aligned_sized", op_free_aligned_sized);
  }
}

/* ---- blocks from one set released by another ---------------------------------------------------- */

static void check_mixing(const struct api *a, const struct api *std) {
  static const size_t sizes[] = {8, 100, 3000, 100 * KiB, 2 * MiB};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i];
    unsigned char *p = a->malloc(hide(n));
    REQUIRE(p != NULL, "[%s] malloc(%zu) returned NULL", a->name, n);
    CHECK(std->usable(p) >= n, "[%s] malloc_usable_size of a %s block of %zu bytes = %zu", a->name, a->name, n,
          std->usable(p));
    tc_fill(p, n, 3);
    p = std->realloc(p, hide(n * 2));
    REQUIRE(p != NULL, "realloc of a [%s] block returned NULL", a->name);
    size_t bad = tc_verify(p, n, 3);
    CHECK(bad == (size_t)-1, "realloc of a [%s] block of %zu bytes lost contents at %zu", a->name, n, bad);
    std->free(p);
    p = std->malloc(hide(n));
    REQUIRE(p != NULL, "malloc(%zu) returned NULL", n);
    p = a->realloc(p, hide(n + 1));
    REQUIRE(p != NULL, "[%s] realloc of a malloc block returned NULL", a->name);
    a->free(p);
    if (a->memalign) {
      p = a->memalign(hide(4096), hide(n));
      REQUIRE(p != NULL, "[%s] memalign(4096, %zu) returned NULL", a->name, n);
      std->free(p);
    }
  }
}

/* ---- driver ------------------------------------------------------------------------------------- */

static void run_api(const struct api *a, const struct api *std) {
  char title[128];
#define SECTION(fn, what)                                 \
  do {                                                    \
    snprintf(title, sizeof title, "[%s] %s", a->name, what); \
    tc_section(title);                                    \
    fn;                                                   \
  } while (0)
  SECTION(check_malloc_zero(a), "malloc(0) returns unique non-NULL pointers");
  SECTION(check_alignment_sweep(a), "alignment of malloc 1 .. 8 MiB");
  SECTION(check_realloc(a), "realloc(NULL, n), growth/shrink keeps contents, realloc(p, 0) frees");
  SECTION(check_no_growth(a, "realloc(p, 0)", op_realloc_zero), "realloc(p, 0) releases the block");
  SECTION(check_overflow(a), "overflow and huge sizes: NULL, errno ENOMEM, old block kept");
  if (on_hakmem) SECTION(check_errno_kept(a), "successful calls leave errno unchanged");
  if (a->usable) SECTION(check_usable_writable(a), "whole usable size is writable");
  SECTION(check_calloc_zero(a), "calloc memory is zero after reuse (small, medium, large)");
  if (a->aligned_alloc || a->posix_memalign || a->memalign)
    SECTION(check_aligned(a), "aligned allocation, alignments 1 .. 16 MiB, bad alignments");
  if (a->valloc || a->pvalloc) SECTION(check_page_aligned(a), "valloc and pvalloc");
  if (a->reallocarray) SECTION(check_reallocarray(a), "reallocarray");
  if (a->free_sized) SECTION(check_sized_frees(a), "free_sized and free_aligned_sized");
  else printf("== [%s] free_sized not available: skipped\n", a->name);
  if (a != std) SECTION(check_mixing(a, std), "blocks shared with the standard functions");
#undef SECTION
}

#define LOOKUP(name) dlsym(RTLD_DEFAULT, name)

/* hak_aligned_calloc: zero after reuse at every alignment and tier, count * size, bad alignments and an
 * overflowing product. (Its fresh large blocks stay uncommitted: rust/tests/global_alloc.rs.) */
static void check_aligned_calloc(void *(*aligned_calloc)(size_t, size_t, size_t), void *(*aligned_alloc)(size_t, size_t),
                                 void (*free_fn)(void *)) {
  static const size_t aligns[] = {16, 64, 4096, 64 * KiB, 2 * MiB};
  static const size_t sizes[] = {1, 100, 5000, 300 * KiB, 3 * MiB};
  for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
      size_t al = aligns[i], n = sizes[j];
      unsigned char *dirty = aligned_alloc(al, hide(n));
      REQUIRE(dirty != NULL, "hak_aligned_alloc(%zu, %zu) returned NULL", al, n);
      memset(dirty, 0xAB, n);
      free_fn(dirty);
      unsigned char *p = aligned_calloc(al, hide(1), hide(n));
      REQUIRE(p != NULL, "hak_aligned_calloc(%zu, 1, %zu) returned NULL", al, n);
      CHECK((uintptr_t)p % al == 0, "hak_aligned_calloc(%zu, 1, %zu) = %p: misaligned", al, n, (void *)p);
      size_t bad = first_not(p, n, 0);
      CHECK(bad == (size_t)-1, "hak_aligned_calloc(%zu, 1, %zu): byte %zu is not zero", al, n, bad);
      free_fn(p);
    }
  }
  unsigned char *p = aligned_calloc(64, hide(10), hide(100));
  REQUIRE(p != NULL, "hak_aligned_calloc(64, 10, 100) returned NULL");
  CHECK(first_not(p, 1000, 0) == (size_t)-1, "hak_aligned_calloc(64, 10, 100) is not zero");
  free_fn(p);
  static const size_t bad_aligns[] = {0, 3, 48};
  for (size_t i = 0; i < sizeof bad_aligns / sizeof bad_aligns[0]; i++) {
    errno = 0;
    CHECK(aligned_calloc(bad_aligns[i], 1, 8) == NULL && errno == EINVAL,
          "hak_aligned_calloc(%zu, 1, 8): want NULL with EINVAL, errno %d", bad_aligns[i], errno);
  }
  errno = 0;
  CHECK(aligned_calloc(64, hide(SIZE_MAX / 2), hide(3)) == NULL && errno == ENOMEM,
        "hak_aligned_calloc with an overflowing product: want NULL with ENOMEM, errno %d", errno);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int hakmem = tc_hakmem_active();
  on_hakmem = hakmem;
  printf("allocator: %s\n", hakmem ? "hakmem" : "glibc");

  struct api std = {"std",  malloc,  calloc,  realloc, reallocarray, free,       aligned_alloc,
                    posix_memalign, memalign, valloc, pvalloc,  std_usable,    NULL,       NULL};
  *(void **)&std.free_sized = LOOKUP("free_sized");
  *(void **)&std.free_aligned_sized = LOOKUP("free_aligned_sized");
  /* glibc 2.36 has neither; hakmem exports both (C23), so there a missing one is a failure, not a skip */
  if (hakmem) CHECK(std.free_sized != NULL && std.free_aligned_sized != NULL, "free_sized or free_aligned_sized "
                    "is not exported by hakmem");
  run_api(&std, &std);

  struct api libc = {.name = "__libc",
                     .malloc = __libc_malloc,
                     .calloc = __libc_calloc,
                     .realloc = __libc_realloc,
                     .free = __libc_free,
                     .memalign = __libc_memalign,
                     .valloc = __libc_valloc,
                     .pvalloc = __libc_pvalloc,
                     .usable = std_usable};
  run_api(&libc, &std);

  if (hakmem) {
    struct api hak = {.name = "hak"};
    *(void **)&hak.malloc = LOOKUP("hak_malloc");
    *(void **)&hak.calloc = LOOKUP("hak_calloc");
    *(void **)&hak.realloc = LOOKUP("hak_realloc");
    *(void **)&hak.reallocarray = LOOKUP("hak_reallocarray");
    *(void **)&hak.free = LOOKUP("hak_free");
    *(void **)&hak.aligned_alloc = LOOKUP("hak_aligned_alloc");
    *(void **)&hak.posix_memalign = LOOKUP("hak_posix_memalign");
    *(void **)&hak.memalign = LOOKUP("hak_memalign");
    *(void **)&hak.valloc = LOOKUP("hak_valloc");
    *(void **)&hak.pvalloc = LOOKUP("hak_pvalloc");
    *(void **)&hak.usable = LOOKUP("hak_usable_size");
    *(void **)&hak.free_sized = LOOKUP("hak_free_sized");
    *(void **)&hak.free_aligned_sized = LOOKUP("hak_free_aligned_sized");
    void **fns = (void **)&hak.malloc;
    for (size_t i = 0; i < (sizeof hak - offsetof(struct api, malloc)) / sizeof(void *); i++)
      REQUIRE(fns[i] != NULL, "hak_* function #%zu of struct api is not exported by libhakmem", i);
    run_api(&hak, &std);
    void *(*aligned_calloc)(size_t, size_t, size_t);
    *(void **)&aligned_calloc = LOOKUP("hak_aligned_calloc");
    REQUIRE(aligned_calloc != NULL, "hak_aligned_calloc is not exported by libhakmem");
    printf("== [hak] hak_aligned_calloc\n");
    check_aligned_calloc(aligned_calloc, hak.aligned_alloc, hak.free);
  } else {
    printf("== hak_* functions not present (not running on hakmem): skipped\n");
  }
  return tc_finish("test_api");
}
