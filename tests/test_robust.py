"""Robustness of libhakmem under stress (issue 4): allocation failure under an address-space limit and
beyond the machine's memory and swap, thread storms that must give their memory back, fork() while other threads allocate, and a
multithreaded mailing mix. Each C program of tests/c (fault_*, storm_*, built by tests/Makefile) runs on
hakmem (the binary linked to libhakmem.so), on the hardened build (libhakmem-secure.so preloaded) and on
plain glibc, which every standard check must pass too. The programs print their own numbers; a failure
shows them."""

import os
import resource
import subprocess

import pytest

MODES = ["linked", "secure", "glibc"]  # conftest's variants: linked to libhakmem.so, secure preloaded, glibc
STATS_BANNER = "hakmem stats:"


@pytest.fixture
def run(test_binary, libhakmem_secure):
    """run(name, mode, *args, timeout=300, preexec_fn=None) -> (CompletedProcess, report text)."""
    def run_in_mode(name, mode, *args, timeout=300, preexec_fn=None):
        prog = test_binary(name, "linked" if mode == "linked" else "glibc")
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("HAKMEM_")}
        if mode == "secure":
            env["LD_PRELOAD"] = str(libhakmem_secure)
        if mode != "glibc":
            env["HAKMEM_STATS"] = "1"
        argv = [str(prog), *map(str, args)]
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, preexec_fn=preexec_fn)
        report = (f"{' '.join(argv)} [{mode}] exit {proc.returncode}\n--- stdout\n{proc.stdout}"
                  f"--- stderr\n{proc.stderr[-4000:]}")
        print(report)
        return proc, report
    return run_in_mode


def check_allocator(proc, mode, report):
    """The hakmem modes must really have run on hakmem: its statistics block is printed at exit."""
    if mode == "glibc":
        assert STATS_BANNER not in proc.stderr, report
    else:
        assert STATS_BANNER in proc.stderr, report


def address_space_limit(limit_bytes):
    """preexec_fn: the child starts with RLIMIT_AS = limit (what `ulimit -v` does)."""
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    return apply


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["fault_oom", "fault_oom_new"])
def test_allocation_failure_under_address_space_limit(run, name, mode):
    # The child starts under a 4 GiB `ulimit -v` and lowers it to what it uses + 192 MiB itself.
    proc, report = run(name, mode, 192, preexec_fn=address_space_limit(4 << 30))
    assert proc.returncode == 0, report
    assert "all scenarios passed" in proc.stdout, report
    assert "FAIL" not in proc.stdout, report
    check_allocator(proc, mode, report)


@pytest.mark.parametrize("mode", MODES)
def test_requests_beyond_memory_and_swap_fail(run, mode):
    # No limit: twice the machine's memory and swap is refused by the kernel's overcommit check (policy 0
    # or 2) for glibc, and must be for hakmem too; under policy 1 both must grant it.
    proc, report = run("fault_overcommit", mode)
    assert proc.returncode == 0, report
    assert "all scenarios passed" in proc.stdout, report
    check_allocator(proc, mode, report)


@pytest.mark.parametrize("mode", MODES)
def test_tight_ulimit_then_recovery(run, mode):
    # A much tighter limit: 48 MiB of headroom leaves hakmem little room for caches and metadata.
    proc, report = run("fault_oom", mode, 48, preexec_fn=address_space_limit(2 << 30))
    assert proc.returncode == 0, report
    assert "all scenarios passed" in proc.stdout, report
    check_allocator(proc, mode, report)


@pytest.mark.parametrize("mode", MODES)
def test_thread_storm_returns_memory(run, mode):
    proc, report = run("storm_threads", mode, 6000, 32)
    assert proc.returncode == 0, report
    assert "damaged blocks=0 failed allocations=0" in proc.stdout, report
    assert "rss_end=" in proc.stdout, report
    expected = "malloc_trim(0)" if mode == "glibc" else "hak_collect(true)"
    assert f"collector: {expected}" in proc.stdout, report
    check_allocator(proc, mode, report)


@pytest.mark.parametrize("mode", MODES)
def test_fork_while_threads_allocate(run, mode):
    proc, report = run("storm_fork", mode, 200, timeout=240)
    assert proc.returncode == 0, report
    assert "forks=200 failed=0" in proc.stdout, report
    check_allocator(proc, mode, report)


@pytest.mark.parametrize("mode", MODES)
def test_multithreaded_mailing_mix(run, mode):
    proc, report = run("storm_mt", mode, 100000)
    assert proc.returncode == 0, report
    assert "damaged=0 failed=0" in proc.stdout, report
    check_allocator(proc, mode, report)
