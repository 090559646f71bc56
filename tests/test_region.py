"""test_region.py — runs tests/c/test_region.c (the hak_region_* API) and tests/c/test_region_upkeep.c (its
housekeeping across threads and over time), built by tests/Makefile.

The program prints one "ok ..." line per part and exits non-zero with file:line on the first failure.
It is run with HAKMEM_STATS=1 so stderr proves libhakmem was the process's allocator too.
"""
import subprocess
from pathlib import Path

import pytest

from conftest import clean_env

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "build" / "tests" / "test_region"
UPKEEP = ROOT / "build" / "tests" / "test_region_upkeep"
PARTS = ["classes", "bad input", "configure", "stats", "stealing", "thread exit", "growth dampener", "huge pages",
         "eager return", "background release", "release errors", "threads", "ENOMEM", "fork", "generations"]


@pytest.fixture(scope="module")
def region_run():
    if not BIN.exists():
        subprocess.run(["make", "-C", str(ROOT / "tests"), "../build/tests/test_region"], check=True)
    return subprocess.run([str(BIN)], env=clean_env({"HAKMEM_STATS": "1"}), capture_output=True, text=True, timeout=120)


def test_region_program_passes(region_run):
    assert region_run.returncode == 0, f"stdout:\n{region_run.stdout}\nstderr:\n{region_run.stderr}"
    assert "all region tests passed" in region_run.stdout


@pytest.mark.parametrize("part", PARTS)
def test_region_part_ran(region_run, part):
    assert f"ok {part}" in region_run.stdout, f"part '{part}' did not pass:\n{region_run.stdout}\n{region_run.stderr}"


def test_region_uses_hakmem(region_run):
    assert "hakmem stats:" in region_run.stderr, region_run.stderr


def _run_upkeep(*args, timeout=120):
    if not UPKEEP.exists():
        subprocess.run(["make", "-C", str(ROOT / "tests"), "../build/tests/test_region_upkeep"], check=True)
    return subprocess.run([str(UPKEEP), *args], env=clean_env({}), capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("part", ["generations", "trim", "collect", "idle-cache", "busy-cache", "fork-cache",
                                  "reconfigure", "turns", "refused", "eager-refused", "no-threads"])
def test_region_upkeep(part):
    """One part of test_region_upkeep.c each: short-lived threads' generations, a lowered
    thread_cache_bytes, hak_collect(true) with cached regions, an idle live thread's cache released by the
    background thread (which then ends) and a busy one kept, a forked child's inherited cache, periods
    under frequent configure calls, regions where no thread can be created (its own process), the
    background release's turns, a region whose purge the kernel refuses (mlock), in a background release
    and in an eager return."""
    run = _run_upkeep(part)
    assert run.returncode == 0 and "ok " in run.stdout, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"


def test_region_without_thread_keys():
    """A process that used up its thread-specific keys before its first region call: regions work without
    thread caches and leave hakmem's own heap key alone (its own process: the keys stay used up)."""
    run = _run_upkeep("keys")
    assert run.returncode == 0 and "ok keys" in run.stdout, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"


def test_region_refused_purge_lets_the_process_end():
    """A region whose purge the kernel refused (mlock), then the main thread calls pthread_exit: the
    process ends. The background release retried the region every period and kept it alive for good."""
    try:
        run = _run_upkeep("refused-exit", timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("the process was still alive 20 s after its main thread called pthread_exit")
    assert run.returncode == 0 and "ok refused-exit" in run.stdout, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
