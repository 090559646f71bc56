"""test_lab_paging.py — the parts of the paging experiment that need neither root nor swap: the bench runs
with the caller's allocator variables removed, the sweep's labels give the working set over the whole
cgroup limit (the nominal 1:N leaves the bench's allowance out), and bad numbers are refused up front."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from lab import paging


class NoCgroup:
    """Stands in for paging.Resources: the bench runs in the caller's own cgroup."""

    @staticmethod
    def enter() -> None:
        pass


def test_bench_runs_without_inherited_tuning(tmp_path: Path, monkeypatch) -> None:
    """`paging` printed that it does not pass HAKMEM_* or LD_PRELOAD to the runs, and then passed them
    (the review of 2026-11-24)."""
    bench = tmp_path / "fake_bench"
    bench.write_text("#!/usr/bin/env python3\n"
                     "import json, os, sys\n"
                     "out = sys.argv[sys.argv.index('--json') + 1]\n"
                     "keep = ('HAKMEM_PROFILE', 'LD_PRELOAD', 'MIMALLOC_VERBOSE', 'LAB_PAGING_PROBE')\n"
                     "json.dump({k: os.environ.get(k) for k in keep}, open(out, 'w'))\n")
    bench.chmod(bench.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("HAKMEM_PROFILE", "lean")
    monkeypatch.setenv("MIMALLOC_VERBOSE", "1")
    monkeypatch.setenv("LAB_PAGING_PROBE", "kept")
    monkeypatch.setenv("LD_PRELOAD", os.environ.get("LD_PRELOAD", ""))
    seen = paging.run_bench(NoCgroup(), bench, ["--ratio-sweep"], timeout=60)
    assert seen == {"HAKMEM_PROFILE": None, "LD_PRELOAD": None, "MIMALLOC_VERBOSE": None,
                    "LAB_PAGING_PROBE": "kept"}, json.dumps(seen)


def test_sweep_labels_give_the_real_ratio() -> None:
    """At 1024 MiB and 1:16 the limit is 64 + 32 MiB: the working set is 10.7x the limit, not 16x."""
    run = {"ratio": 16, "limit_mib": 96, "total_mib": 1024, "result": {"error": "x"}}
    assert paging.ratio_label(run) == "1:16, working set 10.7x the limit"
    assert "96 MiB (1:16, working set 10.7x the limit)" in paging.sweep_section([run])


@pytest.mark.parametrize("option, value", [("--timeout", "0"), ("--seconds", "-1"), ("--ops", "0"),
                                           ("--allowance-mib", "-100"), ("--batch", "0")])
def test_bad_numbers_are_refused_before_any_setup(option, value, capsys):
    """Exit 2 before swap or a cgroup is touched (a timeout of 0 used to set both up and then fail every
    run; a negative allowance made limits of 0 MiB)."""
    from lab import cli
    assert cli.main(["paging", option, value, "--swap-file", "/nonexistent/dir/x.swap"]) == 2
    assert f"{option} must be" in capsys.readouterr().err
