"""tests/test_reclaim.py — memory that must come back (tests/c/test_reclaim.c): heaps of threads whose
other destructors allocate late, and pages emptied only by remote frees, released by malloc_trim."""
import pytest

from conftest import describe


@pytest.mark.parametrize("variant", ["linked", "preload", "secure"])
@pytest.mark.parametrize("case", ["late", "trim"])
def test_memory_comes_back(run_program, case, variant):
    proc = run_program("test_reclaim", variant, args=(case,), timeout=120)
    assert proc.returncode == 0, describe(proc)
    assert f"{case}:" in proc.stdout, describe(proc)
