"""tests/test_build.py — installation, pkg-config, static linking and the launcher (owner: tests suite).

`make install PREFIX=<tmp>` must install the libraries, header, launcher and hakmem.pc; a program built
with `pkg-config --cflags --libs hakmem` must link and run on the installed library; a program linked
with build/libhakmem.a must use hakmem; `build/hakmem run` must preload hakmem and reject bad usage.
"""
import re
import shutil
import subprocess

import pytest

from conftest import ROOT, clean_env, describe, stats_blocks

PROGRAM = r'''
#define _GNU_SOURCE
#include <errno.h>
#include <hakmem.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long allocs(void) {
  struct hak_stats s;
  memset(&s, 0xab, sizeof s);
  if (hak_stats_get(&s) != 0) exit(3);
  if (s.slow_frees == 0xababababababababull) exit(4); /* hak_stats_get fills this header's whole struct */
  if (hak_stats_get(NULL) != EINVAL) exit(5);
  return (unsigned long long)(s.allocs[HAK_TIER_SMALL] + s.allocs[HAK_TIER_MEDIUM] + s.allocs[HAK_TIER_LARGE]);
}

int main(void) {
  unsigned long long a0 = allocs();
  size_t in_use0 = mallinfo2().uordblks; /* glibc's own mallinfo2 would pull its malloc into a static link */
  void *blocks[100];
  for (int i = 0; i < 100; i++) blocks[i] = malloc(100 + i);
  unsigned long long a1 = allocs();
  size_t in_use1 = mallinfo2().uordblks;
  /* strdup allocates inside libc: hakmem must serve it too, and free() must accept the block. */
  char *s = strdup("allocated inside libc");
  unsigned long long a2 = allocs();
  for (int i = 0; i < 100; i++) free(blocks[i]);
  free(s);
  char line[512];
  int mapped = 0;
  FILE *maps = fopen("/proc/self/maps", "r");
  while (maps && fgets(line, sizeof line, maps))
    if (strstr(line, "libhakmem")) mapped = 1;
  if (maps) fclose(maps);
  printf("version %d\nmalloc counted %llu\nstrdup counted %llu\nlibhakmem.so mapped %d\nmallinfo2 grew %zu\n",
         HAKMEM_VERSION, a1 - a0, a2 - a1, mapped, in_use1 - in_use0);
  return 0;
}
'''


def header_version():
    text = (ROOT / "include" / "hakmem.h").read_text()
    parts = [re.search(rf"#define HAKMEM_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts), int(parts[0]) * 10000 + int(parts[1]) * 100 + int(parts[2])


def check_program_output(proc, dynamic):
    assert proc.returncode == 0, describe(proc)
    out = dict(line.rsplit(" ", 1) for line in proc.stdout.splitlines())
    assert int(out["version"]) == header_version()[1], describe(proc)
    assert int(out["malloc counted"]) >= 100, "malloc in the program was not served by hakmem" + describe(proc)
    assert int(out["strdup counted"]) >= 1, "strdup inside libc was not served by hakmem" + describe(proc)
    assert out["libhakmem.so mapped"] == ("1" if dynamic else "0"), describe(proc)
    # 100 blocks of 100..199 bytes: at least their sizes, at most their 16-byte-rounded classes + canaries
    assert 14950 <= int(out["mallinfo2 grew"]) <= 16800, "mallinfo2 did not count the program's blocks" + describe(proc)


@pytest.fixture(scope="module")
def installed(tmp_path_factory, libhakmem):
    prefix = tmp_path_factory.mktemp("install") / "prefix"
    proc = subprocess.run(["make", "-C", str(ROOT), "install", f"PREFIX={prefix}"], capture_output=True, text=True,
                          timeout=600, env=clean_env())
    assert proc.returncode == 0, describe(proc)
    return prefix


def test_install_layout(installed):
    for rel in ("lib/libhakmem.so", "lib/libhakmem-secure.so", "lib/libhakmem.a", "include/hakmem.h",
                "bin/hakmem", "lib/pkgconfig/hakmem.pc"):
        assert (installed / rel).is_file(), f"{rel} not installed under {installed}"
    assert (installed / "bin/hakmem").stat().st_mode & 0o111, "the launcher is not executable"
    assert (installed / "lib/pkgconfig/hakmem.pc").stat().st_mode & 0o777 == 0o644, "hakmem.pc is not mode 644"
    assert (installed / "include/hakmem.h").read_bytes() == (ROOT / "include/hakmem.h").read_bytes()
    pc = (installed / "lib/pkgconfig/hakmem.pc").read_text()
    assert re.search(rf"^prefix={re.escape(str(installed))}$", pc, re.M), \
        f"hakmem.pc does not use PREFIX={installed}:\n{pc}"
    assert re.search(rf"^Version: {re.escape(header_version()[0])}$", pc, re.M), pc


def test_pkg_config_build_and_run(installed, tmp_path):
    pkg_config = shutil.which("pkg-config") or pytest.skip("pkg-config is not installed")
    env = clean_env({"PKG_CONFIG_PATH": str(installed / "lib/pkgconfig")})
    flags = subprocess.run([pkg_config, "--cflags", "--libs", "hakmem"], capture_output=True, text=True, env=env)
    assert flags.returncode == 0, describe(flags)
    assert f"-I{installed}/include" in flags.stdout and f"-L{installed}/lib" in flags.stdout \
        and "-lhakmem" in flags.stdout, flags.stdout
    version = subprocess.run([pkg_config, "--modversion", "hakmem"], capture_output=True, text=True, env=env)
    assert version.stdout.strip() == header_version()[0], describe(version)

    (tmp_path / "prog.c").write_text(PROGRAM)
    build = subprocess.run(["cc", "-o", str(tmp_path / "prog"), str(tmp_path / "prog.c"), *flags.stdout.split()],
                           capture_output=True, text=True, env=env)
    assert build.returncode == 0, describe(build)
    run = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, timeout=60,
                         env=clean_env({"LD_LIBRARY_PATH": str(installed / "lib"), "HAKMEM_STATS": "1"}))
    check_program_output(run, dynamic=True)
    assert stats_blocks(run.stderr) == 1, describe(run)
    ldd = subprocess.run(["ldd", str(tmp_path / "prog")], capture_output=True, text=True,
                         env=clean_env({"LD_LIBRARY_PATH": str(installed / "lib")}))
    assert f"{installed}/lib/libhakmem.so" in ldd.stdout, describe(ldd)


def test_uninstall(libhakmem, tmp_path):
    prefix = tmp_path / "prefix"
    for target in ("install", "uninstall"):
        proc = subprocess.run(["make", "-C", str(ROOT), target, f"PREFIX={prefix}"], capture_output=True, text=True,
                              timeout=600, env=clean_env())
        assert proc.returncode == 0, describe(proc)
    left = [p for p in prefix.rglob("*") if p.is_file()]
    assert left == [], f"make uninstall left {left}"


def build_and_run_static(compiler, source, suffix, archive, tmp_path, mode, env, flags=()):
    """Compile `source` with `compiler` against the archive (fully static when mode says so), run it."""
    (tmp_path / f"prog{suffix}").write_text(source)
    cmd = [compiler, *flags, "-I", str(ROOT / "include"), "-o", str(tmp_path / "prog"),
           str(tmp_path / f"prog{suffix}"), str(archive), "-lpthread"]
    if mode.startswith("fully-static"):
        cmd.insert(1, "-static")
    build = subprocess.run(cmd, capture_output=True, text=True)
    assert build.returncode == 0, describe(build)
    return subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, timeout=60, env=clean_env(env))


@pytest.mark.parametrize("mode", ["archive", "fully-static"])
def test_static_link(libhakmem_static, tmp_path, mode):
    run = build_and_run_static("cc", PROGRAM, ".c", libhakmem_static, tmp_path, mode, {"HAKMEM_STATS": "1"})
    check_program_output(run, dynamic=False)
    assert stats_blocks(run.stderr) == 1, describe(run)


CXX_PROGRAM = r'''
#include <hakmem.h>
#include <cstdio>
#include <new>

static int handler_calls;
static void throwing_handler() {
  handler_calls++;
  throw std::bad_alloc();
}

int main() {
  std::setvbuf(stdout, nullptr, _IONBF, 0); /* every line out before an abort */
  char *small = new char[100];
  std::printf("usable %zu\n", hak_usable_size(small)); /* aborts unless hakmem served the block */
  delete[] small;
  volatile std::size_t big = std::size_t(1) << 62;
  try {
    char *p = new char[big];
    std::printf("new returned %p\n", static_cast<void *>(p));
  } catch (const std::bad_alloc &) {
    std::printf("caught bad_alloc\n");
  }
  std::set_new_handler(throwing_handler);
  char *q = new (std::nothrow) char[big];
  std::printf("nothrow %s, handler calls %d\n", q == nullptr ? "nullptr" : "a block", handler_calls);
  return 0;
}
'''


# README: what a fully static C++ program adds so that hakmem sees the C++ runtime
RUNTIME_FLAGS = ("-Wl,-u,_ZSt17__throw_bad_allocv", "-Wl,-u,_ZSt15get_new_handlerv")


@pytest.mark.parametrize("mode", ["archive", "fully-static", "fully-static-without-flags"])
def test_static_link_cxx(libhakmem_static, tmp_path, mode):
    """A C++ program linked with the archive, its new served by hakmem. With the C++ runtime shared, a
    failed new throws std::bad_alloc and nothrow new returns nullptr after a throwing new-handler. Fully
    static, the runtime is invisible to hakmem's weak references unless the README's two -u flags pull it
    in: with them, new throws and nothrow new returns nullptr without calling the handler; without them,
    a failed new aborts with a message naming the reason (documented)."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    flags = RUNTIME_FLAGS if mode == "fully-static" else ()
    run = build_and_run_static("g++", CXX_PROGRAM, ".cc", libhakmem_static, tmp_path, mode, {}, flags)
    usable = re.search(r"usable (\d+)", run.stdout)
    assert usable and int(usable.group(1)) >= 100, describe(run)
    if mode == "fully-static-without-flags":
        assert run.returncode != 0, describe(run)
        assert "operator new failed and no C++ runtime is loaded to throw" in run.stderr, describe(run)
        return
    assert run.returncode == 0, describe(run)
    assert "caught bad_alloc" in run.stdout, describe(run)
    calls = 1 if mode == "archive" else 0
    assert f"nothrow nullptr, handler calls {calls}" in run.stdout, describe(run)


@pytest.mark.parametrize("prefix", ["{tmp}/with space", "relative/prefix", "{tmp}/a|b"])
def test_install_refuses_unusable_prefix(tmp_path, prefix):
    """make cannot quote a PREFIX with blanks (nor hakmem.pc carry one): it must refuse it before writing
    anything, in the source tree or elsewhere."""
    prefix = prefix.format(tmp=tmp_path)
    before = sorted(p.name for p in ROOT.iterdir())
    for target in ("install", "uninstall"):
        proc = subprocess.run(["make", "-C", str(ROOT), "-s", target, f"PREFIX={prefix}"], capture_output=True,
                              text=True, timeout=600, env=clean_env())
        assert proc.returncode != 0 and "PREFIX" in proc.stderr, describe(proc)
    assert sorted(p.name for p in ROOT.iterdir()) == before, "make install wrote into the source tree"
    assert list(tmp_path.iterdir()) == [], f"make install wrote {list(tmp_path.iterdir())}"


def launch(launcher, *args, env=None):
    return subprocess.run([str(launcher), *map(str, args)], capture_output=True, text=True, timeout=120,
                          env=clean_env(env))


def test_launcher_stats(launcher):
    proc = launch(launcher, "run", "--stats", "--", "/bin/echo", "hi")
    assert proc.returncode == 0 and proc.stdout == "hi\n", describe(proc)
    assert stats_blocks(proc.stderr) == 1, describe(proc)
    quiet = launch(launcher, "run", "--", "/bin/echo", "hi")
    assert quiet.returncode == 0 and quiet.stdout == "hi\n" and stats_blocks(quiet.stderr) == 0, describe(quiet)


def test_launcher_preloads_hakmem(launcher, libhakmem):
    proc = launch(launcher, "run", "--", "cat", "/proc/self/maps")
    assert proc.returncode == 0, describe(proc)
    assert str(libhakmem.resolve()) in proc.stdout, "build/libhakmem.so is not mapped in the launched program"


def test_launcher_profile(launcher, test_binary):
    for name, value in (("fast", 0), ("balanced", 1), ("lean", 2)):
        for args in (["--profile", name], [f"--profile={name}"]):
            proc = launch(launcher, "run", *args, "--", test_binary("test_hakapi", "glibc"), "options")
            assert proc.returncode == 0, describe(proc)
            assert f"HAKMEM_PROFILE={value}\n" in proc.stdout, describe(proc)


def test_launcher_help(launcher):
    for args in (["--help"], ["run", "--help"]):
        proc = launch(launcher, *args)
        assert proc.returncode == 0 and proc.stdout.startswith("usage: hakmem run"), describe(proc)


def test_launcher_relative_lib_survives_chdir(launcher, libhakmem):
    """A relative --lib becomes absolute, so a program that changes directory still preloads it."""
    proc = subprocess.run([str(launcher), "run", "--stats", "--lib", libhakmem.name, "--", "/bin/sh", "-c",
                           "cd / && cat /proc/self/maps"], cwd=libhakmem.parent, capture_output=True, text=True,
                          timeout=60, env=clean_env())
    assert proc.returncode == 0 and "ERROR: ld.so" not in proc.stderr, describe(proc)
    assert str(libhakmem.resolve()) in proc.stdout and stats_blocks(proc.stderr) >= 1, describe(proc)


def test_launcher_rejects_unusable_library(launcher, libhakmem, tmp_path):
    """LD_PRELOAD splits on spaces and colons, and the loader only warns about a file it cannot load: the
    launcher refuses such a library instead of running the program on glibc."""
    spaced = tmp_path / "a dir" / "libhakmem.so"
    spaced.parent.mkdir()
    shutil.copy(libhakmem, spaced)
    not_elf = tmp_path / "libfake.so"
    not_elf.write_text("not a library\n")
    for lib, words in ((spaced, "space"), (not_elf, "ELF"), (tmp_path / "missing.so", "not found")):
        proc = launch(launcher, "run", "--lib", lib, "--", "/bin/true")
        assert proc.returncode == 1 and words in proc.stderr, describe(proc)


def test_launcher_command_not_found(launcher):
    proc = launch(launcher, "run", "--", "no-such-command-hakmem")
    assert proc.returncode == 127 and "no-such-command-hakmem" in proc.stderr, describe(proc)


def test_launcher_refuses_what_exec_cannot_run(launcher, tmp_path):
    """A shell builtin passed the launcher's check and then failed in exec ("exec: cd: not found"); a file
    without execute permission is 126, as in a shell. A command that is a builtin and a program too
    (true) runs the program."""
    plain = tmp_path / "script.sh"
    plain.write_text("#!/bin/sh\nexit 0\n")
    for args, rc, words in ((["cd", "/"], 127, "'cd' not found"), ([plain], 126, "not an executable file"),
                            (["true"], 0, "")):
        proc = launch(launcher, "run", "--", *args)
        assert proc.returncode == rc and words in proc.stderr, describe(proc)


def test_launcher_refuses_conflicting_or_malformed_choices(launcher, libhakmem):
    """--secure with --lib used to drop --secure without a word, and HAKMEM_SECURE=yes chose the default
    build: both are usage errors now."""
    proc = launch(launcher, "run", "--secure", "--lib", libhakmem, "--", "/bin/true")
    assert proc.returncode == 2 and "--secure" in proc.stderr, describe(proc)
    proc = launch(launcher, "run", "--", "/bin/true", env={"HAKMEM_SECURE": "yes"})
    assert proc.returncode == 2 and "HAKMEM_SECURE must be 0 or 1" in proc.stderr, describe(proc)


def test_launcher_exit_status(launcher):
    proc = launch(launcher, "run", "--", "/bin/sh", "-c", "exit 7")
    assert proc.returncode == 7, "the launcher does not pass on the program's exit status" + describe(proc)


@pytest.mark.parametrize("args", [[], ["bogus"], ["run"], ["run", "--"], ["run", "--no-such-flag", "--", "/bin/true"],
                                  ["lib", "--bogus"]],
                         ids=lambda a: " ".join(a) or "no-arguments")
def test_launcher_bad_usage(launcher, args):
    proc = launch(launcher, *args)
    assert proc.returncode != 0, "bad usage accepted" + describe(proc)
    assert "usage" in (proc.stdout + proc.stderr).lower(), "no usage message" + describe(proc)


def test_launcher_unknown_profile(launcher):
    proc = launch(launcher, "run", "--profile", "nosuch", "--", "/bin/true")
    assert proc.returncode != 0, "an unknown profile was accepted" + describe(proc)
    assert "nosuch" in proc.stderr, "the error does not name the bad profile" + describe(proc)


def test_installed_launcher_uses_installed_library(installed):
    proc = launch(installed / "bin/hakmem", "run", "--", "cat", "/proc/self/maps")
    assert proc.returncode == 0, describe(proc)
    assert f"{installed}/lib/libhakmem.so" in proc.stdout, "the installed launcher preloads another library"


SECURE_EXEC_PROGRAM = r'''
#include <hakmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/auxv.h>

int main(void) {
  free(malloc(100));
  printf("secure=%lu delay=%ld stats=%ld\n", getauxval(AT_SECURE), hak_option_get(HAK_OPT_PURGE_DELAY_MS),
         hak_option_get(HAK_OPT_STATS));
  return 0;
}
'''


def test_setuid_program_ignores_the_callers_options(libhakmem_static, tmp_path):
    """A setuid program linked with hakmem reads no HAKMEM_* option: the unprivileged caller could tune it
    and make it print its statistics (a bug hunt of 2026-11-24 saw setuid passwd do so under a system-wide
    preload). The same binary run without the setuid effect reads them."""
    import os
    import tempfile
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run a setuid program as another user")
    where = tempfile.mkdtemp(dir="/var/tmp")  # a directory another user can enter
    try:
        os.chmod(where, 0o755)
        source, prog = os.path.join(where, "prog.c"), os.path.join(where, "prog")
        with open(source, "w") as f:
            f.write(SECURE_EXEC_PROGRAM)
        build = subprocess.run(["cc", "-I", str(ROOT / "include"), "-o", prog, source, str(libhakmem_static),
                                "-lpthread"], capture_output=True, text=True)
        assert build.returncode == 0, describe(build)
        os.chmod(prog, 0o4755)
        options = {"HAKMEM_PURGE_DELAY_MS": "12345", "HAKMEM_STATS": "1", "HAKMEM_VERBOSE": "2"}
        plain = subprocess.run([prog], capture_output=True, text=True, timeout=60, env=clean_env(options))
        assert plain.returncode == 0 and "secure=0 delay=12345 stats=1" in plain.stdout, describe(plain)
        setuid = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", prog],
                                capture_output=True, text=True, timeout=60, env=clean_env(options))
        assert setuid.returncode == 0, describe(setuid)
        if "secure=1" not in setuid.stdout:
            pytest.skip(f"{where} does not honour the setuid bit (nosuid): {setuid.stdout.strip()}")
        assert "delay=12345" not in setuid.stdout and "stats=0" in setuid.stdout, describe(setuid)
        assert "hakmem" not in setuid.stderr, describe(setuid)
    finally:
        shutil.rmtree(where, ignore_errors=True)
