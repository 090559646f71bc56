"""stats.py — the statistics the reports use: median and spread, a distribution-free confidence interval
of the median, ratios to the best, geometric means, coefficient of variation, drift over a series, the parallelism degradation figure, and percentiles /
CCDF of latency histograms given as (lo, hi, count) buckets."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

Bucket = tuple[int, int, int]


def median(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("median of no values")
    return float(statistics.median(values))


def spread(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        raise ValueError("spread of no values")
    return float(min(values)), float(max(values))


def median_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Confidence interval of the median that assumes no distribution: (low, high, coverage).

    The interval runs from the k-th smallest to the k-th largest value, with the largest k whose
    coverage, 1 - 2 P(Binomial(n, 1/2) < k), is still at least `confidence`; coverage is that exact
    probability. When even the whole range falls short (fewer than 6 values at 95 %), it is the whole
    range with its lower coverage (7 values: 98.4 %; 5: 93.8 %; 3: 75 %)."""
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        raise ValueError("confidence interval of no values")

    def coverage(k: int) -> float:  # of [x(k), x(n + 1 - k)]: 1 - 2 P(Binomial(n, 1/2) <= k - 1)
        return 1 - 2 * sum(math.comb(n, j) for j in range(k)) / 2**n

    k = 1
    while k + 1 <= (n + 1) // 2 and coverage(k + 1) >= confidence:
        k += 1
    return float(xs[k - 1]), float(xs[n - k]), coverage(k)


def round_verdict(ratios: Sequence[float]) -> dict:
    """Verdict on per-round time ratios of a subject to a reference (below 1: the subject was faster):
    their median, its distribution-free confidence interval (median_ci at 95 %) and "ahead" or "behind"
    when the interval excludes 1, "within noise" when it holds 1, marked as having too few rounds when
    even all of them cannot reach 95 % coverage."""
    lo, hi, cov = median_ci(ratios)
    verdict = "ahead" if hi < 1 else "behind" if lo > 1 else "within noise"
    if cov < 0.95:
        verdict += " (too few rounds for a 95 % interval)"
    return {"rounds": len(ratios), "ratio": median(ratios), "ci_low": lo, "ci_high": hi, "coverage": cov,
            "verdict": verdict}


def geomean(values: Iterable[float]) -> float:
    vals = list(values)
    if not vals or any(v <= 0 for v in vals):
        raise ValueError("geomean needs positive values")
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def ratio_to_best(value: float, best: float, higher_is_better: bool) -> float:
    """How many times worse than the best a value is: 1.0 for the best, 1.25 for 25 % more time (or
    25 % fewer operations per second, expressed as time)."""
    if value <= 0 or best <= 0:
        raise ValueError("ratios need positive values")
    return best / value if higher_is_better else value / best


def cv_percent(values: Sequence[float]) -> float:
    """Coefficient of variation (sample standard deviation / mean) in percent."""
    if len(values) < 2:
        return 0.0
    mean = statistics.fmean(values)
    return 100.0 * statistics.stdev(values) / mean if mean else 0.0


def edge_means(values: Sequence[float], window: int = 5) -> tuple[float, float]:
    """Means of the first and of the last `window` samples (fewer when the series is short, so the two
    never overlap unless there is a single sample)."""
    if not values:
        raise ValueError("edge means of no values")
    w = max(1, min(window, len(values) // 2))
    return statistics.fmean(values[:w]), statistics.fmean(values[-w:])


def drift_percent(values: Sequence[float], window: int = 5) -> float:
    """Change of the mean of the last `window` samples against the first `window`, in percent."""
    first, last = edge_means(values, window)
    return 100.0 * (last - first) / first if first else 0.0


def degradation(time_n: float, time_2n: float, work_n: float, work_2n: float) -> float:
    """time(2n) / time(n) / (work(2n) / work(n)): the time per unit of work after doubling the threads,
    relative to before. 0.5 = twice the work in the same time (ideal while the threads fit the cores);
    1.0 = the same time per unit of work (no gain; ideal once the cores are full); above 1 the extra
    threads cost more than they gave."""
    if min(time_n, time_2n, work_n, work_2n) <= 0:
        raise ValueError("degradation needs positive times and work")
    return (time_2n / time_n) / (work_2n / work_n)


def merge_hists(hists: Iterable[Sequence[Bucket]]) -> list[Bucket]:
    merged: dict[tuple[int, int], int] = {}
    for hist in hists:
        for lo, hi, count in hist:
            merged[(lo, hi)] = merged.get((lo, hi), 0) + count
    return sorted((lo, hi, c) for (lo, hi), c in merged.items())


def hist_percentile(hist: Sequence[Bucket], q: float, maximum: float | None = None) -> float:
    """Value at quantile q (0..1): the middle of the bucket that holds it, never above `maximum` (the
    true largest value, when known)."""
    total = sum(c for _, _, c in hist)
    if total == 0:
        raise ValueError("percentile of an empty histogram")
    target = max(1, math.ceil(q * total))
    seen = 0
    for lo, hi, count in sorted(hist):
        seen += count
        if seen >= target:
            mid = lo + (hi - 1 - lo) / 2
            return min(mid, maximum) if maximum is not None else mid
    return float(sorted(hist)[-1][1] - 1)


def ccdf(hist: Sequence[Bucket]) -> list[tuple[float, float]]:
    """Points (x, P(latency > x)) at every bucket's upper end; the last point has probability 0."""
    total = sum(c for _, _, c in hist)
    if total == 0:
        return []
    points = []
    above = total
    for _, hi, count in sorted(hist):
        above -= count
        points.append((float(hi), above / total))
    return points
