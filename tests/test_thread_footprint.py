"""tests/test_thread_footprint.py — the resident memory a live thread costs when it keeps one block of each
of 8 classes, 16 B to 2 KiB (tests/c/thread_footprint.c). A fresh page carves only its first OS page, so
each such thread holds about one OS page per class: some 53 KiB per thread under hakmem (glibc about 14),
where carving 16 KiB per class cost 150."""
import re

import pytest

from conftest import VARIANTS, describe

LIMIT_KIB = 96


@pytest.mark.parametrize("variant", VARIANTS)
def test_live_threads_with_a_few_blocks_stay_small(run_program, variant):
    proc = run_program("thread_footprint", variant, args=("400", str(LIMIT_KIB)), timeout=60)
    assert proc.returncode == 0, describe(proc)
    per_thread = float(re.search(r"([\d.]+) KiB per thread", proc.stdout).group(1))
    assert 4 < per_thread <= LIMIT_KIB, describe(proc)
