"""A short bounded libFuzzer run of the hak_* API harness (tests/fuzz/fuzz_api.c) in the default and the
hardened build, both compiled with clang from the hakmem sources under ASan and UBSan by
tests/fuzz/Makefile. Starts from the seed corpus tests/fuzz/corpus (only read; new inputs go to a
temporary directory). Skipped when clang or its libFuzzer runtime is missing."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FUZZ_DIR = ROOT / "tests" / "fuzz"
OUT = ROOT / "build" / "fuzz"
CORPUS = FUZZ_DIR / "corpus"


@pytest.fixture(scope="module")
def fuzzers():
    if shutil.which("clang") is None:
        pytest.skip("clang not installed (apt-get install clang libclang-rt-14-dev)")
    build = subprocess.run(["make", "-C", str(FUZZ_DIR)], capture_output=True, text=True, timeout=600)
    if build.returncode != 0 and "fuzzer" in build.stderr and "cannot find" in build.stderr:
        pytest.skip(f"clang's libFuzzer runtime is missing (libclang-rt-14-dev):\n{build.stderr[-1500:]}")
    assert build.returncode == 0, f"building the fuzzers failed:\n{build.stdout[-2000:]}\n{build.stderr[-4000:]}"
    return {name: OUT / name for name in ("fuzz_api", "fuzz_api_secure")}


def test_seed_corpus_present():
    seeds = [p for p in CORPUS.iterdir() if p.is_file()]
    assert len(seeds) >= 3, "the seed corpus should hold a few inputs"
    assert all(0 < p.stat().st_size <= 4096 for p in seeds)


@pytest.mark.parametrize("name", ["fuzz_api", "fuzz_api_secure"])
def test_fuzz_bounded_run(fuzzers, name, tmp_path):
    argv = [str(fuzzers[name]), "-runs=20000", "-max_total_time=20", "-seed=1", "-timeout=30",
            "-rss_limit_mb=2048", "-print_final_stats=1", str(tmp_path), str(CORPUS)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    log = proc.stderr[-6000:]
    # The run ends at its time limit on a slow machine, and hakmem's heaps and keys are seeded at random,
    # so a failure may not come back with the same seed: the input that failed goes into the message
    # (libFuzzer writes it to the working directory), to replay with `fuzz_api FILE`.
    found = sorted(p for p in tmp_path.iterdir() if p.is_file() and p.name.startswith(("crash-", "leak-", "timeout-", "oom-")))
    saved = "".join(f"\n{p.name} ({p.stat().st_size} bytes): {p.read_bytes()[:4096].hex()}" for p in found)
    assert proc.returncode == 0, f"{' '.join(argv)} exited {proc.returncode}\n{log}{saved}"
    assert "Done " in proc.stderr, log
    runs = int(next(line.split()[-1] for line in proc.stderr.splitlines() if "stat::number_of_executed_units" in line))
    assert runs >= 1000, f"only {runs} inputs executed\n{log}"


@pytest.mark.parametrize("name", ["fuzz_api", "fuzz_api_secure"])
def test_seed_corpus_replays(fuzzers, name, tmp_path):
    """Every seed input runs through the harness's checks without a complaint (no mutation)."""
    proc = subprocess.run([str(fuzzers[name]), "-runs=0", str(CORPUS)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "INITED" in proc.stderr, proc.stderr[-2000:]
