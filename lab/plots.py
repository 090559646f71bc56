"""plots.py — the PNG figures of the reports, drawn with matplotlib (Agg, no display needed): bar panels
(one per workload), line panels (scaling, soak, CCDF) and grouped bars (A/B). Each function returns the
file written, or None (removing any older file at that path) when matplotlib is not installed or there
is nothing to draw."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class BarPanel:
    title: str
    labels: list[str]
    values: list[float]
    lows: list[float] = field(default_factory=list)
    highs: list[float] = field(default_factory=list)
    ylabel: str = ""


@dataclass
class LinePanel:
    title: str
    series: dict[str, tuple[Sequence[float], Sequence[float]]]
    xlabel: str = ""
    ylabel: str = ""
    logx: bool = False
    logy: bool = False


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def available() -> bool:
    return _pyplot() is not None


def _grid(plt, n: int, width: float = 5.0, height: float = 3.6):
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _save(plt, fig, path: Path, title: str) -> Path:
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _nothing_to_draw(path: Path) -> None:
    """No figure this time: remove one an earlier run left at `path`, so a report never sits next to a
    figure of other data."""
    path.unlink(missing_ok=True)
    return None


def bars(path: Path, title: str, panels: list[BarPanel]) -> Path | None:
    plt = _pyplot()
    if plt is None or not panels:
        return _nothing_to_draw(path)
    fig, axes = _grid(plt, len(panels))
    for ax, p in zip(axes, panels):
        x = range(len(p.labels))
        err = None
        if p.lows and p.highs:
            err = [[max(0.0, v - lo) for v, lo in zip(p.values, p.lows)],
                   [max(0.0, hi - v) for v, hi in zip(p.values, p.highs)]]
        ax.bar(x, p.values, yerr=err, capsize=3, color="tab:blue")
        ax.set_xticks(list(x), p.labels, rotation=30, ha="right")
        ax.set_title(p.title)
        ax.set_ylabel(p.ylabel)
    return _save(plt, fig, path, title)


def lines(path: Path, title: str, panels: list[LinePanel]) -> Path | None:
    plt = _pyplot()
    if plt is None or not panels:
        return _nothing_to_draw(path)
    fig, axes = _grid(plt, len(panels), width=6.0, height=4.0)
    for ax, p in zip(axes, panels):
        for label, (xs, ys) in p.series.items():
            if len(xs):
                ax.plot(list(xs), list(ys), marker="o" if len(xs) <= 12 else None, markersize=3, label=label)
        if p.logx:
            ax.set_xscale("log")
        if p.logy:
            ax.set_yscale("log")
        ax.set_title(p.title)
        ax.set_xlabel(p.xlabel)
        ax.set_ylabel(p.ylabel)
        ax.grid(True, alpha=0.3)
        if p.series:
            ax.legend(fontsize="small")
    return _save(plt, fig, path, title)


def grouped_bars(path: Path, title: str, groups: list[str], series: dict[str, list[float]], ylabel: str) -> Path | None:
    """One group of bars per entry of `groups`, one bar per series in each; a None value (no measurement)
    leaves its place empty and marked "n/a", never drawn as a bar of 0."""
    plt = _pyplot()
    if plt is None or not groups or not series:
        return _nothing_to_draw(path)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.5 * len(groups) * len(series) / 2), 4.0))
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, [float("nan") if v is None else v for v in values], width=width, label=label)
        for x, v in zip(xs, values):
            if v is None:
                ax.annotate("n/a", (x, 0), ha="center", va="bottom", fontsize="x-small", rotation=90)
    ax.set_xticks(list(range(len(groups))), groups)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize="small")
    ax.grid(True, axis="y", alpha=0.3)
    return _save(plt, fig, path, title)
