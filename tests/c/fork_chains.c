/* fork_chains.c — fork() while other threads free blocks that a third thread allocated. A producer
 * thread allocates small blocks (64-832 bytes) into a shared table without pause; two other threads take
 * them out and free them, so their frees are remote and wait in chains (src/page.c, default builds). The
 * main thread forks over and over; each child frees and allocates a little and exits. A child of a
 * thread caught in the middle of a chain's update sent the half-written chain on that thread's behalf:
 * "double free detected of 0x0", or a page's remote list with a wrong count (a review: 14 children of
 * 3000 aborted; 23 of 2000 here). The parent checks that every child exited 0.
 * Usage: fork_chains [FORKS] (default 2000). Prints "fork_chains: N forks, F failed". */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SLOTS 4096

static _Atomic(uintptr_t) table[SLOTS];
static atomic_bool stop;

static uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void *produce(void *arg) {
  uint64_t rng = 88172645463325252ull;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    size_t slot = next_rand(&rng) % SLOTS, size = 64 + next_rand(&rng) % 769;
    char *p = malloc(size);
    if (p == NULL) abort();
    p[0] = 1;
    uintptr_t old = atomic_exchange_explicit(&table[slot], (uintptr_t)p, memory_order_acq_rel);
    if (old != 0) free((void *)old); /* the producer's own free: not remote */
  }
  return arg;
}

static void *consume(void *arg) {
  uint64_t rng = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    uintptr_t p = atomic_exchange_explicit(&table[next_rand(&rng) % SLOTS], 0, memory_order_acq_rel);
    if (p != 0) free((void *)p);
  }
  return arg;
}

int main(int argc, char **argv) {
  int forks = argc > 1 ? atoi(argv[1]) : 2000;
  if (forks < 1) {
    fprintf(stderr, "usage: fork_chains [FORKS]\n");
    return 2;
  }
  pthread_t producer, consumers[2];
  if (pthread_create(&producer, NULL, produce, NULL) != 0) return fprintf(stderr, "FAIL: pthread_create\n"), 1;
  for (uintptr_t i = 0; i < 2; i++)
    if (pthread_create(&consumers[i], NULL, consume, (void *)(i + 1)) != 0)
      return fprintf(stderr, "FAIL: pthread_create\n"), 1;
  int failed = 0;
  for (int i = 0; i < forks; i++) {
    pid_t pid = fork();
    if (pid < 0) return fprintf(stderr, "FAIL: fork\n"), 1;
    if (pid == 0) {
      alarm(20); /* a deadlocked allocator ends the child with SIGALRM */
      for (int k = 0; k < 64; k++) {
        uintptr_t p = atomic_exchange_explicit(&table[k * 61 % SLOTS], 0, memory_order_relaxed);
        if (p != 0) free((void *)p);
        free(malloc(64 + (size_t)k * 12));
      }
      _exit(0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      if (failed < 5) fprintf(stderr, "child %d: status 0x%x\n", i, status);
      failed++;
    }
  }
  atomic_store(&stop, true);
  pthread_join(producer, NULL);
  for (int i = 0; i < 2; i++) pthread_join(consumers[i], NULL);
  printf("fork_chains: %d forks, %d failed\n", forks, failed);
  return failed != 0;
}
