/* secure.c — hardened builds (HAK_SECURE=1, libhakmem-secure.so): the keys of each page, derived from
 * two secrets read once from the kernel, and the error reports for a free that failed its checks. The
 * checks themselves are inline in alloc.h. Default builds compile this file empty. */
#include "alloc.h"

#if HAK_SECURE
#include <sys/random.h>
#include <time.h>

/* Independent secrets for the two kinds of key: a page's free-list key mixes the heap's generator with
 * the first, its canary key with the second, so a leaked canary (an over-read of a block's end) tells
 * nothing about free-list keys, nor the other way round. */
static uint64_t key_secret[2];

/* A bijective 64-bit finalizer (splitmix64's): every input bit affects every output bit. */
static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static void read_secrets(void) {
  if (getrandom(key_secret, sizeof key_secret, GRND_NONBLOCK) == (ssize_t)sizeof key_secret) return;
  /* no entropy yet (early boot) or no getrandom: the clock, the cycle counter and ASLR'd addresses */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)__builtin_ia32_rdtsc();
  key_secret[0] = mix64(seed ^ (uintptr_t)&ts);
  key_secret[1] = mix64(key_secret[0] ^ (uintptr_t)&key_secret ^ (uint64_t)__builtin_ia32_rdtsc());
}

void hak_secure_init(void) {
  read_secrets();
  hak_os_randomize_hints(mix64(key_secret[0] ^ (key_secret[1] << 1)));
}

void hak_secure_page_keys(hak_heap *heap, uintptr_t *key, uintptr_t *canary_key) {
  heap->random ^= heap->random << 13; /* xorshift64: a new input for every page */
  heap->random ^= heap->random >> 7;
  heap->random ^= heap->random << 17;
  *key = mix64(heap->random ^ key_secret[0]) | 1;
  /* A nonzero low nibble: blocks are 16-byte aligned, so every canary's low byte, the first byte past a
   * block's usable end, is then nonzero, and an off-by-one NUL (a string's terminator) always changes it
   * (a review: with a low byte of 0, a quarter of a page's blocks missed it) */
  *canary_key = mix64(heap->random ^ key_secret[1]) | 0x8;
}

/* A large block's canary mixes its address with the canary secret and xors a salt kept in its header:
 * a canary read past a block's end (an over-read, or the stale word a growing realloc would leave)
 * then tells nothing about the secret or any other block's canary, and an underflow that reaches back
 * to the header cannot make the salt match without knowing the secret. */
static _Atomic uint64_t large_salt_count;

uintptr_t hak_secure_large_salt(void) {
  uint64_t n = atomic_fetch_add_explicit(&large_salt_count, 1, memory_order_relaxed);
  return mix64(n ^ key_secret[0] ^ 0x6c61726765ull);
}

uintptr_t hak_secure_large_canary(const void *user, uintptr_t salt) {
  /* the low byte is the first one past the block (an off-by-one NUL), the high byte the last one before
   * it (an underflow by one): both nonzero, as for the small canaries */
  return (mix64((uintptr_t)user ^ key_secret[1]) ^ salt) | 0x8000000000000008ull;
}

/* What the checks of a free (`freeing`) or of realloc / a usable-size call found wrong with `b`. */
static __attribute__((noreturn)) void report_bad_block(const hak_page *page, hak_block *b, bool freeing) {
  const char *not_ours = freeing ? "free of a pointer that is not an allocated block:"
                                 : "realloc or usable size of a pointer that is not an allocated block:";
  uintptr_t off = (uintptr_t)b - (uintptr_t)page->start;
  if (page->slice_count == 0) hak_fatal_unknown(b, freeing, not_ours);
  if (off >= page->span) hak_fatal(not_ours, b, page->size_class);
  if (!hak_page_is_block_start(page, (uintptr_t)b))
    hak_fatal(freeing ? "free of an interior pointer" : "realloc or usable size of an interior pointer", b,
              page->size_class);
  if (off >= (uintptr_t)page->capacity * page->block_size) /* not carved yet: malloc never returned it */
    hak_fatal(not_ours, b, page->size_class);
  /* every block of a page the collection gave back was freed (orphaned pages, segment_purge.c): its purge
   * cleared the canaries too (a review: reported as an overflow) */
  if (!hak_page_given_back(page) && *hak_canary_word(page, b) != hak_canary(page, b))
    hak_fatal("heap overflow (canary overwritten) in block", b, page->size_class);
  hak_fatal(freeing ? "double free (or free of a block not allocated) detected of"
                    : "realloc or usable size of a freed block (use after free) at",
            b, page->size_class);
}

void hak_secure_bad_free(const hak_page *page, hak_block *b) { report_bad_block(page, b, true); }

void hak_secure_bad_use(const hak_page *page, const void *p) { report_bad_block(page, (hak_block *)p, false); }
#endif
