"""tests/conftest.py — shared pytest setup for the hakmem test suite (owner: tests suite).

Registers the markers, and gives fixtures for paths (repository root, build directory, the three
libraries, the launcher, the test programs built by tests/Makefile) and for running commands:

  run_hakmem(cmd, ...)   run under LD_PRELOAD=libhakmem.so with HAKMEM_STATS=1 and assert that stderr
                         shows the "hakmem stats:" block, i.e. hakmem really was the allocator;
  run_plain(cmd, ...)    run on the system allocator (no LD_PRELOAD, no HAKMEM_* variables);
  run_program(name, variant, ...)  run build/tests/<name> in one of VARIANTS:
      glibc    <name>.glibc on glibc;            linked   <name> (linked to libhakmem.so);
      preload  <name>.glibc + libhakmem.so;      secure   <name>.glibc + libhakmem-secure.so.

Every runner returns a subprocess.CompletedProcess with text stdout/stderr and a timeout.
"""
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
TESTS_BUILD = BUILD / "tests"
STATS_HEADER = "hakmem stats:"
VARIANTS = ("glibc", "linked", "preload", "secure")
HAKMEM_VARIANTS = ("linked", "preload", "secure")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "real: runs real programs (python, git, gcc, perl, sort) under LD_PRELOAD=libhakmem.so")


def clean_env(extra=None):
    """The current environment without LD_PRELOAD and HAKMEM_* variables, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("HAKMEM_")}
    env.update(extra or {})
    return env


def stats_blocks(stderr):
    """Number of statistics blocks (one per process that exited with HAKMEM_STATS=1) in `stderr`."""
    return sum(1 for line in stderr.splitlines() if line.startswith(STATS_HEADER))


def describe(proc):
    """Command, exit status and the tails of both streams, for assertion messages."""
    cmd = proc.args if isinstance(proc.args, str) else " ".join(str(a) for a in proc.args)
    out, err = proc.stdout or "", proc.stderr or ""
    return (f"\n$ {cmd}\nexit status {proc.returncode}\n--- stdout (tail) ---\n{out[-3000:]}"
            f"\n--- stderr (tail) ---\n{err[-3000:]}")


def _require(path, hint):
    if not path.exists():
        pytest.fail(f"{path} is missing: {hint}")
    return path


def _run(cmd, env, timeout, **kwargs):
    if "stdout" in kwargs:  # e.g. a file for a big output: stderr is still captured
        kwargs.setdefault("stderr", subprocess.PIPE)
    else:
        kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    return subprocess.run([str(c) for c in cmd], env=env, timeout=timeout, **kwargs)


@pytest.fixture(scope="session")
def repo_root():
    return ROOT


@pytest.fixture(scope="session")
def build_dir():
    return BUILD


@pytest.fixture(scope="session")
def tests_build_dir():
    return TESTS_BUILD


@pytest.fixture(scope="session")
def libhakmem():
    return _require(BUILD / "libhakmem.so", "run `make` in the repository root")


@pytest.fixture(scope="session")
def libhakmem_secure():
    return _require(BUILD / "libhakmem-secure.so", "run `make` in the repository root")


@pytest.fixture(scope="session")
def libhakmem_static():
    return _require(BUILD / "libhakmem.a", "run `make` in the repository root")


@pytest.fixture(scope="session")
def launcher():
    return _require(BUILD / "hakmem", "run `make` in the repository root")


@pytest.fixture(scope="session")
def test_binary():
    """test_binary(name, variant="linked") -> path of build/tests/<name> ("linked"), <name>.glibc
    ("glibc") or <name>.so ("so")."""
    suffix = {"linked": "", "glibc": ".glibc", "so": ".so"}

    def get(name, variant="linked"):
        return _require(TESTS_BUILD / (name + suffix[variant]), "run `make -C tests` in the repository root")
    return get


@pytest.fixture(scope="session")
def run_plain():
    """run_plain(cmd, env=None, timeout=300, **subprocess_kwargs) on the system allocator."""
    def run(cmd, env=None, timeout=300, **kwargs):
        return _run(cmd, clean_env(env), timeout, **kwargs)
    return run


@pytest.fixture(scope="session")
def run_hakmem(libhakmem):
    """run_hakmem(cmd, env=None, lib=libhakmem.so, preload_before=(), preload_after=(), timeout=300,
    check_stats=True, **kwargs): LD_PRELOAD="preload_before lib preload_after", HAKMEM_STATS=1 (unless env
    says otherwise). Asserts stderr shows a "hakmem stats:" block unless check_stats is False."""
    def run(cmd, env=None, lib=None, preload_before=(), preload_after=(), timeout=300, check_stats=True, **kwargs):
        preload = " ".join(str(p) for p in (*preload_before, lib or libhakmem, *preload_after))
        proc = _run(cmd, clean_env({"HAKMEM_STATS": "1", **(env or {}), "LD_PRELOAD": preload}), timeout, **kwargs)
        if check_stats:
            assert stats_blocks(proc.stderr or "") >= 1, "hakmem was not the allocator (no stats)" + describe(proc)
        return proc
    return run


@pytest.fixture(scope="session")
def run_program(test_binary, run_plain, run_hakmem, libhakmem_secure):
    """run_program(name, variant, args=(), env=None, timeout=300): build/tests/<name> as one of VARIANTS;
    the hakmem variants run with HAKMEM_STATS=1 and assert hakmem was the allocator."""
    def run(name, variant, args=(), env=None, timeout=300):
        if variant == "glibc":
            return run_plain([test_binary(name, "glibc"), *args], env=env, timeout=timeout)
        if variant == "linked":
            proc = run_plain([test_binary(name), *args], env={"HAKMEM_STATS": "1", **(env or {})}, timeout=timeout)
            assert stats_blocks(proc.stderr) >= 1, "linked program did not use hakmem (no stats)" + describe(proc)
            return proc
        lib = libhakmem_secure if variant == "secure" else None
        return run_hakmem([test_binary(name, "glibc"), *args], env=env, lib=lib, timeout=timeout)
    return run
