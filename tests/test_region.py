"""test_region.py — runs tests/c/test_region.c (the hak_region_* API) built by tests/Makefile.

The program prints one "ok ..." line per part and exits non-zero with file:line on the first failure.
It is run with HAKMEM_STATS=1 so stderr proves libhakmem was the process's allocator too.
"""
import subprocess
from pathlib import Path

import pytest

from conftest import clean_env

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "build" / "tests" / "test_region"
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
