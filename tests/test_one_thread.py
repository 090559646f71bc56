"""tests/test_one_thread.py — a single-threaded program keeps one thread under hakmem (tests/c/test_one_thread.c):
with HAKMEM_BACKGROUND_PURGE=auto (the default) its frees bound the memory waiting for its purge instead of a
background thread, and learn not to purge what each cycle of a program needs again; once it has a thread of
its own, the purger takes over, and frees before it starts trim; off keeps one thread, on starts the purger
anyway."""
import pytest

from conftest import describe


@pytest.mark.parametrize("variant", ["linked", "preload", "secure"])
@pytest.mark.parametrize("env", [{}, {"HAKMEM_BACKGROUND_PURGE": "auto"}, {"HAKMEM_BACKGROUND_PURGE": "2"}],
                         ids=["default", "auto", "2"])
def test_single_threaded_program_keeps_one_thread_and_bounded_memory(run_program, variant, env):
    """No thread while the program has one (its frees purge what waits beyond 32 MiB per tier instead);
    the background purger once it has created a thread."""
    env = {"HAKMEM_PURGE_MODE": "dontneed", "HAKMEM_PURGE_DELAY_MS": "200", "HAKMEM_LARGE_CACHE_MB": "1024", **env}
    proc = run_program("test_one_thread", variant, args=("auto",), env=env, timeout=120)
    assert proc.returncode == 0 and "auto: threaded:" in proc.stdout, describe(proc)


@pytest.mark.parametrize("variant", ["linked", "preload", "secure"])
@pytest.mark.parametrize("case", ["first-thread", "phases", "learn", "cut-down", "sparse"])
def test_trims_without_a_purger(run_program, variant, case):
    """first-thread: blocks allocated before the program's first thread and freed after it, with no allocation
    to start the purger, come back to the bound (they stayed for good). phases: cycles that free and allocate
    again more than 32 MiB stop being purged (each cycle faulted its memory in again). learn: they stop after
    the first cycle, the bound growing by what the next one takes back of what they purged (doubling alone,
    it took three). cut-down: but by what it takes back, not by the size of a mapping cut down for a small
    request. sparse: so do cycles of
    64 KiB-aligned small blocks, whose slices hold one resident page each (counted whole, they were purged in
    every cycle). A purge delay of a
    second keeps the trims' learning window wide on a slow machine."""
    env = {"HAKMEM_PURGE_MODE": "dontneed", "HAKMEM_PURGE_DELAY_MS": "1000", "HAKMEM_LARGE_CACHE_MB": "1024"}
    proc = run_program("test_one_thread", variant, args=(case,), env=env, timeout=120)
    assert proc.returncode == 0 and f"{case}:" in proc.stdout, describe(proc)


@pytest.mark.parametrize("variant", ["linked", "preload", "secure"])
def test_trims_learn_from_a_refill_longer_than_the_delay(run_program, variant):
    """Cycles of 1,500 blocks of 4-256 KiB, each written and all freed: the trimmed memory comes back over
    longer than a purge delay (50 ms), and all of it counts while it goes on coming back, so the trims stop
    (counted within a delay of the last trim only, the bound grew by a fraction a cycle and every cycle was
    faulted in again: the last 4 of 8 cycles took 55-128 K faults against 8 K). The heap's maintenance
    passes are spaced out (HAKMEM_DRAIN_INTERVAL), so that the delay's own deadline purges do not fault
    memory in too; a stall longer than the delay still ends the count (two busy loops on the two cores:
    5-122 K), so the case passes if one of three runs does; the old rule failed every run."""
    env = {"HAKMEM_PURGE_MODE": "dontneed", "HAKMEM_PURGE_DELAY_MS": "50", "HAKMEM_DRAIN_INTERVAL": "1000000"}
    runs = []
    for _ in range(3):
        proc = run_program("test_one_thread", variant, args=("slow-refill",), env=env, timeout=120)
        runs.append(proc)
        if proc.returncode == 0:
            break
    assert proc.returncode == 0 and "slow-refill:" in proc.stdout, "\n".join(describe(p) for p in runs)


@pytest.mark.parametrize("variant", ["linked", "preload"])
def test_unrelated_reuse_keeps_the_trim_bound(run_program, variant):
    """Reusing memory that its deadline purged, not a trim, does not raise the trims' bound."""
    env = {"HAKMEM_PURGE_MODE": "dontneed", "HAKMEM_PURGE_DELAY_MS": "100", "HAKMEM_LARGE_CACHE_MB": "1024"}
    proc = run_program("test_one_thread", variant, args=("unrelated-reuse", "100"), env=env, timeout=120)
    assert proc.returncode == 0 and "unrelated-reuse:" in proc.stdout, describe(proc)


@pytest.mark.parametrize("env", [{"HAKMEM_BACKGROUND_PURGE": "0"}, {"HAKMEM_BACKGROUND_PURGE": "off"},
                                 {"HAKMEM_PROFILE": "fast"},
                                 {"HAKMEM_PURGE_DELAY_MS": "0"}, {"HAKMEM_PURGE_DELAY_MS": "-1"},
                                 {"HAKMEM_PURGE_DELAY_MS": "-1", "HAKMEM_BACKGROUND_PURGE": "on"}],
                         ids=lambda e: ",".join(f"{k}={v}" for k, v in e.items()))
def test_no_purger_thread_when_off(run_program, env):
    """Where idle purging is off (the option, the fast profile, or a purge delay of 0 or -1) a large
    burst starts no thread: the process keeps its single-threaded paths."""
    proc = run_program("test_one_thread", "linked", args=("off",), env=env, timeout=120)
    assert proc.returncode == 0 and "off: threads 1" in proc.stdout, describe(proc)


@pytest.mark.parametrize("variant", ["linked", "preload"])
def test_purger_on_in_a_single_threaded_program(run_program, variant):
    """HAKMEM_BACKGROUND_PURGE=on (1) starts the purger in a single-threaded program too."""
    for value in ("on", "1"):
        proc = run_program("test_one_thread", variant, args=("on",), env={"HAKMEM_BACKGROUND_PURGE": value}, timeout=120)
        assert proc.returncode == 0 and "on: threads 2" in proc.stdout, describe(proc)
