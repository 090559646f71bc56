"""tests/test_reclaim.py — memory that must come back (tests/c/test_reclaim.c): heaps of threads whose
other destructors allocate late, heaps of threads whose first allocation comes in the last round of key
destructors, and what those destructors allocated, freed by another thread, an
exited thread's blocks freed by others and reclaimed by malloc_trim in a thread that never allocated, a
256 MiB working set freed and allocated again without new mappings, a burst of frees given back at once
with HAKMEM_PURGE_DELAY_MS=0 (and a queue that empties one page again and again not purged each time), pages emptied only by remote frees, released by malloc_trim (and the emptied first pages of medium classes), and the
resident memory of churning sets of medium and of large blocks, vectors grown by realloc whose classes
take each other's slices without purging them, the unused tail of a reused large
mapping, the purge of a cached one no request fits, maintenance for a thread whose hot loop never takes
a slow path, a freed large block reused, counted and released by hak_collect (also one that an
exited thread freed), an exited thread's segment that other threads emptied given back, a purge deadline that
does not outlive the slices it was set for, memory freed in bursts that comes back while the program
sleeps, the pages a thread's burst of frees emptied, given back while it sleeps, full pages whose
blocks other threads freed, given back while their owner sleeps (and taken back by it intact, also
while the collection races it: tests/c/orphans_mt.c), remote frees of small blocks that wait in the
freeing thread only a little and not for long, calloc that leaves fresh memory untouched and always reads
as zeroes (also with every purge at once, MADV_DONTNEED or MADV_FREE), a large calloc from a cached
mapping that faults in no page its last block left untouched, and what a parent freed just before a fork, given back in
the child."""
import pytest

from conftest import describe


@pytest.mark.parametrize("variant", ["linked", "preload", "secure"])
@pytest.mark.parametrize("case", ["late", "late-freed", "round4", "trim-heapless", "refill", "at-once", "at-once-queue", "trim", "trim-first-pages", "medium", "regrow", "turns", "hot-head", "large", "many-large", "tail", "aged", "idle", "reuse", "emptied", "pool",
                                  "deadline", "asleep", "sleeper", "orphaned", "abandoned", "batched", "calloc", "fork-inherited",
                                  "fork-inherited-threads", "refused"])
def test_memory_comes_back(run_program, case, variant):
    # medium, regrow, large, many-large: no purge by the clock during the run, so only where memory is reused decides the result;
    # aged, idle: a short delay that the loop outlasts
    env = {"medium": {"HAKMEM_PURGE_DELAY_MS": "60000"}, "regrow": {"HAKMEM_PURGE_DELAY_MS": "60000"}, "refill": {"HAKMEM_PURGE_DELAY_MS": "60000"}, "large": {"HAKMEM_PURGE_DELAY_MS": "60000"},
           "many-large": {"HAKMEM_PURGE_DELAY_MS": "60000", "HAKMEM_LARGE_CACHE_MB": "1024"},
           "tail": {"HAKMEM_PURGE_DELAY_MS": "60000"}, "reuse": {"HAKMEM_PURGE_DELAY_MS": "60000"},
           "aged": {"HAKMEM_PURGE_DELAY_MS": "20"}, "idle": {"HAKMEM_PURGE_DELAY_MS": "20"},
           "deadline": {"HAKMEM_PURGE_DELAY_MS": "1000", "HAKMEM_DRAIN_INTERVAL": "1"},
           # asleep: long enough that RSS is read before the purge, short enough to wait for it; the
           # balanced profile's purge mode and cache size whatever the caller's environment
           "asleep": {"HAKMEM_PURGE_DELAY_MS": "400", "HAKMEM_PURGE_MODE": "dontneed", "HAKMEM_LARGE_CACHE_MB": "1024",
                      "HAKMEM_BACKGROUND_PURGE": "1"},
           "sleeper": {"HAKMEM_PURGE_DELAY_MS": "50", "HAKMEM_PURGE_MODE": "dontneed", "HAKMEM_BACKGROUND_PURGE": "1"},
           "orphaned": {"HAKMEM_PURGE_DELAY_MS": "50", "HAKMEM_PURGE_MODE": "dontneed", "HAKMEM_BACKGROUND_PURGE": "1"},
           "abandoned": {"HAKMEM_PURGE_DELAY_MS": "50", "HAKMEM_PURGE_MODE": "dontneed", "HAKMEM_BACKGROUND_PURGE": "1"},
           # fork-inherited: the fork comes well within the delay after the frees; the child allocates
           # again past it (600 ms), then waits five seconds at most
           "fork-inherited": {"HAKMEM_PURGE_DELAY_MS": "500", "HAKMEM_PURGE_MODE": "dontneed"},
           "fork-inherited-threads": {"HAKMEM_PURGE_DELAY_MS": "500", "HAKMEM_PURGE_MODE": "dontneed"},
           "refused": {"HAKMEM_PURGE_DELAY_MS": "50", "HAKMEM_BACKGROUND_PURGE": "1"},
           "emptied": {"HAKMEM_PURGE_DELAY_MS": "100"}, "at-once": {"HAKMEM_PURGE_DELAY_MS": "0"},
           "at-once-queue": {"HAKMEM_PURGE_DELAY_MS": "0"}}.get(case)
    proc = run_program("test_reclaim", variant, args=(case,), env=env, timeout=120)
    assert proc.returncode == 0, describe(proc)
    assert f"{case}:" in proc.stdout, describe(proc)


@pytest.mark.parametrize("variant", ["linked", "preload", "secure"])
def test_heapless_thread_left_after_main_gets_the_cache_back(run_program, variant):
    """A thread without a heap (large blocks only) outlives a main thread that left through pthread_exit:
    the purger, with no thread with a heap left, gives the large cache back at once and ends (a purge
    delay of 20 s is not waited for, and the memory is not abandoned either)."""
    env = {"HAKMEM_BACKGROUND_PURGE": "1", "HAKMEM_PURGE_DELAY_MS": "20000", "HAKMEM_PURGE_MODE": "dontneed"}
    proc = run_program("test_reclaim", variant, args=("heapless-left",), env=env, timeout=30)
    assert proc.returncode == 0 and "heapless-left: rss" in proc.stdout, describe(proc)


@pytest.mark.parametrize("variant", ["linked", "preload", "secure"])
def test_thread_with_sigcancel_blocked_keeps_its_heap(run_program, variant):
    """Only glibc's thread exit blocks every signal; a live thread with just SIGCANCEL blocked keeps the
    fast paths of a heap of its own."""
    proc = run_program("test_reclaim", variant, args=("sigcancel",), timeout=60)
    assert proc.returncode == 0 and "sigcancel:" in proc.stdout, describe(proc)


@pytest.mark.parametrize("variant", ["linked", "preload", "secure"])
@pytest.mark.parametrize("case", ["pthread-exit", "long-delay", "pthread-exit-locked", "dying-frees",
                                  "pthread-exit-round4", "pthread-exit-round4-later"])
def test_process_ends_after_pthread_exit(run_program, variant, case):
    """A process whose main thread calls pthread_exit ends with its last thread: the purger and the region
    release thread must end once idle (before, the process hung for good, with SIGTERM blocked). Also with
    a purge deadline 20 s away (the purger waited for it), with every purge refused (it retried for good),
    and after exiting threads freed blocks past their TSD destructors (each got a heap that stayed live
    for good, and the purger waited for those threads), and after a thread whose first allocation came in
    its last round of key destructors ended, before the main thread left or after (its heap counted as
    live, and the purger waited for good)."""
    env = {"HAKMEM_BACKGROUND_PURGE": "1", "HAKMEM_PURGE_DELAY_MS": "20000" if case == "long-delay" else "200"}
    program_case = "pthread-exit" if case == "long-delay" else case
    proc = run_program("test_reclaim", variant, args=(program_case,), env=env, timeout=30 if case == "dying-frees" else 10)
    assert proc.returncode == 0 and f"{program_case}: main thread leaving" in proc.stdout, describe(proc)


@pytest.mark.parametrize("variant", ["glibc", "linked", "preload", "secure"])
def test_orphaned_pages_race_their_owners_intact(run_program, variant):
    """Producers hand batches of written blocks to consumers that check and free them, pausing now and then
    so that the collection (1 ms delay) gives back their emptied full pages while they take them back: no
    block is damaged, and on hakmem some page went back as an orphan (tests/c/orphans_mt.c)."""
    env = {"HAKMEM_PURGE_DELAY_MS": "1", "HAKMEM_PURGE_MODE": "dontneed", "HAKMEM_BACKGROUND_PURGE": "1"}
    proc = run_program("orphans_mt", variant, args=("2",), env=env, timeout=60)
    assert proc.returncode == 0 and "0 damaged" in proc.stdout, describe(proc)


@pytest.mark.parametrize("variant", ["linked", "preload", "secure"])
@pytest.mark.parametrize("mode", ["dontneed", "free"])
def test_calloc_reads_zeroes_when_every_purge_comes_at_once(run_program, variant, mode):
    """calloc after freed memory was purged at once: with MADV_DONTNEED the slices read as zeroes and are
    not written over again; with MADV_FREE (which may leave the old contents) they are."""
    env = {"HAKMEM_PURGE_DELAY_MS": "0", "HAKMEM_PURGE_MODE": mode}
    proc = run_program("test_reclaim", variant, args=("calloc",), env=env, timeout=120)
    assert proc.returncode == 0, describe(proc)
    assert "calloc: every block read as zeroes" in proc.stdout, describe(proc)


@pytest.mark.parametrize("variant", ["linked", "preload", "secure"])
@pytest.mark.parametrize("env", [{}, {"HAKMEM_PURGE_MODE": "free"}, {"HAKMEM_PURGE_DELAY_MS": "0"}],
                         ids=["default", "lazy-purge", "no-delay"])
def test_a_large_calloc_zeroes_only_what_its_mapping_held(run_program, variant, env):
    """A large calloc served by a cached mapping reads as zeroes whatever the last block wrote (all of it,
    one byte a MiB, every other page, an odd size, more than the request), and zeroing it faults in no
    page that no block touched: 128 MiB after one byte a MiB stays within 8 MiB more resident (a memset
    of the whole block added 128 MiB)."""
    proc = run_program("test_reclaim", variant, args=("calloc-large",), env=env, timeout=120)
    assert proc.returncode == 0, describe(proc)
    assert "calloc-large: every block read as zeroes" in proc.stdout, describe(proc)


@pytest.mark.parametrize("variant", ["linked", "preload", "secure"])
@pytest.mark.parametrize("size,lock", [("48", False), ("2048", False), ("48", True)])
def test_double_free_into_a_page_given_back_is_reported(test_binary, run_plain, run_hakmem, libhakmem_secure,
                                                       variant, size, lock):
    """An exited worker's 40 blocks, all freed by the main thread and their page given back as an orphan
    (purged): freeing the first block again is reported as a double free. Before, the default build wrote
    the remote-free link into the purged page (a segfault under mlockall, whose purges leave read-only
    zeroes), and the hardened build took the cleared canary for an overflow."""
    args = ("abandoned-double-free", size) + (("mlock",) if lock else ())
    env = {"HAKMEM_PURGE_DELAY_MS": "10"}
    if variant == "linked":  # an aborted program prints no statistics: the report names hakmem instead
        proc = run_plain([test_binary("test_reclaim"), *args], env=env, timeout=60)
    else:
        lib = libhakmem_secure if variant == "secure" else None
        proc = run_hakmem([test_binary("test_reclaim", "glibc"), *args], env=env, lib=lib, timeout=60,
                          check_stats=False)
    if proc.returncode == 77:
        pytest.skip(proc.stdout.strip())
    assert "page given back; freeing the first block again" in proc.stdout, describe(proc)
    assert proc.returncode == -6 and "hakmem: double free" in proc.stderr and "overflow" not in proc.stderr, describe(proc)


@pytest.mark.parametrize("variant", ["linked", "preload", "secure"])
@pytest.mark.parametrize("threads,count,size", [("400", "1", "48"), ("120", "4", "100000"), ("100", "40", "2048")])
def test_exited_threads_segments_go_back(run_program, variant, threads, count, size):
    """Threads running together each leave blocks live and exit; the main thread frees them all and makes
    no call: the pages come back as orphans and the segments are unmapped, no longer counted mapped or
    committed, their blocks no longer counted live (before, each segment stayed mapped until some thread
    needed room: 500 threads, 2 GiB mapped for good). The memory is then allocated again intact
    (tests/c/exited_segments.c)."""
    env = {"HAKMEM_PURGE_DELAY_MS": "50", "HAKMEM_BACKGROUND_PURGE": "1"}
    proc = run_program("exited_segments", variant, args=(threads, count, size), env=env, timeout=120)
    assert proc.returncode == 0, describe(proc)
    assert "exited_segments: ok" in proc.stdout, describe(proc)


@pytest.mark.parametrize("variant", ["linked", "preload", "secure"])
def test_double_free_into_an_exited_threads_segment_given_back_is_reported(test_binary, run_plain, run_hakmem,
                                                                         libhakmem_secure, variant):
    """100 exited threads' segments unmapped once the main thread freed every block they left: freeing the
    first thread's block again is reported as a double free, with its class (only the latest 16 unmapped
    segments were remembered: it read "free of a pointer hakmem never returned")."""
    args = ("100", "1", "48", "free-again")
    env = {"HAKMEM_PURGE_DELAY_MS": "50", "HAKMEM_BACKGROUND_PURGE": "1"}
    if variant == "linked":
        proc = run_plain([test_binary("exited_segments"), *args], env=env, timeout=60)
    else:
        lib = libhakmem_secure if variant == "secure" else None
        proc = run_hakmem([test_binary("exited_segments", "glibc"), *args], env=env, lib=lib, timeout=60,
                          check_stats=False)
    assert "the segments are gone; freeing the first block again" in proc.stdout, describe(proc)
    assert proc.returncode == -6 and "hakmem: double free" in proc.stderr and "size class" in proc.stderr, describe(proc)
