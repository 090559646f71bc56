"""latency.py — the `latency` sub-command: per-operation latency of each workload under each allocator.
The workloads record every malloc/free (or whole operation, for vm) into log-linear histograms (-H) and
dump the buckets; repetitions are merged. The report has p50 … max per allocator and a log-log plot of
the CCDF, P(latency > x)."""

from __future__ import annotations

import argparse

from lab import plots, report, stats
from lab import workloads as wl
from lab.runner import Run, Spec, cell_failure
from lab.session import Session, UsageError, add_common_options

DEFAULT = ("random_mixed", "larson", "prodcons", "vm", "realistic")
QUANTILES = ((0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p99.9"))


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("latency", help="per-operation latency percentiles and CCDF per allocator",
                       description="Per-operation latency histograms, percentiles and CCDF plots.")
    add_common_options(p, reps=1, size="standard")
    p.add_argument("--workloads", help=f"comma-separated workloads (default: {','.join(DEFAULT)})")
    p.add_argument("--threads", type=int, help="-t for the threaded workloads")
    p.set_defaults(func=run_latency)


def summarize(hist: list, runs: list[Run]) -> dict:
    out: dict = {"count": sum(c for _, _, c in hist), "max": max((r.value("lat_max_ns") or 0.0) for r in runs)}
    for q, name in QUANTILES:
        out[name] = stats.hist_percentile(hist, q, out["max"])
    out["timer_overhead_ns"] = stats.median([r.value("timer_overhead_ns") or 0.0 for r in runs])
    return out


def summarize_cell(rs: list[Run]) -> dict | None:
    """The merged histogram and percentiles of one allocator's runs on a workload; with a failed run
    (or one without a histogram) only how many failed and why (runner.cell_failure: one failed run
    voids the cell, as in compare); None without runs."""
    failed = cell_failure(rs, lambda r: bool(r.hist))
    if failed is not None or not rs:
        return failed
    hist = stats.merge_hists(r.hist for r in rs)
    return {**summarize(hist, rs), "hist": hist}


def run_latency(args: argparse.Namespace) -> int:
    try:
        works = wl.parse_list(args.workloads, DEFAULT)
    except ValueError as e:
        raise UsageError(str(e)) from None
    s = Session("latency", args)
    runs: dict[tuple[str, str], list[Run]] = {}
    s.start_progress(len(works) * args.reps * len(s.allocators))
    with s.measuring():
        for w in works:
            t = args.threads if w.threaded else None
            for _ in range(args.reps):
                for a in s.allocators:
                    s.run(Spec(w, a, w.args(args.size), threads=t, flags=["-H"]),
                          keep=runs.setdefault((w.name, a.name), []).append)

    sections, panels, data = [], [], {}
    for w in works:
        rows, series, void = [], {}, []
        for a in s.allocators:
            summ = summarize_cell(runs.get((w.name, a.name), []))
            if summ is None:
                continue
            data[f"{w.name}/{a.name}"] = summ
            if summ.get("failed"):
                void.append((a.name, summ))
                continue
            hist = summ["hist"]
            rows.append([a.name, report.fmt_int(summ["count"]), *(report.fmt_int(summ[n]) for _, n in QUANTILES),
                         report.fmt_int(summ["max"])])
            pts = [(x, p) for x, p in stats.ccdf(hist) if p > 0]
            series[a.name] = ([x for x, _ in pts], [p for _, p in pts])
        if rows or void:
            rows.sort(key=lambda r: float(r[4].replace(",", "") or 0))
            rows += [[name, report.fmt_failed(f)] + [""] * (len(QUANTILES) + 1) for name, f in void]
            lost = report.failed_phrase(void)
            sections.append(f"### {w.name}\n\n{w.summary}. Latency in ns, {args.reps} run(s) merged, sorted by p99."
                            + (f" {lost}" if lost else "") + "\n\n"
                            + report.table(["Allocator", "operations", *(n for _, n in QUANTILES), "max"], rows,
                                           right=range(1, 7)))
            panels.append(plots.LinePanel(w.name, series, "latency ns", "P(latency > x)", logx=True, logy=True))
    overhead = [v["timer_overhead_ns"] for v in data.values() if "timer_overhead_ns" in v]
    intro = ("Every operation is timed with the TSC (or clock_gettime where the TSC is not invariant) around the "
             "allocator call alone. The figures include the clock itself: a back-to-back pair of reads typically "
             f"measures {stats.median(overhead) if overhead else 0:.0f} ns here (read cost plus the clock's "
             "granularity), so values near that are at the clock's limit. Buckets are exact below 32 ns, then 32 "
             "per power of two (< 3.2 % error).")
    s.out_dir.mkdir(parents=True, exist_ok=True)
    png = plots.lines(s.out_dir / "latency-ccdf.png", "latency CCDF", panels)
    sections.append(f"![ccdf]({png.name})" if png else "No figure (matplotlib missing).")
    s.write("latency", sections, {"results": data}, preamble=intro)
    return s.exit_code
