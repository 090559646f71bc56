"""test_rust.py — the Rust crate `hakmem` (Cargo.toml at the root, sources in rust/): `cargo test` (unit tests,
integration tests, doc examples) must pass; the test programs must carry hakmem's hak_* code without
defining malloc/free themselves (-DHAK_NO_OVERRIDE=1); `cargo package --list` must ship the C sources.
Builds go to build/cargo (CARGO_TARGET_DIR)."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, CARGO_TARGET_DIR=str(ROOT / "build" / "cargo"), CARGO_TERM_COLOR="never")

pytestmark = pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")


def cargo(*args, timeout=300):
    return subprocess.run(["cargo", *args], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def test_binaries():
    proc = cargo("test", "--no-run", "--message-format=json")
    assert proc.returncode == 0, proc.stderr[-4000:]
    exes = {}
    for line in proc.stdout.splitlines():
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
            exes[msg["target"]["name"]] = Path(msg["executable"])
    return exes


def test_cargo_test_passes(test_binaries):
    proc = cargo("test")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    results = [line for line in out.splitlines() if line.startswith("test result:")]
    # unit tests, the two integration test binaries and the doc tests
    assert len(results) >= 4, out[-3000:]
    assert all(line.startswith("test result: ok.") for line in results), "\n".join(results)
    passed = sum(int(line.split("ok. ")[1].split(" passed")[0]) for line in results)
    assert passed >= 25, f"only {passed} Rust tests ran"


def test_rust_binaries_keep_their_own_malloc(test_binaries):
    exe = test_binaries.get("global_alloc")
    assert exe is not None and exe.exists(), test_binaries
    syms = subprocess.run(["nm", str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    defined = {line.split()[-1] for line in syms if len(line.split()) == 3 and line.split()[1] in "TtWw"}
    assert "hak_malloc" in defined, "hakmem's C code is not linked in"
    overridden = {"malloc", "free", "calloc", "realloc", "__libc_malloc"} & defined
    assert not overridden, f"the Rust binary defines {overridden}: HAK_NO_OVERRIDE was not honoured"


def test_package_ships_the_c_sources():
    proc = cargo("package", "--list", "--allow-dirty", timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    files = set(proc.stdout.split())
    for needed in ("Cargo.toml", "Makefile", "rust/lib.rs", "rust/build.rs", "rust/region.rs",
                   "rust/benches/alloc_bench.rs", "include/hakmem.h", "src/region.c", "src/os.h"):
        assert needed in files, f"{needed} missing from the package: {sorted(files)}"
    assert not any(f.startswith(("tests/", "lab/", "bench/")) for f in files), sorted(files)
