/* process_memory.h — what the memory tests read of their own process (resident memory, threads), the
 * bursts of large and small blocks they free, and their sleeps (test_reclaim.c, test_one_thread.c,
 * thread_footprint.c, test_learned_delay.c, test_region_upkeep.c).
 * Header-only: static inline functions, since an includer may use only some. The readers allocate
 * nothing. */
#ifndef PROCESS_MEMORY_H
#define PROCESS_MEMORY_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Sleep `ms` milliseconds, the whole of them (resumed after a signal). */
static inline void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0) {
  }
}

static inline long rss_kib(void) {
  /* thread-self: once the main thread has left through pthread_exit, /proc/self/statm reads zeroes; no
   * stdio, which would allocate (heapless-left must not give its thread a heap) */
  char text[128];
  int fd = open("/proc/thread-self/statm", O_RDONLY);
  ssize_t n = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
  if (fd >= 0) close(fd);
  long size = 0, resident = 0;
  if (n <= 0) return -1;
  text[n] = '\0';
  if (sscanf(text, "%ld %ld", &size, &resident) != 2) return -1;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Threads in the process, from the Threads: line of /proc/thread-self/status; -1 if unreadable. Allocates
 * nothing: an allocation could start hakmem's purger while a test watches whether something else does. */
static inline int thread_count(void) {
  char text[4096];
  int fd = open("/proc/thread-self/status", O_RDONLY);
  ssize_t n = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
  if (fd >= 0) close(fd);
  if (n <= 0) return -1;
  text[n] = '\0';
  const char *line = strstr(text, "\nThreads:");
  return line != NULL ? atoi(line + 9) : -1;
}

/* Sleep in steps of 50 ms until RSS is at most `limit_kib` or `max_ms` passed; the RSS reached. */
static inline long sleep_until_rss(long limit_kib, int max_ms) {
  long rss = rss_kib();
  for (int waited = 0; rss > limit_kib && waited < max_ms; waited += 50) {
    struct timespec step = {0, 50 * 1000000L};
    nanosleep(&step, NULL);
    rss = rss_kib();
  }
  return rss;
}

/* A burst of large blocks (245 MiB), all live together, then all freed; returns 0 on success. */
static inline int large_burst(void) {
  char *p[10];
  for (int i = 0; i < 10; i++) {
    size_t size = (size_t)(20 + i) << 20;
    p[i] = malloc(size);
    if (p[i] == NULL) return fprintf(stderr, "FAIL: malloc of %zu bytes\n", size), 1;
    memset(p[i], 1, size);
  }
  for (int i = 0; i < 10; i++) free(p[i]);
  return 0;
}

/* SMALL_BURST blocks of 1000 bytes, written, then freed (in a shuffled order if `shuffled`: pages then
 * empty all over the heap's segments at once, not one segment after another); returns 0 on success. */
enum { SMALL_BURST = 200000 };
static inline void shuffle(char **items, int n);
static inline int small_burst(bool shuffled) {
  char **small = malloc(SMALL_BURST * sizeof *small);
  if (small == NULL) return fprintf(stderr, "FAIL: malloc of the pointer array\n"), 1;
  for (int i = 0; i < SMALL_BURST; i++) {
    small[i] = malloc(1000);
    if (small[i] == NULL) return fprintf(stderr, "FAIL: malloc(1000)\n"), 1;
    memset(small[i], 2, 1000);
  }
  if (shuffled) shuffle(small, SMALL_BURST);
  for (int i = 0; i < SMALL_BURST; i++) free(small[i]);
  free(small);
  return 0;
}

/* Shuffle `n` pointers in a fixed pseudo-random order (xorshift64, the same seed every run). */
static inline void shuffle(char **items, int n) {
  uint64_t x = 88172645463325252ull;
  for (int i = n - 1; i > 0; i--) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    int j = (int)(x % (uint64_t)(i + 1));
    char *tmp = items[i];
    items[i] = items[j];
    items[j] = tmp;
  }
}

#endif
