/* storm_threads.c — a thread storm: thousands of short-lived threads, run in waves, allocate blocks of
 * every tier, swap them through a shared table so most blocks are freed by a thread other than the one
 * that allocated them (often after that thread has exited), and check each block's contents on free.
 * At the end the table is drained, free memory is handed back (hak_collect(true) found with dlsym, else
 * glibc's malloc_trim(0)) and the resident set is compared with the one at the start: it must be back
 * within max(24 MiB, 15% of the growth at the peak). Prints the RSS numbers.
 * Usage: storm_threads [THREADS [WAVE]] (default 6000 threads, 32 per wave). Run by tests/test_robust.py. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TABLE 8192
#define OPS_PER_THREAD 64
#define MIB (1024.0 * 1024.0)

static _Atomic(uintptr_t) table[TABLE];
static atomic_long bad_blocks;
static atomic_long null_blocks;

static uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static size_t pick_size(uint64_t *rng) {
  uint64_t r = next_rand(rng) % 100;
  if (r < 70) return 16 + next_rand(rng) % 497;           /* small */
  if (r < 97) return 513 + next_rand(rng) % 32256;        /* medium */
  if (r < 99) return 65536 + next_rand(rng) % 458752;     /* upper medium */
  return 600000 + next_rand(rng) % 600000;                /* large */
}

/* A block records its size in its first word and a check byte derived from it at each end. */
static void *make_block(size_t size) {
  unsigned char *p = malloc(size);
  if (!p) {
    atomic_fetch_add(&null_blocks, 1);
    return NULL;
  }
  memcpy(p, &size, sizeof size);
  p[sizeof size] = (unsigned char)(size * 31 + 7);
  p[size - 1] = (unsigned char)(size * 17 + 3);
  return p;
}

static void drop_block(void *block) {
  unsigned char *p = block;
  size_t size;
  memcpy(&size, p, sizeof size);
  if (p[sizeof size] != (unsigned char)(size * 31 + 7) || p[size - 1] != (unsigned char)(size * 17 + 3))
    atomic_fetch_add(&bad_blocks, 1);
  free(p);
}

static void *storm_thread(void *arg) {
  uint64_t rng = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;
  void *local[8] = {0};
  for (int op = 0; op < OPS_PER_THREAD; op++) {
    void *p = make_block(pick_size(&rng));
    if (!p) continue;
    if (op % 4 == 3) { /* some blocks live and die in this thread */
      int k = (int)(next_rand(&rng) % 8);
      if (local[k]) drop_block(local[k]);
      local[k] = p;
      continue;
    }
    uintptr_t old = atomic_exchange(&table[next_rand(&rng) % TABLE], (uintptr_t)p);
    if (old) drop_block((void *)old);
  }
  for (int k = 0; k < 8; k++)
    if (local[k]) drop_block(local[k]);
  return NULL;
}

static double rss_mib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
  if (f) fclose(f);
  return kb / 1024.0;
}

static void run_wave(int first_id, int count) {
  pthread_t tids[count];
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 128 * 1024);
  for (int i = 0; i < count; i++)
    if (pthread_create(&tids[i], &attr, storm_thread, (void *)(uintptr_t)(first_id + i)) != 0) {
      fprintf(stderr, "pthread_create failed\n");
      exit(2);
    }
  for (int i = 0; i < count; i++) pthread_join(tids[i], NULL);
  pthread_attr_destroy(&attr);
}

static void drain_table(void) {
  for (int i = 0; i < TABLE; i++) {
    uintptr_t old = atomic_exchange(&table[i], 0);
    if (old) drop_block((void *)old);
  }
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 6000;
  int wave = argc > 2 ? atoi(argv[2]) : 32;
  void (*collect)(bool) = (void (*)(bool))dlsym(RTLD_DEFAULT, "hak_collect");
  printf("collector: %s\n", collect ? "hak_collect(true)" : "malloc_trim(0)");

  run_wave(-wave, wave); /* warm-up: thread machinery and allocator metadata exist from here on */
  drain_table();
  if (collect) collect(true); else malloc_trim(0);
  double start = rss_mib(), peak = start;

  for (int done = 0; done < threads; done += wave) {
    run_wave(done, threads - done < wave ? threads - done : wave);
    double now = rss_mib();
    if (now > peak) peak = now;
  }
  drain_table();
  if (collect) collect(true); else malloc_trim(0);
  double end = rss_mib();

  double allowed = (peak - start) * 0.15 > 24.0 ? (peak - start) * 0.15 : 24.0;
  printf("threads=%d wave=%d rss_start=%.1f MiB rss_peak=%.1f MiB rss_end=%.1f MiB allowed_growth=%.1f MiB\n",
         threads, wave, start, peak, end, allowed);
  long bad = atomic_load(&bad_blocks), nulls = atomic_load(&null_blocks);
  printf("damaged blocks=%ld failed allocations=%ld\n", bad, nulls);
  if (bad || nulls) return 1;
  if (end - start > allowed) {
    printf("FAIL: resident memory did not return (%.1f MiB above the start)\n", end - start);
    return 1;
  }
  printf("ok\n");
  return 0;
}
