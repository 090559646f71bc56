"""What failed runs, a missing peak RSS and missing peers do to the summaries (the audit of 2026-11-25):
one failed run voids its cell in every experiment (compare, quick, paired, ab, scaling, latency, soak), a
workload that prints no peak RSS gets none (not the launcher's), and a run of the default field names
the peers it skipped. Most tests work on hand-made runs; the end-to-end ones run shell scripts standing
in for the workload programs, in a tree of their own, so they need no build and take about a second."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from lab import ab, compare, latency, report, runner, scaling, session, soak
from lab import allocators as al
from lab import workloads as wl
from lab.runner import Run
from lab.tests.helpers import run_lab

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


def _run(workload, allocator, metric, value, error=None, maxrss_kb=1000, command="cmd", **results):
    r = Run(workload, allocator, command, None, {}, wall_s=1.0, user_s=0.9, sys_s=0.1, maxrss_kb=maxrss_kb, minflt=10)
    r.results = {} if error and value is None else {"ops": 1000, metric: value, **results}
    r.error = error
    return r


def _flaky_pair() -> compare.Measurements:
    """The reproducer: `flaky` hangs in half its starts (killed at the timeout) and is fast in the rest."""
    m = compare.Measurements()
    m.timed[("pair", "hakmem")] = [_run("pair", "hakmem", "ns_per_op", 8.0 + i / 10) for i in range(8)]
    m.timed[("pair", "glibc")] = [_run("pair", "glibc", "ns_per_op", 12.0 + i / 10) for i in range(8)]
    m.timed[("pair", "flaky")] = [_run("pair", "flaky", "ns_per_op", 7.81) if i % 2 else
                                  _run("pair", "flaky", "ns_per_op", None, error="timed out after 1.5 s")
                                  for i in range(8)]
    m.timed[("random_mixed", "hakmem")] = [_run("random_mixed", "hakmem", "ops_per_sec", 100.0) for _ in range(8)]
    m.timed[("random_mixed", "glibc")] = [_run("random_mixed", "glibc", "ops_per_sec", 80.0) for _ in range(8)]
    m.timed[("random_mixed", "flaky")] = [_run("random_mixed", "flaky", "ops_per_sec", 90.0) for _ in range(8)]
    return m


def _fake_session(reps=8, missing=()):
    return SimpleNamespace(args=argparse.Namespace(reps=reps), missing_peers=list(missing))


def test_a_failed_run_voids_the_cell_and_the_geomean():
    """An allocator that hung in 4 of 8 runs was ranked on its 4 fast ones (7.81 ns/op, rank 1 here) and
    counted complete in the geomean."""
    m = _flaky_pair()
    allocs = ["hakmem", "glibc", "flaky"]
    works = [wl.get("pair"), wl.get("random_mixed")]
    tables = {w.name: compare.summarize(w, allocs, m) for w in works}
    pair = tables["pair"]
    assert [r["allocator"] for r in pair] == ["hakmem", "glibc", "flaky"]
    flaky = pair[2]
    assert flaky["failed"] and "metric" not in flaky and "ratio" not in flaky
    assert (flaky["failed_runs"], flaky["of_runs"], flaky["errors"]) == (4, 8, {"timed out after 1.5 s": 4})
    assert pair[0]["ratio"] == 1.0, "the best is the best of the allocators with a figure"
    table = compare.workload_table(wl.get("pair"), pair)
    assert "| - | flaky | FAILED 4/8 |" in table and "| 1 | hakmem |" in table
    assert "FAILED 4/8" in compare.workload_table(wl.get("pair"), pair, markdown=False)

    g = compare.geomeans(tables)
    assert [(r["allocator"], r["complete"], r["failed_on"]) for r in g] == [
        ("hakmem", True, []), ("glibc", True, []), ("flaky", False, ["pair"])]
    assert "| - | flaky | 1.111 | 1 of 2 (incomplete: failed on pair) |" in compare.geomean_table(g)

    prs = compare.paired_rows(works, tables, m)
    text = "\n\n".join(compare.sections(_fake_session(), works, tables, g, prs))
    line = "flaky on pair: 4 of 8 runs failed (timed out after 1.5 s ×4)"
    assert f"- {line}" in text, "the summary names who lost which runs"
    assert "Median of 8 interleaved runs; " in text and "were interrupted" not in text
    assert ("**Failed, so no figure, ratio or rank here:** flaky: 4 of 8 runs failed (timed out after 1.5 s ×4)."
            in text)
    data = json.loads(json.dumps(compare.summary_data(tables, g, prs, []), default=str))
    assert data["failed"] == [{"workload": "pair", "allocator": "flaky", "failed_runs": 4, "of_runs": 8,
                               "errors": {"timed out after 1.5 s": 4}}]
    assert compare.failed_lines(data["failed"]) == [line], "data.json and the report say the same"
    assert [r["allocator"] for r in data["geomean"] if r["complete"]] == ["hakmem", "glibc"]


def test_a_failed_subject_or_peer_gets_no_round_by_round_verdict():
    """round_ratios skipped the failed rounds and kept the rest; ab's verdict used it directly."""
    m = _flaky_pair()
    w = wl.get("pair")
    assert compare.round_ratios(w, m.timed[("pair", "flaky")], m.timed[("pair", "hakmem")]) == []
    assert compare.round_ratios(w, m.timed[("pair", "hakmem")], m.timed[("pair", "flaky")]) == []
    assert len(compare.round_ratios(w, m.timed[("pair", "hakmem")], m.timed[("pair", "glibc")])) == 8
    rows = compare.summarize(w, ["hakmem", "glibc", "flaky"], m)
    assert compare.paired(w, rows, m, subject="flaky") is None
    p = compare.paired(w, rows, m)
    assert p["peer"] == "glibc", "the best other is the best with a figure"
    assert ab.paired(w, m.timed[("pair", "flaky")], m.timed[("pair", "hakmem")]) is None


def test_a_failed_latency_pass_voids_the_cell():
    m = _flaky_pair()
    m.timed[("pair", "flaky")] = [_run("pair", "flaky", "ns_per_op", 7.81) for _ in range(8)]
    m.latency[("pair", "flaky")] = _run("pair", "flaky", "ns_per_op", None, error="killed by signal 11: oops")
    m.latency[("pair", "glibc")] = _run("pair", "glibc", "ns_per_op", 12.0, lat_p50_ns=20)
    rows = compare.summarize(wl.get("pair"), ["hakmem", "glibc", "flaky"], m)
    flaky = rows[-1]
    assert flaky["failed"] and flaky["latency_failed"] and flaky["errors"] == {"killed by signal 11": 1}
    assert report.fmt_failed(flaky) == "FAILED latency pass"
    assert report.failure_detail(flaky) == "the latency pass failed (killed by signal 11)"
    assert rows[1]["lat_p50_ns"] == 20


def test_the_paired_command_keeps_failed_runs_and_latency_passes_apart(tmp_path, capsys):
    """A failed latency pass prints no percentiles: it was read back as one more timed run."""
    from lab import cli
    runs = []
    for rnd in range(7):
        for a, v in (("hakmem", 2.0), ("glibc", 4.0), ("tcmalloc", 2.5)):
            runs.append(_run("pair", a, "ns_per_op", v + rnd, command="build/bench/pair 200K").to_dict())
    runs.append(_run("pair", "tcmalloc", "ns_per_op", None, error="timed out after 1.5 s",
                     command="LD_PRELOAD=/x.so build/bench/pair -l 200K").to_dict())
    data = {"allocators": [{"name": a} for a in ("hakmem", "glibc", "tcmalloc")], "runs": runs}
    names, m = compare.measurements_from_data(data)
    assert len(m.timed[("pair", "tcmalloc")]) == 7 and not m.latency[("pair", "tcmalloc")].ok
    (tmp_path / "data.json").write_text(json.dumps(data))
    assert cli.main(["paired", str(tmp_path)]) == 0
    assert "| pair | glibc | 7 |" in capsys.readouterr().out, "tcmalloc's cell is void: glibc is the best other"


def test_an_allocator_that_failed_everywhere_is_still_listed():
    tables = {"w1": [{"allocator": "a", "failed": False, "ratio": 1.0},
                     {"allocator": "b", "failed": True, "failed_runs": 2, "of_runs": 2,
                      "errors": {"exit status 1": 2}}]}
    g = compare.geomeans(tables)
    assert [(r["allocator"], r["geomean"], r["complete"]) for r in g] == [("a", 1.0, True), ("b", None, False)]
    assert "| - | b | n/a | 0 of 1 (incomplete: failed on w1) |" in compare.geomean_table(g)


def test_an_interrupted_cell_is_not_run_not_failed():
    """Nothing ran (Ctrl-C before its turn): no figure, but not a failure either."""
    m = compare.Measurements()
    m.timed[("pair", "a")] = [_run("pair", "a", "ns_per_op", 3.0)]
    rows = compare.summarize(wl.get("pair"), ["a", "b"], m)
    assert report.fmt_failed(rows[1]) == "not run"
    assert compare.failed_cells({"pair": rows}) == []
    assert compare.geomeans({"pair": rows})[1]["failed_on"] == []


def test_ab_scaling_latency_and_soak_void_a_cell_with_a_failed_run():
    w = wl.get("random_mixed")
    good = [_run("random_mixed", "x", "ops_per_sec", 100.0, seconds=1.0) for _ in range(3)]
    bad = good[:2] + [_run("random_mixed", "x", "ops_per_sec", None, error="exit status 1: boom")]
    med, failed = ab.summarize(w, {(None, "8"): good, (None, "64"): bad})
    assert med[(None, "8")]["metric"] == 100.0 and (None, "64") not in med
    assert failed[(None, "64")] == {"failed": True, "failed_runs": 1, "of_runs": 3, "errors": {"exit status 1": 1}}

    points = scaling.summarize({("larson", "x", 1): good, ("larson", "x", 2): bad})
    assert points[("larson", "x", 1)]["ops_per_sec"] == 100.0
    assert points[("larson", "x", 2)]["failed_runs"] == 1 and "ops_per_sec" not in points[("larson", "x", 2)]
    assert scaling.degradations(points, "larson", "x", [1, 2]) == {}

    hist_runs = [_run("random_mixed", "x", "ops_per_sec", 1.0, lat_max_ns=50, timer_overhead_ns=10) for _ in range(2)]
    for r in hist_runs:
        r.hist = [(10, 11, 5)]
    assert latency.summarize_cell(hist_runs)["count"] == 10
    hist_runs[1].error = "timed out after 2.5 s"
    assert latency.summarize_cell(hist_runs)["errors"] == {"timed out after 2.5 s": 1}

    assert runner.cell_failure([bad[2]], lambda _: True)["failed_runs"] == 1
    assert soak.soak_figures(_run("random_mixed", "x", "ops_per_sec", 1.0, maxrss_kb=None)) == {
        "samples": 0, "rss_samples": 0}


def test_a_missing_peak_rss_stays_missing():
    """A workload that printed no peak_rss_kb got ru_maxrss, the Python launcher's ~19 MiB."""
    m = compare.Measurements()
    m.timed[("pair", "a")] = [_run("pair", "a", "ns_per_op", 3.0, maxrss_kb=1800), _run("pair", "a", "ns_per_op", 3.1,
                                                                                       maxrss_kb=None)]
    m.timed[("pair", "b")] = [_run("pair", "b", "ns_per_op", 4.0, maxrss_kb=1700) for _ in range(2)]
    tables = {"pair": compare.summarize(wl.get("pair"), ["a", "b"], m)}
    a, b = tables["pair"]
    assert a["peak_rss_kb"] is None and b["peak_rss_kb"] == 1700
    assert "| 1 | a | 3.05 |" in compare.workload_table(wl.get("pair"), tables["pair"])
    assert "| n/a |" in compare.workload_table(wl.get("pair"), tables["pair"])
    g = compare.geomeans(tables)
    text = "\n\n".join(compare.sections(_fake_session(reps=2), [wl.get("pair")], tables, g, []))
    assert "Peak RSS of a: n/a: the workload printed no `peak_rss_kb`" in text
    assert compare.summary_data(tables, g, [], [])["rss_missing"] == [{"workload": "pair", "allocator": "a"}]
    med, _ = ab.summarize(wl.get("pair"), {(None, "v"): m.timed[("pair", "a")]})
    assert med[(None, "v")]["peak_rss_kb"] is None
    r = _run("pair", "a", "ns_per_op", 3.0, maxrss_kb=None)
    r.rss_samples = [(0.5, 1500), (1.0, 1600)]
    assert soak.soak_figures(r)["rss_peak_kb"] is None


def test_the_missing_peers_are_named_in_the_status():
    missing = [al.Missing("mimalloc", "not installed: `apt-get install libmimalloc2.0`"),
               al.Missing("hakmem", "/x/build/libhakmem.so not built: run `make lib` in /x")]
    assert session.missing_status(missing) == (" (peers missing: mimalloc — apt-get install libmimalloc2.0; "
                                               "hakmem — make lib)")
    assert session.missing_status([]) == ""


def test_a_repeated_workload_is_refused():
    with pytest.raises(ValueError, match="--workloads names pair more than once"):
        wl.parse_list("pair,pair,random_mixed", ())
    assert [w.name for w in wl.parse_list("pair,random_mixed", ())] == ["pair", "random_mixed"]


# ---- end to end, with shell scripts standing in for the workload programs ----------------------------

SCRIPT = """#!/bin/sh
# stands in for a workload: with LD_PRELOAD set it hangs in every other start
dir=$(dirname "$0")
if [ -n "$LD_PRELOAD" ] && [ -n "$HANG_EVERY_OTHER" ]; then
    n=$(cat "$dir/.starts" 2>/dev/null || echo 0)
    echo $((n + 1)) > "$dir/.starts"
    if [ $((n % 2)) = 0 ]; then exec sleep 30; fi
fi
echo "allocator-check: ${WRONG_CHECK:-${LD_PRELOAD:-LIBC}}"
if [ -n "$LD_PRELOAD" ]; then ns=2.0; else ns=5.0; fi
echo "RESULT workload=pair threads=1 ops=1000 seconds=0.001 ops_per_sec=1000000 ns_per_op=$ns ns_per_op_16=$ns"
[ -n "$NO_PEAK_RSS" ] || echo "RESULT peak_rss_kb=1500"
"""


@pytest.fixture
def fake_root(tmp_path: Path) -> Path:
    """A tree whose every workload program is SCRIPT (no Makefile: the lab builds nothing)."""
    if not os.path.isfile(LIBC):
        pytest.skip(f"{LIBC} not found")
    bench = tmp_path / "tree" / "build" / "bench"
    bench.mkdir(parents=True)
    for name in wl.WORKLOADS:
        (bench / name).write_text(SCRIPT.replace("LIBC", LIBC))
        (bench / name).chmod(0o755)
    return tmp_path / "tree"


def _spec(env=None):
    return runner.Spec(wl.get("pair"), al.Allocator("glibc", None), ["200K"], env=env or {})


def test_no_peak_rss_printed_is_none_not_the_launchers(fake_root):
    r = runner.run(_spec({"NO_PEAK_RSS": "1"}), fake_root, timeout=30)
    assert r.ok and r.maxrss_kb is None and r.rusage_maxrss_kb > 0
    assert runner.run(_spec(), fake_root, timeout=30).maxrss_kb == 1500


def test_the_timeout_is_printed_exactly(fake_root):
    """`:.0f` printed a 1.5 s timeout as "2 s" (and 0.3 s as "0 s")."""
    slow = al.Allocator("slow", LIBC)
    spec = runner.Spec(wl.get("pair"), slow, ["200K"], env={"HANG_EVERY_OTHER": "1"})
    r = runner.run(spec, fake_root, timeout=0.3)
    assert r.error == "timed out after 0.3 s"


def test_a_run_with_the_wrong_allocator_goes_with_the_mismatch(fake_root):
    """The run that used the wrong allocator ends the experiment; it now reaches the experiment's tables
    (Session.run's `keep`), where it voids its cell, instead of vanishing with the exception."""
    with pytest.raises(al.AllocatorMismatch) as e:
        runner.run(_spec({"WRONG_CHECK": "/usr/lib/libjemalloc.so.2"}), fake_root, timeout=30)
    bad = e.value.run
    assert bad.error == "allocator mismatch: malloc from /usr/lib/libjemalloc.so.2"
    assert runner.cell_failure([bad], lambda _: True)["errors"] == {"allocator mismatch": 1}


def test_a_flaky_allocator_is_reported_failed_end_to_end(root, fake_root, tmp_path, monkeypatch):
    """The reproducer through `quick`: an allocator hanging in every other start, --timeout 0.5."""
    out_dir = tmp_path / "out"
    monkeypatch.setenv("HANG_EVERY_OTHER", "1")  # not an allocator variable: the runs inherit it
    res = run_lab(root, "quick", "--root", str(fake_root), "--alloc", f"flaky={LIBC}", "--allocs",
                  "glibc,flaky", "--workloads", "pair", "--size", "tiny", "--reps", "4", "--timeout", "0.5",
                  "--no-strace", "--no-latency", "--no-progress", "--out", str(out_dir))
    assert res.returncode == 1, res.stderr
    assert "FAILED 2/4" in res.stdout and "flaky on pair: 2 of 4 runs failed (timed out after 0.5 s ×2)" in res.stdout
    assert "status: complete, with 2 failed runs" in res.stdout
    text = (out_dir / "report.md").read_text()
    assert "| - | flaky | FAILED 2/4 |" in text and "| 1 | glibc |" in text
    assert "- flaky on pair: 2 of 4 runs failed (timed out after 0.5 s ×2)" in text
    assert "| - | flaky | n/a | 0 of 1 (incomplete: failed on pair) |" in text
    summary = json.loads((out_dir / "data.json").read_text())["summary"]
    assert summary["failed"] == [{"workload": "pair", "allocator": "flaky", "failed_runs": 2, "of_runs": 4,
                                  "errors": {"timed out after 0.5 s": 2}}]
    assert [(r["allocator"], r["complete"]) for r in summary["geomean"]] == [("glibc", True), ("flaky", False)]


def test_a_run_missing_peers_says_so(fake_root, tmp_path, monkeypatch, capsys):
    """A missing peer was one stderr line at the start; the run still ended "status: complete"."""
    d = al.Discovery(found=[al.Allocator("glibc", None, "libc6")],
                     missing=[al.Missing("mimalloc", "not installed: `apt-get install libmimalloc2.0`"),
                              al.Missing("hakmem-secure", "not built")])
    monkeypatch.setattr(al, "discover", lambda *a, **k: d)
    out_dir = tmp_path / "out"
    args = argparse.Namespace(allocs=None, alloc=[], size="tiny", reps=1, out=str(out_dir), root=str(fake_root),
                              timeout=30.0, no_progress=True, workloads="pair", threads=None, no_strace=True,
                              no_latency=True)
    assert compare.run_quick(args) == 0
    status = "complete (peers missing: mimalloc — apt-get install libmimalloc2.0)"
    assert f"status: {status}\n" in capsys.readouterr().out
    text = (out_dir / "report.md").read_text()
    assert f"**Status:** {status}" in text
    assert "**Not in this comparison** (not installed, so neither ranked nor beaten here): mimalloc" in text
    data = json.loads((out_dir / "data.json").read_text())
    assert data["status"] == status
    assert data["missing_peers"] == data["summary"]["missing_peers"] == [
        {"name": "mimalloc", "reason": "not installed: `apt-get install libmimalloc2.0`"}]
