"""tests/test_fork.py — fork() while threads allocate (owner: tests suite).

Runs build/tests/test_fork (children that allocate, start threads, fork again, exit or exec /bin/true or
themselves) on glibc and on hakmem (linked, preloaded, hardened build). With HAKMEM_STATS=1 every hakmem
process prints its statistics at exit, so the exec'ed copies of the program show up on stderr too.
"""
import re

import pytest

from conftest import VARIANTS, describe, stats_blocks

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
