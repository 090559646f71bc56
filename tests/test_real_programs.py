"""tests/test_real_programs.py — real programs under LD_PRELOAD=libhakmem.so (owner: tests suite).

Each program runs once on the system allocator and once on hakmem (HAKMEM_STATS=1, every hakmem run must
print "hakmem stats:"); the standard outputs must be identical. Programs: python3 (json, re, threads),
git (init, add 1000 files, commit, gc, fsck), gcc (compile, then run the binaries), perl, and sort of a
50 MB file. Marked `real`: `pytest -m "not real"` skips them.
"""
import hashlib
import random
import shutil
import sys

import pytest

from conftest import describe, stats_blocks

pytestmark = pytest.mark.real


def need(tool):
    path = shutil.which(tool)
    if not path:
        pytest.skip(f"{tool} is not installed")
    return path


def run_both(run_plain, run_hakmem, cmd, min_stats=1, **kwargs):
    """Run cmd on glibc and on hakmem; both must succeed with the same stdout. Returns the stdout."""
    plain = run_plain(cmd, **kwargs)
    assert plain.returncode == 0, describe(plain)
    hak = run_hakmem(cmd, **kwargs)
    assert hak.returncode == 0, describe(hak)
    assert stats_blocks(hak.stderr) >= min_stats, f"expected {min_stats} hakmem stats blocks" + describe(hak)
    assert hak.stdout == plain.stdout, "stdout differs between glibc and hakmem" + describe(plain) + describe(hak)
    return plain.stdout


PYTHON_SCRIPT = r'''
import collections, concurrent.futures, hashlib, json, queue, random, re, threading

random.seed(20240601)
WORDS = [w * (1 + i % 3) for i, w in enumerate("alpha beta gamma delta epsilon zeta eta theta iota kappa".split())]

def record(i):
    return {"id": i, "name": "item-%d" % i,
            "tags": [random.choice(WORDS) for _ in range(random.randint(0, 8))],
            "nested": {"values": [random.random() for _ in range(random.randint(1, 30))],
                       "text": " ".join(random.choice(WORDS) for _ in range(random.randint(5, 60)))}}

records = [record(i) for i in range(20000)]
blob = json.dumps(records, sort_keys=True, indent=1)
assert json.loads(blob) == records
words = collections.Counter(re.findall(r"[a-z]+", blob))
subbed = re.sub(r"(\d+)\.(\d{3})\d*", r"<\1:\2>", blob)
items = sorted(set(re.findall(r"item-\d*7\b", blob)), key=lambda s: int(s[5:]))

def digest(chunk):
    h = hashlib.sha256()
    scratch = {}
    for r in chunk:
        h.update(json.dumps(r, sort_keys=True).encode())
        scratch[r["id"]] = [t.upper() for t in r["tags"]] * 3
        if len(scratch) > 100:
            scratch.clear()
    return h.hexdigest()

chunks = [records[i:i + 500] for i in range(0, len(records), 500)]
with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
    digests = list(pool.map(digest, chunks))

q, results = queue.Queue(), []
def consumer():
    while True:
        item = q.get()
        if item is None:
            return
        results.append(sum(len(s) for s in item))
threads = [threading.Thread(target=consumer) for _ in range(4)]
for t in threads:
    t.start()
for i in range(20000):
    q.put(["x" * (i % 300)] * (i % 17))
for t in threads:
    q.put(None)
for t in threads:
    t.join()

print(len(blob), hashlib.sha256(subbed.encode()).hexdigest())
print(words.most_common(12))
print(len(items), items[:5], items[-5:])
print(hashlib.sha256("".join(digests).encode()).hexdigest())
print(len(results), sum(results))
'''


def test_python(run_plain, run_hakmem, tmp_path):
    script = tmp_path / "work.py"
    script.write_text(PYTHON_SCRIPT)
    out = run_both(run_plain, run_hakmem, [sys.executable, script])
    assert len(out.splitlines()) == 5


PERL_SCRIPT = r'''
use strict; use warnings;
srand(42);
my @w = qw(apple banana cherry date elder fig grape honeydew kiwi lemon mango nectarine);
my %h;
for my $i (1 .. 200000) {
    my $k = join("-", map { $w[int(rand(@w))] } 1 .. 3) . "-" . ($i % 977);
    push @{ $h{$k} }, sprintf("%08.3f", rand(1000));
}
my $text = join("\n", map { "$_: " . join(",", @{ $h{$_} }) } sort keys %h);
(my $sub = $text) =~ s/(\d+)\.(\d+)/<$2.$1>/g;
my %count; $count{$1}++ while $text =~ /\b([a-z]+)-/g;
my @big = map { [ $_, scalar reverse("x$_" x 5) ] } 1 .. 50000;
my $packed = pack("N*", map { $_->[0] } @big);
print scalar(keys %h), " ", length($text), " ", length($sub), "\n";
print join(" ", map { "$_=$count{$_}" } sort keys %count), "\n";
print length($packed), " ", (unpack("N*", $packed))[-1], " ", $big[-1][1], "\n";
'''


def test_perl(run_plain, run_hakmem, tmp_path):
    script = tmp_path / "work.pl"
    script.write_text(PERL_SCRIPT)
    out = run_both(run_plain, run_hakmem, [need("perl"), script])
    assert len(out.splitlines()) == 3


def c_program():
    """A C file with many functions and data tables, deterministic output."""
    parts = ["#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"]
    for i in range(300):
        parts.append(f"""
struct s{i} {{ int a[{i % 7 + 1}]; double d; const char *name; }};
static const char *names{i}[] = {{"n{i}a", "n{i}b", "n{i}c"}};
static long f{i}(long x) {{
  struct s{i} v = {{ .d = {i}.5, .name = names{i}[x % 3] }};
  for (int k = 0; k < {i % 7 + 1}; k++) v.a[k] = (int)(x * {i + 1} + k);
  switch (x % 5) {{
    case 0: return v.a[0] + (long)v.d + (long)strlen(v.name);
    case 1: return x * {i} - v.a[{i % 7}];
    case 2: return (x << {i % 11}) ^ {i * 7919};
    default: return x + {i};
  }}
}}""")
    parts.append("\nint main(void) {\n  long acc = 0;\n  char *buf = malloc(1 << 20);\n")
    for i in range(300):
        parts.append(f"  acc += f{i}(acc % 1000 + {i});\n")
    parts.append('  snprintf(buf, 1 << 20, "%ld", acc);\n  printf("result %s\\n", buf);\n'
                 "  free(buf);\n  return 0;\n}\n")
    return "".join(parts)


def test_gcc(run_plain, run_hakmem, tmp_path):
    gcc = need("gcc")
    (tmp_path / "prog.c").write_text(c_program())
    plain = run_plain([gcc, "-O2", "-Wall", "-S", "-o", "glibc.s", "prog.c"], cwd=tmp_path)
    hak = run_hakmem([gcc, "-O2", "-Wall", "-S", "-o", "hakmem.s", "prog.c"], cwd=tmp_path)
    assert plain.returncode == 0 and hak.returncode == 0, describe(plain) + describe(hak)
    assert hak.stdout == plain.stdout
    # The driver and cc1 each print a block.
    assert stats_blocks(hak.stderr) >= 2, describe(hak)
    assert (tmp_path / "hakmem.s").read_text() == (tmp_path / "glibc.s").read_text(), \
        "gcc on hakmem generated different assembly"

    plain = run_plain([gcc, "-O2", "-o", "prog_glibc", "prog.c"], cwd=tmp_path)
    hak = run_hakmem([gcc, "-O2", "-o", "prog_hakmem", "prog.c"], cwd=tmp_path)
    assert plain.returncode == 0 and hak.returncode == 0, describe(plain) + describe(hak)
    assert stats_blocks(hak.stderr) >= 3, "driver, cc1, as and ld should each print stats" + describe(hak)
    built_plain = run_plain([tmp_path / "prog_glibc"])
    built_hak = run_plain([tmp_path / "prog_hakmem"])
    assert built_plain.returncode == 0 and built_hak.returncode == 0, describe(built_plain) + describe(built_hak)
    assert built_plain.stdout.startswith("result ") and built_hak.stdout == built_plain.stdout
    on_hakmem = run_hakmem([tmp_path / "prog_hakmem"])
    assert on_hakmem.returncode == 0 and on_hakmem.stdout == built_plain.stdout, describe(on_hakmem)


def git_session(git, run, repo):
    """Run the git workload in `repo` with runner `run`; returns the list of completed processes."""
    env = {"HOME": str(repo.parent), "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_DATE": "2024-01-02T03:04:05Z",
           "GIT_COMMITTER_DATE": "2024-01-02T03:04:05Z", "LC_ALL": "C", "TZ": "UTC"}
    procs = []

    def git_cmd(*args):
        proc = run([git, *args], env=env, cwd=repo)
        assert proc.returncode == 0, describe(proc)
        procs.append(proc)

    repo.mkdir(parents=True)
    git_cmd("init", "-q", "-b", "main", ".")
    git_cmd("config", "user.name", "Hakmem Test")
    git_cmd("config", "user.email", "test@example.invalid")
    rng = random.Random(7)
    for i in range(1000):
        d = repo / f"d{i % 20}"
        d.mkdir(exist_ok=True)
        (d / f"f{i}.txt").write_text("".join(f"line {k} {rng.random()}\n" for k in range(i % 50 + 1)))
    git_cmd("add", "-A")
    git_cmd("commit", "-q", "-m", "add 1000 files")
    for i in range(0, 1000, 10):
        (repo / f"d{i % 20}" / f"f{i}.txt").write_text(f"changed {i}\n" * (i % 13 + 1))
    for i in range(5, 1000, 20):
        (repo / f"d{i % 20}" / f"f{i}.txt").unlink()
    git_cmd("add", "-A")
    git_cmd("commit", "-q", "-m", "change 100 files, delete 50")
    git_cmd("gc", "-q", "--aggressive")
    git_cmd("fsck", "--full", "--strict", "--no-dangling")
    git_cmd("log", "--stat", "--format=%H %s")
    git_cmd("rev-parse", "HEAD", "HEAD^{tree}")
    git_cmd("ls-tree", "-r", "--name-only", "HEAD~1")
    git_cmd("diff", "--stat", "HEAD~1", "HEAD")
    git_cmd("grep", "-c", "changed", "HEAD")
    return procs


def test_git(run_plain, run_hakmem, tmp_path):
    git = need("git")
    plain = git_session(git, run_plain, tmp_path / "plain" / "repo")
    hak = git_session(git, run_hakmem, tmp_path / "hakmem" / "repo")
    for p, h in zip(plain, hak):
        assert stats_blocks(h.stderr) >= 1, describe(h)
        assert h.stdout == p.stdout, "git output differs between glibc and hakmem" + describe(p) + describe(h)
    assert len(plain[-5].stdout.split()) > 0 and "1000 files" in plain[-5].stdout


def test_sort_50mb(run_plain, run_hakmem, tmp_path):
    sort = need("sort")
    rng = random.Random(11)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 12))) for _ in range(5000)]
    data = tmp_path / "data.txt"
    with open(data, "w") as f:
        size = 0
        while size < 50 << 20:
            chunk = "".join(f"{rng.choice(words)} {rng.randint(0, 10**9)} {rng.choice(words)}{rng.random()}\n"
                            for _ in range(20000))
            f.write(chunk)
            size += len(chunk)
    env = {"LC_ALL": "C", "TMPDIR": str(tmp_path)}
    for args in (["-S", "200M"], ["-t", " ", "-k2,2n", "-k1,1", "--parallel=2"], ["-u", "-k1,1"]):
        digests = []
        for runner in (run_plain, run_hakmem):
            out = tmp_path / "out.txt"
            with open(out, "w") as fh:
                proc = runner([sort, *args, data], env=env, stdout=fh, timeout=600)
            assert proc.returncode == 0, describe(proc)
            digests.append((out.stat().st_size, hashlib.sha256(out.read_bytes()).hexdigest()))
        assert digests[0] == digests[1], f"sort {' '.join(args)}: output differs (size, sha256): {digests}"
    assert digests[0][0] > 0
