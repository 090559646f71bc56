/* storm_fork.c — fork() while other threads are inside malloc/free, repeatedly. Worker threads allocate,
 * resize and free blocks of every tier without pause; the main thread forks over and over. Each child
 * (guarded by alarm() against a deadlocked allocator) frees the blocks it inherited from the parent's
 * threads after checking them, allocates and frees on its own and in a new thread, then execs this
 * program again with --exec-child, which allocates a little and exits 0. The parent checks every child
 * exited 0. Usage: storm_fork [FORKS] (default 400). Run by tests/test_robust.py. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WORKERS 3
#define SLOTS 64

static _Atomic(uintptr_t) slots[WORKERS][SLOTS];
static atomic_bool stop;

static uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static size_t pick_size(uint64_t *rng) {
  uint64_t r = next_rand(rng) % 100;
  if (r < 60) return 16 + next_rand(rng) % 1000;
  if (r < 95) return 1024 + next_rand(rng) % 100000;
  return 600000 + next_rand(rng) % 2000000;
}

static void stamp(unsigned char *p, size_t size) {
  memcpy(p, &size, sizeof size);
  p[size - 1] = (unsigned char)(size * 13 + 1);
}

static int intact(const unsigned char *p) {
  size_t size;
  memcpy(&size, p, sizeof size);
  return size >= sizeof size + 1 && p[size - 1] == (unsigned char)(size * 13 + 1);
}

static void *worker(void *arg) {
  int w = (int)(intptr_t)arg;
  uint64_t rng = 0x1234567ull * (uint64_t)(w + 1);
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    int k = (int)(next_rand(&rng) % SLOTS);
    unsigned char *old = (unsigned char *)atomic_exchange(&slots[w][k], 0);
    size_t size = pick_size(&rng);
    unsigned char *p;
    if (old && next_rand(&rng) % 4 == 0) {
      p = realloc(old, size);
      if (!p) free(old);
    } else {
      free(old);
      p = malloc(size);
    }
    if (!p) continue;
    stamp(p, size);
    atomic_store(&slots[w][k], (uintptr_t)p);
  }
  return NULL;
}

static void *child_thread(void *arg) {
  for (int i = 0; i < 100; i++) free(malloc(64 + (size_t)i * 97));
  return arg;
}

/* In the forked child: use what was inherited, allocate, then exec. Exit codes name the failure. */
static void child(const char *self) {
  alarm(20);
  for (int w = 0; w < WORKERS; w++)
    for (int k = 0; k < SLOTS; k++) {
      unsigned char *p = (unsigned char *)atomic_load(&slots[w][k]);
      if (!p) continue;
      if (!intact(p)) _exit(11);
      free(p);
    }
  uint64_t rng = (uint64_t)getpid() * 2654435761u + 1;
  void *mine[32];
  for (int i = 0; i < 32; i++) {
    size_t size = pick_size(&rng);
    if (!(mine[i] = malloc(size))) _exit(12);
    stamp(mine[i], size);
  }
  pthread_t t;
  if (pthread_create(&t, NULL, child_thread, NULL) != 0 || pthread_join(t, NULL) != 0) _exit(13);
  for (int i = 0; i < 32; i++) {
    if (!intact(mine[i])) _exit(14);
    free(mine[i]);
  }
  execl(self, self, "--exec-child", (char *)NULL);
  _exit(15);
}

static int exec_child(void) {
  size_t total = 0;
  for (size_t size = 8; size < (4u << 20); size = size * 3 / 2 + 8) {
    char *p = malloc(size);
    if (!p) return 21;
    memset(p, 1, size);
    total += size;
    free(p);
  }
  return total ? 0 : 22;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--exec-child") == 0) return exec_child();
  int forks = argc > 1 ? atoi(argv[1]) : 400;
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 2;
  self[n] = 0;

  pthread_t tids[WORKERS];
  for (int w = 0; w < WORKERS; w++)
    if (pthread_create(&tids[w], NULL, worker, (void *)(intptr_t)w) != 0) return 2;

  int failed = 0;
  for (int i = 0; i < forks; i++) {
    void *mine = malloc(100 + (size_t)i);
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      failed++;
      break;
    }
    if (pid == 0) child(self);
    free(mine);
    int status;
    if (waitpid(pid, &status, 0) != pid) {
      failed++;
      continue;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      if (failed < 10) {
        if (WIFSIGNALED(status))
          printf("fork %d: child killed by signal %d%s\n", i, WTERMSIG(status),
                 WTERMSIG(status) == SIGALRM ? " (deadlock: alarm fired)" : "");
        else
          printf("fork %d: child exited with %d\n", i, WEXITSTATUS(status));
      }
      failed++;
    }
  }
  atomic_store(&stop, 1);
  for (int w = 0; w < WORKERS; w++) pthread_join(tids[w], NULL);
  for (int w = 0; w < WORKERS; w++)
    for (int k = 0; k < SLOTS; k++) free((void *)atomic_load(&slots[w][k]));
  printf("forks=%d failed=%d\n", forks, failed);
  return failed ? 1 : 0;
}
