"""Report writing: number formats, markdown tables, report.md/data.json, and the ranking logic of
compare applied to hand-made runs."""

import json

import pytest

from lab import compare, report
from lab import workloads as wl
from lab.runner import Run, SyscallCount


def test_number_formats():
    assert report.fmt_num(None) == ""
    assert report.fmt_num(0.5) == "0.5"
    assert report.fmt_num(1234) == "1,234"
    assert report.fmt_num(12345678) == "12.3M"
    assert report.fmt_num(2.5e9) == "2.5G"
    assert report.fmt_int(1234.6) == "1,235"
    assert report.fmt_kib(2048) == "2.0 MiB"
    assert report.fmt_pct(1.94) == "+1.9%"
    assert report.fmt_pct(-3.0) == "-3.0%"
    assert report.fmt_ratio(1.0) == "-"
    assert report.fmt_ratio(1.25) == "+25.0%"


def test_markdown_table():
    text = report.table(["Rank", "Allocator", "ops/s"], [[1, "a|b", "5"]])
    lines = text.splitlines()
    assert lines[0] == "| Rank | Allocator | ops/s |"
    assert lines[1] == "|---|---|---:|"
    assert lines[2] == "| 1 | a\\|b | 5 |"


def test_text_table_aligns_columns():
    text = report.text_table(["Rank", "Allocator", "ops/s"], [[1, "glibc", "5"], [2, "x", "12345"]])
    lines = text.splitlines()
    assert len({len(line) for line in lines}) == 1
    assert lines[2].endswith("    5")


def test_write_creates_report_and_data(tmp_path):
    path = report.write(tmp_path / "out", "hakmem lab — test", "complete", ["## A\n\nbody", ""], {"x": [1, 2]})
    text = path.read_text()
    assert text.startswith("# hakmem lab — test\n\n**Status:** complete\n\n## A\n\nbody")
    assert json.loads((tmp_path / "out" / "data.json").read_text()) == {"x": [1, 2]}


def _run(workload, allocator, metric, value, ok=True, **results):
    r = Run(workload, allocator, "cmd", None, {}, wall_s=1.0, user_s=0.9, sys_s=0.1, maxrss_kb=1000, minflt=10)
    r.results = {"ops": 1000, metric: value, **results}
    if not ok:
        r.error = "killed by signal 11"
    return r


def test_summarize_ranks_by_median_and_puts_failures_last():
    w = wl.get("random_mixed")
    m = compare.Measurements()
    m.timed[("random_mixed", "slow")] = [_run("random_mixed", "slow", "ops_per_sec", v) for v in (50, 80, 60)]
    m.timed[("random_mixed", "fast")] = [_run("random_mixed", "fast", "ops_per_sec", v) for v in (100, 90, 200)]
    m.timed[("random_mixed", "broken")] = [_run("random_mixed", "broken", "ops_per_sec", 1, ok=False)]
    m.syscalls[("random_mixed", "fast")] = SyscallCount({"mmap": 10, "munmap": 10}, 1000, "strace ...")
    rows = compare.summarize(w, ["slow", "fast", "broken"], m)
    assert [r["allocator"] for r in rows] == ["fast", "slow", "broken"]
    fast, slow, broken = rows
    assert fast["metric"] == 100 and (fast["min"], fast["max"]) == (90, 200)
    assert fast["ratio"] == 1.0
    assert slow["ratio"] == 100 / 60
    assert fast["syscalls_per_op"] == 0.02
    assert "syscalls_per_op" not in slow
    assert broken["failed"]
    table = compare.workload_table(w, rows)
    assert "| 1 | fast | 100 |" in table
    assert "| - | broken | FAILED 1/1 |" in table


def test_summarize_lower_is_better_and_sizes():
    w = wl.get("pair")
    m = compare.Measurements()
    m.timed[("pair", "a")] = [_run("pair", "a", "ns_per_op", 8.0, ns_per_op_16=7.0, ns_per_op_64=9.0)]
    m.timed[("pair", "b")] = [_run("pair", "b", "ns_per_op", 4.0, ns_per_op_16=3.0, ns_per_op_64=5.0)]
    m.timed[("floor", "a")] = [_run("floor", "a", "ns_per_op", 1.0)]
    m.timed[("floor", "b")] = [_run("floor", "b", "ns_per_op", 1.0)]
    tables = {"pair": compare.summarize(w, ["a", "b"], m),
              "floor": compare.summarize(wl.get("floor"), ["a", "b"], m)}
    assert [r["allocator"] for r in tables["pair"]] == ["b", "a"]
    assert tables["pair"][1]["ratio"] == 2.0
    assert tables["pair"][0]["sized"] == {16: 3.0, 64: 5.0}
    floor, rows = compare.floor_rows(tables)
    assert floor == 1.0
    assert rows[0]["sizes"][16] == (3.0, 3.0)
    g = compare.geomeans({"pair": tables["pair"]})
    assert [(r["allocator"], r["geomean"]) for r in g] == [("b", 1.0), ("a", 2.0)]


def test_paired_takes_ratios_round_by_round_against_the_best_other():
    w = wl.get("random_mixed")
    m = compare.Measurements()
    # The machine slows down over the rounds; within each round hakmem does 10 % fewer ops than tcmalloc.
    speeds = (100, 90, 80, 70, 60, 50, 40)
    m.timed[("random_mixed", "hakmem")] = [_run("random_mixed", "hakmem", "ops_per_sec", v / 1.1) for v in speeds]
    m.timed[("random_mixed", "tcmalloc")] = [_run("random_mixed", "tcmalloc", "ops_per_sec", v) for v in speeds]
    m.timed[("random_mixed", "glibc")] = [_run("random_mixed", "glibc", "ops_per_sec", v / 2) for v in speeds]
    rows = compare.summarize(w, ["hakmem", "tcmalloc", "glibc"], m)
    p = compare.paired(w, rows, m)
    assert p["peer"] == "tcmalloc" and p["rounds"] == 7
    assert abs(p["ratio"] - 1.1) < 1e-9 and abs(p["ci_low"] - 1.1) < 1e-9 and p["verdict"] == "behind"
    assert abs(p["coverage"] - 0.984375) < 1e-12
    # Per-round ratios on both sides of 1: the medians differ, but the run cannot tell them apart.
    m.timed[("random_mixed", "hakmem")] = [_run("random_mixed", "hakmem", "ops_per_sec", v * f)
                                           for v, f in zip(speeds, (1.05, 0.95, 1.04, 0.97, 1.02, 0.9, 1.01))]
    rows = compare.summarize(w, ["hakmem", "tcmalloc", "glibc"], m)
    p = compare.paired(w, rows, m)
    assert p["ci_low"] < 1 < p["ci_high"] and p["verdict"] == "within noise"
    # Three rounds are too few for a 95 % interval.
    for k in ("hakmem", "tcmalloc", "glibc"):
        m.timed[("random_mixed", k)] = m.timed[("random_mixed", k)][:3]
    p = compare.paired(w, compare.summarize(w, ["hakmem", "tcmalloc", "glibc"], m), m)
    assert p["rounds"] == 3 and p["verdict"].endswith("(too few rounds for a 95 % interval)")
    assert "too few rounds" in compare.paired_table([p])
    # No subject, or nobody else: no row.
    assert compare.paired(w, compare.summarize(w, ["tcmalloc", "glibc"], m), m) is None
    assert compare.paired(w, compare.summarize(w, ["hakmem"], m), m) is None


def test_paired_command_reads_a_reports_data(tmp_path, capsys):
    from lab import cli
    runs = []
    for rnd in range(7):
        for a, v in (("hakmem", 2.0), ("glibc", 4.0), ("tcmalloc", 2.5)):
            runs.append(_run("pair", a, "ns_per_op", v + rnd).to_dict())
        runs.append(_run("pair", "hakmem", "ns_per_op", 99.0, lat_count=10).to_dict())  # a latency pass
    data = {"allocators": [{"name": a} for a in ("hakmem", "glibc", "tcmalloc")], "runs": runs}
    (tmp_path / "data.json").write_text(json.dumps(data))
    assert cli.main(["paired", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| pair | tcmalloc | 7 |" in out and "| ahead |" in out
    assert cli.main(["paired", str(tmp_path / "data.json"), "--subject", "glibc"]) == 0
    assert "| pair | hakmem | 7 |" in capsys.readouterr().out
    assert cli.main(["paired", str(tmp_path), "--subject", "nope"]) == 2
    assert "not among the allocators" in capsys.readouterr().err
    assert cli.main(["paired", str(tmp_path / "missing.json")]) == 2
    assert "not a compare's data.json" in capsys.readouterr().err
    (tmp_path / "scaling.json").write_text(json.dumps({**data, "experiment": "scaling"}))
    assert cli.main(["paired", str(tmp_path / "scaling.json")]) == 2
    assert "scaling experiment" in capsys.readouterr().err


def test_fmt_num_thousands_suffix():
    from lab.report import fmt_num
    assert fmt_num(46530.0) == "46.5k"
    assert fmt_num(10000.0) == "10k"
    assert fmt_num(9999.0) == "9,999"
    assert fmt_num(2.5e6) == "2.5M"


def test_no_figure_removes_a_stale_one(tmp_path, monkeypatch):
    """Without matplotlib a report gets no figure, and one an earlier run left there is removed rather
    than shown beside data it was not drawn from."""
    from lab import plots

    stale = tmp_path / "workloads.png"
    stale.write_bytes(b"old figure")
    monkeypatch.setattr(plots, "_pyplot", lambda: None)
    panel = plots.BarPanel("w", ["a"], [1.0])
    assert plots.bars(stale, "t", [panel]) is None
    assert not stale.exists()
    assert plots.bars(tmp_path / "never.png", "t", [panel]) is None


def test_fmt_num_never_prints_an_exponent():
    from lab.report import fmt_num
    assert fmt_num(999_700.0) == "1,000k"
    assert fmt_num(999.7) == "1,000"
    assert fmt_num(999_600_000.0) == "1,000M"
    assert fmt_num(999.4) == "999"
    assert fmt_num(9_999.0) == "9,999"
    assert not [x for x in (999.5, 999_999.0, 999_999_999.0, 0.00099999, 9.77e-05, 1.1e-08) if "e" in fmt_num(x)]


def test_fmt_num_keeps_small_values():
    """System calls per operation are far below 1e-4: they used to print as "0" next to totals of 20-49
    calls (the review of 2026-11-24)."""
    from lab.report import fmt_num
    assert fmt_num(9.77e-05) == "0.0000977"
    assert fmt_num(1.1e-08) == "0.000000011"
    assert fmt_num(0.000112) == "0.000112"
    assert fmt_num(-3e-06) == "-0.000003"
    assert fmt_num(0.0) == "0"


def test_geomeans_rank_only_allocators_measured_everywhere():
    """An allocator that failed its worst workload must not be ranked above one measured on all."""
    tables = {"w1": [{"allocator": "a", "failed": False, "ratio": 1.0}, {"allocator": "b", "failed": False, "ratio": 1.02}],
              "w2": [{"allocator": "a", "failed": False, "ratio": 1.0}, {"allocator": "b", "failed": False, "ratio": 1.01}],
              "w3": [{"allocator": "b", "failed": False, "ratio": 1.0}, {"allocator": "a", "failed": True}]}
    g = compare.geomeans(tables)
    assert [(r["allocator"], r["complete"], r["workloads"], r["of"]) for r in g] == [("b", True, 3, 3), ("a", False, 2, 3)]
    text = compare.geomean_table(g)
    assert "| 1 | b |" in text and "| - | a | 1.000 | 2 of 3 (incomplete: failed on w3) |" in text


def test_summarize_survives_a_run_that_did_no_operation():
    """A lower-is-better metric of 0 (a run that did nothing) gets no ratio instead of breaking the others'."""
    w = wl.get("vm")
    m = compare.Measurements()
    m.timed[("vm", "idle")] = [_run("vm", "idle", "ns_per_op", 0.0)]
    m.timed[("vm", "real")] = [_run("vm", "real", "ns_per_op", 5.0)]
    rows = compare.summarize(w, ["idle", "real"], m)
    assert [(r["allocator"], r.get("ratio")) for r in rows] == [("real", 1.0), ("idle", None)]


def test_runs_get_no_allocator_tuning_from_the_caller(monkeypatch):
    from lab import runner
    for k, v in {"HAKMEM_PROFILE": "lean", "MALLOC_CONF": "narenas:1", "MALLOC_ARENA_MAX": "1",
                 "MIMALLOC_ARENA_EAGER_COMMIT": "1", "TCMALLOC_RELEASE_RATE": "0", "GLIBC_TUNABLES": "x=1",
                 "LD_PRELOAD": "/x.so", "HAKMEM_LAB_KEEP_ME": None, "PATH_LIKE_KEEP": "yes"}.items():
        if v is not None:
            monkeypatch.setenv(k, v)
    env = runner.clean_environ(("UNSET_ME",))
    assert env.get("PATH_LIKE_KEEP") == "yes"
    assert not [k for k in env if k.startswith(("HAKMEM_", "MALLOC_", "MIMALLOC_", "TCMALLOC_"))]
    assert "GLIBC_TUNABLES" not in env and "LD_PRELOAD" not in env
    assert runner.inherited_tuning() == sorted(["HAKMEM_PROFILE", "MALLOC_CONF", "MALLOC_ARENA_MAX",
                                                "MIMALLOC_ARENA_EAGER_COMMIT", "TCMALLOC_RELEASE_RATE",
                                                "GLIBC_TUNABLES", "LD_PRELOAD"])


def test_prodcons_scaling_starts_at_two_threads():
    """prodcons runs one producer and one consumer at -t 1 as at -t 2: no "1 thread" column for it."""
    from lab import scaling
    assert scaling.counts_for(wl.get("prodcons"), [1, 2, 3, 4]) == [2, 3, 4]
    assert scaling.counts_for(wl.get("larson"), [1, 2, 3, 4]) == [1, 2, 3, 4]


def test_tables_say_how_many_runs_each_median_has():
    """'Median of 6 runs' was printed even when runs had failed."""
    from lab.report import runs_phrase
    assert runs_phrase([6, 4, 6], 6) == "Median of 4-6 of 6 interleaved runs (the others were not run: interrupted)"
    assert runs_phrase([5, 5], 6) == "Median of 5 of 6 interleaved runs (the others were not run: interrupted)"
    assert runs_phrase([6], 6) == "Median of 6 interleaved runs"


def test_geomean_plot_marks_incomplete_allocators():
    """The geomean figure drew an allocator that failed a workload like a ranked one."""
    from lab.compare import geomean_label
    assert geomean_label({"allocator": "a", "complete": True, "workloads": 3, "of": 3}) == "a"
    assert geomean_label({"allocator": "b", "complete": False, "workloads": 2, "of": 3}) == "b (incomplete, 2 of 3)"


def test_grouped_bars_leave_missing_values_empty(tmp_path):
    """ab drew a value whose runs failed as a bar of 0 %, which reads as 'same as the baseline'."""
    from lab import plots
    if not plots.available():
        pytest.skip("matplotlib not installed")
    path = plots.grouped_bars(tmp_path / "ab.png", "t", ["64 B", "256 B"], {"8": [None, 3.0], "64": [-2.0, None]},
                              "% faster than baseline")
    assert path is not None and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
