/* probe_security.c — the security probe suite: one deliberate heap misuse per probe, chosen by name
 * (`probe_security NAME`, `probe_security --list`). Uses only the standard allocation interface, so the
 * same binary runs under glibc, libhakmem.so and libhakmem-secure.so (LD_PRELOAD). tests/test_security.py
 * runs every probe in every mode and checks the outcome; docs/security.md tabulates it.
 *
 * Conventions: before the faulty operation a probe prints "probe: NAME target=0x..." (the address it is
 * about to misuse) on stderr. Exit status 0 = the program ran to its end (misuse not detected, or for the
 * huge/overflow probes: every call returned NULL with errno ENOMEM); 1 = an allocation call misbehaved
 * (message says how); 3 = a free-list hijack succeeded (malloc returned an address the probe planted);
 * 77 = probe not applicable (a function the probe needs is missing). A detected fault ends the process
 * by a signal (abort). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* The misuse is the point: keep gcc from warning about it. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuse-after-free"
#pragma GCC diagnostic ignored "-Walloc-size-larger-than="
#pragma GCC diagnostic ignored "-Warray-bounds"
#endif

#define NEIGHBOURS 16

static char global_buf[256] __attribute__((aligned(64)));
static const char *probe_name = "";

static void target(const void *p) {
  fprintf(stderr, "probe: %s target=%p\n", probe_name, p);
}

static int fail(const char *what) {
  fprintf(stderr, "probe: %s: %s (errno=%d)\n", probe_name, what, errno);
  return 1;
}

/* Keeps the compiler from proving a use-after-free or an out-of-bounds write away. */
static void *opaque(void *p) {
  __asm__ volatile("" : "+r"(p));
  return p;
}

/* ---- double frees ------------------------------------------------------------------------------- */

static int double_free_sized(size_t size) {
  char *p = malloc(size);
  if (!p) return fail("malloc returned NULL");
  memset(p, 0x5a, size);
  free(p);
  target(p);
  free(opaque(p));
  return 0;
}

static int df_immediate_small(void) { return double_free_sized(48); }
static int df_immediate_medium(void) { return double_free_sized(20000); }
static int df_immediate_large(void) { return double_free_sized(2u << 20); }

static int df_intervening(void) {
  char *p = malloc(48), *q = malloc(48);
  if (!p || !q) return fail("malloc returned NULL");
  free(p);
  free(q);
  target(p);
  free(opaque(p));
  return 0;
}

static int df_after_allocs(void) {
  void *keep[128];
  char *p = malloc(48);
  if (!p) return fail("malloc returned NULL");
  free(p);
  for (int i = 0; i < 128; i++) {
    keep[i] = malloc(i % 8 == 0 ? 5000 : 200);
    if (!keep[i]) return fail("malloc returned NULL");
  }
  target(p);
  free(opaque(p));
  for (int i = 0; i < 128; i++) free(keep[i]);
  return 0;
}

static int df_after_realloc(void) {
  char *p = malloc(48);
  if (!p) return fail("malloc returned NULL");
  memset(p, 0x11, 48);
  char *q = realloc(p, 300000);
  if (!q) return fail("realloc returned NULL");
  if (q == p) {
    fprintf(stderr, "probe: %s: realloc grew in place, nothing to probe\n", probe_name);
    free(q);
    return 77;
  }
  target(p);
  free(opaque(p));
  free(q);
  return 0;
}

static void *free_in_thread(void *p) {
  free(p);
  return NULL;
}

static int df_cross_thread(void) {
  pthread_t t;
  char *p = malloc(48);
  if (!p) return fail("malloc returned NULL");
  if (pthread_create(&t, NULL, free_in_thread, p) != 0) return fail("pthread_create");
  pthread_join(t, NULL);
  target(p);
  free(opaque(p));
  return 0;
}

/* Another thread frees p and q (the main thread's), then p again: p waits at the old end of that
 * thread's chain for the page (remote frees sent in chains, page.c). */
static void *free_p_q_p(void *arg) {
  char **pq = arg;
  free(pq[0]);
  free(pq[1]);
  target(pq[0]);
  free(opaque(pq[0]));
  return NULL;
}

static int df_remote_chain(void) {
  pthread_t t;
  char *pq[2] = {malloc(48), malloc(48)};
  if (!pq[0] || !pq[1]) return fail("malloc returned NULL");
  if (pthread_create(&t, NULL, free_p_q_p, pq) != 0) return fail("pthread_create");
  pthread_join(t, NULL);
  return 0;
}

/* ---- invalid frees ------------------------------------------------------------------------------- */

static int free_stack(void) {
  char buf[256] __attribute__((aligned(64)));
  memset(buf, 0, sizeof buf);
  target(buf + 64);
  free(opaque(buf + 64));
  return buf[0];
}

static int free_global(void) {
  target(global_buf + 64);
  free(opaque(global_buf + 64));
  return 0;
}

static int free_interior(size_t size, size_t offset) {
  char *p = malloc(size);
  if (!p) return fail("malloc returned NULL");
  memset(p, 0x22, size);
  target(p + offset);
  free(opaque(p + offset));
  return 0;
}

static int free_interior_small(void) { return free_interior(64, 16); }

/* realloc of a pointer that is not a live block: it must not hand the block out a second time. */
static int realloc_after_free(void) {
  char *p = malloc(100);
  if (!p) return fail("malloc returned NULL");
  memset(p, 0x21, 100);
  free(p);
  target(p);
  char *q = realloc(opaque(p), 100);
  char *r = malloc(100);
  fprintf(stderr, "probe: %s: realloc returned %p, the next malloc %p\n", probe_name, (void *)q, (void *)r);
  return 0;
}

/* A block of `size` bytes freed, its memory given back by malloc_trim (a small block keeps the rest of
 * its segment in use, or not: `keep`), freed again. */
static int double_free_released(size_t size, int keep) {
  char *hold = keep ? malloc(48) : NULL;
  if (keep && !hold) return fail("malloc returned NULL");
  char *p = malloc(size);
  if (!p) return fail("malloc returned NULL");
  memset(p, 0x5a, 4096);
  free(p);
  malloc_trim(0);
  target(p);
  free(opaque(p));
  free(hold);
  return 0;
}

static int df_released_page(void) { return double_free_released(300000, 1); }
static int df_released_segment(void) { return double_free_released(300000, 0); }
static int df_released_large(void) { return double_free_released(2u << 20, 0); }

/* A large block freed, its cached mapping taken by an aligned block at another offset, freed again. */
static int df_reused_large(void) {
  char *p = malloc(1u << 20);
  if (!p) return fail("malloc returned NULL");
  free(p);
  void *q = aligned_alloc(128u << 10, 900000);
  if (!q) return fail("aligned_alloc returned NULL");
  fprintf(stderr, "probe: %s: the aligned block is %p\n", probe_name, q);
  target(p);
  free(opaque(p));
  return 0;
}

/* A page-long underflow below a large block, over its header, then free. */
static int underflow_4k_large(void) {
  char *p = malloc(1u << 20);
  if (!p) return fail("malloc returned NULL");
  target(p);
  memset(opaque(p - 4096), 0, 4096);
  free(opaque(p));
  return 0;
}

/* A large block freed and cached, then reallocated. */
static int realloc_after_free_large(void) {
  char *p = malloc(2u << 20);
  if (!p) return fail("malloc returned NULL");
  memset(p, 0x21, 4096);
  free(p);
  target(p);
  char *q = realloc(opaque(p), 100);
  fprintf(stderr, "probe: %s: realloc returned %p\n", probe_name, (void *)q);
  return 0;
}

static int realloc_interior_small(void) {
  char *p = malloc(64);
  if (!p) return fail("malloc returned NULL");
  memset(p, 0x22, 64);
  target(p + 16);
  char *q = realloc(opaque(p + 16), 40);
  fprintf(stderr, "probe: %s: realloc returned %p\n", probe_name, (void *)q);
  return 0;
}

/* The block after the two most recent of a fresh run of 200-byte blocks: laid out by the allocator but
 * never returned by malloc. */
static int free_never_allocated(void) {
  char *a = malloc(200), *b = malloc(200);
  if (!a || !b) return fail("malloc returned NULL");
  ptrdiff_t stride = b - a;
  if (stride < 200 || stride > 4096) return fail("two consecutive 200-byte blocks are not neighbours");
  target(b + stride);
  free(opaque(b + stride));
  return 0;
}
static int free_interior_large(void) { return free_interior(1u << 20, 8192); }

/* Wild pointers at the two edges of the 4 MiB-aligned region that holds heap blocks. */
#define REGION ((uintptr_t)4 << 20)

static int free_region_start(void) {
  char *p = malloc(64);
  if (!p) return fail("malloc returned NULL");
  char *start = (char *)((uintptr_t)p & ~(REGION - 1));
  target(start);
  free(opaque(start));
  return 0;
}

/* 14328-byte blocks are allocated until one of them holds the region's last 16 bytes; nothing is
 * allocated after it, so whatever lies above the boundary (often nothing mapped) is no block of ours.
 * A free that reads a block's far end before checking that the pointer starts a block reads 14 KiB past
 * the boundary. (In hakmem these blocks come in pages of seven 64 KiB slices, which tile a 4 MiB
 * segment's 63 slices, so a block ends at the boundary.) */
static int free_region_end(void) {
  enum { SIZE = 14328, MAX = 2048 };
  static char *keep[MAX];
  for (int i = 0; i < MAX; i++) {
    char *p = keep[i] = malloc(SIZE);
    if (!p) return fail("malloc returned NULL");
    char *last = (char *)(((uintptr_t)p | (REGION - 1)) + 1) - 16;
    if (last >= p && last < p + SIZE) {
      target(last);
      free(opaque(last));
      return 0;
    }
  }
  fprintf(stderr, "probe: %s: no block holds the last bytes of a 4 MiB region\n", probe_name);
  return 77;
}

static int free_foreign(size_t map_size, size_t align, size_t offset) {
  char *m = mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return fail("mmap failed");
  char *p = (char *)(((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1)) + offset;
  target(p);
  free(opaque(p));
  munmap(m, map_size);
  return 0;
}

static int free_foreign_mmap(void) { return free_foreign(1u << 20, 4096, 256); }
/* An address aligned like an allocator's segment start inside memory it never mapped. */
static int free_foreign_mmap_aligned(void) { return free_foreign(16u << 20, 4u << 20, 0); }

/* A block from glibc's own allocator: dlsym on libc's handle finds libc's malloc even when another
 * allocator is preloaded (which may also define __libc_malloc). */
static int free_glibc_block(void) {
  void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  void *(*libc_malloc)(size_t) = libc ? (void *(*)(size_t))dlsym(libc, "malloc") : NULL;
  if (!libc_malloc) {
    fprintf(stderr, "probe: %s: glibc's malloc not found\n", probe_name);
    return 77;
  }
  char *p = libc_malloc(64);
  if (!p) return fail("glibc's malloc returned NULL");
  target(p);
  free(opaque(p));
  return 0;
}

/* ---- overflows and underflows: corrupt one block among neighbours, then free them all ------------- */

/* Overwrites `len` bytes at `offset` from the start of the middle block of NEIGHBOURS blocks of `size`
 * bytes (past its end when offset is USABLE_END) with their complement, then frees every block. (Each
 * byte changes: a fixed value left a random canary byte as it was in 1 run in 256, and the probe saw
 * nothing to detect.) */
#define USABLE_END LONG_MAX
static int corrupt_neighbours(size_t size, long offset, size_t len) {
  char *blocks[NEIGHBOURS];
  for (int i = 0; i < NEIGHBOURS; i++) {
    blocks[i] = malloc(size);
    if (!blocks[i]) return fail("malloc returned NULL");
    memset(blocks[i], 0x33, size);
  }
  char *victim = blocks[NEIGHBOURS / 2];
  if (offset == USABLE_END) offset = (long)malloc_usable_size(victim);
  target(victim);
  fprintf(stderr, "probe: %s: writing %zu bytes at offset %ld (usable size %zu)\n", probe_name, len, offset,
          malloc_usable_size(victim));
  volatile unsigned char *at = (unsigned char *)opaque(victim) + offset;
  for (size_t i = 0; i < len; i++) at[i] = (unsigned char)~at[i];
  for (int i = 0; i < NEIGHBOURS; i++) free(blocks[i]);
  return 0;
}

static int overflow_1_small(void) { return corrupt_neighbours(64, USABLE_END, 1); }
static int overflow_32_small(void) { return corrupt_neighbours(64, USABLE_END, 32); }
static int overflow_1_medium(void) { return corrupt_neighbours(4096, USABLE_END, 1); }
static int overflow_32_medium(void) { return corrupt_neighbours(4096, USABLE_END, 32); }
/* One byte past the 40 bytes requested, which may still lie inside the usable size. */
static int overflow_1_slack(void) { return corrupt_neighbours(40, 40, 1); }
static int overflow_1_large(void) { return corrupt_neighbours(1u << 20, USABLE_END, 1); }
static int overflow_32_large(void) { return corrupt_neighbours(1u << 20, USABLE_END, 32); }
/* A keyless forgery from a review: three large blocks whose hardened mappings (header page, request, end
 * canary) fill 4 MiB each, so that they would touch; 24 bytes written from a's end canary on overwrite
 * the next mapping's header with public values ({kind, cached = 0, map_size = 8 MiB}), and freeing b then
 * caches it as 8 MiB, so that a 6 MiB malloc covers the live c. A guard page after each mapping stops the
 * write. Returns 3 when c ends up inside the new block. */
static int large_header_forged(void) {
  size_t big = ((size_t)4 << 20) - 4096 - 8;
  char *a = malloc(big), *b = malloc(big), *c = malloc(big);
  if (!a || !b || !c) return fail("malloc returned NULL");
  memset(c, 'C', 4096);
  target(a);
  fprintf(stderr, "probe: %s: a=%p b=%p c=%p\n", probe_name, (void *)a, (void *)b, (void *)c);
  struct {
    uint64_t junk;
    uint32_t kind, cached;
    uint64_t map_size;
  } forged = {0, 0x1a26eu, 0, (uint64_t)8 << 20};
  memcpy(opaque(a + big), &forged, sizeof forged);
  free(b);
  char *d = malloc((size_t)6 << 20);
  if (d != NULL && c >= d && c < d + ((size_t)6 << 20)) {
    fprintf(stderr, "probe: %s: malloc returned %p, covering the live block %p\n", probe_name, (void *)d, (void *)c);
    return 3;
  }
  return 0;
}

static int underflow_1_small(void) { return corrupt_neighbours(64, -1, 1); }
static int underflow_32_small(void) { return corrupt_neighbours(64, -32, 32); }
static int underflow_1_large(void) { return corrupt_neighbours(1u << 20, -1, 1); }
static int underflow_32_large(void) { return corrupt_neighbours(1u << 20, -32, 32); }

/* ---- use after free and free-list corruption ----------------------------------------------------- */

/* Enough allocations of the freed block's size to use up its page, so the block is handed out again
 * and whatever free-list link it held is followed. Returns 1 if one of them is `planted`. */
#define REUSE_ROUNDS 4096
static int allocate_through(size_t size, const void *planted) {
  static void *got[REUSE_ROUNDS];
  int hit = 0;
  for (int i = 0; i < REUSE_ROUNDS; i++) {
    got[i] = malloc(size);
    if (got[i] == planted) hit = 1;
  }
  if (hit) return 1;
  for (int i = 0; i < REUSE_ROUNDS; i++) free(got[i]);
  return 0;
}

static int uaf_write_malloc(void) {
  char *p = malloc(64);
  if (!p) return fail("malloc returned NULL");
  free(p);
  target(p);
  memset(opaque(p), 0x41, 64);
  allocate_through(64, NULL);
  return 0;
}

/* Change only the lowest byte of a freed block's first word, as a one-byte overflow from the block
 * below or a stray byte write would: the link moves by 16 bytes, so an allocator that follows it hands
 * out a block that overlaps two others. */
static int uaf_write_1_malloc(void) {
  char *p = malloc(64);
  if (!p) return fail("malloc returned NULL");
  free(p);
  target(p);
  ((volatile unsigned char *)opaque(p))[0] ^= 0x10;
  allocate_through(64, NULL);
  return 0;
}

/* Overwrite a freed block with pointers to a global buffer: an allocator that trusts its free list
 * hands the global out. */
static int freelist_hijack(void) {
  char *p = malloc(64);
  if (!p) return fail("malloc returned NULL");
  free(p);
  target(p);
  uintptr_t *words = opaque(p);
  for (int i = 0; i < 8; i++) words[i] = (uintptr_t)(global_buf + 64);
  if (allocate_through(64, global_buf + 64)) {
    fprintf(stderr, "probe: %s: malloc returned the planted global address\n", probe_name);
    return 3;
  }
  return 0;
}

/* `n` (at most 64) mallocs of `size` without frees: 3 (reported) if one block comes back twice, else 0. */
static int malloc_returns_twice(size_t size, int n) {
  void *got[64];
  for (int i = 0; i < n; i++) {
    got[i] = malloc(size);
    for (int j = 0; j < i; j++)
      if (got[i] != NULL && got[i] == got[j]) {
        fprintf(stderr, "probe: %s: malloc returned %p twice\n", probe_name, got[i]);
        return 3;
      }
  }
  return 0;
}

/* A use-after-free write to the freed block's second word (a reference count, say), then a second free of
 * it, among 64 live blocks: the write hid the block's freed mark from the second free, and the block was
 * handed out twice. */
static int df_after_uaf_write(void) {
  static char *live[64];
  for (int i = 0; i < 64; i++) {
    live[i] = malloc(48);
    if (!live[i]) return fail("malloc returned NULL");
  }
  char *p = live[10], *q = live[11];
  free(p);
  target(p);
  ((volatile long *)opaque(p))[1]--;
  free(q);
  free(p);
  return malloc_returns_twice(48, 4);
}

/* A few bytes written into a freed block's link, no key needed: the difference between two blocks'
 * addresses xored in moves a link stored xor-encoded (as hakmem's hardened build stores it, in the
 * word's low bytes) from one freed block to another, which a range test accepts; malloc then hands the
 * same blocks out again and again. */
static int uaf_link_flip(void) {
  char *b[8];
  for (int i = 0; i < 8; i++) b[i] = malloc(200);
  free(b[6]);
  free(b[4]);
  free(b[5]);
  target(b[4]);
  uintptr_t diff = (uintptr_t)b[6] ^ (uintptr_t)b[5];
  ((volatile uint32_t *)opaque(b[4]))[0] ^= (uint32_t)diff;
  return malloc_returns_twice(200, 64);
}

/* Another thread frees three blocks (a remote list, parked by the owner's next collection while its own
 * list is not empty); a use-after-free write points the list's last link back at its first block, no key
 * needed (the xor of the address into a link that encodes the list's end); malloc+free pairs then run the
 * owner through collections that walk the parked list to its end. */
static char *remote_blocks[3];
static void *free_three(void *arg) {
  for (int i = 0; i < 3; i++) free(remote_blocks[i]);
  return arg;
}

static int remote_list_cycle(void) {
  char *hold[16];
  for (int i = 0; i < 16; i++) hold[i] = malloc(64);
  for (int i = 0; i < 3; i++) remote_blocks[i] = hold[4 + i];
  pthread_t t;
  if (pthread_create(&t, NULL, free_three, NULL) != 0) return fail("pthread_create failed");
  pthread_join(t, NULL);
  target(remote_blocks[0]);
  ((volatile uintptr_t *)opaque(remote_blocks[0]))[0] ^= (uintptr_t)remote_blocks[2];
  for (int i = 0; i < 4 * 4096 + 64; i++) free(opaque(malloc(64)));
  return 0;
}

/* Fresh memory from malloc, read before it is written (a leak of uninitialised memory): it must not
 * carry the encoded free-list link, from which a reader recovers the page's key with two addresses. */
static int fresh_memory_leaks_link(void) {
  void *hold[8];
  for (int i = 0; i < 8; i++) hold[i] = malloc(64);
  for (int i = 0; i < 8; i++) free(hold[i]);
  uintptr_t *p = malloc(64);
  if (!p) return fail("malloc returned NULL");
  if (p[0] != 0) {
    fprintf(stderr, "probe: %s: a fresh block's first word holds %#lx\n", probe_name, (unsigned long)p[0]);
    return 3;
  }
  return 0;
}

/* An off-by-one string terminator: strcpy of a string exactly as long as the usable size writes its NUL
 * one byte past the end, into the canary's lowest byte; 64 blocks so that any canary value is met. */
static int overflow_nul_small(void) {
  char *p[64];
  for (int i = 0; i < 64; i++) {
    p[i] = malloc(56);
    if (!p[i]) return fail("malloc returned NULL");
  }
  for (int i = 0; i < 64; i++) {
    size_t n = malloc_usable_size(p[i]);
    memset(p[i], 'x', n);
    ((volatile char *)opaque(p[i]))[n] = '\0';
  }
  target(p[0]);
  for (int i = 0; i < 64; i++) free(p[i]);
  return 0;
}

static int free_sized_wrong(void) {
  void (*free_sized_fn)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized");
  if (!free_sized_fn) {
    fprintf(stderr, "probe: %s: free_sized not available\n", probe_name);
    return 77;
  }
  char *p = malloc(64);
  if (!p) return fail("malloc returned NULL");
  target(p);
  free_sized_fn(p, 4096);
  return 0;
}

/* ---- requests that must fail cleanly ------------------------------------------------------------- */

static int expect_enomem(const void *p, const char *what) {
  if (p != NULL || errno != ENOMEM) {
    fprintf(stderr, "probe: %s: %s returned %p errno=%d, want NULL/ENOMEM\n", probe_name, what, p, errno);
    return 1;
  }
  return 0;
}

static int huge_malloc(void) {
  static const size_t sizes[] = {SIZE_MAX, SIZE_MAX - 4096, SIZE_MAX / 2 + 1, (size_t)PTRDIFF_MAX,
                                 (size_t)1 << 48};
  int bad = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    errno = 0;
    bad |= expect_enomem(malloc(sizes[i]), "malloc");
    errno = 0;
    bad |= expect_enomem(aligned_alloc(4096, sizes[i] & ~(size_t)4095), "aligned_alloc");
    void *out = &out;
    int rc = posix_memalign(&out, 64, sizes[i]);
    if (rc != ENOMEM || out != &out) bad |= fail("posix_memalign did not fail with ENOMEM untouched");
  }
  char *keep = malloc(100);
  if (!keep) return fail("malloc(100) returned NULL");
  memset(keep, 0x44, 100);
  errno = 0;
  bad |= expect_enomem(realloc(keep, SIZE_MAX - 8), "realloc");
  for (int i = 0; i < 100; i++)
    if (keep[i] != 0x44) return fail("realloc failure damaged the old block");
  free(keep);
  return bad;
}

static int calloc_overflow(void) {
  static const size_t pairs[][2] = {{SIZE_MAX / 2 + 2, 2}, {(size_t)1 << 33, (size_t)1 << 31},
                                    {SIZE_MAX, SIZE_MAX}, {3, SIZE_MAX / 3 + 1}, {65537, 281470681808897}};
  int bad = 0;
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    errno = 0;
    bad |= expect_enomem(calloc(pairs[i][0], pairs[i][1]), "calloc");
    char *keep = malloc(32);
    if (!keep) return fail("malloc(32) returned NULL");
    errno = 0;
    bad |= expect_enomem(reallocarray(keep, pairs[i][0], pairs[i][1]), "reallocarray");
    free(keep);
  }
  return bad;
}

static int zero_size_read(void) {
  unsigned char *p = malloc(0), *q = malloc(0);
  if (!p || !q) return fail("malloc(0) returned NULL");
  if (p == q) return fail("two live malloc(0) blocks share an address");
  size_t n = malloc_usable_size(p);
  unsigned sum = 0;
  for (size_t i = 0; i < n; i++) sum += ((volatile unsigned char *)p)[i];
  memset(p, 0x55, n);
  fprintf(stderr, "probe: %s: usable=%zu sum=%u\n", probe_name, n, sum);
  free(p);
  free(q);
  return 0;
}

struct probe {
  const char *name;
  int (*run)(void);
};

static const struct probe probes[] = {
    {"df_immediate_small", df_immediate_small},
    {"df_immediate_medium", df_immediate_medium},
    {"df_immediate_large", df_immediate_large},
    {"df_intervening", df_intervening},
    {"df_after_allocs", df_after_allocs},
    {"df_after_realloc", df_after_realloc},
    {"df_cross_thread", df_cross_thread},
    {"df_remote_chain", df_remote_chain},
    {"df_after_uaf_write", df_after_uaf_write},
    {"free_stack", free_stack},
    {"free_global", free_global},
    {"free_interior_small", free_interior_small},
    {"free_interior_large", free_interior_large},
    {"realloc_after_free", realloc_after_free},
    {"realloc_after_free_large", realloc_after_free_large},
    {"df_released_large", df_released_large},
    {"df_reused_large", df_reused_large},
    {"df_released_page", df_released_page},
    {"df_released_segment", df_released_segment},
    {"realloc_interior_small", realloc_interior_small},
    {"free_region_start", free_region_start},
    {"free_region_end", free_region_end},
    {"free_never_allocated", free_never_allocated},
    {"free_foreign_mmap", free_foreign_mmap},
    {"free_foreign_mmap_aligned", free_foreign_mmap_aligned},
    {"free_glibc_block", free_glibc_block},
    {"overflow_1_small", overflow_1_small},
    {"overflow_32_small", overflow_32_small},
    {"overflow_1_medium", overflow_1_medium},
    {"overflow_32_medium", overflow_32_medium},
    {"overflow_1_slack", overflow_1_slack},
    {"underflow_1_small", underflow_1_small},
    {"underflow_32_small", underflow_32_small},
    {"overflow_1_large", overflow_1_large},
    {"overflow_32_large", overflow_32_large},
    {"large_header_forged", large_header_forged},
    {"underflow_1_large", underflow_1_large},
    {"underflow_32_large", underflow_32_large},
    {"underflow_4k_large", underflow_4k_large},
    {"uaf_write_malloc", uaf_write_malloc},
    {"uaf_write_1_malloc", uaf_write_1_malloc},
    {"freelist_hijack", freelist_hijack},
    {"uaf_link_flip", uaf_link_flip},
    {"remote_list_cycle", remote_list_cycle},
    {"fresh_memory_leaks_link", fresh_memory_leaks_link},
    {"overflow_nul_small", overflow_nul_small},
    {"free_sized_wrong", free_sized_wrong},
    {"huge_malloc", huge_malloc},
    {"calloc_overflow", calloc_overflow},
    {"zero_size_read", zero_size_read},
};

int main(int argc, char **argv) {
  setvbuf(stderr, NULL, _IONBF, 0);
  size_t count = sizeof probes / sizeof probes[0];
  if (argc == 2 && strcmp(argv[1], "--list") == 0) {
    for (size_t i = 0; i < count; i++) printf("%s\n", probes[i].name);
    return 0;
  }
  for (size_t i = 0; argc == 2 && i < count; i++) {
    if (strcmp(argv[1], probes[i].name) == 0) {
      probe_name = probes[i].name;
      int rc = probes[i].run();
      fprintf(stderr, "probe: %s: finished rc=%d\n", probe_name, rc);
      return rc;
    }
  }
  fprintf(stderr, "usage: %s --list | PROBE\n", argv[0]);
  return 2;
}
