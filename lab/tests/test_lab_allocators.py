"""Allocator discovery, selection, and the check that each run used the intended allocator — including a
deliberately wrong preload."""

import os
import time

import pytest

from lab import allocators as al
from lab import runner
from lab import workloads as wl


def _touch(path):
    """A file that passes for a shared object where only its first bytes are looked at."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x7fELF")
    return path


def test_discover_names_the_missing_peers_with_their_install_command(tmp_path):
    libs = tmp_path / "lib"
    _touch(libs / "libjemalloc.so.2")
    d = al.discover(tmp_path, lib_dirs=(str(libs),))
    assert d.names() == ["glibc", "jemalloc"]
    assert {a.name: a.path for a in d.found}["jemalloc"] == str(libs / "libjemalloc.so.2")
    reasons = {m.name: m.reason for m in d.missing}
    assert "apt-get install libmimalloc2.0" in reasons["mimalloc"]
    assert "apt-get install libtcmalloc-minimal4" in reasons["tcmalloc"]
    assert "make lib" in reasons["hakmem"]


def test_discover_finds_our_build(tmp_path):
    _touch(tmp_path / "build" / "libhakmem.so")
    _touch(tmp_path / "build" / "libhakmem-secure.so")
    d = al.discover(tmp_path, lib_dirs=())
    assert d.names()[:3] == ["hakmem", "hakmem-secure", "glibc"]
    assert al.select(d, None) == [a for a in d.found if a.name != "hakmem-secure"], "secure is opt-in"
    assert [a.name for a in al.select(d, ["hakmem-secure", "glibc"])] == ["hakmem-secure", "glibc"]


def test_select_errors_say_what_to_do(tmp_path):
    d = al.discover(tmp_path, lib_dirs=())
    with pytest.raises(al.AllocatorError, match="apt-get install libjemalloc2"):
        al.select(d, ["jemalloc"])
    with pytest.raises(al.AllocatorError, match="unknown allocator 'nope'"):
        al.select(d, ["nope"])


def test_alloc_spec(tmp_path):
    lib = _touch(tmp_path / "libx.so")
    a = al.parse_alloc_spec(f"mine={lib}")
    assert (a.name, a.path) == ("mine", str(lib))
    d = al.discover(tmp_path, lib_dirs=(), extra=(f"mine={lib}",))
    assert [x.name for x in al.select(d, ["glibc"], (f"mine={lib}",))] == ["glibc", "mine"]
    for bad in ("mine", f"={lib}", "mine=", f"glibc={lib}", "bad name=/x", f"mine={tmp_path}/absent.so"):
        with pytest.raises(al.AllocatorError):
            al.parse_alloc_spec(bad)
    text = tmp_path / "notes.txt"
    text.write_text("not a library")
    with pytest.raises(al.AllocatorError, match="not a shared object"):
        al.parse_alloc_spec(f"mine={text}")


def test_a_library_whose_path_holds_a_space_or_colon_is_preloaded(bench_built, root, hakmem, tmp_path):
    """LD_PRELOAD splits at spaces and colons: such a path (a clone in "My Projects", say) used to end in
    an allocator mismatch. It is preloaded through a link, and the check still names the library."""
    odd = tmp_path / "dir with space" / "lib:hakmem.so"
    odd.parent.mkdir()
    odd.write_bytes(open(hakmem.path, "rb").read())
    a = al.parse_alloc_spec(f"odd={odd}")
    r = runner.run(_spec(a), root, timeout=60)
    assert r.ok, r.error
    assert a.matches(r.allocator_check)
    assert " " not in a.env()["LD_PRELOAD"] and ":" not in a.env()["LD_PRELOAD"]


def test_matches_follows_symlinks(tmp_path):
    real = _touch(tmp_path / "libreal.so.1")
    link = tmp_path / "libreal.so"
    os.symlink(real, link)
    a = al.Allocator("x", str(link))
    assert a.matches(str(real))
    assert not a.matches("/lib/x86_64-linux-gnu/libc.so.6")
    assert not a.matches(None)
    g = al.Allocator("glibc", None)
    assert g.matches("/lib/x86_64-linux-gnu/libc.so.6")
    assert g.matches("/lib/libc-2.31.so")
    assert not g.matches(str(real))
    assert not g.matches("unknown")


def test_verify_raises_with_both_names():
    libc = "/lib/x86_64-linux-gnu/libc.so.6"
    with pytest.raises(al.AllocatorMismatch, match=f"meant for jemalloc.*got malloc from {libc}"):
        al.verify(al.Allocator("jemalloc", "/usr/lib/libjemalloc.so.2"), libc, "cmd")


def _spec(a, **kw):
    w = wl.get("random_mixed")
    return runner.Spec(w, a, w.args("tiny"), **kw)


def test_real_runs_pass_the_check(bench_built, root, glibc, peers):
    for a in [glibc, *peers]:
        r = runner.run(_spec(a), root, timeout=60)
        assert r.ok, r.error
        assert a.matches(r.allocator_check)
        assert r.results["ops"] == 200 * 1024


def test_hakmem_run_passes_the_check_and_prints_its_stats(bench_built, root, hakmem):
    r = runner.run(_spec(hakmem, env={"HAKMEM_STATS": "1"}), root, timeout=60)
    assert r.ok, r.error
    assert os.path.realpath(r.allocator_check) == os.path.realpath(hakmem.path)
    assert "hakmem stats:" in r.stderr_tail


def test_a_preload_without_malloc_is_detected(bench_built, root, not_an_allocator):
    fake = al.Allocator("fake", not_an_allocator)
    with pytest.raises(al.AllocatorMismatch, match="meant for fake"):
        runner.run(_spec(fake), root, timeout=60)


def test_a_missing_preload_file_is_detected(bench_built, root, tmp_path):
    """... and the mismatch shows what the dynamic loader said about it."""
    ghost = al.Allocator("ghost", str(tmp_path / "libghost.so"))
    with pytest.raises(al.AllocatorMismatch, match="(?s)libc.*its stderr: .*cannot be preloaded"):
        runner.run(_spec(ghost), root, timeout=60)


def test_a_preload_overridden_by_the_environment_is_detected(bench_built, root, glibc, peers):
    if not peers:
        pytest.skip("no Debian peer allocator installed (apt-get install libjemalloc2)")
    other = peers[0]
    with pytest.raises(al.AllocatorMismatch, match=f"got malloc from {other.path}"):
        runner.run(_spec(glibc, env={"LD_PRELOAD": other.path}), root, timeout=60)


def test_strace_pass_is_checked_and_counts_calls(bench_built, root, glibc, not_an_allocator):
    if runner.strace_path() is None:
        pytest.skip("strace not installed")
    res = runner.count_syscalls(_spec(glibc), root, timeout=60)
    assert isinstance(res, runner.SyscallCount), res
    assert res.ops == 200 * 1024
    assert res.calls["mmap"] > 0 and res.calls["brk"] > 0
    assert res.per_op() == res.total / res.ops
    with pytest.raises(al.AllocatorMismatch):
        runner.count_syscalls(_spec(al.Allocator("fake", not_an_allocator)), root, timeout=60)


def _processes_with(arg: str) -> list[int]:
    """Processes whose command line has `arg` as one of its words."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    words = f.read().split(b"\0")
            except OSError:
                continue
            if arg.encode() in words and b"strace" not in words[0]:
                found.append(int(entry))
    return found


def test_strace_timeout_kills_the_traced_workload(bench_built, root, glibc):
    """A strace pass that times out ends the workload too: killing strace alone left the traced program
    running, detached, through the timed runs that followed (the review of 2026-11-24)."""
    if runner.strace_path() is None:
        pytest.skip("strace not installed")
    w = wl.get("random_mixed")
    marker = "918273645"  # the seed: names this run's process
    res = runner.count_syscalls(runner.Spec(w, glibc, ["4000M", "8192", marker]), root, timeout=1.5)
    if isinstance(res, str) and res.startswith("strace run failed"):
        pytest.skip(f"strace cannot trace here: {res}")
    assert isinstance(res, str) and "timed out" in res, res
    deadline = time.monotonic() + 5
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _processes_with(marker)
    for pid in left:
        os.kill(pid, 9)
    assert not left, f"the traced workload outlived the timeout: pids {left}"


def _exited_children() -> list[int]:
    """Our children that have exited and wait to be reaped."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] == "Z" and int(fields[1]) == os.getpid():
                found.append(int(entry))
    return found


def test_ctrl_c_after_the_workload_exited_is_reported_as_ctrl_c(bench_built, root, glibc):
    """A Ctrl-C that lands after the workload has exited but before the lab read its last line must reach
    the caller as KeyboardInterrupt, with the child reaped. (A CI run once saw 'No child processes'
    instead: killing the child through Popen reaped it behind the lab's back.)"""
    def interrupt_once_exited(line: str) -> None:
        deadline = time.monotonic() + 30
        while not _exited_children():
            assert time.monotonic() < deadline, "the workload did not exit"
            time.sleep(0.01)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runner.run(_spec(glibc), root, timeout=60, on_line=interrupt_once_exited)
    assert _exited_children() == []


def test_ctrl_c_inside_the_wait_that_reaped_the_workload(bench_built, root, glibc, monkeypatch):
    """A Ctrl-C that lands after os.wait4 reaped the workload but before it returned must reach the caller
    as KeyboardInterrupt (a harness saw 'No child processes' in 1 of 50 such interrupts: the second wait
    found nothing left to reap)."""
    real_wait4 = os.wait4

    def reaped_then_interrupted(pid, options):
        real_wait4(pid, options)
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "wait4", reaped_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        runner.run(_spec(glibc), root, timeout=60)
    monkeypatch.undo()
    assert _exited_children() == []
