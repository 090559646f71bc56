/* tcheck.h — tiny check/report helpers shared by the C test programs in tests/c (owner: tests suite).
 * Every check prints file:line, what was checked, expected and got; tc_finish() gives the exit code. */
#ifndef TCHECK_H
#define TCHECK_H

#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned long tc_checks, tc_failures;

static void tc_fail(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void tc_fail(const char *file, int line, const char *cond, const char *fmt, ...) {
  va_list ap;
  tc_failures++;
  fprintf(stderr, "%s:%d: FAIL: (%s) ", file, line, cond);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  fflush(stderr);
  if (tc_failures >= 50) {
    fprintf(stderr, "too many failures, giving up\n");
    _exit(1);
  }
}

/* A check that records a failure and goes on. */
#define CHECK(cond, ...)                                                  \
  do {                                                                    \
    tc_checks++;                                                          \
    if (!(cond)) tc_fail(__FILE__, __LINE__, #cond, __VA_ARGS__); \
  } while (0)

/* A check after which going on makes no sense (e.g. a NULL block): exits at once. */
#define REQUIRE(cond, ...)                                                \
  do {                                                                    \
    tc_checks++;                                                          \
    if (!(cond)) {                                                        \
      tc_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);            \
      fprintf(stderr, "fatal check failed, stopping\n");                  \
      _exit(1);                                                           \
    }                                                                     \
  } while (0)

#define CHECK_EQ(got, want, what)                                                               \
  do {                                                                                          \
    unsigned long long g_ = (unsigned long long)(got), w_ = (unsigned long long)(want);         \
    tc_checks++;                                                                                \
    if (g_ != w_) tc_fail(__FILE__, __LINE__, #got, "%s: expected %llu (%#llx), got %llu (%#llx)", \
                          (what), w_, w_, g_, g_);                                              \
  } while (0)

/* Print the section being checked, so a failure's context is in the output. */
static inline void tc_section(const char *name) {
  printf("== %s\n", name);
  fflush(stdout);
}

static inline int tc_finish(const char *prog) {
  printf("%s: %lu checks, %lu failed\n", prog, tc_checks, tc_failures);
  fflush(stdout);
  return tc_failures ? 1 : 0;
}

/* True when hakmem is the allocator of this process (linked or preloaded). */
static inline int tc_hakmem_active(void) { return dlsym(RTLD_DEFAULT, "hak_malloc") != NULL; }

/* Resident set size in bytes, from /proc/self/statm. */
static inline size_t tc_rss_bytes(void) {
  unsigned long size = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  if (fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
  fclose(f);
  return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* Byte pattern for offset i of a block identified by seed. */
static inline unsigned char tc_pat(uint64_t seed, size_t i) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + i;
  x ^= x >> 29;
  return (unsigned char)(x * 0xBF58476D1CE4E5B9ull >> 56);
}

static inline void tc_fill(void *p, size_t n, uint64_t seed) {
  unsigned char *b = (unsigned char *)p;
  for (size_t i = 0; i < n; i++) b[i] = tc_pat(seed, i);
}

/* Offset of the first byte that differs from the pattern, or (size_t)-1 if all match. */
static inline size_t tc_verify(const void *p, size_t n, uint64_t seed) {
  const unsigned char *b = (const unsigned char *)p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != tc_pat(seed, i)) return i;
  return (size_t)-1;
}

#endif
