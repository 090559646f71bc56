"""tests/test_threads.py — multi-threaded stress (owner: tests suite).

Runs build/tests/test_threads (stamped objects handed between threads, realloc, exiting and replaced
threads; about 5 s each) on glibc and on hakmem (linked, preloaded, hardened build).
"""
import re

import pytest

from conftest import VARIANTS, describe

SECONDS = "5"


@pytest.mark.parametrize("variant", VARIANTS)
def test_thread_stress(run_program, variant):
    proc = run_program("test_threads", variant, args=[SECONDS], timeout=180)
    assert proc.returncode == 0, describe(proc)
    assert f"allocator: {'glibc' if variant == 'glibc' else 'hakmem'}" in proc.stdout, describe(proc)
    assert re.search(r"test_threads: \d+ checks, 0 failed", proc.stdout), describe(proc)
    created = int(re.search(r"objects created (\d+)", proc.stdout).group(1))
    assert created > 10000, "the stress did too little work" + describe(proc)
