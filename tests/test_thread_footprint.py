"""tests/test_thread_footprint.py — the resident memory a live thread costs when it keeps one block of each
of 8 classes, 16 B to 2 KiB (tests/c/thread_footprint.c). A fresh page carves only its first OS page, so
each such thread holds about one OS page per class: some 53 KiB per thread under hakmem (glibc about 14),
where carving 16 KiB per class cost 150; and the same under mlockall, where the kernel populates whole
mappings. And an idle thread that used medium classes: it keeps their emptied first pages only up to a
bound."""
import re

import pytest

from conftest import VARIANTS, describe

LIMIT_KIB = 96


def within_limit(run_program, variant, args, label, limit_kib):
    """Run thread_footprint with `args` (threads, limit, mode...) as `variant`; assert it exited 0, printed
    `label`, and measured a growth per thread above 4 KiB (it measured something) and at most the limit."""
    proc = run_program("thread_footprint", variant, args=args, timeout=60)
    assert proc.returncode == 0, describe(proc)
    assert label in proc.stdout, describe(proc)
    per_thread = float(re.search(r"([\d.]+) KiB per thread", proc.stdout).group(1))
    assert 4 < per_thread <= limit_kib, describe(proc)


@pytest.mark.parametrize("variant", VARIANTS)
def test_live_threads_with_a_few_blocks_stay_small(run_program, variant):
    within_limit(run_program, variant, ("400", str(LIMIT_KIB)), "400 threads,", LIMIT_KIB)


MLOCK_LIMIT_KIB = 2048


@pytest.mark.parametrize("variant", VARIANTS)
def test_threads_under_mlockall_lock_only_the_pages_they_use(run_program, variant):
    """After mlockall(MCL_CURRENT | MCL_FUTURE) the kernel populates every new writable mapping whole;
    segments are then mapped read-only and made writable slice by slice as pages take them, so a thread
    with 8 small blocks locks about 0.9 MiB (hardened build 1.2, glibc 84 KiB) instead of its whole
    4 MiB segment (4,250 KiB per thread before)."""
    within_limit(run_program, variant, ("100", str(MLOCK_LIMIT_KIB), "mlock"), "under mlockall", MLOCK_LIMIT_KIB)


MEDIUM_LIMIT_KIB = 1024


@pytest.mark.parametrize("variant", VARIANTS)
def test_idle_threads_give_back_their_medium_first_pages(run_program, variant):
    """64 threads each write and free one block of each of 10 medium sizes (16-384 KiB) in 3 rounds 10 ms
    apart, then sleep: a second later each holds about 0.3 MiB above the start (hardened build 0.74, glibc
    0.12), where it kept the emptied first page of every class for good, 1.4 MiB (hardened 1.6)."""
    within_limit(run_program, variant, ("64", str(MEDIUM_LIMIT_KIB), "medium"), "idle after medium blocks",
                 MEDIUM_LIMIT_KIB)


BURST_LIMIT_KIB = 5632


@pytest.mark.parametrize("variant", VARIANTS)
def test_idle_threads_after_a_burst_keep_a_bounded_part(run_program, variant):
    """32 threads each write 4 blocks of a medium size at once and free them, for 10 sizes (16-384 KiB),
    in 3 rounds back to back, then sleep. The classes are hot (they took a page again right after retiring
    their first one) and kept their first pages whole: 6.0-6.5 MiB a thread (12 MiB with 12 blocks of a
    size); now only up to HOT_HEAD_BYTES of them: 3.9-5.0 MiB (jemalloc 0.9-1.0, tcmalloc 1.7-1.9, mimalloc
    2.8; docs/notes/2026-11-26-idle-burst-heads.md: those kept first pages are about 4.1 MiB of it)."""
    within_limit(run_program, variant, ("32", str(BURST_LIMIT_KIB), "medium-burst", "4"),
                 "idle after a burst of medium blocks (4 of a size at once)", BURST_LIMIT_KIB)
