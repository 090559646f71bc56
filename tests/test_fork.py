"""tests/test_fork.py — fork() while threads allocate (owner: tests suite).

Runs build/tests/test_fork (children that allocate, start threads, fork again, exit or exec /bin/true or
themselves) on glibc and on hakmem (linked, preloaded, hardened build), build/tests/fork_chains (forks
while other threads' remote frees wait in chains) and build/tests/fork_frozen_chain (a chain the child
sends frees an exited thread's last blocks). With HAKMEM_STATS=1 every hakmem
process prints its statistics at exit, so the exec'ed copies of the program show up on stderr too.
"""
import re
import subprocess

import pytest

from conftest import BUILD, VARIANTS, describe, stats_blocks

ROUNDS = 24


@pytest.mark.parametrize("variant", VARIANTS)
def test_fork_with_threads(run_program, variant):
    proc = run_program("test_fork", variant, args=[str(ROUNDS)], timeout=300)
    assert proc.returncode == 0, describe(proc)
    assert f"allocator: {'glibc' if variant == 'glibc' else 'hakmem'}" in proc.stdout, describe(proc)
    assert re.search(r"test_fork: \d+ checks, 0 failed", proc.stdout), describe(proc)
    if variant != "glibc":
        # The parent, the children that exit() or exec themselves, each print a block; /bin/true too
        # when preloaded. At least the parent and the self-exec'ed children (ROUNDS / 3) must have.
        assert stats_blocks(proc.stderr) >= 1 + ROUNDS // 3, describe(proc)


EARLY_HANDLER_LIB = r'''
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_t worker;
static volatile int running, stop;
static void *saved;

static void *work(void *arg) {
  void *p = malloc(200); /* freed on the way out, while the prepare handler waits for the join */
  memset(p, 1, 200);
  while (!stop) usleep(1000);
  free(p);
  return arg;
}

void pool_start(void) {
  if (!running) {
    stop = 0;
    pthread_create(&worker, NULL, work, NULL);
    running = 1;
  }
}

/* Like a thread pool that shuts down before fork (OpenBLAS): join the worker, allocate on slow paths. */
static void prepare(void) {
  if (running) {
    stop = 1;
    pthread_join(worker, NULL);
    running = 0;
  }
  saved = malloc(1 << 20);
  memset(saved, 1, 100);
  free(malloc(100000));
}

static void parent(void) { free(saved); }
static void child(void) { free(saved); }

/* Runs before hakmem's constructor (the constructors of preloaded libraries run last). */
__attribute__((constructor)) static void early(void) { pthread_atfork(prepare, parent, child); }
'''

EARLY_HANDLER_MAIN = r'''
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

void pool_start(void);

int main(void) {
  for (int i = 0; i < 5; i++) {
    pool_start();
    usleep(10000);
    pid_t pid = fork();
    if (pid == 0) _exit(malloc(100000) != NULL ? 0 : 1);
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0) return 2;
  }
  puts("forked ok");
  return 0;
}
'''


@pytest.mark.parametrize("lib", ["libhakmem.so", "libhakmem-secure.so"])
def test_fork_with_an_earlier_prepare_handler(run_hakmem, tmp_path, lib):
    """A library whose constructor registers fork handlers before hakmem's constructor runs: its prepare
    handler, which joins a thread that frees and allocates on slow paths, ran after hakmem's had taken the
    allocator's locks and fork hung for good (a bug hunt's finding). hakmem's handlers now come first."""
    (tmp_path / "early.c").write_text(EARLY_HANDLER_LIB)
    (tmp_path / "main.c").write_text(EARLY_HANDLER_MAIN)
    for cmd in (["cc", "-shared", "-fPIC", "-o", tmp_path / "libearly.so", tmp_path / "early.c", "-lpthread"],
                ["cc", "-o", tmp_path / "main", tmp_path / "main.c", f"-L{tmp_path}", "-learly",
                 f"-Wl,-rpath,{tmp_path}", "-lpthread"]):
        build = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
        assert build.returncode == 0, describe(build)
    try:
        proc = run_hakmem([str(tmp_path / "main")], lib=BUILD / lib, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("fork hung: the earlier prepare handler waited on a lock hakmem's prepare handler held")
    assert proc.returncode == 0 and "forked ok" in proc.stdout, describe(proc)


@pytest.mark.parametrize("variant", VARIANTS)
def test_fork_while_remote_frees_wait_in_chains(run_program, variant):
    """A producer thread allocates small blocks that two other threads free, while the main thread forks
    1000 times: every child frees and allocates and exits 0. A child used to send a chain that its
    thread had been writing at the fork, half written ("double free detected of 0x0": 23 of 2000
    children)."""
    proc = run_program("fork_chains", variant, args=["1000"], timeout=300)
    assert proc.returncode == 0, describe(proc)
    assert "fork_chains: 1000 forks, 0 failed" in proc.stdout, describe(proc)


@pytest.mark.parametrize("variant", VARIANTS)
def test_fork_child_sends_a_chain_that_empties_an_exited_threads_page(run_program, variant):
    """A thread's remote-free chain holds the last live blocks of an exited thread's page when the main
    thread forks: the child sends that chain in its fork handler, and the emptied page asks for the
    purger, whose lock the fork had left held. The child hung there for good; now it goes on, allocates
    and exits 0, every round (tests/c/fork_frozen_chain.c)."""
    proc = run_program("fork_frozen_chain", variant, args=["3"], timeout=120)
    assert proc.returncode == 0, describe(proc)
    assert "fork_frozen_chain: 3 rounds, every child exited" in proc.stdout, describe(proc)
