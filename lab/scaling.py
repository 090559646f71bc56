"""scaling.py — the `scaling` sub-command: the threaded workloads at 1 .. 2x cores threads under every
allocator (repeated, interleaved). The threaded workloads do a fixed amount of work per thread, so while
threads fit the cores ideal scaling keeps the time flat. The report gives ops/s per thread count, a plot
of ops/s against threads, and the parallelism degradation figure
time(2n) / time(n) / (work(2n) / work(n)) for every n whose double was measured."""

from __future__ import annotations

import argparse
import os

from lab import plots, report, stats
from lab import workloads as wl
from lab.runner import Run, Spec, cell_failure
from lab.session import Session, UsageError, add_common_options


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scaling", help="ops/s against thread count for the threaded workloads",
                       description="ops/s against thread count (1 .. 2x cores) and the parallelism degradation.")
    add_common_options(p, reps=3, size="standard")
    p.add_argument("--workloads", help=f"comma-separated threaded workloads (default: {','.join(wl.THREADED)})")
    p.add_argument("--threads", help="comma-separated thread counts (default: 1 .. 2x cores)")
    p.set_defaults(func=run_scaling)


def thread_counts(cores: int) -> list[int]:
    """1 .. 2x cores: every count up to 8, else the powers of two and 2x cores itself."""
    top = max(2, 2 * cores)
    if top <= 8:
        return list(range(1, top + 1))
    counts = {1, top}
    n = 2
    while n < top:
        counts.add(n)
        n *= 2
    return sorted(counts)


def parse_counts(text: str | None) -> list[int]:
    if not text:
        return thread_counts(os.cpu_count() or 1)
    try:
        counts = sorted({int(x) for x in text.split(",") if x})
    except ValueError:
        raise UsageError(f"--threads wants numbers, got {text!r}") from None
    if not counts or counts[0] < 1:
        raise UsageError("--threads wants positive numbers")
    return counts


def counts_for(w: wl.Workload, counts: list[int]) -> list[int]:
    """The thread counts a workload is run at: none below the threads it always starts (prodcons runs one
    producer and one consumer at -t 1 as at -t 2, so a "1 thread" column would be a 2-thread run)."""
    return [n for n in counts if n >= w.min_threads]


def summarize(runs: dict[tuple[str, str, int], list[Run]]) -> dict[tuple[str, str, int], dict]:
    """Median ops/s, seconds and ops per (workload, allocator, threads); a point with a failed run gets
    none, only how many runs failed and why (runner.cell_failure: one failed run voids it, as in compare)."""
    out = {}
    for key, rs in runs.items():
        failed = cell_failure(rs, lambda r: None not in (r.value("ops_per_sec"), r.value("seconds"), r.value("ops")))
        if failed is not None:
            out[key] = failed
        elif rs:
            out[key] = {
                "ops_per_sec": stats.median([r.value("ops_per_sec") for r in rs]),
                "seconds": stats.median([r.value("seconds") for r in rs]),
                "ops": stats.median([r.value("ops") for r in rs]),
                "runs": len(rs),
            }
    return out


def measured(point: dict | None) -> bool:
    return point is not None and not point.get("failed")


def degradations(summary: dict, workload: str, allocator: str, counts: list[int]) -> dict[str, float]:
    out = {}
    for n in counts:
        a, b = summary.get((workload, allocator, n)), summary.get((workload, allocator, 2 * n))
        if measured(a) and measured(b) and min(a["seconds"], b["seconds"], a["ops"], b["ops"]) > 0:
            out[f"{n}->{2 * n}"] = stats.degradation(a["seconds"], b["seconds"], a["ops"], b["ops"])
    return out


def run_scaling(args: argparse.Namespace) -> int:
    try:
        works = wl.parse_list(args.workloads, wl.THREADED)
    except ValueError as e:
        raise UsageError(str(e)) from None
    unthreaded = [w.name for w in works if not w.threaded]
    if unthreaded:
        raise UsageError(f"not threaded: {', '.join(unthreaded)}")
    counts = parse_counts(args.threads)
    s = Session("scaling", args)
    runs: dict[tuple[str, str, int], list[Run]] = {}
    s.start_progress(sum(len(counts_for(w, counts)) for w in works) * args.reps * len(s.allocators))
    with s.measuring():
        for w in works:
            for n in counts_for(w, counts):
                for _ in range(args.reps):
                    for a in s.allocators:
                        s.run(Spec(w, a, w.args(args.size), threads=n),
                              keep=runs.setdefault((w.name, a.name, n), []).append)
    summary = summarize(runs)

    sections, panels, data = [], [], {}
    for w in works:
        wc = counts_for(w, counts)
        pairs = [f"{n}->{2 * n}" for n in wc if 2 * n in wc]
        rows, deg_rows, series = [], [], {}
        for a in s.allocators:
            cells = [summary.get((w.name, a.name, n)) for n in wc]
            rows.append([a.name] + [report.fmt_num(c["ops_per_sec"]) if measured(c) else report.fmt_failed(c) if c
                                    else "" for c in cells])
            pts = [(n, c["ops_per_sec"] / 1e6) for n, c in zip(wc, cells) if measured(c)]
            if pts:
                series[a.name] = ([p[0] for p in pts], [p[1] for p in pts])
            deg = degradations(summary, w.name, a.name, wc)
            deg_rows.append([a.name] + [f"{deg[p]:.3f}" if p in deg else "" for p in pairs])
            data[f"{w.name}/{a.name}"] = {
                "points": {n: summary.get((w.name, a.name, n)) for n in wc}, "degradation": deg}
        counts_here = [c["runs"] for a in s.allocators for n in wc if measured(c := summary.get((w.name, a.name, n)))]
        lost = report.failed_phrase([(f"{a.name} at {n} thread{'s' if n > 1 else ''}", c)
                                     for a in s.allocators for n in wc
                                     if (c := summary.get((w.name, a.name, n))) and not measured(c)])
        text = (f"### {w.name}\n\n{w.summary}. ops/s by threads, each the "
                f"{report.runs_phrase(counts_here, args.reps).replace('Median', 'median', 1)}"
                + (f". {lost}" if lost else "") + ":\n\n"
                + report.table(["Allocator"] + [f"{n} thr" for n in wc], rows, right=range(1, len(wc) + 1)))
        if pairs:
            text += ("\n\nParallelism degradation time(2n)/time(n)/(work(2n)/work(n)): while the 2n threads fit "
                     f"the {os.cpu_count()} cores 0.50 is ideal (twice the work in the same time) and 1.00 means no "
                     "gain at all; once n threads fill the cores 1.00 is ideal (the same time per unit of work), "
                     "and above it the doubled threads cost more than the work they added:\n\n"
                     + report.table(["Allocator"] + pairs, deg_rows, right=range(1, len(pairs) + 1)))
        sections.append(text)
        panels.append(plots.LinePanel(w.name, series, "threads", "M ops/s"))
    s.out_dir.mkdir(parents=True, exist_ok=True)
    png = plots.lines(s.out_dir / "scaling.png", "ops/s against threads", panels)
    intro = (f"Threads {', '.join(map(str, counts))} on {os.cpu_count()} cores. Every threaded workload does a fixed "
             "amount of work per thread, so work(2n)/work(n) is about 2; prodcons always runs at least one producer "
             "and one consumer, so it starts at 2 threads. Time is the workload's own measured seconds.")
    fig = f"![scaling]({png.name})" if png else "No figure (matplotlib missing)."
    s.write("scaling", sections + [fig], {"threads": counts, "results": data}, preamble=intro)
    return s.exit_code
