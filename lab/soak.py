"""soak.py — the `soak` sub-command: N minutes of one workload per allocator (one after the other). The
workload prints a PROGRESS line every interval and the runner samples VmRSS from /proc/<pid>/status just
as often. Per allocator: RSS first/last/peak and drift, throughput mean, drift and coefficient of
variation, and system calls per operation from a shorter untimed strace pass; a plot of RSS and
throughput over time."""

from __future__ import annotations

import argparse
import statistics

from lab import plots, report, stats
from lab import workloads as wl
from lab.runner import RSS_MISSING, Run, Spec, SyscallCount, cell_failure
from lab.session import Session, UsageError, add_common_options


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("soak", help="minutes of one workload per allocator: RSS and throughput drift",
                       description="Long run of one workload per allocator, sampled every interval.")
    add_common_options(p, reps=None, size="standard")
    p.add_argument("--minutes", type=float, default=5.0, help="minutes per allocator (default 5)")
    p.add_argument("--workload", default="random_mixed", help="workload (default random_mixed)")
    p.add_argument("--threads", type=int, help="-t for a threaded workload")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between samples (default 1)")
    p.add_argument("--no-strace", action="store_true", help="skip the system-call pass")
    p.set_defaults(func=run_soak)


class _Follower:
    """Moves the progress bar (in seconds) as the workload's PROGRESS lines arrive."""

    def __init__(self, s: Session):
        self.session = s
        self.seen = 0.0

    def __call__(self, line: str) -> None:
        if line.startswith("PROGRESS ") and self.session.bar:
            now = float(line.split()[1].partition("=")[2])
            self.session.bar.advance(now - self.seen)
            self.seen = now


def soak_figures(run: Run, window: int = 5) -> dict:
    """Drift, variation and RSS figures of one soak run (empty when it produced no samples)."""
    tput = [float(p["ops_per_sec"]) for p in run.progress if "ops_per_sec" in p]
    rss = [kb for _, kb in run.rss_samples]
    out: dict = {"samples": len(tput), "rss_samples": len(rss)}
    if tput:
        first, last = stats.edge_means(tput, window)
        out.update(tput_mean=statistics.fmean(tput), tput_first=first, tput_last=last,
                   tput_drift_pct=stats.drift_percent(tput, window), tput_cv_pct=stats.cv_percent(tput))
    if rss:  # the peak is the workload's own VmHWM: without it (no peak_rss_kb printed) it is unknown
        out.update(rss_first_kb=rss[0], rss_last_kb=rss[-1],
                   rss_peak_kb=None if run.maxrss_kb is None else max(max(rss), run.maxrss_kb),
                   rss_drift_pct=stats.drift_percent(rss, window))
    return out


def run_soak(args: argparse.Namespace) -> int:
    try:
        w = wl.get(args.workload)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.minutes <= 0 or args.interval <= 0:
        raise UsageError("--minutes and --interval must be positive")
    secs = args.minutes * 60.0
    trace_secs = max(2.0, min(10.0, secs / 10))
    s = Session("soak", args)
    strace = not args.no_strace
    t = args.threads if w.threaded else None
    flags = ["-d", f"{secs:g}", "-p", str(max(1, int(args.interval * 1000)))]
    args.timeout = max(args.timeout, secs + 120)
    runs: dict[str, Run] = {}
    sysc: dict[str, SyscallCount | str] = {}
    s.start_progress(len(s.allocators) * (secs + (trace_secs if strace else 0)), unit="s")
    with s.measuring():
        for a in s.allocators:
            follow = _Follower(s)
            runs[a.name] = s.run(Spec(w, a, w.args(args.size), threads=t, flags=flags), advance=0,
                                 rss_interval=args.interval, on_line=follow)
            if s.bar:
                s.bar.advance(max(0.0, secs - follow.seen))
            if strace:
                sysc[a.name] = s.strace(Spec(w, a, w.args(args.size), threads=t, flags=["-d", f"{trace_secs:g}"]),
                                        advance=trace_secs)

    figures = {}
    for name, r in runs.items():
        failed = cell_failure([r], lambda _: True)
        if failed is not None:
            figures[name] = failed
        else:
            figures[name] = soak_figures(r)
            sc = sysc.get(name)
            if isinstance(sc, SyscallCount):
                figures[name].update(syscalls=sc.calls, syscalls_per_op=sc.per_op())
    head = ["Allocator", "samples", "tput mean ops/s", "first", "last", "tput drift", "CV", "RSS first",
            "RSS last", "peak RSS", "RSS drift", "syscalls/op"]
    rows = []
    for name, f in figures.items():
        if f.get("failed"):
            rows.append([name, report.fmt_failed(f)] + [""] * (len(head) - 2))
            continue
        rows.append([name, f["samples"], report.fmt_num(f.get("tput_mean")), report.fmt_num(f.get("tput_first")),
                     report.fmt_num(f.get("tput_last")), report.fmt_pct(f.get("tput_drift_pct")),
                     report.fmt_pct(f.get("tput_cv_pct"), signed=False), report.fmt_kib(f.get("rss_first_kb")),
                     report.fmt_kib(f.get("rss_last_kb")),
                     report.fmt_kib(f.get("rss_peak_kb"), missing="n/a" if f.get("rss_samples") else ""),
                     report.fmt_pct(f.get("rss_drift_pct")), report.fmt_num(f.get("syscalls_per_op"))])
    text = (f"## {w.name}, {args.minutes:g} min per allocator\n\n{w.summary}. Throughput is sampled every "
            f"{args.interval:g} s from the workload's PROGRESS lines and RSS (VmRSS) from /proc/<pid>/status; "
            "drift = mean of the last 5 samples against the first 5 (fewer in runs under 10 samples); CV = "
            "standard deviation / mean of the throughput samples; syscalls/op from a separate "
            f"{trace_secs:g} s strace pass."
            + (f" {lost}" if (lost := report.failed_phrase([(n, f) for n, f in figures.items() if f.get("failed")]))
               else "")
            + (f" Peak RSS of {', '.join(no_rss)}: {RSS_MISSING}." if (no_rss := [
                n for n, f in figures.items() if f.get("rss_samples") and f.get("rss_peak_kb") is None]) else "")
            + "\n\n" + report.table(head, rows))
    s.out_dir.mkdir(parents=True, exist_ok=True)
    rss_series = {n: ([t for t, _ in r.rss_samples], [kb / 1024 for _, kb in r.rss_samples])
                  for n, r in runs.items() if r.rss_samples}
    tput_series = {n: ([float(p["t"]) for p in r.progress], [float(p["ops_per_sec"]) / 1e6 for p in r.progress])
                   for n, r in runs.items() if r.progress}
    png = plots.lines(s.out_dir / "soak.png", f"{w.name} soak",
                      [plots.LinePanel("RSS", rss_series, "seconds", "MiB"),
                       plots.LinePanel("throughput", tput_series, "seconds", "M ops/s")])
    sections = [text, f"![soak]({png.name})" if png else "No figure (matplotlib missing)."]
    s.write(f"soak of {w.name}", sections, {"minutes": args.minutes, "workload": w.name, "figures": figures})
    return s.exit_code
