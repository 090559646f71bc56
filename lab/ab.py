"""ab.py — the `ab` sub-command: one option of an allocator (an environment variable) over a list of
values, per block size, e.g. `hakmem-lab ab --env HAKMEM_DRAIN_INTERVAL --values 0,512,1024,2048 --sizes
128,256`. Runs are repeated and interleaved across values; each value gets ops/s (median, min–max), its
change against the baseline value (positive = faster), and the system calls of an untimed strace pass.
The value `default` leaves the variable unset."""

from __future__ import annotations

import argparse

from lab import compare, plots, report, stats
from lab import workloads as wl
from lab.runner import RSS_MISSING, SYSCALLS, Run, Spec, SyscallCount, cell_failure, peak_rss_kb
from lab.session import Session, UsageError, add_common_options

UNSET = "default"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ab", help="A/B of an option (env var) over values, per block size",
                       description="A/B of an allocator option given as an environment variable.")
    add_common_options(p, reps=6, size="standard")
    p.set_defaults(allocs="hakmem", func=run_ab)
    p.add_argument("--env", required=True, help="the environment variable, e.g. HAKMEM_DRAIN_INTERVAL")
    p.add_argument("--values", required=True, help=f"comma-separated values; `{UNSET}` = variable unset")
    p.add_argument("--baseline", help="the value the others are compared with (default: the first)")
    p.add_argument("--sizes", help="comma-separated block sizes in bytes (default: the workload's own mix)")
    p.add_argument("--workload", default="random_mixed", help="workload (default random_mixed)")
    p.add_argument("--no-strace", action="store_true", help="skip the system-call pass")


def speedup(value: float, baseline: float, higher_is_better: bool) -> float:
    """Percent faster than the baseline (negative: slower)."""
    return 100.0 * ((value / baseline) if higher_is_better else (baseline / value)) - 100.0


def paired(w: wl.Workload, runs: list[Run], base_runs: list[Run]) -> dict | None:
    """Round-by-round verdict of one value against the baseline: runs of the same index were made in the
    same interleaved round. None when no round has both runs, or when either side failed a run."""
    ratios = compare.round_ratios(w, runs, base_runs)
    return stats.round_verdict(ratios) if ratios else None


def summarize(w: wl.Workload, runs: dict[tuple[int | None, str], list[Run]]
              ) -> tuple[dict[tuple[int | None, str], dict], dict[tuple[int | None, str], dict]]:
    """Per (size, value): the median, min, max, peak RSS and run count of its runs; apart, the cells with
    a failed run, which get no figure (runner.cell_failure: a failed run voids the cell, as in compare)."""
    med: dict[tuple[int | None, str], dict] = {}
    failed: dict[tuple[int | None, str], dict] = {}
    for key, rs in runs.items():
        f = cell_failure(rs, lambda r: r.value(w.metric) is not None)
        if f is not None or not rs:
            failed[key] = f or {"failed": True, "failed_runs": 0, "of_runs": 0, "errors": {}}
            continue
        vals = [r.value(w.metric) for r in rs]
        med[key] = {"metric": stats.median(vals), "min": min(vals), "max": max(vals),
                    "peak_rss_kb": peak_rss_kb(rs), "runs": len(rs)}
    return med, failed


def _spec(w: wl.Workload, s: Session, var: str, value: str, size: int | None) -> Spec:
    a = s.allocators[0]
    if value == UNSET:
        return Spec(w, a, w.args(s.args.size, size), unset=(var,))
    return Spec(w, a, w.args(s.args.size, size), env={var: value})


def run_ab(args: argparse.Namespace) -> int:
    try:
        w = wl.get(args.workload)
        try:
            sizes: list[int | None] = [int(x) for x in args.sizes.split(",") if x] if args.sizes else [None]
        except ValueError:
            raise ValueError(f"--sizes wants comma-separated whole numbers of bytes, got {args.sizes!r}") from None
        if any(sz is not None and sz < 1 for sz in sizes):
            raise ValueError(f"--sizes wants block sizes of at least 1 byte, got {args.sizes}")
        if args.sizes and not w.size_args:
            raise ValueError(f"workload {w.name} takes no block size; use random_mixed, tiny_hot or pair")
    except ValueError as e:
        raise UsageError(str(e)) from None
    values = [v for v in args.values.split(",") if v]
    baseline = args.baseline if args.baseline is not None else (values[0] if values else None)
    if not values or baseline not in values:
        raise UsageError("--values must be non-empty and contain --baseline")
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:  # each round pairs one run per value: a repeat would pair runs of different rounds
        raise UsageError(f"--values lists {', '.join(repeated)} more than once")
    if "," in (args.allocs or ""):
        raise UsageError("ab runs one allocator (--allocs NAME)")
    s = Session("ab", args)
    if len(s.allocators) != 1:  # an --alloc not named by --allocs would be listed in the report but never run
        raise UsageError(f"ab runs one allocator, got {', '.join(a.name for a in s.allocators)}: "
                         "name the one to measure with --allocs (an --alloc NAME=PATH too)")
    runs: dict[tuple[int | None, str], list[Run]] = {}
    sysc: dict[tuple[int | None, str], SyscallCount | str] = {}
    strace = not args.no_strace
    s.start_progress(len(sizes) * len(values) * (args.reps + int(strace)))
    with s.measuring():
        for _ in range(args.reps):
            for size in sizes:
                for v in values:
                    s.run(_spec(w, s, args.env, v, size), keep=runs.setdefault((size, v), []).append)
        if strace:
            for size in sizes:
                for v in values:
                    sysc[(size, v)] = s.strace(_spec(w, s, args.env, v, size))

    med, failed = summarize(w, runs)
    for key, m in med.items():
        sc = sysc.get(key)
        if isinstance(sc, SyscallCount):
            m.update(syscalls=sc.calls, syscalls_total=sc.total, syscalls_per_op=sc.per_op())
    for (size, _), m in med.items():
        base = med.get((size, baseline))
        m["delta_pct"] = speedup(m["metric"], base["metric"], w.higher_is_better) if base else None
    for (size, v), m in med.items():
        if v != baseline and (p := paired(w, runs[(size, v)], runs.get((size, baseline), []))):
            m["paired"] = p

    label = {None: "mix"} | {sz: f"{sz} B" for sz in sizes if sz is not None}
    matrix_head = ["Value"] + [h for sz in sizes for h in (f"{label[sz]} {w.unit}", "vs baseline")]
    matrix = []
    for v in values:
        row = [f"{v} (baseline)" if v == baseline else v]
        for sz in sizes:
            m = med.get((sz, v))
            f = failed.get((sz, v))
            row += ([report.fmt_num(m["metric"]), report.fmt_pct(m["delta_pct"])] if m
                    else [report.fmt_failed(f), ""] if f else ["", ""])
        matrix.append(row)
    lost = report.failed_phrase([(f"{v} at {label[sz]}", failed[(sz, v)]) for sz in sizes for v in values
                                 if (sz, v) in failed])
    no_rss = [f"{v} at {label[sz]}" for (sz, v), m in med.items() if m["peak_rss_kb"] is None]
    sections = [f"## {args.env} on {s.allocators[0].name}, workload {w.name}\n\n"
                f"{report.runs_phrase([m['runs'] for m in med.values()], args.reps)}; vs baseline: positive = "
                "faster." + (f" {lost}" if lost else "")
                + (f" Peak RSS of {', '.join(no_rss)}: {RSS_MISSING}." if no_rss else "") + "\n\n"
                + report.table(matrix_head, matrix, right=range(1, len(matrix_head)))]
    best_lines = []
    for sz in sizes:
        cands = [(v, med[(sz, v)]) for v in values if med.get((sz, v), {}).get("delta_pct") is not None]
        if cands:
            v, m = max(cands, key=lambda c: c[1]["delta_pct"])
            best_lines.append(f"- {label[sz]}: fastest value {v} ({report.fmt_pct(m['delta_pct'])} vs baseline)")
        else:
            best_lines.append(f"- {label[sz]}: no comparison (the baseline {baseline} failed or no value ran)")
        rows = []
        for v in values:
            m = med.get((sz, v))
            if not m:
                f = failed.get((sz, v))
                rows.append([v, report.fmt_failed(f) if f else "not run"] + [""] * (5 + len(SYSCALLS)))
                continue
            calls = m.get("syscalls", {})
            rows.append([v, report.fmt_num(m["metric"]), f"{report.fmt_num(m['min'])}–{report.fmt_num(m['max'])}",
                         report.fmt_pct(m["delta_pct"]), report.fmt_kib(m["peak_rss_kb"], missing="n/a"),
                         report.fmt_int(m.get("syscalls_total")), report.fmt_num(m.get("syscalls_per_op")),
                         *(report.fmt_int(calls.get(c)) if calls else "" for c in SYSCALLS)])
        sections.append(f"### {label[sz]}\n\n" + report.table(
            ["Value", f"{w.unit} median", "min–max", "vs baseline", "peak RSS", "syscalls", "per op", *SYSCALLS],
            rows, right=range(1, 7 + len(SYSCALLS))))
    if best_lines:
        sections.insert(1, "Fastest value per size:\n\n" + "\n".join(best_lines))
    verdict_rows = [[v, label[sz], m["paired"]["rounds"], f"{m['paired']['ratio']:.3f}",
                     f"{m['paired']['ci_low']:.3f}–{m['paired']['ci_high']:.3f} ({100 * m['paired']['coverage']:.1f} %)",
                     m["paired"]["verdict"]]
                    for sz in sizes for v in values if (m := med.get((sz, v))) and "paired" in m]
    if verdict_rows:
        sections.insert(2, "Round by round: each interleaved round gives one ratio of the value's time to the "
                        "baseline's (below 1: the value was faster); the median of those ratios, its "
                        "distribution-free confidence interval, and \"ahead\" or \"behind\" (of the baseline) "
                        "when the interval excludes 1.\n\n" + report.table(
                            ["Value", "size", "rounds", "value ÷ baseline (time)", "confidence interval", "verdict"],
                            verdict_rows, right=(2, 3)))
    s.out_dir.mkdir(parents=True, exist_ok=True)
    others = [v for v in values if v != baseline]
    png = plots.grouped_bars(s.out_dir / "ab.png", f"{args.env}: change vs baseline {baseline}",
                             [label[sz] for sz in sizes],
                             {v: [med.get((sz, v), {}).get("delta_pct") for sz in sizes] for v in others},
                             "% faster than baseline")
    if png:
        sections.append(f"![ab]({png.name})")
    summary = {"env": args.env, "baseline": baseline, "values": values, "workload": w.name,
               "results": {f"{label[sz]}/{v}": m for (sz, v), m in {**failed, **med}.items()}}
    s.write(f"A/B of {args.env}", sections, summary)
    return s.exit_code
