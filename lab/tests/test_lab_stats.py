"""The statistics behind the reports."""

import math

import pytest

from lab import stats


def test_median_and_spread():
    assert stats.median([3, 1, 2]) == 2
    assert stats.median([1, 2, 3, 10]) == 2.5
    assert stats.spread([3, 1, 2]) == (1, 3)
    with pytest.raises(ValueError):
        stats.median([])


def test_geomean():
    assert stats.geomean([1, 4]) == pytest.approx(2.0)
    assert stats.geomean([2, 2, 2]) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        stats.geomean([1, 0])
    with pytest.raises(ValueError):
        stats.geomean([])


def test_ratio_to_best_is_time_like_both_ways():
    assert stats.ratio_to_best(100, 125, higher_is_better=True) == pytest.approx(1.25)
    assert stats.ratio_to_best(125, 100, higher_is_better=False) == pytest.approx(1.25)
    assert stats.ratio_to_best(5, 5, higher_is_better=True) == 1.0


def test_cv_percent():
    assert stats.cv_percent([1, 2, 3]) == pytest.approx(50.0)
    assert stats.cv_percent([7]) == 0.0


def test_drift_compares_the_ends_of_a_series():
    series = [100.0] * 5 + [105.0] * 10 + [110.0] * 5
    assert stats.drift_percent(series) == pytest.approx(10.0)
    assert stats.drift_percent([100.0, 90.0]) == pytest.approx(-10.0)
    assert stats.edge_means([1.0, 2.0, 3.0, 4.0], window=5) == (1.5, 3.5)


def test_degradation():
    assert stats.degradation(1.0, 1.0, 100, 200) == pytest.approx(0.5)
    assert stats.degradation(1.0, 2.0, 100, 200) == pytest.approx(1.0)
    assert stats.degradation(1.0, 4.0, 100, 200) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        stats.degradation(0.0, 1.0, 1, 1)


HIST = [(10, 11, 90), (100, 110, 9), (1000, 1100, 1)]


def test_hist_percentiles_use_bucket_middles_and_the_true_maximum():
    assert stats.hist_percentile(HIST, 0.5) == 10
    assert stats.hist_percentile(HIST, 0.95) == pytest.approx(104.5)
    assert stats.hist_percentile(HIST, 1.0) == pytest.approx(1049.5)
    assert stats.hist_percentile(HIST, 1.0, maximum=1020) == 1020
    with pytest.raises(ValueError):
        stats.hist_percentile([], 0.5)


def test_ccdf_falls_to_zero():
    pts = stats.ccdf(HIST)
    assert pts == [(11.0, 0.1), (110.0, 0.01), (1100.0, 0.0)]
    assert stats.ccdf([]) == []


def test_merge_hists_adds_matching_buckets():
    merged = stats.merge_hists([[(1, 2, 3), (5, 6, 1)], [(1, 2, 4)]])
    assert merged == [(1, 2, 7), (5, 6, 1)]
    assert math.isclose(sum(c for *_, c in merged), 8)


def test_median_ci_uses_order_statistics_with_exact_coverage():
    assert stats.median_ci(range(1, 8)) == (1.0, 7.0, 1 - 2 / 128)  # 7 values: the whole range, 98.4 %
    lo, hi, cov = stats.median_ci(list(range(15, 0, -1)))  # order does not matter
    assert (lo, hi) == (4.0, 12.0) and abs(cov - (1 - 2 * 576 / 32768)) < 1e-12
    assert stats.median_ci([1, 2, 3]) == (1.0, 3.0, 0.75)  # too few for 95 %: the range, with its coverage
    assert stats.median_ci([5])[2] == 0.0
    with pytest.raises(ValueError):
        stats.median_ci([])


def test_round_verdict_reads_the_interval():
    ahead = stats.round_verdict([0.90, 0.92, 0.95, 0.91, 0.93, 0.94, 0.96])
    assert ahead["verdict"] == "ahead" and ahead["ratio"] == 0.93 and ahead["rounds"] == 7
    assert (ahead["ci_low"], ahead["ci_high"]) == (0.90, 0.96)
    assert stats.round_verdict([1.1, 1.2, 1.05, 1.3, 1.15, 1.12, 1.08])["verdict"] == "behind"
    assert stats.round_verdict([0.9, 1.1, 0.95, 1.05, 1.0, 0.97, 1.02])["verdict"] == "within noise"
    few = stats.round_verdict([0.9, 0.91, 0.92])
    assert few["verdict"] == "ahead (too few rounds for a 95 % interval)" and few["coverage"] == 0.75
