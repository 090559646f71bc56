/* fuzz_api.c — libFuzzer harness for the hak_* API. The input is read as a sequence of calls on 32 slots:
 * malloc, calloc, realloc, reallocarray, aligned allocations (aligned_alloc, posix_memalign, memalign,
 * valloc, pvalloc), free, free_sized, free_aligned_sized, usable size, a second thread that checks,
 * frees and refills a batch of slots, and collection. Every live block carries a pattern derived from a
 * per-block seed, checked before every free and realloc and after every thread handoff; calloc memory
 * must be zero, alignment and usable size must hold, and every failure must be NULL with ENOMEM (or
 * EINVAL for a bad alignment). Any violation aborts, which libFuzzer reports as a crash.
 * Built with the hakmem sources (-DHAK_NO_OVERRIDE=1) by tests/fuzz/Makefile; run by tests/test_fuzz.py. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hakmem.h"

#define SLOTS 32
#define BATCH 8

struct slot {
  unsigned char *ptr;
  size_t size;  /* bytes requested */
  size_t align; /* 0: default alignment */
  uint8_t seed;
  bool c23;     /* from aligned_alloc: may be released with free_aligned_sized */
};

struct input {
  const uint8_t *data;
  size_t len, pos;
};

static struct slot slots[SLOTS];

static void die(const char *what, const struct slot *s) {
  fprintf(stderr, "fuzz_api: %s (ptr=%p size=%zu align=%zu)\n", what, (void *)(s ? s->ptr : NULL),
          s ? s->size : 0, s ? s->align : 0);
  abort();
}

static uint8_t byte(struct input *in) { return in->pos < in->len ? in->data[in->pos++] : 0; }

/* Sizes weighted towards the small tier, with every tier and the edges reachable. */
static size_t size_arg(struct input *in) {
  uint8_t tier = byte(in);
  size_t lo = byte(in), hi = byte(in);
  switch (tier % 8) {
  case 0: return lo % 17;                              /* 0..16 */
  case 1: case 2: case 3: return lo + (hi & 3) * 256;  /* small: up to 1 KiB */
  case 4: case 5: return 1024 + (lo | hi << 8) * 8;    /* medium: up to 513 KiB */
  case 6: return (512u << 10) - 64 + lo;               /* around the medium/large boundary */
  default: return (512u << 10) + (lo | hi << 8) * 8;   /* large: up to 1 MiB */
  }
}

static size_t align_arg(struct input *in) { return (size_t)1 << (byte(in) % 24); } /* 1 .. 8 MiB */

/* The byte loops below are not coverage-instrumented: they would dominate the run time. */
#define NO_COVERAGE __attribute__((noinline, no_sanitize("coverage")))

static unsigned char pattern(const struct slot *s, size_t i) { return (unsigned char)(s->seed + i * 7 + (i >> 9)); }

NO_COVERAGE static void fill(struct slot *s) {
  for (size_t i = 0; i < s->size; i++) s->ptr[i] = pattern(s, i);
}

NO_COVERAGE static void verify(const struct slot *s, size_t upto) {
  for (size_t i = 0; i < upto; i++)
    if (s->ptr[i] != pattern(s, i)) die("block contents changed", s);
}

NO_COVERAGE static bool all_zero(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return false;
  return true;
}

static void check_new(struct slot *s, bool zeroed) {
  if (s->align && ((uintptr_t)s->ptr & (s->align - 1))) die("misaligned block", s);
  if (s->size >= 16 && ((uintptr_t)s->ptr & 15)) die("block not 16-byte aligned", s);
  size_t usable = hak_usable_size(s->ptr);
  if (usable < s->size) die("usable size below the request", s);
  if (zeroed && !all_zero(s->ptr, s->size)) die("calloc memory not zeroed", s);
  fill(s);
}

static void release(struct slot *s, int how) {
  if (!s->ptr) return;
  verify(s, s->size);
  if (how == 1 && !s->align) hak_free_sized(s->ptr, s->size);
  else if (how == 1 && s->c23) hak_free_aligned_sized(s->ptr, s->align, s->size);
  else hak_free(s->ptr);
  s->ptr = NULL;
}

static void expect_failure(void *p, int err, int want, const char *what) {
  if (p || err != want) {
    fprintf(stderr, "fuzz_api: %s returned %p errno %d, want NULL/%d\n", what, p, err, want);
    abort();
  }
}

static void allocate(struct slot *s, struct input *in, unsigned kind) {
  release(s, 0);
  size_t size = size_arg(in), align = 0;
  void *p = NULL;
  bool zeroed = false;
  errno = 0;
  switch (kind % 7) {
  case 0: p = hak_malloc(size); break;
  case 1: {
    size_t n = 1 + byte(in) % 16;
    p = hak_calloc(n, size / n + 1);
    size = n * (size / n + 1);
    zeroed = true;
    break;
  }
  case 2: align = align_arg(in); p = hak_aligned_alloc(align, size); break;
  case 3: {
    align = align_arg(in);
    void *out = &out;
    int rc = hak_posix_memalign(&out, align, size);
    if (align < sizeof(void *)) {
      if (rc != EINVAL || out != &out) die("posix_memalign accepted a small alignment", s);
      return;
    }
    if (rc != 0) die("posix_memalign failed", s);
    p = out;
    break;
  }
  case 4: align = align_arg(in); p = hak_memalign(align, size); if (align < 16) align = 16; break;
  case 5: align = 4096; p = hak_valloc(size); break;
  case 6:
    align = 4096;
    p = hak_pvalloc(size);
    size = size ? (size + 4095) & ~(size_t)4095 : 4096;
    break;
  }
  if (!p) die("allocation failed", s);
  *s = (struct slot){p, size, align, byte(in), kind % 7 == 2};
  check_new(s, zeroed);
}

static void resize(struct slot *s, struct input *in, bool as_array) {
  size_t size = size_arg(in);
  if (!s->ptr) return;
  verify(s, s->size);
  errno = 0;
  unsigned char *p;
  if (as_array) {
    size_t n = 1 + byte(in) % 8;
    size = n * (size / n);
    p = hak_reallocarray(s->ptr, n, size / n);
  } else {
    p = hak_realloc(s->ptr, size);
  }
  if (size == 0) { /* realloc(p, 0) frees p */
    if (p) die("realloc(p, 0) did not return NULL", s);
    s->ptr = NULL;
    return;
  }
  if (!p) die("realloc failed", s);
  size_t keep = size < s->size ? size : s->size;
  s->ptr = p;
  s->align = 0;
  s->c23 = false;
  verify(s, keep);
  s->size = size;
  s->seed = (uint8_t)(s->seed + 1);
  check_new(s, false);
}

/* The second thread: check and free a batch of slots, then refill them (blocks it allocates are later
 * freed by the main thread, blocks it frees were mostly allocated by the main thread). */
struct batch {
  struct slot *s[BATCH];
  size_t sizes[BATCH];
  int n;
};

static void *second_thread(void *arg) {
  struct batch *b = arg;
  for (int i = 0; i < b->n; i++) {
    release(b->s[i], i & 1);
    unsigned char *p = hak_malloc(b->sizes[i]);
    if (!p) die("allocation failed in the second thread", NULL);
    *b->s[i] = (struct slot){p, b->sizes[i], 0, (uint8_t)(i * 37), false};
    check_new(b->s[i], false);
  }
  return NULL;
}

static void run_thread(struct input *in) {
  struct batch b = {.n = 1 + byte(in) % BATCH};
  for (int i = 0; i < b.n; i++) {
    b.s[i] = &slots[(byte(in) % (SLOTS / BATCH)) * BATCH + i];
    b.sizes[i] = size_arg(in);
  }
  pthread_t t;
  if (pthread_create(&t, NULL, second_thread, &b) != 0) die("pthread_create failed", NULL);
  pthread_join(t, NULL);
  for (int i = 0; i < b.n; i++) verify(b.s[i], b.s[i]->size);
}

static void bad_requests(struct input *in) {
  size_t huge = SIZE_MAX - byte(in);
  errno = 0;
  expect_failure(hak_malloc(huge), errno, ENOMEM, "malloc(huge)");
  errno = 0;
  expect_failure(hak_calloc(huge / 2 + 1, 2 + byte(in) % 7), errno, ENOMEM, "calloc overflow");
  errno = 0;
  expect_failure(hak_aligned_alloc(3 + 2 * (size_t)(byte(in) % 100), 64), errno, EINVAL, "aligned_alloc(bad)");
  struct slot *s = &slots[byte(in) % SLOTS];
  if (s->ptr) {
    errno = 0;
    expect_failure(hak_realloc(s->ptr, huge), errno, ENOMEM, "realloc(huge)");
    verify(s, s->size);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  struct input in = {data, len, 0};
  while (in.pos < in.len) {
    uint8_t op = byte(&in);
    struct slot *s = &slots[byte(&in) % SLOTS];
    switch (op % 12) {
    case 0: case 1: case 2: allocate(s, &in, op / 12); break;
    case 3: resize(s, &in, false); break;
    case 4: resize(s, &in, true); break;
    case 5: case 6: release(s, op & 1); break;
    case 7:
      if (s->ptr) { /* all usable bytes may be written */
        size_t usable = hak_usable_size(s->ptr);
        memset(s->ptr + s->size, 0xee, usable - s->size);
        verify(s, s->size);
      }
      break;
    case 8: run_thread(&in); break;
    case 9: hak_collect(op & 0x10); break;
    case 10: bad_requests(&in); break;
    case 11: if (s->ptr) verify(s, s->size); break;
    }
  }
  for (int i = 0; i < SLOTS; i++) release(&slots[i], 0);
  return 0;
}
