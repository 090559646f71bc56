"""tests/test_learned_delay.py — the purge delay learns the interval at which a program reuses its memory (large
blocks, or the free slices of small and medium pages), when the purger had purged it in between, and only up to
32 times the option (tests/c/test_learned_delay.c)."""
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
