"""report.py — writes the files of an experiment: report.md (markdown tables: machine, allocators, results,
exact commands) and data.json (every run and every summary figure). Also the number formatting shared by
all reports."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path


def fmt_num(v: float | None, digits: int = 3) -> str:
    """A number with `digits` significant digits and a k/M/G suffix from 10 000 up; '' for None."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    a = abs(v)

    def sig(x: float) -> str:  # `digits` significant digits, never exponent form: 999.7 -> "1,000",
        text = f"{x:.{digits}g}"  # 9.77e-05 -> "0.0000977" (syscalls per operation)
        if "e" not in text:
            return text
        if 0 < abs(x) < 1:
            return f"{x:.{digits - 1 - math.floor(math.log10(abs(x)))}f}".rstrip("0")
        return f"{x:,.0f}"

    for div, suffix, at in ((1e9, "G", 1e9), (1e6, "M", 1e6), (1e3, "k", 1e4)):
        if a >= at:
            return f"{sig(v / div)}{suffix}" if a / div < 10 ** digits else f"{v / div:,.0f}{suffix}"
    if a >= 10 ** digits:
        return f"{v:,.0f}"
    return sig(v)


def runs_phrase(counts: Sequence[int], reps: int) -> str:
    """What a table's figures are medians of, given each figure's number of runs: `reps` interleaved runs,
    or fewer where the experiment was interrupted. A cell with a failed run has no figure at all (see
    failed_phrase), so failures never shorten a median."""
    counts = sorted(set(counts))
    if not counts or counts == [reps]:
        return f"Median of {reps} interleaved runs"
    span = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    return f"Median of {span} of {reps} interleaved runs (the others were not run: interrupted)"


def fmt_failed(f: dict) -> str:
    """The cell of a failed figure (runner.cell_failure): "FAILED 4/8" (runs failed of runs made), plus
    " + latency pass" when the untimed latency pass failed too; "not run" when nothing ran (interrupted)."""
    parts = [f"{f['failed_runs']}/{f['of_runs']}"] if f.get("failed_runs") else []
    if f.get("latency_failed"):
        parts.append("latency pass")
    return "FAILED " + " + ".join(parts) if parts else "not run"


def failure_detail(f: dict) -> str:
    """'4 of 8 runs failed (timed out after 1.5 s ×4)', from a failed cell."""
    n = f.get("failed_runs", 0)
    head = [f"{n} of {f['of_runs']} runs"] if n else []
    if f.get("latency_failed"):
        head.append("the latency pass")
    why = ", ".join(f"{k} ×{c}" if c > 1 else k for k, c in f.get("errors", {}).items())
    return " and ".join(head) + " failed" + (f" ({why})" if why else "")


def failed_phrase(cells: Sequence[tuple[str, dict]]) -> str:
    """One sentence naming each failed (name, cell) and the runs it lost; '' when none failed."""
    cells = [(name, f) for name, f in cells if f.get("failed_runs") or f.get("latency_failed")]
    if not cells:
        return ""
    return ("**Failed, so no figure, ratio or rank here:** "
            + "; ".join(f"{name}: {failure_detail(f)}" for name, f in cells) + ".")


def fmt_int(v: float | None) -> str:
    return "" if v is None else f"{int(round(v)):,}"


def fmt_kib(kb: float | None, missing: str = "") -> str:
    """KiB as MiB with one decimal; `missing` for None."""
    return missing if kb is None else f"{kb / 1024:,.1f} MiB"


def fmt_pct(v: float | None, signed: bool = True) -> str:
    if v is None:
        return ""
    return f"{v:+.1f}%" if signed else f"{v:.1f}%"


def fmt_ratio(r: float | None) -> str:
    """A ratio to the best: '-' for the best itself, else '+x.x%'."""
    if r is None:
        return ""
    return "-" if abs(r - 1.0) < 5e-4 else f"{(r - 1.0) * 100:+.1f}%"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], right: Sequence[int] | None = None) -> str:
    """A markdown table; the columns in `right` (default: all but the first two) are right-aligned."""
    if right is None:
        right = range(2, len(headers))
    align = ["---:" if i in set(right) else "---" for i in range(len(headers))]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(align) + "|"]
    for row in rows:
        cells = ["" if c is None else str(c).replace("|", "\\|") for c in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def text_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """The same table aligned for a terminal."""
    cells = [list(map(str, headers))] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    out = []
    for n, r in enumerate(cells):
        out.append("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def machine_section(m: dict) -> str:
    pk = m.get("packages") or {}
    rows = [
        ("CPU", m.get("cpu")), ("cores", m.get("cores")),
        ("cores this run could use", m.get("cpus_usable", "not recorded")), ("RAM", f"{m.get('ram_gib')} GiB"),
        ("kernel", m.get("kernel")), ("glibc", m.get("glibc")), ("transparent huge pages", m.get("thp")),
        ("compiler", m.get("compiler")), ("strace", m.get("strace") or "not installed"),
        ("python", m.get("python")), ("hakmem commit", m.get("hakmem_commit") or "not recorded"),
    ] + [(f"package {k}", v) for k, v in sorted(pk.items())]
    return "## Machine\n\n" + table(("what", "value"), rows, right=())


def allocators_section(allocators: Sequence, missing: Sequence, versions: dict[str, str]) -> str:
    rows = [(a.name, a.describe(), versions.get(a.package or "", "")) for a in allocators]
    text = "## Allocators\n\n" + table(("name", "library", "package version"), rows, right=())
    if missing:
        text += "\n\nSkipped:\n\n" + "\n".join(f"- **{m.name}**: {m.reason}" for m in missing)
    return text


def commands_section(lab_command: str, commands: Sequence[str], notes: Sequence[str] = ()) -> str:
    text = (f"## Commands\n\nThis report: `{lab_command}`\n\n"
            "Each measured process (repeated as the report says):\n\n")
    text += "```sh\n" + "\n".join(commands) + "\n```"
    if notes:
        text += "\n\n" + "\n".join(f"- {n}" for n in notes)
    return text


def write(out_dir: Path, title: str, status: str, sections: Sequence[str], data: dict) -> Path:
    """Write report.md and data.json into out_dir; returns the report's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    body = [f"# {title}", f"**Status:** {status}"] + [s for s in sections if s]
    report = out_dir / "report.md"
    report.write_text("\n\n".join(body) + "\n", encoding="utf-8")
    (out_dir / "data.json").write_text(json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8")
    return report
