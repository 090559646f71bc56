"""Robustness of libhakmem under stress (issue 4): allocation failure under an address-space limit,
thread storms that must give their memory back, fork() while other threads allocate, and a
multithreaded mailing mix. Each C program of tests/c (fault_*, storm_*) runs on hakmem (the binary
linked to libhakmem.so), on the hardened build (libhakmem-secure.so preloaded) and on plain glibc, which
every standard check must pass too. The programs print their own numbers; a failure shows them."""

import os
import resource
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"
BIN = BUILD / "tests"
LIBS = {"hakmem": BUILD / "libhakmem.so", "secure": BUILD / "libhakmem-secure.so"}
MODES = ["hakmem", "secure", "glibc"]
STATS_BANNER = "hakmem stats:"


def command(name, mode, args):
    """argv and environment running tests/c/<name> in a mode; skip if the build is missing."""
    prog = BIN / name if mode == "hakmem" else BIN / f"{name}.glibc"
    if not prog.exists():
        pytest.skip(f"{prog} not built (run `make` and `make -C tests`)")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if mode == "secure":
        if not LIBS["secure"].exists():
            pytest.skip(f"{LIBS['secure']} not built")
        env["LD_PRELOAD"] = str(LIBS["secure"])
    if mode != "glibc":
        env["HAKMEM_STATS"] = "1"
    return [str(prog), *map(str, args)], env


def run(name, mode, *args, timeout=300, preexec_fn=None):
    argv, env = command(name, mode, args)
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=preexec_fn)
    report = f"{' '.join(argv)} [{mode}] exit {proc.returncode}\n--- stdout\n{proc.stdout}--- stderr\n{proc.stderr[-4000:]}"
    print(report)
    return proc, report


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
def test_allocation_failure_under_address_space_limit(name, mode):
    # The child starts under a 4 GiB `ulimit -v` and lowers it to what it uses + 192 MiB itself.
    proc, report = run(name, mode, 192, preexec_fn=address_space_limit(4 << 30))
    assert proc.returncode == 0, report
    assert "all scenarios passed" in proc.stdout, report
    assert "FAIL" not in proc.stdout, report
    check_allocator(proc, mode, report)


@pytest.mark.parametrize("mode", MODES)
def test_tight_ulimit_then_recovery(mode):
    # A much tighter limit: 48 MiB of headroom leaves hakmem little room for caches and metadata.
    proc, report = run("fault_oom", mode, 48, preexec_fn=address_space_limit(2 << 30))
    assert proc.returncode == 0, report
    assert "all scenarios passed" in proc.stdout, report


@pytest.mark.parametrize("mode", MODES)
def test_thread_storm_returns_memory(mode):
    proc, report = run("storm_threads", mode, 6000, 32)
    assert proc.returncode == 0, report
    assert "damaged blocks=0 failed allocations=0" in proc.stdout, report
    assert "rss_end=" in proc.stdout, report
    expected = "malloc_trim(0)" if mode == "glibc" else "hak_collect(true)"
    assert f"collector: {expected}" in proc.stdout, report
    check_allocator(proc, mode, report)


@pytest.mark.parametrize("mode", MODES)
def test_fork_while_threads_allocate(mode):
    proc, report = run("storm_fork", mode, 200, timeout=240)
    assert proc.returncode == 0, report
    assert "forks=200 failed=0" in proc.stdout, report
    check_allocator(proc, mode, report)


@pytest.mark.parametrize("mode", MODES)
def test_multithreaded_mailing_mix(mode):
    proc, report = run("storm_mt", mode, 100000)
    assert proc.returncode == 0, report
    assert "damaged=0 failed=0" in proc.stdout, report
    check_allocator(proc, mode, report)
