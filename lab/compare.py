"""compare.py — the `compare` and `quick` sub-commands: every workload under every allocator, repeated and
interleaved in rounds whose orders form a balanced Latin square (round_order), then one latency pass (-l) and one strace pass per pair, never timed.
Per workload a ranked table (rank, allocator, figure with min–max, vs best, times, page faults, peak RSS,
system calls per operation, latency percentiles), then each allocator's geometric-mean ratio to the best,
hakmem against each workload's best other allocator round by round (median ratio, confidence interval,
verdict: ahead, behind or within noise), the floor ratio (malloc+free pair vs a bare free-list pop+push),
per-size tables and the system calls. The `paired` sub-command prints the round-by-round table of a
finished report again, for any allocator as the subject."""

from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path

from lab import plots, report, stats
from lab import workloads as wl
from lab.runner import RSS_MISSING, SYSCALLS, Run, Spec, SyscallCount, cell_failure, error_kind, peak_rss_kb
from lab.session import Session, UsageError, add_common_options

LAT_KEYS = ("lat_p50_ns", "lat_p90_ns", "lat_p99_ns", "lat_p999_ns", "lat_max_ns")
SIZED_RE = re.compile(r"^ns_per_op_(\d+)$")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    for name, size, default, text in (
        ("compare", "standard", "all workloads", "rank the allocators on each workload"),
        ("quick", "quick", ",".join(wl.QUICK), "what `make bench` runs: a fast compare, printed as tables"),
    ):
        p = sub.add_parser(name, help=text, description=text)
        add_common_options(p, reps=6, size=size)  # the fewest rounds whose paired interval reaches 95 %
        p.add_argument("--workloads", help=f"comma-separated workloads (default: {default})")
        p.add_argument("--threads", type=int, help="-t for the threaded workloads (default: the program's, 2)")
        p.add_argument("--no-strace", action="store_true", help="skip the system-call pass")
        p.add_argument("--no-latency", action="store_true", help="skip the latency pass")
        p.set_defaults(func=run_quick if name == "quick" else run_compare)


def add_paired_parser(sub: argparse._SubParsersAction) -> None:
    text = "the round-by-round table of a finished compare, from its data.json"
    p = sub.add_parser("paired", help=text, description=text + " (any allocator as the subject).")
    p.add_argument("data", type=Path, help="a compare report's folder or its data.json")
    p.add_argument("--subject", default=SUBJECT, help=f"the allocator held against the others (default {SUBJECT})")
    p.set_defaults(func=run_paired)


class Measurements:
    """Runs of one compare, keyed by (workload, allocator)."""

    def __init__(self) -> None:
        self.timed: dict[tuple[str, str], list[Run]] = {}
        self.latency: dict[tuple[str, str], Run] = {}
        self.syscalls: dict[tuple[str, str], SyscallCount | str] = {}


def round_order(n: int, i: int) -> list[int]:
    """The order of n allocators in round i: the rows of a balanced Latin square (Williams design), so
    that over n rounds (2n when n is odd) each allocator runs in each position, and right after each
    other allocator, equally often: an after-effect of one run (a warm cache, a busy page allocator)
    falls on every allocator alike. Row 0 is 0, 1, n-1, 2, n-2, ...; row i adds i (mod n); odd n also
    uses the rows reversed."""
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    row = [(x + i) % n for x in first]
    return row[::-1] if n % 2 and (i // n) % 2 else row


def measure(s: Session, works: list[wl.Workload], threads: int | None, strace: bool, latency: bool) -> Measurements:
    m = Measurements()
    passes = s.args.reps + int(latency) + int(strace)
    s.start_progress(len(works) * len(s.allocators) * passes)
    with s.measuring():
        for w in works:
            t = threads if w.threaded else None
            args = w.args(s.args.size)
            for i in range(s.args.reps):
                for k in round_order(len(s.allocators), i):
                    a = s.allocators[k]
                    s.run(Spec(w, a, args, threads=t), keep=m.timed.setdefault((w.name, a.name), []).append)
            if latency:
                for a in s.allocators:
                    s.run(Spec(w, a, args, threads=t, flags=["-l"]),
                          keep=lambda r, key=(w.name, a.name): m.latency.__setitem__(key, r))
            if strace:
                for a in s.allocators:
                    m.syscalls[(w.name, a.name)] = s.strace(Spec(w, a, args, threads=t))
    return m


def failed_row(a: str, runs: list[Run], latency: Run | None, metric: str) -> dict | None:
    """The row of an allocator whose cell is void, or None when every run of it is good. Any failed run
    (timeout, crash, bad exit status, unparsable output, allocator mismatch), the latency pass's included,
    voids the cell: no median, no ratio, no rank, and the allocator is incomplete in the geomean. Ranking
    it on the runs that happened to finish rated an allocator that hung in half its starts on its fast
    half. With no run at all (an interrupted experiment) the row says so ("not run")."""
    fail = cell_failure(runs, lambda r: r.value(metric) is not None)
    lat_failed = latency is not None and not latency.ok
    if fail is None and not lat_failed and runs:
        return None
    row = {"allocator": a, "failed": True, "failed_runs": 0, "of_runs": len(runs), "errors": {}}
    if fail is not None:
        row.update(fail)
    if lat_failed:
        row["latency_failed"] = True
        kind = error_kind(latency.error or "")
        row["errors"] = {**row["errors"], kind: row["errors"].get(kind, 0) + 1}
    return row


def summarize(w: wl.Workload, allocators: list[str], m: Measurements) -> list[dict]:
    """One row per allocator (best first, failed ones last) with every figure of the table."""
    rows = []
    for a in allocators:
        runs = m.timed.get((w.name, a), [])
        void = failed_row(a, runs, m.latency.get((w.name, a)), w.metric)
        if void is not None:
            rows.append(void)
            continue
        vals = [r.value(w.metric) for r in runs]
        lo, hi = stats.spread(vals)
        row: dict = {
            "allocator": a, "failed": False, "runs": len(runs), "metric": stats.median(vals), "min": lo, "max": hi,
            "wall_s": stats.median([r.wall_s for r in runs]), "user_s": stats.median([r.user_s for r in runs]),
            "sys_s": stats.median([r.sys_s for r in runs]), "minflt": stats.median([r.minflt for r in runs]),
            "majflt": stats.median([r.majflt for r in runs]), "peak_rss_kb": peak_rss_kb(runs),
            "ops": stats.median([r.value("ops") or 0 for r in runs]),
        }
        sized = {}
        for key in runs[0].results:
            match = SIZED_RE.match(key)
            if match:
                sized[int(match.group(1))] = stats.median([r.value(key) or 0.0 for r in runs])
        row["sized"] = dict(sorted(sized.items()))
        sc = m.syscalls.get((w.name, a))
        if isinstance(sc, SyscallCount):
            row["syscalls"] = sc.calls
            row["syscalls_per_op"] = sc.per_op()
        lat = m.latency.get((w.name, a))
        if lat is not None:  # a failed latency pass voided the row above
            row.update({k: lat.value(k) for k in LAT_KEYS})
        rows.append(row)
    ok = [r for r in rows if not r["failed"]]
    positive = [r for r in ok if r["metric"] > 0]  # a run that did no operation reports 0: no ratio, no best
    if positive:
        best = (max if w.higher_is_better else min)(r["metric"] for r in positive)
        for r in ok:
            r["ratio"] = stats.ratio_to_best(r["metric"], best, w.higher_is_better) if r["metric"] > 0 else None
    ok.sort(key=lambda r: r.get("ratio") or float("inf"))
    return ok + [r for r in rows if r["failed"]]


SUBJECT = "hakmem"


def round_ratios(w: wl.Workload, mine: list[Run], theirs: list[Run]) -> list[float]:
    """Time ratios of runs to the runs of the same interleaved rounds (same index). None at all when
    either side has a failed run, as summarize voids its cell: skipping the failed rounds kept the rounds
    in which a flaky allocator happened to be fast. Rounds in which either did no operation (a figure of
    0) give no ratio."""
    if cell_failure(mine, lambda r: r.value(w.metric) is not None) or \
            cell_failure(theirs, lambda r: r.value(w.metric) is not None):
        return []
    ratios = []
    for a_run, b_run in zip(mine, theirs):
        a, b = a_run.value(w.metric), b_run.value(w.metric)
        if (a or 0) > 0 and (b or 0) > 0:
            ratios.append(stats.ratio_to_best(a, b, w.higher_is_better))
    return ratios


def paired(w: wl.Workload, rows: list[dict], m: Measurements, subject: str = SUBJECT) -> dict | None:
    """The subject against the best other allocator of the workload, round by round: each interleaved
    round gives one ratio of the subject's time to the other's (both runs of a round saw the same machine
    state), and the row holds their median, its distribution-free confidence interval and a verdict:
    "ahead" or "behind" when the interval excludes 1, "within noise" when it holds 1, marked as having too
    few rounds when even all of them cannot reach 95 % coverage. None when there is no subject or no other."""
    ok = [r for r in rows if not r["failed"]]
    others = [r for r in ok if r["allocator"] != subject]
    if not others or not any(r["allocator"] == subject for r in ok):
        return None
    peer = others[0]["allocator"]  # rows are sorted best first
    ratios = round_ratios(w, m.timed.get((w.name, subject), []), m.timed.get((w.name, peer), []))
    if not ratios:
        return None
    return {"workload": w.name, "subject": subject, "peer": peer} | stats.round_verdict(ratios)


def paired_rows(works: list[wl.Workload], tables: dict[str, list[dict]], m: Measurements,
                subject: str = SUBJECT) -> list[dict]:
    """paired() for every ranked workload that has a table."""
    return [p for w in works if w.ranked and w.name in tables and (p := paired(w, tables[w.name], m, subject))]


def paired_table(prs: list[dict], markdown: bool = True) -> str:
    subject = prs[0]["subject"] if prs else SUBJECT
    headers = ["Workload", "best other", "rounds", f"{subject} ÷ other (time)", "confidence interval", "verdict"]
    body = [[p["workload"], p["peer"], p["rounds"], f"{p['ratio']:.3f}",
             f"{p['ci_low']:.3f}–{p['ci_high']:.3f} ({100 * p['coverage']:.1f} %)", p["verdict"]] for p in prs]
    if len(prs) > 1:
        body.append(["geomean", "", "", f"{stats.geomean(p['ratio'] for p in prs):.3f}", "", ""])
    return report.table(headers, body, right=(2, 3)) if markdown else report.text_table(headers, body)


def is_failure(row: dict) -> bool:
    """A void row that lost runs (not one that was never run because the experiment was interrupted)."""
    return bool(row["failed"] and (row.get("failed_runs") or row.get("latency_failed") or "of_runs" not in row))


def geomeans(tables: dict[str, list[dict]]) -> list[dict]:
    """Each allocator's geomean ratio to the best. Only allocators with a ratio on every workload of the
    tables are complete and ranked: one that failed a run somewhere (its cell void) or has no ratio on a
    workload gets a geomean of the rest, marked incomplete (`failed_on` names the workloads it failed),
    below them; one with no ratio at all is listed with none."""
    per: dict[str, list[float]] = {}
    failed: dict[str, list[str]] = {}
    order: list[str] = []
    for name, rows in tables.items():
        for r in rows:
            order += [r["allocator"]] if r["allocator"] not in order else []
            if r.get("ratio"):
                per.setdefault(r["allocator"], []).append(r["ratio"])
            elif is_failure(r):
                failed.setdefault(r["allocator"], []).append(name)
    total = len(tables)
    out = [{"allocator": a, "geomean": stats.geomean(per[a]) if per.get(a) else None,
            "workloads": len(per.get(a, [])), "of": total, "failed_on": failed.get(a, []),
            "complete": len(per.get(a, [])) == total and not failed.get(a)} for a in order]
    return sorted(out, key=lambda r: (not r["complete"], r["geomean"] is None, r["geomean"] or 0.0))


def failed_cells(tables: dict[str, list[dict]]) -> list[dict]:
    """Every void cell that lost runs, for the report's summary and data.json alike."""
    keys = ("failed_runs", "of_runs", "errors", "latency_failed")
    return [{"workload": name, "allocator": r["allocator"], **{k: r[k] for k in keys if k in r}}
            for name, rows in tables.items() for r in rows if is_failure(r)]


def failed_lines(cells: list[dict]) -> list[str]:
    """'tcmalloc on pair: 4 of 8 runs failed (timed out after 1.5 s ×4)' per failed cell."""
    return [f"{c['allocator']} on {c['workload']}: {report.failure_detail(c)}" for c in cells]


def rss_missing(tables: dict[str, list[dict]]) -> list[dict]:
    """The measured cells without a peak RSS (a workload that printed no peak_rss_kb)."""
    return [{"workload": name, "allocator": r["allocator"]} for name, rows in tables.items()
            for r in rows if not r["failed"] and r.get("peak_rss_kb") is None]


def floor_rows(tables: dict[str, list[dict]]) -> tuple[float | None, list[dict]]:
    """The floor's ns/op (median over its runs under every allocator) and each allocator's pair cost."""
    floor = [r["metric"] for r in tables.get("floor", []) if not r["failed"]]
    if not floor or "pair" not in tables:
        return None, []
    f = stats.median(floor)
    rows = [{"allocator": r["allocator"], "sizes": {sz: (ns, ns / f) for sz, ns in r["sized"].items()}}
            for r in tables["pair"] if not r["failed"]]
    return f, rows


def _rank_label(i: int) -> str:
    return str(i + 1)


def workload_table(w: wl.Workload, rows: list[dict], markdown: bool = True) -> str:
    headers = ["Rank", "Allocator", f"{w.unit} (median)", "min–max", "vs best", "wall s", "user s", "sys s",
               "soft PF", "hard PF", "peak RSS", "syscalls/op", "p50 ns", "p90 ns", "p99 ns", "p99.9 ns", "max ns"]
    body = []
    for i, r in enumerate(rows):
        if r["failed"]:
            body.append(["-", r["allocator"], report.fmt_failed(r)] + [""] * (len(headers) - 3))
            continue
        body.append([
            _rank_label(i), r["allocator"], report.fmt_num(r["metric"]),
            f"{report.fmt_num(r['min'])}–{report.fmt_num(r['max'])}", report.fmt_ratio(r.get("ratio")),
            f"{r['wall_s']:.3f}", f"{r['user_s']:.3f}", f"{r['sys_s']:.3f}", report.fmt_int(r["minflt"]),
            report.fmt_int(r["majflt"]), report.fmt_kib(r["peak_rss_kb"], missing="n/a"),
            report.fmt_num(r.get("syscalls_per_op")), *(report.fmt_int(r.get(k)) for k in LAT_KEYS),
        ])
    if markdown:
        return report.table(headers, body)
    keep = (0, 1, 2, 4, 10, 11, 14)
    return report.text_table([headers[i] for i in keep], [[row[i] for i in keep] for row in body])


def geomean_table(g: list[dict], markdown: bool = True) -> str:
    headers = ["Rank", "Allocator", "geomean ratio to best", "workloads"]
    body = [[i + 1 if r["complete"] else "-", r["allocator"],
             "n/a" if r["geomean"] is None else f"{r['geomean']:.3f}", workloads_cell(r)] for i, r in enumerate(g)]
    return report.table(headers, body) if markdown else report.text_table(headers, body)


def workloads_cell(r: dict) -> str | int:
    """How many workloads a geomean covers: the count when complete, else 'k of n (incomplete...)' naming
    the workloads on which the allocator failed runs."""
    if r["complete"]:
        return r["workloads"]
    failed = r.get("failed_on") or []
    why = f": failed on {', '.join(failed)}" if failed else ""
    return f"{r['workloads']} of {r['of']} (incomplete{why})"


def sized_table(rows: list[dict]) -> str:
    sizes = sorted({sz for r in rows if not r["failed"] for sz in r["sized"]})
    body = [[r["allocator"]] + [report.fmt_num(r["sized"].get(sz)) for sz in sizes] for r in rows if not r["failed"]]
    return report.table(["Allocator"] + [f"{sz} B ns/op" for sz in sizes], body, right=range(1, len(sizes) + 1))


def syscall_table(tables: dict[str, list[dict]]) -> str:
    body = []
    for name, rows in tables.items():
        for r in rows:
            if "syscalls" in r:
                c = r["syscalls"]
                body.append([name, r["allocator"], *(report.fmt_int(c.get(s, 0)) for s in SYSCALLS),
                             report.fmt_int(sum(c.values())), report.fmt_num(r.get("syscalls_per_op"))])
    if not body:
        return ""
    return report.table(["Workload", "Allocator", *SYSCALLS, "total", "per op"], body)


def missing_sentence(missing: list[dict]) -> str:
    """The allocators this run skipped because they are not installed (or not built), so that its ranks
    are not read as a win over the whole field."""
    if not missing:
        return ""
    return ("**Not in this comparison** (not installed, so neither ranked nor beaten here): "
            + "; ".join(f"{m['name']} ({m['reason']})" for m in missing) + ".")


def summary_data(tables: dict[str, list[dict]], g: list[dict], prs: list[dict], missing: list[dict]) -> dict:
    """data.json's summary: the same tables, geomeans, failures, missing peak RSS and missing peers as the
    report's Markdown."""
    return {"tables": tables, "geomean": g, "paired": prs, "failed": failed_cells(tables),
            "rss_missing": rss_missing(tables), "missing_peers": missing}


def sections(s: Session, works: list[wl.Workload], tables: dict[str, list[dict]], g: list[dict],
             prs: list[dict]) -> list[str]:
    summary = ("## Summary: geometric mean of each allocator's ratio to the best\n\n"
               "1.000 = best on every workload; 1.25 = on average 25 % more time per unit of work.\n\n"
               + geomean_table(g))
    fails = failed_cells(tables)
    if fails:
        summary += ("\n\n**Failed runs.** A failed run voids its allocator's figure on that workload: no median, no "
                    "ratio, no rank there, and its geomean is incomplete.\n\n"
                    + "\n".join(f"- {line}" for line in failed_lines(fails)))
    if missing := missing_sentence(getattr(s, "missing_peers", [])):
        summary += "\n\n" + missing
    out = [summary]
    for w in works:
        if w.name not in tables or not w.ranked:
            continue
        counts = [r["runs"] for r in tables[w.name] if not r["failed"]]
        failed = report.failed_phrase([(r["allocator"], r) for r in tables[w.name] if r["failed"]])
        no_rss = [c["allocator"] for c in rss_missing({w.name: tables[w.name]})]
        text = (f"### {w.name} — {w.unit}, {'higher' if w.higher_is_better else 'lower'} is better\n\n"
                f"{w.summary}. {report.runs_phrase(counts, s.args.reps)}; vs best in time terms; peak RSS is the "
                f"largest of the runs; syscalls/op and latency come from separate untimed passes."
                + (f" {failed}" if failed else "")
                + (f" Peak RSS of {', '.join(no_rss)}: {RSS_MISSING}." if no_rss else "")
                + "\n\n" + workload_table(w, tables[w.name]))
        if w.sized_results:
            text += "\n\nPer size:\n\n" + sized_table(tables[w.name])
        out.append(text)
    if prs:
        out.append(f"## {SUBJECT} against the best other allocator, round by round\n\n"
                   f"Each interleaved round gives one ratio of {SUBJECT}'s time to that of the workload's best other "
                   "allocator; the table gives their median and the distribution-free confidence interval of that "
                   "median (order statistics, its exact coverage in brackets). Below 1 is faster; an interval that "
                   "holds 1 means this run cannot tell the two apart.\n\n" + paired_table(prs))
    f, frows = floor_rows(tables)
    if f is not None and frows:
        sizes = sorted({sz for r in frows for sz in r["sizes"]})
        body = [[r["allocator"]] + [f"{report.fmt_num(r['sizes'][sz][0])} ({r['sizes'][sz][1]:.1f}x)"
                                    if sz in r["sizes"] else "" for sz in sizes] for r in frows]
        out.append(f"## Floor: malloc+free pair against a bare free-list pop+push\n\nThe floor (`floor`, no malloc) "
                   f"costs {f:.2f} ns per pop+push. Each cell: the pair's ns/op (its multiple of the floor).\n\n"
                   + report.table(["Allocator"] + [f"{sz} B" for sz in sizes], body, right=range(1, len(sizes) + 1)))
    sc = syscall_table(tables)
    if sc:
        out.append("## System calls (strace -f -c pass)\n\n" + sc)
    return out


def make_plots(out_dir: Path, works: list[wl.Workload], tables: dict[str, list[dict]], g: list[dict]) -> list[str]:
    panels = []
    for w in works:
        rows = [r for r in tables.get(w.name, []) if not r["failed"]]
        if rows:
            panels.append(plots.BarPanel(f"{w.name} ({'higher' if w.higher_is_better else 'lower'} is better)",
                                         [r["allocator"] for r in rows], [r["metric"] for r in rows],
                                         [r["min"] for r in rows], [r["max"] for r in rows], w.unit))
    written = [plots.bars(out_dir / "workloads.png", "median, min–max", panels)]
    drawn = [r for r in g if r["geomean"] is not None]
    written.append(plots.bars(out_dir / "geomean.png", "geometric mean ratio to best (lower is better)",
                              [plots.BarPanel("all workloads", [geomean_label(r) for r in drawn],
                                              [r["geomean"] for r in drawn], ylabel="ratio")] if drawn else []))
    return [p.name for p in written if p is not None]


def geomean_label(r: dict) -> str:
    """An allocator's name under its geomean bar; one that failed a workload is marked, as in the table."""
    return r["allocator"] if r["complete"] else f"{r['allocator']} (incomplete, {r['workloads']} of {r['of']})"


def execute(args: argparse.Namespace, name: str, default: tuple[str, ...]) -> tuple[Session, dict, list]:
    try:
        works = wl.parse_list(args.workloads, default)
    except ValueError as e:
        raise UsageError(str(e)) from None
    s = Session(name, args)
    m = measure(s, works, args.threads, strace=not args.no_strace, latency=not args.no_latency)
    names = [a.name for a in s.allocators]
    tables = {w.name: summarize(w, names, m) for w in works if any(k[0] == w.name for k in m.timed)}
    g = geomeans({k: v for k, v in tables.items() if wl.get(k).ranked})
    s.out_dir.mkdir(parents=True, exist_ok=True)
    pngs = make_plots(s.out_dir, [w for w in works if w.ranked], tables, g)
    figs = "Figures: " + ", ".join(f"![{p}]({p})" for p in pngs) if pngs else "No figures (matplotlib missing)."
    prs = paired_rows(works, tables, m)
    s.write(name, sections(s, works, tables, g, prs) + [figs], summary_data(tables, g, prs, s.missing_peers))
    return s, tables, g, prs


def is_latency_pass(run: Run) -> bool:
    """A compare's untimed latency pass (-l): it reports percentiles, or, when it failed, its command
    still carries the flag."""
    if "lat_count" in run.results:
        return True
    try:
        return "-l" in shlex.split(run.command)
    except ValueError:
        return False


def measurements_from_data(data: dict) -> tuple[list[str], Measurements]:
    """The allocators and the runs of a compare's data.json in the order they ran: timed runs, and the
    latency passes apart (a failed one voids its cell, as in the report)."""
    m = Measurements()
    for r in data["runs"]:
        run = Run(**r)
        if is_latency_pass(run):
            m.latency[(run.workload, run.allocator)] = run
        else:
            m.timed.setdefault((run.workload, run.allocator), []).append(run)
    return [a["name"] for a in data["allocators"]], m


def run_paired(args: argparse.Namespace) -> int:
    path = args.data / "data.json" if args.data.is_dir() else args.data
    try:
        data = json.loads(path.read_text())
        if data.get("experiment") not in (None, "compare", "quick"):
            raise ValueError(f"it holds a {data['experiment']} experiment, whose runs are not rounds of one size")
        names, m = measurements_from_data(data)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise UsageError(f"{path}: not a compare's data.json ({e})") from None
    if args.subject not in names:
        raise UsageError(f"{args.subject} is not among the allocators of {path}: {', '.join(names)}")
    works = list(wl.WORKLOADS.values())
    tables = {w.name: summarize(w, names, m) for w in works if any(k[0] == w.name for k in m.timed)}
    prs = paired_rows(works, tables, m, args.subject)
    print(paired_table(prs) if prs else f"no workload of {path} has {args.subject} and another allocator")
    return 0


def run_compare(args: argparse.Namespace) -> int:
    s, _, _, _ = execute(args, "compare", tuple(wl.WORKLOADS))
    return s.exit_code


def run_quick(args: argparse.Namespace) -> int:
    s, tables, g, prs = execute(args, "quick", wl.QUICK)
    for name, rows in tables.items():
        w = wl.get(name)
        if w.ranked:
            print(f"\n{name} ({w.unit}, {'higher' if w.higher_is_better else 'lower'} is better)")
            print(workload_table(w, rows, markdown=False))
    f, frows = floor_rows(tables)
    if f is not None:
        print(f"\nfloor: {f:.2f} ns per pop+push; pair ns/op (x floor):")
        for r in frows:
            cells = (f"{sz}B {ns:.2f} ({x:.1f}x)" for sz, (ns, x) in r["sizes"].items())
            print(f"  {r['allocator']:<14}" + "  ".join(cells))
    if prs:
        print(f"\n{SUBJECT} against the best other allocator, round by round (median ratio of times, confidence interval):")
        print(paired_table(prs, markdown=False))
    if g:
        print("\nsummary: geometric mean ratio to best (1.000 = best everywhere)")
        print(geomean_table(g, markdown=False))
    fails = failed_cells(tables)
    if fails:
        print("\nfailed runs (each voids that figure: no median, ratio or rank; its geomean is incomplete):")
        for line in failed_lines(fails):
            print(f"  {line}")
    for c in rss_missing(tables):
        print(f"\npeak RSS of {c['allocator']} on {c['workload']}: {RSS_MISSING}")
    if s.missing_peers:
        print("\nnot in this comparison (not installed): "
              + "; ".join(f"{p['name']} ({p['reason']})" for p in s.missing_peers))
    print(f"\nstatus: {s.status}\nreport: {s.out_dir / 'report.md'}")
    return s.exit_code
