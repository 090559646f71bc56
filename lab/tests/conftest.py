"""conftest.py — fixtures of the lab tests: the repository root, the bench programs (built once per
session with make -C bench), the allocators found on this machine, and a shared object that is not an
allocator (for the wrong-preload tests)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lab.allocators import Allocator, discover

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def bench_built(root: Path) -> Path:
    proc = subprocess.run(["make", "-s", "-C", str(root / "bench")], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"make -C bench failed:\n{proc.stderr}"
    return root / "build" / "bench"


@pytest.fixture(scope="session")
def found(root: Path) -> dict[str, Allocator]:
    return {a.name: a for a in discover(root).found}


@pytest.fixture(scope="session")
def glibc(found: dict[str, Allocator]) -> Allocator:
    return found["glibc"]


@pytest.fixture(scope="session")
def peers(found: dict[str, Allocator]) -> list[Allocator]:
    """The Debian peers installed here (possibly none)."""
    return [found[n] for n in ("jemalloc", "mimalloc", "tcmalloc") if n in found]


@pytest.fixture(scope="session")
def hakmem(found: dict[str, Allocator]) -> Allocator:
    if "hakmem" not in found:
        pytest.skip("build/libhakmem.so is not built (run `make lib`)")
    return found["hakmem"]


@pytest.fixture(scope="session")
def not_an_allocator(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A shared object that defines no malloc: preloading it leaves glibc's malloc in charge."""
    d = tmp_path_factory.mktemp("fake")
    src = d / "notmalloc.c"
    src.write_text("int not_malloc(int x) { return x + 1; }\n")
    lib = d / "libnotmalloc.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return str(lib)
