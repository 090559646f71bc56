"""tests/test_learned_delay.py — the purge delay learns the interval at which a program reuses its memory (large
blocks, or the free slices of small and medium pages), when the purger had purged it in between, and only up to
32 times the option (tests/c/test_learned_delay.c)."""
import re
import shutil

import pytest

from conftest import describe


@pytest.mark.parametrize("variant", ["linked", "preload", "secure"])
@pytest.mark.parametrize("case,delay_ms", [("periodic", "100"), ("slices", "100"), ("sparse", "20"), ("share", "20"), ("ratchet", "20"), ("young", "1000"), ("held", "20"), ("held-on", "20")])
def test_purge_delay_learns_reuse(run_program, variant, case, delay_ms):
    """periodic: a 64 MiB block reused every 3 delays is purged between the first rounds only (each round faulted
    16,384 pages in again). slices: so are 256 blocks of 256 KiB (their segments' free slices). sparse: reused
    every 40 delays, beyond what the delay learns, it is purged between every two rounds. share: a new thread's
    few blocks, which take back some of a burst's purged slices, teach nothing, and each burst is purged. ratchet:
    one pause of 25 delays between rounds every 3 delays does not keep the last round resident for the 31 delays
    it taught (the rounds after it bring the delay down to 5/4 of theirs). young: slices freed 7/10 of a delay
    after others of their segments are not purged by the older ones' deadline, but by their own. held: a 256 MiB
    block is kept for its size (about 1 ms a MiB), past the delay, and then goes back to the OS. held-on: a later
    free that takes the cache past half its cap does not end that hold (its own collection purged the block). The purge
    mode is fixed, since MADV_FREE pages would not fault in again."""
    env = {"HAKMEM_PURGE_MODE": "dontneed", "HAKMEM_PURGE_DELAY_MS": delay_ms, "HAKMEM_LARGE_CACHE_MB": "1024",
           "HAKMEM_BACKGROUND_PURGE": "1"}
    proc = run_program("test_learned_delay", variant, args=(case, delay_ms), env=env, timeout=120)
    assert proc.returncode == 0 and f"{case}:" in proc.stdout, describe(proc)


def test_a_free_past_the_cap_leaves_a_held_block_to_the_purger(test_binary, run_plain, tmp_path):
    """A 400 MiB block held for its size, then a 700 MiB free that takes the cache past its 1 GiB cap: the
    first block is purged by the purger thread, not by the free (which that cost 41-55 ms), and is back
    within 3 s. strace shows which thread called madvise on it."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace not installed (apt-get install strace)")
    log = tmp_path / "strace.log"
    env = {"HAKMEM_PURGE_MODE": "dontneed", "HAKMEM_PURGE_DELAY_MS": "20", "HAKMEM_LARGE_CACHE_MB": "1024",
           "HAKMEM_BACKGROUND_PURGE": "1"}
    proc = run_plain([strace, "-f", "-qq", "-e", "trace=madvise", "-o", str(log),
                      test_binary("test_learned_delay"), "held-cap", "20"], env=env, timeout=120)
    assert proc.returncode == 0 and "held-cap:" in proc.stdout, describe(proc)
    found = re.search(r"first block (0x[0-9a-f]+) in process (\d+)", proc.stdout)
    assert found, describe(proc)
    block, pid = found.group(1), found.group(2)
    purges = [line.split()[0] for line in log.read_text().splitlines()
              if f"madvise({block}," in line and "MADV_DONTNEED" in line]
    assert purges, f"no MADV_DONTNEED of the first block {block} in the strace log" + describe(proc)
    assert pid not in purges, f"the main thread ({pid}) purged the held block itself: {purges}" + describe(proc)
