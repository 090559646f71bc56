/* test_large_last.c — a thread's last freed large block (up to 4 MiB of mapping), which waits in the
 * thread's heap for its next large malloc instead of the large cache (src/large.c, LAST_MAX):
 *   reuse:  a freed 2 MiB block serves the next 2 MiB malloc and calloc (which reads zeroes) of the
 *           thread, counted as cache hits; a request it does not fit leaves it to the cache, which serves
 *           the next 2 MiB request with it; a 3 MiB block takes its place; a double free of the block
 *           while it waits is still reported (the `double-free` case);
 *   trim:   malloc_trim gives the waiting block's pages back at once;
 *   exit:   a thread that freed a 3 MiB block and exited left it to the cache: the main thread's next
 *           3 MiB malloc gets the same mapping;
 *   idle:   a thread that freed a written 3.5 MiB block and then waits, with the purger running (40 MiB
 *           live), gets its pages back within a few seconds (the purger's sweeps and passes take it);
 *   idle-unswept: with no purger (HAKMEM_BACKGROUND_PURGE=0), four threads that each freed a written
 *           3.5 MiB block and then wait get their pages back through the main thread's calls;
 *   lone:   a single-threaded program that frees a written 3 MiB block and then allocates small blocks
 *           gets its pages back through its maintenance passes (hak_collect(false) runs one);
 *   lone-hot: a single-threaded program that freed a written 24 MiB block (to the cache) and then only
 *           loops on 2 MiB blocks (each one the thread's last) gets the 24 MiB back after the delay;
 *   fork:   a child forked while the block waits gets it for its own 2 MiB malloc, as the parent does;
 *   fork-purger: a child forked while 192 MiB freed by its parent wait for the purge delay, and whose
 *           large mallocs all reuse the block it inherited in its thread's slot, still starts its
 *           purger and gives the 192 MiB back;
 *   double-free: frees a waiting block twice; must abort with the double-free report.
 * Needs hakmem (hak_stats_get_sized through dlsym); on another allocator it prints "skip" and exits 77.
 * Usage: test_large_last reuse|trim|exit|idle|idle-unswept|lone|lone-hot|fork|fork-purger|double-free */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hakmem.h"
#include "process_memory.h"

#define MIB ((size_t)1 << 20)

static int (*stats_get_sized)(struct hak_stats *, size_t);

static uint64_t hits(void) {
  struct hak_stats s;
  stats_get_sized(&s, sizeof s);
  return s.large_cache_hits;
}

static int fail(const char *what) {
  fprintf(stderr, "FAIL %s\n", what);
  return 1;
}

static int check_reuse(void) {
  char *p = malloc(2 * MIB);
  if (p == NULL) return fail("reuse: malloc(2 MiB) failed");
  memset(p, 0xab, 2 * MIB);
  free(p);
  uint64_t before = hits();
  char *q = malloc(2 * MIB);
  if (q != p) return fail("reuse: the next 2 MiB malloc did not get the freed block");
  if (hits() != before + 1) return fail("reuse: the reuse was not counted as a cache hit");
  memset(q, 0xcd, 2 * MIB);
  free(q);
  char *c = calloc(1, 2 * MIB);
  if (c != p) return fail("reuse: the next 2 MiB calloc did not get the freed block");
  for (size_t i = 0; i < 2 * MIB; i++)
    if (c[i] != 0) return fprintf(stderr, "FAIL reuse: calloc byte %zu reads %d\n", i, c[i]), 1;
  free(c);
  char *big = malloc(8 * MIB); /* the waiting block does not fit: it goes to the cache */
  if (big == NULL || big == p) return fail("reuse: an 8 MiB malloc took the 2 MiB block");
  memset(big, 1, 8 * MIB);
  char *again = malloc(2 * MIB);
  if (again != p) return fail("reuse: the cache did not serve the next 2 MiB malloc with the block");
  free(big); /* 8 MiB: past the slot's bound, cached */
  char *three = malloc(3 * MIB);
  if (three == NULL) return fail("reuse: malloc(3 MiB) failed");
  free(again);
  free(three); /* takes the slot; the 2 MiB block goes to the cache */
  char *t2 = malloc(3 * MIB), *t1 = malloc(2 * MIB);
  if (t2 != three || t1 != p) return fail("reuse: the blocks did not come back from the slot and the cache");
  free(t1);
  free(t2);
  printf("reuse: the 2 MiB block came back to malloc, calloc and the cache; the 3 MiB one took its place\n");
  return 0;
}

static int check_trim(void) {
  char *p = malloc(3 * MIB);
  if (p == NULL) return fail("trim: malloc(3 MiB) failed");
  memset(p, 1, 3 * MIB);
  long before = rss_kib();
  free(p);
  malloc_trim(0);
  long after = rss_kib();
  printf("trim: rss %ld -> %ld KiB after free and malloc_trim\n", before, after);
  if (before - after < 2560) return fail("trim: malloc_trim kept the waiting block's pages");
  return 0;
}

static void *exit_block;
static void *free_and_exit(void *arg) {
  char *p = malloc(3 * MIB);
  if (p != NULL) memset(p, 1, 3 * MIB);
  exit_block = p;
  free(p);
  return NULL;
}

static int check_exit(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, free_and_exit, NULL) != 0 || pthread_join(t, NULL) != 0)
    return fail("exit: thread failed");
  if (exit_block == NULL) return fail("exit: the thread's malloc failed");
  uint64_t before = hits();
  char *q = malloc(3 * MIB);
  printf("exit: thread's block %p, main's malloc %p\n", exit_block, (void *)q);
  if (q != exit_block || hits() != before + 1) return fail("exit: the exited thread's block did not reach the cache");
  free(q);
  return 0;
}

static sem_t freed, done;
static void *wait_done(void *arg) {
  sem_wait(&done);
  return arg;
}
static long idle_rss_freed;
static void *free_and_wait(void *arg) {
  size_t size = 3 * MIB + MIB / 2;
  char *p = malloc(size);
  if (p != NULL) memset(p, 1, size);
  free(p);
  idle_rss_freed = rss_kib();
  sem_post(&freed);
  sem_wait(&done); /* idle: no call into the allocator until the main thread is done */
  return p;
}

static int check_idle(void) {
  enum { LIVE = 40 };
  char *live[LIVE]; /* past the purger's start size */
  for (int i = 0; i < LIVE; i++) {
    live[i] = malloc(MIB - 4096);
    if (live[i] == NULL) return fail("idle: malloc failed");
    memset(live[i], 1, MIB - 4096);
  }
  sem_init(&freed, 0, 0);
  sem_init(&done, 0, 0);
  pthread_t t;
  if (pthread_create(&t, NULL, free_and_wait, NULL) != 0) return fail("idle: thread failed");
  sem_wait(&freed);
  long now = idle_rss_freed;
  int waited = 0;
  for (; waited < 200 && idle_rss_freed - now < 3072; waited++) {
    sleep_ms(100); /* no allocator call: only the purger can give the block back */
    now = rss_kib();
  }
  printf("idle: rss %ld KiB after the free, %ld KiB %.1f s later\n", idle_rss_freed, now, waited / 10.0);
  sem_post(&done);
  pthread_join(t, NULL);
  for (int i = 0; i < LIVE; i++) free(live[i]);
  if (idle_rss_freed - now < 3072) return fail("idle: the idle thread's last block stayed resident for 20 s");
  return 0;
}

static int check_lone(void) {
  void (*collect)(bool) = (void (*)(bool))dlsym(RTLD_DEFAULT, "hak_collect");
  static void *small[4096];
  if (collect == NULL) return fail("lone: no hak_collect");
  for (int i = 0; i < 4096; i++) small[i] = malloc(200 + (size_t)(i % 7) * 100); /* their pages resident */
  char *p = malloc(3 * MIB);
  if (p == NULL) return fail("lone: malloc(3 MiB) failed");
  memset(p, 1, 3 * MIB);
  free(p);
  long freed_at = rss_kib(), now = freed_at;
  int rounds = 0;
  for (; rounds < 200 && freed_at - now < 2560; rounds++) {
    for (int i = 0; i < 4096; i++) free(small[i]);
    for (int i = 0; i < 4096; i++) small[i] = malloc(200 + (size_t)(i % 7) * 100);
    collect(false); /* a maintenance pass, as the heap's slow paths run them */
    sleep_ms(10);
    now = rss_kib();
  }
  for (int i = 0; i < 4096; i++) free(small[i]);
  printf("lone: rss %ld KiB after the free, %ld KiB after %d rounds of small blocks and passes\n", freed_at, now,
         rounds);
  if (freed_at - now < 2560) return fail("lone: the last large block stayed resident through the passes");
  return 0;
}

static int check_lone_hot(void) {
  char *last = malloc(2 * MIB);
  char *big = malloc(24 * MIB); /* under the lone program's trims' first bound (32 MiB): only its deadline */
  if (last == NULL || big == NULL) return fail("lone-hot: malloc failed");
  memset(big, 1, 24 * MIB);
  free(last); /* the thread's last block: the loop below reuses it and never asks the cache */
  free(big);  /* to the cache: past the slot's bound */
  long freed_at = rss_kib(), now = freed_at;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long ms = 0;
  while (ms < 3000 && freed_at - now < 16 * 1024) {
    for (int i = 0; i < 1000; i++) { /* pairs of the thread's last block */
      char *p = malloc(2 * MIB);
      if (p == NULL) return fail("lone-hot: malloc(2 MiB) failed");
      p[0] = 1;
      free(p);
    }
    now = rss_kib();
    clock_gettime(CLOCK_MONOTONIC, &t);
    ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
  }
  printf("lone-hot: rss %ld KiB after freeing 24 MiB, %ld KiB after %ld ms of 2 MiB pairs\n", freed_at, now, ms);
  if (freed_at - now < 16 * 1024) return fail("lone-hot: the freed 24 MiB stayed resident while 2 MiB pairs ran");
  return 0;
}

static int check_idle_unswept(void) {
  enum { WORKERS = 4 };
  sem_init(&freed, 0, 0);
  sem_init(&done, 0, 0);
  pthread_t t[WORKERS];
  for (int i = 0; i < WORKERS; i++) { /* one after the other: none reuses another's block */
    if (pthread_create(&t[i], NULL, free_and_wait, NULL) != 0) return fail("idle-unswept: thread failed");
    sem_wait(&freed);
  }
  long freed_at = rss_kib(), now = freed_at;
  struct timespec t0, tn;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long ms = 0;
  static void *small[1000];
  while (ms < 5000 && freed_at - now < WORKERS * 3 * 1024) { /* the main thread works on */
    for (int i = 0; i < 1000; i++) small[i] = malloc(16 + (size_t)(i % 50) * 16);
    for (int i = 0; i < 1000; i++) free(small[i]);
    char *big = malloc(8 * MIB);
    if (big == NULL) return fail("idle-unswept: malloc(8 MiB) failed");
    big[0] = 1;
    free(big);
    sleep_ms(1);
    now = rss_kib();
    clock_gettime(CLOCK_MONOTONIC, &tn);
    ms = (tn.tv_sec - t0.tv_sec) * 1000 + (tn.tv_nsec - t0.tv_nsec) / 1000000;
  }
  printf("idle-unswept: rss %ld KiB after %d idle threads' frees, %ld KiB after %ld ms of the main thread's calls\n",
         freed_at, WORKERS, now, ms);
  for (int i = 0; i < WORKERS; i++) sem_post(&done);
  for (int i = 0; i < WORKERS; i++) pthread_join(t[i], NULL);
  if (freed_at - now < WORKERS * 3 * 1024) return fail("idle-unswept: the idle threads' last blocks stayed resident");
  return 0;
}

static int check_fork_purger(void) {
  enum { BLOCKS = 3072 };
  sem_init(&done, 0, 0);
  pthread_t t;
  if (pthread_create(&t, NULL, wait_done, NULL) != 0) return fail("fork-purger: thread failed");
  char *live = malloc(40 * MIB); /* past the purger's start size */
  static char *b[BLOCKS];
  if (live == NULL) return fail("fork-purger: malloc failed");
  memset(live, 1, 40 * MIB);
  for (int i = 0; i < BLOCKS; i++) {
    b[i] = malloc(64 << 10);
    if (b[i] == NULL) return fail("fork-purger: malloc failed");
    memset(b[i], 1, 64 << 10);
  }
  for (int i = 0; i < BLOCKS; i++) free(b[i]); /* 192 MiB waiting for the purge delay */
  char *q = malloc(2 * MIB);
  if (q == NULL) return fail("fork-purger: malloc failed");
  memset(q, 1, 2 * MIB);
  free(q); /* the thread's last block: the child's mallocs below all reuse it */
  fflush(NULL);
  pid_t child = fork();
  if (child < 0) return fail("fork-purger: fork failed");
  if (child == 0) {
    long start = rss_kib(), now = start;
    for (int round = 0; round < 500 && start - now < 128 * 1024; round++) {
      for (int i = 0; i < 10; i++) {
        char *p = malloc(2 * MIB);
        if (p == NULL) _exit(3);
        p[0] = 1;
        free(p);
      }
      sleep_ms(10);
      now = rss_kib();
    }
    char line[160];
    int n = snprintf(line, sizeof line, "fork-purger: child's rss %ld KiB after the fork, %ld KiB later\n", start, now);
    if (write(1, line, (size_t)n) != n) _exit(4);
    _exit(start - now >= 128 * 1024 ? 0 : 5);
  }
  int status = 0;
  waitpid(child, &status, 0);
  sem_post(&done);
  pthread_join(t, NULL);
  free(live);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return fail("fork-purger: the child kept what the parent had freed (no purger of its own)");
  return 0;
}

static int check_fork(void) {
  char *p = malloc(2 * MIB);
  if (p == NULL) return fail("fork: malloc failed");
  memset(p, 1, 2 * MIB);
  free(p);
  fflush(NULL);
  pid_t child = fork();
  if (child < 0) return fail("fork: fork failed");
  if (child == 0) {
    char *q = malloc(2 * MIB);
    if (q != p) _exit(3);
    memset(q, 2, 2 * MIB);
    free(q);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  char *q = malloc(2 * MIB);
  printf("fork: child status %d, parent's malloc %s\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
         q == p ? "reused the block" : "did not reuse the block");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return fail("fork: the child did not get the block");
  if (q != p) return fail("fork: the parent did not get the block");
  for (size_t i = 0; i < 2 * MIB; i += 4096)
    if (q[i] != 1) return fail("fork: the child's writes reached the parent's block");
  free(q);
  return 0;
}

static int check_double_free(void) {
  char *p = malloc(2 * MIB);
  if (p == NULL) return fail("double-free: malloc failed");
  free(p);
  printf("double-free: freeing %p again\n", (void *)p);
  fflush(stdout);
  free(p);
  return fail("double-free: the second free returned");
}

int main(int argc, char **argv) {
  stats_get_sized = (int (*)(struct hak_stats *, size_t))dlsym(RTLD_DEFAULT, "hak_stats_get_sized");
  if (stats_get_sized == NULL) {
    printf("skip: not running on hakmem\n");
    return 77;
  }
  const char *c = argc > 1 ? argv[1] : "";
  if (!strcmp(c, "reuse")) return check_reuse();
  if (!strcmp(c, "trim")) return check_trim();
  if (!strcmp(c, "exit")) return check_exit();
  if (!strcmp(c, "idle")) return check_idle();
  if (!strcmp(c, "lone")) return check_lone();
  if (!strcmp(c, "lone-hot")) return check_lone_hot();
  if (!strcmp(c, "fork")) return check_fork();
  if (!strcmp(c, "idle-unswept")) return check_idle_unswept();
  if (!strcmp(c, "fork-purger")) return check_fork_purger();
  if (!strcmp(c, "double-free")) return check_double_free();
  fprintf(stderr, "usage: test_large_last reuse|trim|exit|idle|idle-unswept|lone|lone-hot|fork|fork-purger|double-free\n");
  return 2;
}
