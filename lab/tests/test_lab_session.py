"""test_lab_session.py — what every experiment does before it runs: bringing the builds up to date
(ensure_built) in trees with and without make, Makefiles or built libraries, and finding hakmem once
it has been built."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

from lab import session
from lab.workloads import WORKLOADS


def _prebuilt_root(tmp_path: Path, root: Path) -> Path:
    """A tree holding only copies of the bench programs: no Makefile anywhere."""
    bench = tmp_path / "tree" / "build" / "bench"
    bench.mkdir(parents=True)
    for w in WORKLOADS.values():
        shutil.copy(w.binary(root), bench / w.binary(root).name)
    return tmp_path / "tree"


def test_prebuilt_programs_without_makefiles_are_measured(bench_built, root, tmp_path):
    """`--root` at prebuilt programs: nothing to build, no error (make -q on a missing bench/ used to fail)."""
    assert session.ensure_built(_prebuilt_root(tmp_path, root), libraries=True) == []


def test_missing_programs_without_makefiles_stop_the_lab(tmp_path):
    """... and outside a checkout (an installed hakmem-lab run elsewhere) the message says where to run."""
    with pytest.raises(SystemExit, match="bench programs missing.*not a hakmem checkout.*--root"):
        session.ensure_built(tmp_path, libraries=False)


def test_without_make_the_existing_builds_are_measured(bench_built, root, monkeypatch, tmp_path):
    """No make on PATH: a warning for the report, not a crash (FileNotFoundError before the fix)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    warnings = session.ensure_built(root, libraries=True)
    assert warnings and all("cannot run make" in w for w in warnings)


def test_hakmem_built_by_the_lab_is_measured(bench_built, root, hakmem, tmp_path):
    """The libraries are built before the allocators are looked for: a tree whose libhakmem.so the lab
    had to build used to run without hakmem ('not built'), right after building it."""
    tree = _prebuilt_root(tmp_path, root)
    (tree / "Makefile").write_text(
        f"build/libhakmem.so build/libhakmem-secure.so:\n\tcp {hakmem.path} $@\n")
    args = argparse.Namespace(root=str(tree), out=str(tmp_path / "out"), alloc=[], allocs=None, reps=1,
                              timeout=10.0, threads=None)
    s = session.Session("quick", args)
    assert "hakmem" in [a.name for a in s.allocators]
    assert (tree / "build" / "libhakmem.so").is_file()
