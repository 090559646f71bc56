"""The workload programs themselves, in tiny runs: every one runs, prints parsable results, records
latency, honours -d/-p, is deterministic where it claims to be, and rejects bad arguments."""

import subprocess

import pytest

from lab import runner, stats
from lab import workloads as wl

ALL = list(wl.WORKLOADS)


def _run(a, name, root, threads=None, flags=(), args=None, env=None):
    w = wl.get(name)
    spec = runner.Spec(w, a, args if args is not None else w.args("tiny"), threads=threads, flags=list(flags),
                       env=env or {})
    r = runner.run(spec, root, timeout=120)
    assert r.ok, f"{spec.shell(root)}: {r.error}"
    return r


@pytest.mark.parametrize("name", ALL)
def test_every_workload_reports_results(bench_built, root, glibc, name):
    r = _run(glibc, name, root)
    res = r.results
    assert res["workload"] == name
    assert res["ops"] > 0 and res["seconds"] > 0
    assert res["ops_per_sec"] == pytest.approx(res["ops"] / res["seconds"], rel=1e-3)
    assert res["peak_rss_kb"] > 0
    assert glibc.matches(r.allocator_check)
    assert "lat_p50_ns" not in res, "latency is recorded only with -l"


@pytest.mark.parametrize("name", ALL)
def test_every_workload_records_latency(bench_built, root, glibc, name):
    r = _run(glibc, name, root, flags=["-H"])
    res = r.results
    assert res["lat_count"] > 0
    assert res["lat_p50_ns"] <= res["lat_p90_ns"] <= res["lat_p99_ns"] <= res["lat_p999_ns"] <= res["lat_max_ns"]
    assert sum(c for _, _, c in r.hist) == res["lat_count"]
    assert all(lo < hi for lo, hi, _ in r.hist)
    assert stats.hist_percentile(r.hist, 0.5, res["lat_max_ns"]) == pytest.approx(res["lat_p50_ns"], abs=1)


@pytest.mark.parametrize("name", ["random_mixed", "larson", "prodcons", "churn", "realistic", "tiny_hot", "pair"])
def test_duration_mode_prints_progress_and_stops(bench_built, root, glibc, name):
    r = _run(glibc, name, root, flags=["-d", "0.6", "-p", "100"])
    assert 0.55 <= r.results["seconds"] < 3.0
    times = [p["t"] for p in r.progress]
    assert len(times) >= 4 and times == sorted(times)
    ops = [p["ops"] for p in r.progress]  # operations done so far: they grow, and the work started
    assert ops == sorted(ops) and ops[-1] > 0


def test_random_mixed_output_and_determinism(bench_built, root, glibc):
    a = _run(glibc, "random_mixed", root, args=["100000", "512", "7"])
    b = _run(glibc, "random_mixed", root, args=["100000", "512", "7"])
    c = _run(glibc, "random_mixed", root, args=["100000", "512", "8"])
    assert a.results["live_at_end"] == b.results["live_at_end"]
    assert (a.results["min"], a.results["max"]) == (16, 1040)
    assert a.results["live_at_end"] != c.results["live_at_end"] or a.results["seed"] != c.results["seed"]
    out = subprocess.run([str(bench_built / "random_mixed"), "1000"], capture_output=True, text=True, check=True)
    assert any(line.startswith("Throughput = ") and line.endswith(" ops/s") for line in out.stdout.splitlines())


def test_threaded_counts(bench_built, root, glibc):
    larson = _run(glibc, "larson", root, threads=3, args=["4", "1000"])
    assert larson.results["threads_created"] == 12
    assert larson.results["ops"] == 3 * 4 * 1000 * 2
    churn = _run(glibc, "churn", root, threads=2, args=["5", "100"])
    assert churn.results["threads_created"] == 10
    pc = _run(glibc, "prodcons", root, threads=3, args=["5000"])
    assert (pc.results["producers"], pc.results["consumers"]) == (2, 1)
    assert pc.results["ops"] == 2 * 2 * 5000


def test_realistic_shape(bench_built, root, glibc):
    a = _run(glibc, "realistic", root, threads=2, args=["10", "1000", "1", "16"])
    b = _run(glibc, "realistic", root, threads=2, args=["10", "1000", "1", "16"])
    assert a.results["tasks"] == 20
    assert a.results["handed_off"] == b.results["handed_off"], "task contents depend only on the seed"
    assert 30 <= a.results["remote_free_pct"] <= 50
    assert a.results["big_buffers"] == 1


def test_sized_workloads_report_each_size(bench_built, root, glibc):
    hot = _run(glibc, "tiny_hot", root)
    assert all(f"ns_per_op_{s}" in hot.results for s in (8, 16, 32, 64, 128, 256, 512, 1024))
    pair = _run(glibc, "pair", root, args=wl.get("pair").args("tiny", size=48))
    assert "ns_per_op_48" in pair.results and "ns_per_op_16" not in pair.results


@pytest.mark.parametrize("args", [["-t", "0"], ["-d", "-1"], ["-x"], ["12abc"], ["1", "0"]])
def test_bad_arguments_exit_2_with_a_message(bench_built, args):
    out = subprocess.run([str(bench_built / "random_mixed"), *args], capture_output=True, text=True, check=False)
    assert out.returncode == 2
    assert "random_mixed" in out.stderr


def test_peers_and_hakmem_run_the_threaded_workloads(bench_built, root, peers, found):
    allocs = peers + ([found["hakmem"]] if "hakmem" in found else [])
    if not allocs:
        pytest.skip("neither a peer allocator nor build/libhakmem.so is available")
    for a in allocs:
        for name in ("larson", "prodcons", "realistic"):
            r = _run(a, name, root)
            assert a.matches(r.allocator_check)
