"""The sub-commands end to end on tiny runs: files written, tables filled, allocator mismatch fatal,
Ctrl-C leaving a partial report."""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from lab import compare, plots, runner
from lab.cli import build_parser
from lab.tests.helpers import run_lab

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _allocs(glibc, peers):
    return ",".join([glibc.name] + [p.name for p in peers[:1]])


def _is_png(path):
    return path.read_bytes()[:8] == PNG_MAGIC


def test_parser_knows_every_subcommand():
    p = build_parser()
    for cmd in ("compare", "quick", "scaling", "ab", "soak", "latency", "list"):
        extra = ["--env", "X", "--values", "1"] if cmd == "ab" else []
        assert p.parse_args([cmd, *extra]).command == cmd


def test_list_shows_allocators_and_workloads(root):
    out = run_lab(root, "list")
    assert out.returncode == 0
    assert "glibc" in out.stdout and "realistic" in out.stdout and "floor" in out.stdout


def test_quick_writes_report_data_and_plots(bench_built, root, tmp_path, glibc, peers):
    out_dir = tmp_path / "quick"
    allocs = _allocs(glibc, peers)
    res = run_lab(root, "quick", "--size", "tiny", "--reps", "2", "--allocs", allocs, "--workloads",
                  "random_mixed,vm,floor,pair", "--out", str(out_dir), "--no-progress")
    assert res.returncode == 0, res.stderr
    assert "summary: geometric mean ratio to best" in res.stdout
    assert "floor:" in res.stdout
    text = (out_dir / "report.md").read_text()
    for needle in ("**Status:** complete", "## Summary", "### random_mixed", "### vm", "## Floor", "## Machine",
                   "## Allocators", "## Commands", "kernel", "glibc", "build/bench/random_mixed"):
        assert needle in text, needle
    assert "### floor" not in text, "the floor is not an allocator ranking"
    data = json.loads((out_dir / "data.json").read_text())
    n_alloc = len(allocs.split(","))
    assert len(data["runs"]) == 4 * n_alloc * (2 + 1), "reps plus one latency pass per pair"
    assert all(r["error"] is None for r in data["runs"])
    assert data["machine"]["cores"] == os.cpu_count()
    assert data["machine"]["cpus_usable"] == len(os.sched_getaffinity(0))
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:  # a source tree without git (a tarball) records none
        assert data["machine"]["hakmem_commit"].startswith(head.stdout.strip()), data["machine"]["hakmem_commit"]
        assert f"| hakmem commit | {data['machine']['hakmem_commit']} |" in text
    assert {r["allocator"] for r in data["summary"]["geomean"]} == set(allocs.split(","))
    if peers:
        assert f"LD_PRELOAD={peers[0].path}" in text
    if plots.available():
        assert _is_png(out_dir / "workloads.png") and _is_png(out_dir / "geomean.png")


def test_compare_fills_syscall_column_from_strace(bench_built, root, tmp_path, glibc):
    if runner.strace_path() is None:
        pytest.skip("strace not installed (apt-get install strace)")
    out_dir = tmp_path / "cmp"
    res = run_lab(root, "compare", "--size", "tiny", "--reps", "1", "--allocs", "glibc", "--workloads",
                  "big", "--no-latency", "--out", str(out_dir), "--no-progress")
    assert res.returncode == 0, res.stderr
    summary = json.loads((out_dir / "data.json").read_text())["summary"]
    row = summary["tables"]["big"][0]
    assert row["syscalls"]["mmap"] > 0 and row["syscalls_per_op"] > 0
    assert "## System calls" in (out_dir / "report.md").read_text()
    assert "strace -f -c" in (out_dir / "report.md").read_text()


def test_mismatched_allocator_aborts_loudly(bench_built, root, tmp_path, not_an_allocator):
    out_dir = tmp_path / "bad"
    res = run_lab(root, "quick", "--size", "tiny", "--reps", "1", "--alloc", f"fake={not_an_allocator}",
                  "--allocs", "fake", "--workloads", "random_mixed", "--out", str(out_dir), "--no-progress")
    assert res.returncode == 3
    assert "allocator mismatch" in res.stderr and "meant for fake" in res.stderr
    assert "**Status:** ABORTED" in (out_dir / "report.md").read_text()


def test_missing_named_allocator_is_a_usage_error(root, tmp_path):
    res = run_lab(root, "quick", "--allocs", "nosuch", "--out", str(tmp_path / "x"))
    assert res.returncode == 2 and "unknown allocator 'nosuch'" in res.stderr


@pytest.mark.parametrize("args, message", [
    (["--allocs", "glibc,glibc"], "--allocs names glibc more than once"),
    (["--allocs", "glibc", "--timeout", "-1"], "--timeout must be above 0"),
    (["--allocs", "glibc", "--threads", "0"], "--threads must be above 0"),
    (["--allocs", "glibc", "--reps", "0"], "--reps must be at least 1"),
    (["--allocs", "glibc", "--workloads", "nosuch"], "nosuch"),
    (["--allocs", "glibc", "--workloads", "pair,pair,random_mixed"], "--workloads names pair more than once"),
])
def test_bad_options_are_usage_errors(root, tmp_path, args, message):
    """Exit status 2 and one line, before anything runs. A repeated allocator used to be run twice under
    one key (its rounds no longer lined up and a slower allocator ranked first); a timeout or thread count
    of 0 turned every run into a failure (the review of 2026-11-24); a repeated workload was run twice
    and counted twice in its summary (the audit of 2026-11-25)."""
    workloads = [] if "--workloads" in args else ["--workloads", "random_mixed"]
    res = run_lab(root, "quick", *args, *workloads, "--out", str(tmp_path / "x"))
    assert res.returncode == 2, res.stderr
    assert message in res.stderr
    assert not (tmp_path / "x").exists()


def test_a_repeated_alloc_name_is_a_usage_error(root, tmp_path, glibc):
    lib = "/lib/x86_64-linux-gnu/libc.so.6"
    res = run_lab(root, "quick", "--alloc", f"x={lib}", "--alloc", f"x={lib}", "--allocs", "glibc",
                  "--out", str(tmp_path / "x"))
    assert res.returncode == 2 and "--alloc names x more than once" in res.stderr


def test_scaling_reports_degradation(bench_built, root, tmp_path, glibc):
    out_dir = tmp_path / "scaling"
    res = run_lab(root, "scaling", "--size", "tiny", "--reps", "1", "--allocs", "glibc", "--workloads",
                  "larson,mid_large_mt", "--threads", "1,2", "--out", str(out_dir), "--no-progress")
    assert res.returncode == 0, res.stderr
    text = (out_dir / "report.md").read_text()
    assert "| Allocator | 1 thr | 2 thr |" in text and "| Allocator | 1->2 |" in text
    result = json.loads((out_dir / "data.json").read_text())["summary"]["results"]["larson/glibc"]
    one, two = result["points"]["1"], result["points"]["2"]
    expected = (two["seconds"] / one["seconds"]) / (two["ops"] / one["ops"])
    assert result["degradation"]["1->2"] == pytest.approx(expected)
    assert "0.50 is ideal" in text  # the time per unit of work halves when twice the threads fit the cores
    if plots.available():
        assert _is_png(out_dir / "scaling.png")


def test_ab_over_glibc_tunables(bench_built, root, tmp_path):
    out_dir = tmp_path / "ab"
    res = run_lab(root, "ab", "--allocs", "glibc", "--env", "GLIBC_TUNABLES", "--values",
                  "default,glibc.malloc.tcache_count=0", "--sizes", "64,512", "--size", "tiny", "--reps", "2",
                  "--out", str(out_dir), "--no-progress")
    assert res.returncode == 0, res.stderr
    text = (out_dir / "report.md").read_text()
    assert "| default (baseline) |" in text and "| glibc.malloc.tcache_count=0 |" in text
    assert "### 64 B" in text and "### 512 B" in text
    assert "GLIBC_TUNABLES=glibc.malloc.tcache_count=0" in text
    assert "env -u GLIBC_TUNABLES" in text
    results = json.loads((out_dir / "data.json").read_text())["summary"]["results"]
    assert results["64 B/default"]["delta_pct"] == 0.0
    # the value against the baseline, round by round (two rounds: an interval too short for 95 %)
    assert "paired" not in results["64 B/default"]
    p = results["512 B/glibc.malloc.tcache_count=0"]["paired"]
    assert p["rounds"] == 2 and p["ci_low"] <= p["ratio"] <= p["ci_high"] and p["coverage"] == 0.5
    assert p["verdict"].endswith("(too few rounds for a 95 % interval)")
    assert "| glibc.malloc.tcache_count=0 | 512 B | 2 |" in text
    assert set(results) == {"64 B/default", "64 B/glibc.malloc.tcache_count=0", "512 B/default",
                            "512 B/glibc.malloc.tcache_count=0"}


def test_ab_refuses_an_allocator_it_would_not_run(bench_built, root, tmp_path, not_an_allocator):
    """ab measures one allocator: an --alloc beside it would be listed in the report but never run."""
    res = run_lab(root, "ab", "--alloc", f"other={not_an_allocator}", "--env", "HAKMEM_DRAIN_INTERVAL", "--values",
                  "default,8", "--size", "tiny", "--reps", "1", "--out", str(tmp_path / "ab"), "--no-progress")
    assert res.returncode != 0
    assert "ab runs one allocator" in res.stderr
    assert not (tmp_path / "ab" / "report.md").exists()


def test_soak_samples_rss_and_throughput(bench_built, root, tmp_path):
    out_dir = tmp_path / "soak"
    res = run_lab(root, "soak", "--allocs", "glibc", "--minutes", "0.05", "--interval", "0.5", "--no-strace",
                  "--out", str(out_dir), "--no-progress")
    assert res.returncode == 0, res.stderr
    figures = json.loads((out_dir / "data.json").read_text())["summary"]["figures"]["glibc"]
    assert figures["samples"] >= 4 and figures["rss_samples"] >= 4
    assert figures["rss_peak_kb"] >= figures["rss_last_kb"] > 0
    tput = [p["ops_per_sec"] for p in json.loads((out_dir / "data.json").read_text())["runs"][0]["progress"]]
    mean = sum(tput) / len(tput)
    cv = 100 * (sum((x - mean) ** 2 for x in tput) / (len(tput) - 1)) ** 0.5 / mean
    assert figures["tput_mean"] == pytest.approx(mean) and figures["tput_cv_pct"] == pytest.approx(cv)
    assert "RSS drift" in (out_dir / "report.md").read_text()
    if plots.available():
        assert _is_png(out_dir / "soak.png")


def test_latency_ccdf(bench_built, root, tmp_path):
    out_dir = tmp_path / "lat"
    res = run_lab(root, "latency", "--allocs", "glibc", "--workloads", "random_mixed,vm", "--size", "tiny",
                  "--out", str(out_dir), "--no-progress")
    assert res.returncode == 0, res.stderr
    results = json.loads((out_dir / "data.json").read_text())["summary"]["results"]
    rm = results["random_mixed/glibc"]
    assert rm["count"] == 200 * 1024
    assert rm["p50"] <= rm["p90"] <= rm["p99"] <= rm["p99.9"] <= rm["max"]
    assert "| Allocator | operations | p50 | p90 | p99 | p99.9 | max |" in (out_dir / "report.md").read_text()
    if plots.available():
        assert _is_png(out_dir / "latency-ccdf.png")


def _bench_processes():
    """Processes running `random_mixed 100M` (the full-size run the test below interrupts; each takes about
    a second, so one the lab left behind is still there when it has ended)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"/bench/random_mixed") and b"100M" in cmd:
            found.append(int(pid))
    return found


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_keeps_a_partial_report(bench_built, root, tmp_path, sig):
    """Ctrl-C (SIGINT), SIGTERM or SIGHUP three seconds into a run far too long to finish by then leaves
    the rounds so far in a report marked partial, naming the signal, and no workload running (SIGTERM and
    SIGHUP used to end the lab at once: no report, the workload left running). The child starts with
    SIGINT at its default: a test run started in the background of a non-interactive shell inherits it
    ignored, and Python then never raises KeyboardInterrupt. Runs of the standard size (a fraction of a
    second each): a full-size run took over three seconds on a loaded machine, and none had ended."""
    out_dir = tmp_path / "partial"
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    proc = subprocess.Popen([sys.executable, "-m", "lab", "compare", "--size", "standard", "--reps", "5000", "--allocs",
                             "glibc", "--workloads", "random_mixed", "--no-progress", "--out", str(out_dir)],
                            cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(3.0)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    text = (out_dir / "report.md").read_text()
    assert "**Status:** PARTIAL" in text
    assert ("Ctrl-C" if sig == signal.SIGINT else sig.name) in text
    runs = json.loads((out_dir / "data.json").read_text())["runs"]
    assert 1 <= len(runs) < 5000
    assert "### random_mixed" in text
    assert not _bench_processes(), "a workload kept running after the lab ended"


def test_an_out_folder_that_cannot_be_written_is_refused_before_any_run(root, tmp_path):
    """--out under a file (or anywhere the lab cannot write) is a usage error at once: it used to run
    everything and then lose it all to a traceback."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    res = run_lab(root, "compare", "--allocs", "glibc", "--reps", "1", "--workloads", "pair", "--no-strace",
                  "--no-latency", "--out", str(blocker / "sub"))
    assert res.returncode == 2, res.stderr
    assert "cannot write there" in res.stderr
    assert "RESULT" not in res.stdout


@pytest.mark.parametrize("value", ["inf", "nan"])
def test_a_timeout_must_be_finite(root, value):
    res = run_lab(root, "compare", "--allocs", "glibc", "--reps", "1", "--workloads", "pair", "--timeout", value)
    assert res.returncode == 2, res.stderr


def test_without_strace_the_column_stays_empty_and_the_report_says_why(bench_built, root, tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "strace_path", lambda: None)
    args = argparse.Namespace(allocs="glibc", alloc=[], size="tiny", reps=1, out=str(tmp_path / "nostrace"),
                              root=str(root), timeout=60.0, no_progress=True, workloads="random_mixed",
                              threads=None, no_strace=False, no_latency=True)
    assert compare.run_compare(args) == 0
    text = (tmp_path / "nostrace" / "report.md").read_text()
    assert "strace not installed (`apt-get install strace`)" in text
    row = json.loads((tmp_path / "nostrace" / "data.json").read_text())["summary"]["tables"]["random_mixed"][0]
    assert "syscalls_per_op" not in row


def test_ab_refuses_repeated_values(root, tmp_path):
    """A value listed twice would pair runs of different rounds against the baseline: refused up front."""
    res = run_lab(root, "ab", "--allocs", "glibc", "--env", "X", "--values", "1,2,1", "--size", "tiny",
                  "--out", str(tmp_path / "ab"), "--no-progress")
    assert res.returncode != 0
    assert "--values lists 1 more than once" in res.stderr
    assert not (tmp_path / "ab").exists()


def test_rounds_change_the_order(bench_built, root, tmp_path, hakmem, glibc):
    """The rounds follow compare.round_order (the review of 2026-11-24 found the order fixed: any
    after-effect of a run fell on the same allocator every round)."""
    out_dir = tmp_path / "rot"
    res = run_lab(root, "quick", "--allocs", "hakmem,glibc", "--workloads", "pair", "--size", "tiny", "--reps", "3",
                  "--no-strace", "--no-latency", "--no-progress", "--out", str(out_dir))
    assert res.returncode == 0, res.stderr
    order = [r["allocator"] for r in json.loads((out_dir / "data.json").read_text())["runs"]]
    assert order == ["hakmem", "glibc", "glibc", "hakmem", "hakmem", "glibc"]


@pytest.mark.parametrize("n", range(1, 8))
def test_round_orders_are_balanced(n):
    """Over n rounds (2n when n is odd) every allocator runs in every position and right after every
    other allocator equally often. (Rotating the order alone left each one after the same other in all
    rounds but one.)"""
    rounds = [compare.round_order(n, i) for i in range(n if n % 2 == 0 else 2 * n)]
    assert all(sorted(r) == list(range(n)) for r in rounds)
    after = {(a, b): 0 for a in range(n) for b in range(n) if a != b}
    for r in rounds:
        for a, b in zip(r, r[1:]):
            after[(a, b)] += 1
    assert len(set(after.values())) <= 1, after
    positions = {(p, a): 0 for p in range(n) for a in range(n)}
    for r in rounds:
        for p, a in enumerate(r):
            positions[(p, a)] += 1
    assert len(set(positions.values())) == 1, positions
