"""ThreadSanitizer (issue 4): the hakmem sources (overrides compiled out with -DHAK_NO_OVERRIDE=1) and two
multithreaded programs, built with -DSTORM_HAK_API so that they call hak_* directly, are compiled with
-fsanitize=thread, in the default and the hardened configuration: the mailing mix tests/c/storm_mt.c,
run for a bounded number of rounds, and tests/c/orphans_mt.c, whose producers pause so that the
collection gives back their emptied full pages while they take them back (a purge delay of 1 ms), run
for a few seconds. Each run must be clean: no ThreadSanitizer report and no damaged block."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 15000  # about 15 s per configuration under TSan on two cores
CFLAGS = ["-O1", "-g", "-fsanitize=thread", "-pthread", f"-I{ROOT / 'include'}"]


def compiler():
    for cc in ("gcc", "clang"):
        path = shutil.which(cc)
        if path and subprocess.run([path, "-fsanitize=thread", "-x", "c", "-", "-o", os.devnull],
                                   input="int main(void){return 0;}", text=True,
                                   capture_output=True).returncode == 0:
            return path
    pytest.skip("no compiler with a working -fsanitize=thread runtime")


def build(cc, out_dir, secure, program="storm_mt"):
    """Compile every src/*.c and tests/c/<program>.c under TSan into out_dir/<program>; returns its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    defines = ["-DHAK_NO_OVERRIDE=1"] + (["-DHAK_SECURE=1"] if secure else [])
    objects = []
    for src in sorted((ROOT / "src").glob("*.c")):
        obj = out_dir / f"{src.stem}.o"
        cmd = [cc, "-std=c11", "-D_GNU_SOURCE", *CFLAGS, *defines, f"-I{ROOT / 'src'}", "-c", str(src), "-o", str(obj)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr[-3000:]}"
        objects.append(str(obj))
    prog = out_dir / program
    cmd = [cc, "-std=gnu11", *CFLAGS, "-DSTORM_HAK_API", str(ROOT / "tests" / "c" / f"{program}.c"), *objects,
           "-o", str(prog)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr[-3000:]}"
    return prog


@pytest.mark.parametrize("config", ["default", "hardened"])
def test_storm_mt_is_tsan_clean(config, tmp_path_factory):
    cc = compiler()
    prog = build(cc, tmp_path_factory.mktemp(f"tsan-{config}"), secure=config == "hardened")
    env = dict(os.environ, TSAN_OPTIONS="exitcode=66 halt_on_error=0 history_size=4")
    env.pop("LD_PRELOAD", None)
    proc = subprocess.run([str(prog), str(ROUNDS)], env=env, capture_output=True, text=True, timeout=300)
    reports = proc.stderr.count("WARNING: ThreadSanitizer")
    summaries = sorted({line for line in proc.stderr.splitlines() if line.startswith("SUMMARY: ThreadSanitizer")})
    log = f"{prog} {ROUNDS} [{cc}] exit {proc.returncode}\n{proc.stdout}\n" + "\n".join(summaries) + \
          f"\n--- first report\n{proc.stderr[:6000]}"
    assert reports == 0, f"{reports} ThreadSanitizer reports\n{log}"
    assert proc.returncode == 0, log
    assert "damaged=0 failed=0" in proc.stdout, log


@pytest.mark.parametrize("config", ["default", "hardened"])
def test_orphaned_pages_are_tsan_clean(config, tmp_path_factory):
    cc = compiler()
    prog = build(cc, tmp_path_factory.mktemp(f"tsan-orphans-{config}"), secure=config == "hardened",
                 program="orphans_mt")
    env = dict(os.environ, TSAN_OPTIONS="exitcode=66 halt_on_error=0 history_size=4", HAKMEM_PURGE_DELAY_MS="1",
               HAKMEM_PURGE_MODE="dontneed", HAKMEM_BACKGROUND_PURGE="1")
    env.pop("LD_PRELOAD", None)
    proc = subprocess.run([str(prog), "4"], env=env, capture_output=True, text=True, timeout=300)
    reports = proc.stderr.count("WARNING: ThreadSanitizer")
    log = f"{prog} 4 [{cc}] exit {proc.returncode}\n{proc.stdout}\n--- first report\n{proc.stderr[:6000]}"
    assert reports == 0, f"{reports} ThreadSanitizer reports\n{log}"
    assert proc.returncode == 0 and "0 damaged" in proc.stdout, log
