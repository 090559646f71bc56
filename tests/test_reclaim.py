"""tests/test_reclaim.py — memory that must come back (tests/c/test_reclaim.c): heaps of threads whose
other destructors allocate late, pages emptied only by remote frees, released by malloc_trim, and the
resident memory of churning sets of medium and of large blocks, the unused tail of a reused large
mapping, the purge of a cached one no request fits, maintenance for a thread whose hot loop never takes
a slow path, a freed large block reused, counted and released by hak_collect (also one that an
exited thread freed), the abandoned segment a thread emptied adopted first, a purge deadline that
does not outlive the slices it was set for, and memory freed in bursts that comes back while the program
sleeps."""
import pytest

from conftest import describe


@pytest.mark.parametrize("variant", ["linked", "preload", "secure"])
@pytest.mark.parametrize("case", ["late", "trim", "medium", "large", "tail", "aged", "idle", "reuse", "hint",
                                  "deadline", "asleep"])
def test_memory_comes_back(run_program, case, variant):
    # medium, large: no purge by the clock during the run, so only where memory is reused decides the result;
    # aged, idle: a short delay that the loop outlasts
    env = {"medium": {"HAKMEM_PURGE_DELAY_MS": "60000"}, "large": {"HAKMEM_PURGE_DELAY_MS": "60000"},
           "tail": {"HAKMEM_PURGE_DELAY_MS": "60000"}, "reuse": {"HAKMEM_PURGE_DELAY_MS": "60000"},
           "aged": {"HAKMEM_PURGE_DELAY_MS": "20"}, "idle": {"HAKMEM_PURGE_DELAY_MS": "20"},
           "deadline": {"HAKMEM_PURGE_DELAY_MS": "1000", "HAKMEM_DRAIN_INTERVAL": "1"},
           # asleep: long enough that RSS is read before the purge, short enough to wait for it
           "asleep": {"HAKMEM_PURGE_DELAY_MS": "400"}}.get(case)
    proc = run_program("test_reclaim", variant, args=(case,), env=env, timeout=120)
    assert proc.returncode == 0, describe(proc)
    assert f"{case}:" in proc.stdout, describe(proc)
