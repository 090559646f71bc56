/* fork_frozen_chain.c — a forked child sends the remote-free chains of the threads the fork did not copy,
 * and one of them frees the last live blocks of an exited thread's page (src/page.c, src/init.c).
 *   A worker allocates 40 blocks of 48 bytes and waits; a holder thread frees three of them while the
 *   worker lives, so they wait in the holder's chain, and then blocks for good; the worker exits (its
 *   page keeps 40 blocks live as an orphan target); the main thread frees the other 37 (too few to take
 *   the segment over) with 48 MiB of large blocks live (over the purger's start size) and forks. The
 *   child's fork handler sends the holder's chain, which empties the page and asks for the purger: it
 *   waited on the purger's lock, which the parent's fork handler had taken and the child had not made
 *   its own yet (a review: the child hung there for good, every time). The parent gives each child
 *   10 s to print and exit 0; ROUNDS rounds (default 3).
 * Runs on any allocator. Usage: fork_frozen_chain [ROUNDS] */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "process_memory.h"

enum { BLOCKS = 40, HELD_BY_CHAIN = 3, BIG = 48 };

static void *blocks[BLOCKS];
static pthread_mutex_t step_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t step_changed = PTHREAD_COND_INITIALIZER;
static int step;

static void wait_for_step(int s) {
  pthread_mutex_lock(&step_lock);
  while (step < s) pthread_cond_wait(&step_changed, &step_lock);
  pthread_mutex_unlock(&step_lock);
}

static void go_to_step(int s) {
  pthread_mutex_lock(&step_lock);
  step = s;
  pthread_cond_broadcast(&step_changed);
  pthread_mutex_unlock(&step_lock);
}

static void *worker(void *arg) {
  int base = *(int *)arg;
  for (int i = 0; i < BLOCKS; i++) {
    blocks[i] = malloc(48);
    if (blocks[i] == NULL) return NULL;
    memset(blocks[i], 1, 48);
  }
  go_to_step(base + 1);
  wait_for_step(base + 2); /* the holder's chain holds three blocks: exit */
  return arg;
}

static void *holder(void *arg) {
  int base = *(int *)arg;
  wait_for_step(base + 1);
  for (int i = 0; i < HELD_BY_CHAIN; i++) free(blocks[i]);
  go_to_step(base + 2);
  for (;;) pause(); /* alive, never to send its chain */
  return NULL;
}

static int round_once(int round) {
  static int bases[64];
  int *base = &bases[round % 64];
  *base = round * 10;
  pthread_t w, h;
  void *done = NULL;
  if (pthread_create(&w, NULL, worker, base) != 0 || pthread_create(&h, NULL, holder, base) != 0)
    return fprintf(stderr, "FAIL: pthread_create\n"), 1;
  pthread_detach(h);
  if (pthread_join(w, &done) != 0 || done == NULL) return fprintf(stderr, "FAIL: worker\n"), 1;
  for (int i = HELD_BY_CHAIN; i < BLOCKS; i++) free(blocks[i]);
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return fprintf(stderr, "FAIL: fork\n"), 1;
  if (pid == 0) {
    void *p = malloc(100); /* the child's allocator works */
    printf("round %d: child past its fork handlers\n", round);
    fflush(stdout);
    _exit(p != NULL ? 0 : 3);
  }
  for (int waited = 0; waited < 10000; waited += 20) {
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return fprintf(stderr, "FAIL round %d: the child ended with status %#x\n", round, status), 1;
      return 0;
    }
    sleep_ms(20);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return fprintf(stderr, "FAIL round %d: the child hung for 10 s (in a fork handler)\n", round), 1;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  void *big[BIG];
  for (int i = 0; i < BIG; i++) {
    big[i] = malloc(1 << 20);
    if (big[i] == NULL) return fprintf(stderr, "FAIL: malloc\n"), 1;
    memset(big[i], 1, 1 << 20);
  }
  for (int r = 0; r < rounds; r++)
    if (round_once(r) != 0) return 1;
  for (int i = 0; i < BIG; i++) free(big[i]);
  printf("fork_frozen_chain: %d rounds, every child exited\n", rounds);
  return 0;
}
