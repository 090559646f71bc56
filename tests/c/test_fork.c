/* test_fork.c — fork() from a process whose threads keep allocating (owner: tests suite).
 *
 * Four background threads allocate, stamp, exchange and free blocks of every tier while the main thread
 * forks repeatedly. Each child verifies and frees blocks it inherited (allocated by threads that do not
 * exist in the child; the large ones grow by realloc first), allocates heavily itself, starts threads of
 * its own, sometimes forks again, and either exits, execs /bin/true, or execs this program with --exec-child. The parent keeps allocating
 * meanwhile and checks every child exits with status 0 within a deadline (a deadlock is a failure).
 * Then, for two seconds, a thread calls mallinfo2 in a loop while the main thread forks and each child
 * calls mallinfo2 once: a child must not find a lock of the allocator's statistics held by the thread it
 * lost (the region registry's lock was taken without a fork handler in a process that never used regions).
 * Usage: test_fork [rounds]   (default 24). Exit status 0 when every check passed. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "hakmem.h"
#include "tcheck.h"

extern char **environ;

enum { BG_THREADS = 4, SHARED_MAX = 512 };

struct block {
  size_t size;
  uint64_t seed;
};

/* Blocks any thread may free; guarded by shared_lock, which is held across fork() by an atfork handler. */
static struct block *shared[SHARED_MAX];
static int shared_count;
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int stop;
static const char *self_path;

static void lock_shared(void) { pthread_mutex_lock(&shared_lock); }
static void unlock_shared(void) { pthread_mutex_unlock(&shared_lock); }

static uint64_t rng_next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

static size_t pick_size(uint64_t *rng) {
  uint64_t r = rng_next(rng);
  unsigned pct = (unsigned)(r % 100);
  r >>= 8;
  if (pct < 75) return sizeof(struct block) + r % 512;
  if (pct < 95) return 1024 + r % (200 << 10);
  return (600 << 10) + r % (3 << 20);
}

static struct block *new_block(size_t size, uint64_t seed) {
  struct block *b = malloc(size);
  if (!b) {
    fprintf(stderr, "%s:%d: FAIL: malloc(%zu) returned NULL in pid %d\n", __FILE__, __LINE__, size, getpid());
    _exit(1);
  }
  b->size = size;
  b->seed = seed;
  /* Stamp the first and last 64 bytes of the payload only, so big blocks stay cheap. */
  unsigned char *p = (unsigned char *)(b + 1);
  size_t n = size - sizeof *b;
  for (size_t i = 0; i < n && i < 64; i++) p[i] = tc_pat(seed, i);
  for (size_t i = n > 64 ? n - 64 : 0; i < n; i++) p[i] = tc_pat(seed, i);
  return b;
}

/* Check a block's stamp and free it; exits the process with a message on corruption. */
static void check_free(struct block *b, const char *where) {
  unsigned char *p = (unsigned char *)(b + 1);
  size_t n = b->size - sizeof *b;
  for (size_t i = 0; i < n; i = (i == 63 && n > 128) ? n - 64 : i + 1) {
    if (p[i] != tc_pat(b->seed, i)) {
      fprintf(stderr, "%s:%d: FAIL: %s (pid %d): block %p size %zu seed %llu: byte %zu is %#x, expected %#x\n",
              __FILE__, __LINE__, where, getpid(), (void *)b, b->size, (unsigned long long)b->seed, i, p[i],
              tc_pat(b->seed, i));
      _exit(1);
    }
  }
  free(b);
}

/* A burst of allocation work: keep up to 64 blocks, replace them at random, share some with others. */
static void churn(uint64_t *rng, long ops, const char *where) {
  struct block *mine[64] = {0};
  for (long op = 0; op < ops; op++) {
    int k = (int)(rng_next(rng) % 64);
    if (mine[k]) check_free(mine[k], where);
    mine[k] = new_block(pick_size(rng), rng_next(rng));
    if (op % 16 == 0) {
      struct block *give = mine[k], *take = NULL;
      mine[k] = NULL;
      lock_shared();
      if (shared_count == SHARED_MAX) take = shared[--shared_count];
      shared[shared_count++] = give;
      unlock_shared();
      if (take) check_free(take, where);
    }
  }
  for (int k = 0; k < 64; k++)
    if (mine[k]) check_free(mine[k], where);
}

static void *background(void *arg) {
  uint64_t rng = (uint64_t)(uintptr_t)arg * 7919 + 17;
  while (!atomic_load(&stop)) churn(&rng, 2000, "background thread");
  return NULL;
}

static void *child_thread(void *arg) {
  uint64_t rng = (uint64_t)(uintptr_t)arg * 104729 + 5;
  churn(&rng, 20000, "thread in child");
  return NULL;
}

/* What a child does after fork (or after exec with --exec-child). Returns the exit status. */
static int child_work(int round, int may_fork, int forked) {
  uint64_t rng = (uint64_t)round * 31337 + (uint64_t)getpid();
  /* Under hakmem, the parent's other threads count as exited in a forked child: only this one lives. */
  int (*stats_get)(struct hak_stats *) = (int (*)(struct hak_stats *))dlsym(RTLD_DEFAULT, "hak_stats_get");
  struct hak_stats st;
  if (forked && stats_get != NULL && stats_get(&st) == 0 && st.threads_started - st.threads_exited != 1) {
    fprintf(stderr, "%s:%d: FAIL: forked child (pid %d) sees %llu live thread heaps, expected 1\n", __FILE__,
            __LINE__, getpid(), (unsigned long long)(st.threads_started - st.threads_exited));
    return 1;
  }
  /* Blocks inherited from the parent were allocated by threads that do not exist here. */
  lock_shared();
  int n = shared_count;
  for (int i = 0; i < n; i++) {
    struct block *b = shared[i];
    if (b->size > (512 << 10)) {
      /* An inherited large block grows in the child: the hardened build's guard page splits its mapping,
       * and in a child the kernel no longer merges the parts back (a hunt: every such realloc failed). */
      struct block *grown = realloc(b, b->size + (1 << 20));
      if (!grown) {
        fprintf(stderr, "%s:%d: FAIL: realloc of an inherited block of %zu bytes to %zu returned NULL (errno %d) in pid %d\n",
                __FILE__, __LINE__, b->size, b->size + (1 << 20), errno, getpid());
        _exit(1);
      }
      b = grown;
    }
    check_free(b, "inherited block grown and freed in child");
  }
  shared_count = 0;
  unlock_shared();

  pthread_t t[2];
  for (int i = 0; i < 2; i++) {
    int rc = pthread_create(&t[i], NULL, child_thread, (void *)(uintptr_t)(round * 2 + i));
    if (rc) {
      fprintf(stderr, "%s:%d: FAIL: pthread_create in child: %s\n", __FILE__, __LINE__, strerror(rc));
      return 1;
    }
  }
  if (may_fork) {
    pid_t g = fork();
    if (g < 0) return 1;
    if (g == 0) {
      churn(&rng, 5000, "grandchild");
      _exit(0);
    }
    int st;
    if (waitpid(g, &st, 0) != g || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "%s:%d: FAIL: grandchild status %#x\n", __FILE__, __LINE__, st);
      return 1;
    }
  }
  churn(&rng, 20000, "child main thread");
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  char *s = strdup("still allocating after joining threads");
  if (!s) return 1;
  free(s);
  return 0;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Wait for pid while allocating in the parent; a child not done in 30 s is reported as deadlocked. */
static void wait_child(pid_t pid, const char *what, uint64_t *rng) {
  double deadline = now() + 30;
  for (;;) {
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) {
      CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s (pid %d): expected exit status 0, got %s %d", what, pid,
            WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
      return;
    }
    REQUIRE(r == 0, "waitpid(%d): %s", pid, strerror(errno));
    if (now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      CHECK(0, "%s (pid %d) did not finish within 30 s: deadlocked after fork", what, pid);
      return;
    }
    churn(rng, 200, "parent while waiting");
  }
}

static void *mallinfo_loop(void *arg) {
  while (!atomic_load(&stop)) {
    struct mallinfo2 m = mallinfo2();
    __asm__ volatile("" : : "r"(m.arena)); /* kept: the call is the point */
  }
  return arg;
}

/* Forks for `seconds` while another thread reads mallinfo2; each child reads it once within a second. */
static void fork_during_mallinfo(int seconds) {
  atomic_store(&stop, 0);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, mallinfo_loop, NULL) == 0, "pthread_create");
  int forks = 0, hung = 0, failed = 0;
  for (time_t t0 = time(NULL); time(NULL) - t0 < seconds;) {
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
      alarm(1);
      struct mallinfo2 m = mallinfo2();
      _exit(m.arena >= m.uordblks ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
    forks++;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) hung++;
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed++;
  }
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  printf("mallinfo2 while forking: %d forks, %d children hung, %d failed\n", forks, hung, failed);
  CHECK(hung == 0, "%d of %d children hung in mallinfo2 (a lock held across fork)", hung, forks);
  CHECK(failed == 0, "%d of %d children failed", failed, forks);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 1 && strcmp(argv[1], "--exec-child") == 0) return child_work(atoi(argv[2]), 0, 0);
  int rounds = argc > 1 ? atoi(argv[1]) : 24;
  self_path = "/proc/self/exe";
  printf("allocator: %s\n", tc_hakmem_active() ? "hakmem" : "glibc");
  pthread_atfork(lock_shared, unlock_shared, unlock_shared);

  tc_section("fork while 4 threads allocate; children allocate, thread, fork again, exit or exec");
  pthread_t bg[BG_THREADS];
  for (int i = 0; i < BG_THREADS; i++)
    REQUIRE(pthread_create(&bg[i], NULL, background, (void *)(uintptr_t)(i + 1)) == 0, "pthread_create");
  uint64_t rng = 42;
  churn(&rng, 3000, "parent main thread");

  for (int round = 0; round < rounds; round++) {
    churn(&rng, 500, "parent main thread");
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
      int mode = round % 3;
      if (mode == 0) exit(child_work(round, round % 2 == 0, 1));
      churn(&rng, 2000, "child before exec");
      char arg[16];
      snprintf(arg, sizeof arg, "%d", round);
      if (mode == 1) execl("/bin/true", "true", (char *)NULL);
      else execl(self_path, "test_fork", "--exec-child", arg, (char *)NULL);
      fprintf(stderr, "%s:%d: FAIL: exec in child: %s\n", __FILE__, __LINE__, strerror(errno));
      _exit(1);
    }
    static const char *const modes[] = {"child that exits", "child that execs /bin/true",
                                        "child that execs itself"};
    wait_child(pid, modes[round % 3], &rng);
  }

  tc_section("posix_spawn while threads allocate");
  for (int i = 0; i < 8; i++) {
    pid_t pid;
    char *args[] = {"true", NULL};
    int rc = posix_spawn(&pid, "/bin/true", NULL, NULL, args, environ);
    REQUIRE(rc == 0, "posix_spawn(/bin/true): %s", strerror(rc));
    wait_child(pid, "posix_spawn'ed /bin/true", &rng);
  }

  atomic_store(&stop, 1);
  for (int i = 0; i < BG_THREADS; i++) pthread_join(bg[i], NULL);
  lock_shared();
  for (int i = 0; i < shared_count; i++) check_free(shared[i], "final cleanup");
  shared_count = 0;
  unlock_shared();

  tc_section("fork while another thread reads mallinfo2");
  fork_during_mallinfo(2);
  return tc_finish("test_fork");
}
