"""A thread's last freed large block waits in its heap for the thread's next large malloc (src/large.c,
LAST_MAX): it is reused, zeroed for calloc, left to the cache, and given back by malloc_trim, by the
thread's exit, by the purger while the thread is idle and by a lone program's maintenance passes."""
import pytest

from conftest import describe


@pytest.mark.parametrize("variant", ["linked", "preload", "secure"])
@pytest.mark.parametrize("case", ["reuse", "trim", "exit", "idle", "idle-unswept", "lone", "lone-hot", "fork",
                                  "fork-purger"])
def test_last_large_block(run_program, case, variant):
    # idle: a short delay, the purger on whatever the profile; idle-unswept: no purger; fork-purger: the balanced
    # profile's delay and purger; lone, lone-hot: a short delay that the loop outlasts;
    # the others: no purge by the clock during the run
    env = {"idle": {"HAKMEM_PURGE_DELAY_MS": "50", "HAKMEM_BACKGROUND_PURGE": "1", "HAKMEM_PURGE_MODE": "dontneed"},
           "idle-unswept": {"HAKMEM_PURGE_DELAY_MS": "50", "HAKMEM_BACKGROUND_PURGE": "0", "HAKMEM_PURGE_MODE": "dontneed"},
           "fork-purger": {"HAKMEM_PURGE_DELAY_MS": "100", "HAKMEM_BACKGROUND_PURGE": "2", "HAKMEM_PURGE_MODE": "dontneed"},
           "lone": {"HAKMEM_PURGE_DELAY_MS": "20", "HAKMEM_PURGE_MODE": "dontneed"},
           "lone-hot": {"HAKMEM_PURGE_DELAY_MS": "20", "HAKMEM_PURGE_MODE": "dontneed"}}.get(
        case, {"HAKMEM_PURGE_DELAY_MS": "60000", "HAKMEM_PURGE_MODE": "dontneed"})
    proc = run_program("test_large_last", variant, args=(case,), env=env, timeout=120)
    assert proc.returncode == 0, describe(proc)
    assert f"{case}:" in proc.stdout, describe(proc)


@pytest.mark.parametrize("variant", ["linked", "preload", "secure"])
def test_double_free_of_the_waiting_block_is_reported(test_binary, run_plain, run_hakmem, libhakmem_secure, variant):
    env = {"HAKMEM_PURGE_DELAY_MS": "60000"}
    if variant == "linked":  # an aborted program prints no statistics: the report names hakmem instead
        proc = run_plain([test_binary("test_large_last"), "double-free"], env=env, timeout=60)
    else:
        lib = libhakmem_secure if variant == "secure" else None
        proc = run_hakmem([test_binary("test_large_last", "glibc"), "double-free"], env=env, lib=lib, timeout=60,
                          check_stats=False)
    assert "double-free: freeing" in proc.stdout, describe(proc)
    assert proc.returncode == -6 and "hakmem: double free" in proc.stderr, describe(proc)
