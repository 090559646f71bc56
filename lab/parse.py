"""parse.py — reads what the workloads and strace print: the `allocator-check:`, `RESULT k=v ...`,
`PROGRESS k=v ...`, `HIST lo hi count` and `Throughput = N ops/s` lines, and `strace -c` summary tables."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class WorkloadOutput:
    """Everything a workload printed that the lab understands."""

    allocator_check: str | None = None
    results: dict[str, float | int | str] = field(default_factory=dict)
    progress: list[dict[str, float | int | str]] = field(default_factory=list)
    hist: list[tuple[int, int, int]] = field(default_factory=list)
    throughput: float | None = None


def parse_value(text: str) -> float | int | str:
    """An int if the text is one, else a float if it is one, else the text itself."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def parse_kv(text: str) -> dict[str, float | int | str]:
    """Parse `k=v k2=v2 ...`; a token without `=` or with an empty key is an error."""
    out: dict[str, float | int | str] = {}
    for token in text.split():
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise ValueError(f"malformed key=value token {token!r}")
        out[key] = parse_value(value)
    return out


def parse_output(text: str) -> WorkloadOutput:
    """Parse a workload's standard output. RESULT lines are merged into one dict (later keys win);
    unknown lines are ignored so a workload may print human-readable text too."""
    out = WorkloadOutput()
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("allocator-check:"):
            out.allocator_check = line.partition(":")[2].strip()
        elif line.startswith("RESULT "):
            out.results.update(parse_kv(line[len("RESULT "):]))
        elif line.startswith("PROGRESS "):
            out.progress.append(parse_kv(line[len("PROGRESS "):]))
        elif line.startswith("HIST "):
            parts = line.split()
            if len(parts) != 4:
                raise ValueError(f"malformed HIST line {line!r}")
            lo, hi, count = (int(p) for p in parts[1:])
            out.hist.append((lo, hi, count))
        elif line.startswith("Throughput = "):
            out.throughput = float(line.split()[2])
    return out


def parse_strace_summary(text: str) -> dict[str, int]:
    """Calls per system call from a `strace -c` table (the `total` row is left out).

    Rows look like `45.16 0.005323 6 851 [errors] munmap`: the calls are the fourth column and the name
    is the last, whether or not the errors column is filled."""
    calls: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 5 or parts[0].startswith(("%", "-")):
            continue
        name = parts[-1]
        if name == "total":
            continue
        try:
            float(parts[0])
            calls[name] = calls.get(name, 0) + int(parts[3])
        except ValueError:
            continue
    return calls
