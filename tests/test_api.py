"""tests/test_api.py — API conformance (owner: tests suite).

Runs the C programs test_api (every standard entry point, __libc_*, hak_*), test_new (C++ new/delete) on
glibc and on hakmem (linked, preloaded, hardened build), test_hakapi (options, statistics, hak_collect) on
hakmem, and checks how options are read from the environment.
"""
import re

import pytest

from conftest import HAKMEM_VARIANTS, ROOT, VARIANTS, describe, stats_blocks


def expect_ok(proc, allocator):
    assert proc.returncode == 0, describe(proc)
    assert f"allocator: {allocator}" in proc.stdout, describe(proc)
    assert re.search(r": \d+ checks, 0 failed", proc.stdout), describe(proc)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("program", ["test_api", "test_new"])
def test_conformance(run_program, program, variant):
    proc = run_program(program, variant, timeout=600)
    expect_ok(proc, "glibc" if variant == "glibc" else "hakmem")


@pytest.mark.parametrize("variant", HAKMEM_VARIANTS)
def test_hakmem_interface(run_program, variant):
    expect_ok(run_program("test_hakapi", variant, timeout=600), "hakmem")


@pytest.mark.parametrize("variant", ["linked", "preload"])
def test_class_cache(run_program, variant):
    """The default build's class cache (hardened builds have none): owner-freed blocks of several pages
    reused in LIFO order without a page switch, a full list keeping its blocks and exact counts past
    it, an immediate double free reported, a list that overflows and runs dry in every batch growing
    to take the batch (and set back by hak_collect(true)), and hak_collect(true) handing the lists back
    so that their pages are returned."""
    proc = run_program("test_hakapi", variant, args=("class-cache",))
    assert proc.returncode == 0, describe(proc)
    assert re.search(r"test_hakapi class-cache: \d+ checks, 0 failed", proc.stdout), describe(proc)


def read_options(test_binary, run_plain, env=None):
    """The options in force in a fresh hakmem process given `env`, as {NAME: value}, and the process."""
    proc = run_plain([test_binary("test_hakapi"), "options"], env=env)
    assert proc.returncode == 0, describe(proc)
    values = dict(re.findall(r"^(HAKMEM_\w+)=(-?\d+)$", proc.stdout, re.M))
    assert len(values) == 9, describe(proc)
    return {k: int(v) for k, v in values.items()}, proc


OPTION_CASES = [
    ({}, {"HAKMEM_STATS": 0, "HAKMEM_PROFILE": 1}),
    ({"HAKMEM_STATS": "1"}, {"HAKMEM_STATS": 1}),
    ({"HAKMEM_PURGE_DELAY_MS": "1234"}, {"HAKMEM_PURGE_DELAY_MS": 1234}),
    ({"HAKMEM_PURGE_DELAY_MS": "-1"}, {"HAKMEM_PURGE_DELAY_MS": -1}),
    ({"HAKMEM_PURGE_MODE": "1"}, {"HAKMEM_PURGE_MODE": 1}),
    ({"HAKMEM_PURGE_MODE": "free"}, {"HAKMEM_PURGE_MODE": 1}),
    ({"HAKMEM_PURGE_MODE": "dontneed"}, {"HAKMEM_PURGE_MODE": 0}),
    ({"HAKMEM_PROFILE": "lean", "HAKMEM_PURGE_DELAY_MS": "500"}, {"HAKMEM_PROFILE": 2, "HAKMEM_PURGE_DELAY_MS": 500,
                                                                 "HAKMEM_DRAIN_INTERVAL": 8}),
    ({"HAKMEM_LARGE_CACHE_MB": "77"}, {"HAKMEM_LARGE_CACHE_MB": 77}),
    ({"HAKMEM_DRAIN_INTERVAL": "33"}, {"HAKMEM_DRAIN_INTERVAL": 33}),
    ({"HAKMEM_TINY_SLL_DRAIN_INTERVAL": "55"}, {"HAKMEM_DRAIN_INTERVAL": 55}),
    ({"HAKMEM_PROFILE": "fast"}, {"HAKMEM_PROFILE": 0}),
    ({"HAKMEM_PROFILE": "balanced"}, {"HAKMEM_PROFILE": 1}),
    ({"HAKMEM_PROFILE": "lean"}, {"HAKMEM_PROFILE": 2}),
    ({"HAKMEM_HUGE_PAGES": "1"}, {"HAKMEM_HUGE_PAGES": 1}),
    ({"HAKMEM_BACKGROUND_PURGE": "0"}, {"HAKMEM_BACKGROUND_PURGE": 0}),
    ({"HAKMEM_PROFILE": "fast", "HAKMEM_BACKGROUND_PURGE": "1"}, {"HAKMEM_BACKGROUND_PURGE": 1}),
    ({}, {"HAKMEM_BACKGROUND_PURGE": 2}),
    ({"HAKMEM_BACKGROUND_PURGE": "off"}, {"HAKMEM_BACKGROUND_PURGE": 0}),
    ({"HAKMEM_BACKGROUND_PURGE": "ON"}, {"HAKMEM_BACKGROUND_PURGE": 1}),
    ({"HAKMEM_PROFILE": "fast", "HAKMEM_BACKGROUND_PURGE": "auto"}, {"HAKMEM_BACKGROUND_PURGE": 2}),
    ({"HAKMEM_VERBOSE": "0"}, {"HAKMEM_VERBOSE": 0}),
    ({"HAKMEM_STATS": "yes"}, {"HAKMEM_STATS": 1}),
    ({"HAKMEM_HUGE_PAGES": "off", "HAKMEM_PROFILE": "fast"}, {"HAKMEM_HUGE_PAGES": 0}),
]

# Values refused with a warning (the preset stays): yes/no words for options that are not on-off switches
# (a delay of "off" used to mean 0, purge at once), and blanks or a sign that strtol alone would skip.
MALFORMED_CASES = [
    ("HAKMEM_PURGE_DELAY_MS", "off"), ("HAKMEM_LARGE_CACHE_MB", "on"), ("HAKMEM_PURGE_MODE", "yes"),
    ("HAKMEM_PROFILE", "off"), ("HAKMEM_DRAIN_INTERVAL", "off"), ("HAKMEM_VERBOSE", "no"),
    ("HAKMEM_PURGE_DELAY_MS", " 50"), ("HAKMEM_PURGE_DELAY_MS", "50 "), ("HAKMEM_PURGE_DELAY_MS", "+50"),
    ("HAKMEM_PURGE_DELAY_MS", "5\n0"),
]


@pytest.mark.parametrize("env, expected", OPTION_CASES,
                         ids=[",".join(f"{k}={v}" for k, v in env.items()) or "defaults" for env, _ in OPTION_CASES])
def test_options_from_environment(test_binary, run_plain, env, expected):
    values, proc = read_options(test_binary, run_plain, env)
    for name, value in expected.items():
        assert values[name] == value, f"{name}: expected {value}, got {values[name]}" + describe(proc)


def readme_presets():
    """{profile index: {variable: value}} from the README's option table ("fast / balanced / lean" cells)."""
    names = {"free": 1, "dontneed": 0, "off": 0, "on": 1, "auto": 2}
    presets = {0: {}, 1: {}, 2: {}}
    for var, cell in re.findall(r"^\| `(HAKMEM_\w+)`[^|]*\| ([^|]*/[^|]*) \|", (ROOT / "README.md").read_text(), re.M):
        values = [v.strip().strip("`") for v in cell.split("/")]
        assert len(values) == 3, f"README row {var}: {cell!r}"
        for profile, value in enumerate(values):
            presets[profile][var] = names[value] if value in names else int(value)
    assert len(presets[0]) == 6, f"expected six preset rows in the README's option table, got {presets[0]}"
    return presets


@pytest.mark.parametrize("profile", ["fast", "balanced", "lean"])
def test_profile_presets_match_readme(test_binary, run_plain, profile):
    index = ["fast", "balanced", "lean"].index(profile)
    values, proc = read_options(test_binary, run_plain, {"HAKMEM_PROFILE": profile})
    for name, value in readme_presets()[index].items():
        assert values[name] == value, f"{profile}: {name} is {values[name]}, the README says {value}" + describe(proc)


def test_malformed_option_value_warns_once(test_binary, run_plain):
    defaults, proc = read_options(test_binary, run_plain)
    assert proc.stderr.strip() == "", "a clean environment printed something" + describe(proc)
    values, proc = read_options(test_binary, run_plain, {"HAKMEM_PURGE_DELAY_MS": "abc"})
    used = defaults["HAKMEM_PURGE_DELAY_MS"]
    assert values["HAKMEM_PURGE_DELAY_MS"] == used, describe(proc)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, "expected exactly one line on stderr" + describe(proc)
    assert "HAKMEM_PURGE_DELAY_MS" in lines[0], describe(proc)
    assert re.search(rf"(?<![\d-]){used}(?!\d)", lines[0]), \
        f"the warning does not name the value used ({used}): {lines[0]!r}"


@pytest.mark.parametrize("name, text", MALFORMED_CASES, ids=[f"{n}={t!r}" for n, t in MALFORMED_CASES])
def test_option_value_refused(test_binary, run_plain, name, text):
    defaults, _ = read_options(test_binary, run_plain)
    values, proc = read_options(test_binary, run_plain, {name: text})
    assert values[name] == defaults[name], f"{name}={text!r} was taken as {values[name]}" + describe(proc)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and name in lines[0], "expected one warning line naming the variable" + describe(proc)


@pytest.mark.parametrize("text, warns", [("", False), ("0", False), ("1", True), ("yes", True)])
def test_hakmem_secure_on_the_default_build(test_binary, run_plain, text, warns):
    """HAKMEM_SECURE set to anything but empty or 0 on the default library warns once that hardened mode
    is the other library; empty counts as unset, as in the launcher (it used to warn there)."""
    _, proc = read_options(test_binary, run_plain, {"HAKMEM_SECURE": text})
    lines = [line for line in proc.stderr.splitlines() if "HAKMEM_SECURE" in line]
    assert len(lines) == (1 if warns else 0), describe(proc)
    if warns:
        assert "libhakmem-secure.so" in lines[0], describe(proc)


def test_verbose_prints_the_options_in_force(test_binary, run_plain):
    """HAKMEM_VERBOSE=2 prints one line at start with every option's value, symbolic where it has names."""
    env = {"HAKMEM_VERBOSE": "2", "HAKMEM_PURGE_MODE": "free", "HAKMEM_LARGE_CACHE_MB": "7", "HAKMEM_PROFILE": "lean"}
    _, proc = read_options(test_binary, run_plain, env)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("hakmem: options:")]
    assert len(lines) == 1, describe(proc)
    for setting in ("HAKMEM_PURGE_MODE=free", "HAKMEM_LARGE_CACHE_MB=7", "HAKMEM_PROFILE=lean", "HAKMEM_VERBOSE=2",
                    "HAKMEM_PURGE_DELAY_MS=10", "HAKMEM_BACKGROUND_PURGE=auto", "HAKMEM_DRAIN_INTERVAL=8"):
        assert f" {setting}" in lines[0], f"{setting} missing: {lines[0]!r}"


def test_long_malformed_option_value_keeps_the_warning_whole(test_binary, run_plain):
    """A value of thousands of characters is shown cut at 64 with "...", and the line still ends with the
    range and the value used (it used to lose them once the value passed about 270 characters)."""
    defaults, _ = read_options(test_binary, run_plain)
    values, proc = read_options(test_binary, run_plain, {"HAKMEM_PURGE_DELAY_MS": "A" * 5000})
    used = defaults["HAKMEM_PURGE_DELAY_MS"]
    assert values["HAKMEM_PURGE_DELAY_MS"] == used, describe(proc)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, "expected exactly one line on stderr" + describe(proc)
    assert '="' + "A" * 64 + '..." is not valid (' in lines[0], lines[0]
    assert lines[0].endswith(f"); using {used}"), lines[0]


def test_stats_report_skips_a_reused_descriptor(test_binary, run_plain, tmp_path):
    """HAKMEM_STATS keeps a copy of stderr at fd 100 or above. A program that closes it and opens a file
    of its own under that number keeps its file as written; the report goes to fd 2."""
    data = tmp_path / "data.txt"
    proc = run_plain([test_binary("test_hakapi"), "reuse-report-fd", str(data)], env={"HAKMEM_STATS": "1"})
    assert proc.returncode == 0, describe(proc)
    assert data.read_text() == "data\n", f"the program's file was written into: {data.read_text()[:300]!r}"
    assert stats_blocks(proc.stderr) == 1, describe(proc)


def test_malloc_trim_says_whether_it_released(test_binary, run_plain):
    """malloc_trim returns 1 when it gave memory back and 0 when there was none, as glibc's does (it
    returned 1 every time). A long purge delay keeps the purger from releasing anything meanwhile."""
    proc = run_plain([test_binary("test_hakapi"), "trim"], env={"HAKMEM_PURGE_DELAY_MS": "600000"})
    assert proc.returncode == 0, describe(proc)
    assert "malloc_trim 1 then 0" in proc.stdout, describe(proc)


def test_address_hints_start_again_at_the_window_base(test_binary, run_plain):
    """Large mappings are placed through address hints in a 32 TiB window; after 32 TiB of mappings the
    hints stopped at its end for good and every aligned mapping took three calls (mmap, two munmaps). They
    start again at its base now: 1000 mappings after the window was walked through take about 1000 calls."""
    proc = run_plain([test_binary("test_hakapi"), "hint-window"], env={"HAKMEM_LARGE_CACHE_MB": "0"}, timeout=300)
    assert proc.returncode == 0, describe(proc)
    m = re.search(r"hint window: (\d+) mmap and (\d+) munmap calls", proc.stdout)
    assert m, describe(proc)
    assert int(m.group(1)) <= 1100 and int(m.group(2)) <= 1100, describe(proc)


def test_stats_print_to_stderr(test_binary, run_plain):
    proc = run_plain([test_binary("test_hakapi"), "print"])
    assert proc.returncode == 0, describe(proc)
    assert stats_blocks(proc.stderr) == 1, describe(proc)
    assert proc.stderr.startswith("hakmem stats:"), describe(proc)


def test_malloc_stats_and_mallopt(test_binary, run_plain):
    """glibc's malloc_stats prints hakmem's block, live blocks included; mallopt is accepted with no
    effect, silently unless HAKMEM_VERBOSE=2."""
    proc = run_plain([test_binary("test_hakapi"), "glibc-calls"])
    assert proc.returncode == 0, describe(proc)
    assert proc.stderr.startswith("hakmem stats:") and stats_blocks(proc.stderr) == 1, describe(proc)
    assert re.search(r"^  tier .* live blocks +live MiB$", proc.stderr, re.M), describe(proc)
    assert "mallopt" not in proc.stderr, describe(proc)
    loud = run_plain([test_binary("test_hakapi"), "glibc-calls"], env={"HAKMEM_VERBOSE": "2"})
    assert loud.returncode == 0, describe(loud)
    assert "hakmem: mallopt(-8, 2) has no effect" in loud.stderr, describe(loud)


def test_stats_at_exit_only_when_asked(test_binary, run_plain):
    quiet = run_plain([test_binary("test_hakapi"), "options"])
    assert quiet.returncode == 0 and stats_blocks(quiet.stderr) == 0, describe(quiet)
    loud = run_plain([test_binary("test_hakapi"), "options"], env={"HAKMEM_STATS": "1"})
    assert loud.returncode == 0 and stats_blocks(loud.stderr) == 1, describe(loud)
