"""Heavy real programs under hakmem (issue 4): a redis-server under redis-benchmark load whose data set
must read back exactly, python running part of its own regression suite plus an allocation-heavy script,
gcc building a multi-file C program, git gc/fsck on a repository of thousands of objects, and a perl
workload. Each runs under LD_PRELOAD (default and, for redis, the hardened build) and its output must be
identical to a plain run; HAKMEM_STATS=1 (or /proc/PID/maps for the server) proves hakmem was in use.
Nothing is installed here: a missing program skips its test with the reason."""

import hashlib
import importlib.util
import os
import random
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBS = {"default": ROOT / "build" / "libhakmem.so", "hardened": ROOT / "build" / "libhakmem-secure.so"}
STATS_BANNER = "hakmem stats:"


def need(*programs):
    for prog in programs:
        if shutil.which(prog) is None:
            pytest.skip(f"{prog} is not installed")


def environment(mode, stats=True):
    """Environment for a run: plain (mode None) or with a hakmem build preloaded (and its stats on)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HAKMEM_", "LD_PRELOAD", "MALLOC_"))}
    env.update(LC_ALL="C", TZ="UTC")
    if mode:
        if not LIBS[mode].exists():
            pytest.skip(f"{LIBS[mode]} not built")
        env["LD_PRELOAD"] = str(LIBS[mode])
        if stats:
            env["HAKMEM_STATS"] = "1"
    return env


def run(argv, mode, timeout=600, **kw):
    proc = subprocess.run(argv, env=environment(mode), capture_output=True, text=True, timeout=timeout, **kw)
    if mode:
        assert STATS_BANNER in proc.stderr, f"{argv[0]} did not run on hakmem ({mode})\n{proc.stderr[-2000:]}"
    return proc


def checked(argv, mode, **kw):
    proc = run(argv, mode, **kw)
    assert proc.returncode == 0, f"{' '.join(map(str, argv))} [{mode or 'plain'}] exit {proc.returncode}\n" \
                                 f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


# ---- redis ---------------------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_dataset(seed=2024):
    """Commands that write a known data set, and the (command, expected reply lines, ordered) to read it."""
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

    def word(n):
        return "".join(rng.choices(alphabet, k=n))

    writes, reads = [], []
    for i in range(3000):
        value = word(rng.choice([1, 8, 40, 200, 1000, 5000, 20000]))
        writes.append(f"SET known:s:{i} {value}")
        reads.append((f"GET known:s:{i}", [value], True))
    for i in range(200):
        fields = [(f"f{j}", word(rng.randint(1, 300))) for j in range(rng.randint(1, 40))]
        writes.append(f"HSET known:h:{i} " + " ".join(f"{f} {v}" for f, v in fields))
        reads.append((f"HGETALL known:h:{i}", [x for fv in fields for x in fv], False))
    for i in range(100):
        items = [word(rng.randint(1, 120)) for _ in range(rng.randint(1, 200))]
        writes.append(f"RPUSH known:l:{i} " + " ".join(items))
        reads.append((f"LRANGE known:l:{i} 0 -1", items, True))
    for i in range(50):
        members = sorted({word(rng.randint(4, 64)) for _ in range(rng.randint(1, 150))})
        writes.append(f"SADD known:z:{i} " + " ".join(members))
        reads.append((f"SMEMBERS known:z:{i}", members, False))
    return writes, reads


def redis_cli(port, commands, timeout=120):
    """Feed commands (one per line) to redis-cli --raw; returns its stdout lines."""
    proc = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), "--raw"], input="\n".join(commands) + "\n",
                          capture_output=True, text=True, timeout=timeout, env=environment(None))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def answers_ping(port):
    proc = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), "PING"], capture_output=True, text=True,
                          timeout=30, env=environment(None))
    return proc.stdout.strip() == "PONG"


def pair_up(flat):
    return sorted(zip(flat[0::2], flat[1::2]))


def check_read_back(port, reads):
    lines = redis_cli(port, [cmd for cmd, _, _ in reads])
    pos = 0
    for cmd, expected, ordered in reads:
        got = lines[pos:pos + len(expected)]
        pos += len(expected)
        if cmd.startswith("HGETALL"):
            assert pair_up(got) == pair_up(expected), f"{cmd} read back differently"
        else:
            assert (got if ordered else sorted(got)) == expected, f"{cmd} read back differently"
    assert pos == len(lines), f"{len(lines) - pos} unexpected reply lines"


@pytest.mark.parametrize("mode", ["default", "hardened"])
def test_redis_under_benchmark_load(mode, tmp_path):
    need("redis-server", "redis-cli", "redis-benchmark")
    port = free_port()
    log = tmp_path / "server.stderr"
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path), "--save", "",
            "--appendonly", "no", "--daemonize", "no", "--logfile", str(tmp_path / "redis.log")]
    with open(log, "w") as err:
        server = subprocess.Popen(argv, env=environment(mode), stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.time() + 20
        while not answers_ping(port):
            assert server.poll() is None, f"redis-server exited {server.returncode}\n{log.read_text()}"
            assert time.time() < deadline, "redis-server did not answer PING"
            time.sleep(0.2)
        maps = Path(f"/proc/{server.pid}/maps").read_text()
        assert LIBS[mode].name in maps, "redis-server is not running on hakmem"

        writes, reads = redis_dataset()
        assert all(reply in ("OK",) or reply.isdigit() for reply in redis_cli(port, writes))
        bench = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-q", "-r", "100000",
                 "-t", "set,get,lpush,lpop,incr,hset"]
        for extra in (["-n", "40000", "-c", "50", "-d", "64"], ["-n", "15000", "-c", "20", "-d", "3000", "-P", "8"]):
            proc = subprocess.run(bench + extra, capture_output=True, text=True, timeout=600, env=environment(None))
            assert proc.returncode == 0, proc.stderr
            for test in ("SET", "GET", "INCR", "LPUSH", "LPOP", "HSET"):
                assert f"{test}: " in proc.stdout and "requests per second" in proc.stdout, proc.stdout[-2000:]
        assert server.poll() is None, f"redis-server died under load\n{log.read_text()[-3000:]}"

        check_read_back(port, reads)
        dbsize = int(redis_cli(port, ["DBSIZE"])[0])
        assert dbsize > len(reads), f"DBSIZE {dbsize}: the benchmark keys are missing"
        redis_cli(port, ["SHUTDOWN NOSAVE"])
        server.wait(timeout=30)
        assert server.returncode == 0, f"redis-server exited {server.returncode}\n{log.read_text()[-3000:]}"
        assert STATS_BANNER in log.read_text()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


# ---- python ------------------------------------------------------------------------------------------

REGRTEST = ["test_dict", "test_set", "test_list", "test_unicode", "test_json", "test_re", "test_pickle",
            "test_collections", "test_deque", "test_sort", "test_bytes", "test_struct", "test_itertools",
            "test_functools", "test_weakref", "test_gc", "test_decimal"]


def regrtest_summary(output):
    """The lines of a regrtest run that do not depend on timing."""
    keep = ("Tests result:", "Result:", "Total tests:", "Total test files:", "tests OK", "failed", "skipped")
    return [line.strip() for line in output.splitlines() if any(k in line for k in keep) and "load avg" not in line
            and "Total duration" not in line]


# regrtest, after checking that the interpreter itself runs on hakmem. HAKMEM_STATS stays off: the suite
# starts child interpreters whose stderr some tests require to be empty.
REGRTEST_MAIN = """
import runpy, sys
if sys.argv[1] == "--expect-hakmem" and "libhakmem" not in open("/proc/self/maps").read():
    sys.exit("not running on hakmem")
sys.argv = ["python -m test"] + sys.argv[2:]
runpy.run_module("test", run_name="__main__")
"""


def test_python_regression_suite_subset():
    missing = [m for m in ["libregrtest", *REGRTEST] if importlib.util.find_spec(f"test.{m}") is None]
    if missing:  # Debian's python3 has them in libpython3.11-testsuite (.ci/run installs it)
        pytest.skip(f"this python lacks its regression tests {', '.join(missing)}")
    results = {}
    for mode, flag in ((None, "--plain"), ("default", "--expect-hakmem")):
        argv = [sys.executable, "-c", REGRTEST_MAIN, flag, "-q", *REGRTEST]
        results[mode] = subprocess.run(argv, env=environment(mode, stats=False), capture_output=True, text=True,
                                       timeout=900)
    plain, hakmem = results[None], results["default"]
    # the subset passes on the system allocator (else the comparison below would hold for two equal failures)
    assert plain.returncode == 0, f"plain exit {plain.returncode}\n{plain.stdout[-4000:]}\n{plain.stderr[-2000:]}"
    assert hakmem.returncode == 0, f"hakmem exit {hakmem.returncode}\n{hakmem.stdout[-4000:]}\n{hakmem.stderr[-2000:]}"
    assert regrtest_summary(hakmem.stdout) == regrtest_summary(plain.stdout), hakmem.stdout[-4000:]
    assert "Tests result: SUCCESS" in hakmem.stdout, hakmem.stdout[-3000:]


PY_HEAVY = textwrap.dedent("""
    import gc, hashlib, json, queue, random, re, threading, zlib
    rng = random.Random(7)
    out = []
    def digest(obj):
        out.append(hashlib.sha256(repr(obj).encode()).hexdigest()[:16])
    d = {f"k{i}-{rng.random()}": [i] * (i % 7) for i in range(150000)}
    for k in list(d)[::3]:
        del d[k]
    digest(sorted(d.items())[:1000]); digest(len(d))
    words = ["".join(rng.choices("abcdefgh", k=rng.randint(1, 30))) for _ in range(200000)]
    text = " ".join(words)
    digest(re.findall(r"a[bc]+d", text)[:5000]); digest(re.sub(r"(h+)", lambda m: str(len(m.group(1))), text)[-5000:])
    blob = json.dumps({"rows": [{"id": i, "v": words[i], "f": i / 7} for i in range(60000)]})
    digest(json.loads(blob)["rows"][::97]); digest(zlib.crc32(zlib.compress(blob.encode(), 6)))
    digest(hex(3 ** 200000)[-500:]); digest(sum(x * x for x in range(2000000)))
    class Node:
        def __init__(self, parent): self.parent, self.kids = parent, []
    for round_ in range(20):
        root = Node(None)
        for i in range(20000):
            n = Node(root); root.kids.append(n); n.kids.append(root)
        del root
        out.append(str(gc.collect() > 0))
    q, results = queue.Queue(), []
    lock = threading.Lock()
    def work():
        while (item := q.get()) is not None:
            r = sorted(item, key=lambda s: (len(s), s))
            with lock:
                results.append(hashlib.md5("".join(r).encode()).hexdigest())
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads: t.start()
    for i in range(400):
        q.put(words[i * 400:(i + 1) * 400])
    for t in threads: q.put(None)
    for t in threads: t.join()
    digest(sorted(results))
    print("\\n".join(out))
""")


def test_python_allocation_heavy_script(tmp_path):
    script = tmp_path / "heavy.py"
    script.write_text(PY_HEAVY)
    plain = checked([sys.executable, str(script)], None)
    hakmem = checked([sys.executable, str(script)], "default")
    assert hakmem.stdout == plain.stdout
    assert len(plain.stdout.splitlines()) > 20


# ---- gcc ----------------------------------------------------------------------------------------------

def write_c_project(root, files=40, functions=60):
    """A generated program of many translation units; main prints a checksum over every function."""
    rng = random.Random(11)
    root.mkdir()
    decls = []
    for f in range(files):
        table = ", ".join(str(rng.randrange(1 << 30)) for _ in range(256))
        body = ['#include "gen.h"', f"static const unsigned table_{f}[] = {{{table}}};"]
        for g in range(functions):
            a, b, c = rng.randrange(1, 97), rng.randrange(1, 31), rng.randrange(1, 1 << 20)
            body.append(textwrap.dedent(f"""\
                unsigned long fn_{f}_{g}(unsigned long x) {{
                  unsigned long acc = {c}u;
                  for (int i = 0; i < {a}; i++) {{
                    acc = acc * {b}u + table_{f}[(x + i) & 255] + (x >> (i & 7));
                    if (acc % {a + 2} == 0) acc ^= fn_helper_{f}(acc);
                  }}
                  return acc;
                }}"""))
            decls.append(f"unsigned long fn_{f}_{g}(unsigned long x);")
        body.insert(2, f"static unsigned long fn_helper_{f}(unsigned long v) {{ return (v << 3) ^ (v >> 5) ^ {f}u; }}")
        (root / f"unit{f}.c").write_text("\n".join(body) + "\n")
    (root / "gen.h").write_text("#pragma once\n" + "\n".join(decls) + "\n")
    calls = "\n".join(f"  sum = sum * 31 + fn_{f}_{g}(sum & 0xffff);" for f in range(files) for g in range(functions))
    (root / "main.c").write_text(f'#include <stdio.h>\n#include "gen.h"\nint main(void) {{\n  unsigned long sum = 1;\n'
                                 f'{calls}\n  printf("checksum %lu\\n", sum);\n  return 0;\n}}\n')
    objs = " ".join(f"unit{f}.o" for f in range(files))
    (root / "Makefile").write_text(f"prog: main.o {objs}\n\tgcc -o $@ $^\n%.o: %.c gen.h\n\tgcc -O2 -c $< -o $@\n")


def build_c_project(root, mode):
    checked(["make", "-s", "-j2", "-C", str(root)], mode)
    objects = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.glob("*.o"))}
    output = checked([str(root / "prog")], None).stdout
    return objects, output


def test_gcc_builds_multi_file_program(tmp_path):
    need("gcc", "make")
    write_c_project(tmp_path / "plain")
    shutil.copytree(tmp_path / "plain", tmp_path / "hakmem")
    plain_objs, plain_out = build_c_project(tmp_path / "plain", None)
    hak_objs, hak_out = build_c_project(tmp_path / "hakmem", "default")
    assert hak_out == plain_out and plain_out.startswith("checksum ")
    assert hak_objs == plain_objs, "object files differ between the plain and the hakmem build"
    assert len(plain_objs) == 41


# ---- git ----------------------------------------------------------------------------------------------

def fast_import_stream(commits=400, files=300, seed=5):
    """A deterministic history for git fast-import: each commit rewrites a few of `files` files."""
    rng = random.Random(seed)
    lines, contents = [], {}
    for c in range(commits):
        lines += ["commit refs/heads/main", f"mark :{c + 1}",
                  f"committer Robust Test <robust@example.org> {1_600_000_000 + c * 3600} +0000"]
        msg = f"change {c}\n"
        lines += [f"data {len(msg.encode())}", msg.rstrip("\n")]
        if c:
            lines.append(f"from :{c}")
        for _ in range(8):
            name = f"dir{rng.randrange(20)}/file{rng.randrange(files)}.txt"
            old = contents.get(name, "")
            added = [f"line {c} {rng.random()}" for _ in range(rng.randrange(1, 40))]
            new_lines = old.splitlines()[:rng.randrange(200)] + added
            data = "\n".join(new_lines) + "\n"
            contents[name] = data
            lines += [f"M 100644 inline {name}", f"data {len(data.encode())}", data.rstrip("\n")]
        lines.append("")
    return "\n".join(lines) + "\n"


def git_workout(repo, mode):
    """gc, fsck and history walks; returns the outputs that must not depend on the allocator."""
    git = ["git", "-C", str(repo), "-c", "gc.auto=0", "-c", "pack.threads=2"]
    checked(git + ["gc", "--quiet", "--prune=now"], mode)
    fsck = checked(git + ["fsck", "--full", "--strict", "--no-progress"], mode)
    objects = checked(git + ["cat-file", "--batch-all-objects", "--batch-check"], mode).stdout
    log = checked(git + ["log", "--stat", "-p", "--format=%H %s"], mode).stdout
    blame = checked(git + ["blame", "--line-porcelain", "dir1/" + next(
        p.name for p in sorted((repo / "dir1").iterdir()))], mode).stdout
    count = checked(git + ["count-objects", "-v"], mode).stdout
    return {"fsck": fsck.stdout, "objects": objects, "log": hashlib.sha256(log.encode()).hexdigest(),
            "blame": blame, "in-pack": [line for line in count.splitlines() if line.startswith("in-pack")]}


def test_git_gc_fsck_on_thousands_of_objects(tmp_path):
    need("git")
    seed = tmp_path / "seed"
    subprocess.run(["git", "init", "-q", "-b", "main", str(seed)], check=True, env=environment(None))
    subprocess.run(["git", "-C", str(seed), "fast-import", "--quiet"], input=fast_import_stream(), text=True,
                   check=True, env=environment(None))
    subprocess.run(["git", "-C", str(seed), "checkout", "-q", "main"], check=True, env=environment(None))
    shutil.copytree(seed, tmp_path / "hakmem")
    plain = git_workout(seed, None)
    hakmem = git_workout(tmp_path / "hakmem", "default")
    assert hakmem == plain
    assert len(plain["objects"].splitlines()) > 3000


# ---- perl ---------------------------------------------------------------------------------------------

PERL_HEAVY = r"""
use strict; use warnings; use Digest::MD5 qw(md5_hex);
srand(3);
my %h; my @out;
for my $i (1 .. 200000) { $h{"key$i" . int(rand(1000))} .= "v" x ($i % 13) . $i; }
delete $h{$_} for grep { /7$/ } keys %h;
push @out, md5_hex(join ",", map { "$_=$h{$_}" } sort keys %h);
my $text = join " ", map { join "", map { chr(97 + int(rand(8))) } 1 .. 1 + int(rand(25)) } 1 .. 150000;
(my $t2 = $text) =~ s/(a+)(b|c)/length($1) . uc($2)/ge;
push @out, md5_hex($t2), scalar(() = $text =~ /h[a-d]+h/g);
my @recs = map { { id => $_, name => "n" . ($_ * 7919 % 100003), tags => [ map { $_ * 3 } 1 .. $_ % 9 ] } } 1 .. 100000;
my @sorted = sort { $a->{name} cmp $b->{name} or $a->{id} <=> $b->{id} } @recs;
push @out, md5_hex(join ";", map { "$_->{id}:@{$_->{tags}}" } @sorted[0 .. 5000]);
my $s = ""; $s .= sprintf("%08x", $_ * 2654435761 % 4294967296) for 1 .. 300000;
push @out, md5_hex($s), length($s);
my @closures = map { my $n = $_; sub { $n * $_[0] } } 1 .. 50000;
my $acc = 0; $acc = ($acc + $_->(3)) % 1000003 for @closures;
push @out, $acc;
print join("\n", @out), "\n";
"""


def test_perl_workload(tmp_path):
    need("perl")
    script = tmp_path / "heavy.pl"
    script.write_text(PERL_HEAVY)
    plain = checked(["perl", str(script)], None)
    hakmem = checked(["perl", str(script)], "default")
    assert hakmem.stdout == plain.stdout
    assert len(plain.stdout.splitlines()) == 7
