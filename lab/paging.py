"""paging.py — the `paging` sub-command: hakmem regions under memory pressure with swap. As root it
creates a swap file and a memory cgroup (v1 memory controller, or cgroup v2 with the memory controller),
then runs the Rust bench (rust/benches/alloc_bench.rs) inside the cgroup:
  - the ratio sweep: a fixed working set read at random under RAM limits from 1:1 down to 1:16 of it, with
    the strategies baseline, MADV_RANDOM, MADV_SEQUENTIAL, a prefetch thread and batched Handle::prefetch;
  - the paging run: 3x the limit allocated in 2 MiB regions, random reads (CCDF) and realloc+touch.
The swap file and the cgroup are removed at the end, also after an error, Ctrl-C or SIGTERM. Writes
report.md, data.json, ccdf.png and sweep.png. Without root, cgroups or swap support it says which is
missing and stops (exit 2)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lab import machine, plots, report
from lab.runner import clean_environ
from lab.session import UsageError, check_numbers, prepare_out_dir

V1_ROOT = Path("/sys/fs/cgroup/memory")
V2_ROOT = Path("/sys/fs/cgroup")
EXIT_MISSING = 2
EXIT_INTERRUPTED = 130


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("paging", help="swap experiment with hakmem regions under cgroup memory limits (root)",
                              description="Random reads of a swapped working set in hakmem regions: ratio sweep "
                                          "of RAM limits and madvise/prefetch strategies, plus a 3x-overcommit "
                                          "paging run. Needs root, a memory cgroup controller and swap support.")
    p.add_argument("--total-mib", type=int, default=1024, help="working set of the ratio sweep (default 1024)")
    p.add_argument("--ratios", default="1,2,4,8,16",
                   help="RAM limits as fractions 1:N of the working set (default 1,2,4,8,16)")
    p.add_argument("--paging-ratio", type=int, default=4,
                   help="limit of the paging run as 1:N of the working set (default 4); 0 skips it")
    p.add_argument("--allowance-mib", type=int, default=32,
                   help="added to each sweep limit for the bench's own memory (default 32)")
    p.add_argument("--seconds", type=float, default=3.0, help="time bound of one strategy run (default 3)")
    p.add_argument("--ops", type=int, default=500_000, help="most reads of one strategy run (default 500000)")
    p.add_argument("--ahead", type=int, default=32, help="pages the prefetch thread runs ahead (default 32)")
    p.add_argument("--batch", type=int, default=32, help="reads per prefetched batch (default 32)")
    p.add_argument("--huge", action="store_true", help="transparent huge pages on the regions (default off)")
    p.add_argument("--swap-file", default="/var/tmp/hakmem-paging.swap",
                   help="swap file to create (must not exist; default /var/tmp/hakmem-paging.swap)")
    p.add_argument("--swap-mib", type=int, help="swap file size (default: working set + 512)")
    p.add_argument("--bench", help="prebuilt alloc_bench binary (default: built with cargo)")
    p.add_argument("--out", help="output directory (default results/<date>-<HHMMSS>-paging)")
    p.add_argument("--root", help="hakmem repository (default: the one holding this lab)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds before one bench run is killed (default 900)")
    p.set_defaults(func=run_paging)


# ---- preconditions ------------------------------------------------------------------------------------

def cgroup_flavour() -> str | None:
    """'v1' when the v1 memory controller is mounted, 'v2' when the unified hierarchy gives its child
    cgroups the memory controller (listed in the root's cgroup.subtree_control, not only available in its
    cgroup.controllers: a child would then have no memory.max), else None."""
    if (V1_ROOT / "memory.limit_in_bytes").exists() or (V1_ROOT / "memory.usage_in_bytes").exists():
        return "v1"
    try:
        if "memory" in (V2_ROOT / "cgroup.subtree_control").read_text().split():
            return "v2"
    except OSError:
        pass
    return None


def paging_limit_mib(total_mib: int, ratio: int) -> int:
    """The RAM limit of the paging run: the working set / ratio, at least 8 MiB."""
    return max(8, total_mib // ratio)


def missing_requirements() -> list[str]:
    """What stops the experiment on this machine (empty: nothing)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root privileges (swapon and cgroup limits need root)")
    if cgroup_flavour() is None:
        missing.append("a memory cgroup controller (neither /sys/fs/cgroup/memory (v1) nor memory in "
                       "/sys/fs/cgroup/cgroup.subtree_control (v2; as root: "
                       "echo +memory > /sys/fs/cgroup/cgroup.subtree_control))")
    if not Path("/proc/swaps").exists():
        missing.append("swap support in the kernel (/proc/swaps is absent)")
    for tool in ("mkswap", "swapon", "swapoff"):
        if shutil.which(tool) is None:
            missing.append(f"the {tool} command (util-linux)")
    return missing


# ---- resources: swap file and cgroup, always cleaned up ---------------------------------------------------

class Resources:
    """The swap file and the cgroup this experiment created; cleanup() undoes whatever was done."""

    def __init__(self, swap_file: Path, swap_mib: int):
        self.swap_file = swap_file
        self.swap_mib = swap_mib
        self.flavour = cgroup_flavour()
        base = V1_ROOT if self.flavour == "v1" else V2_ROOT
        self.cgroup = base / f"hakmem-paging-{os.getpid()}"
        self.swap_created = self.swap_on = self.cgroup_created = False
        self.log: list[str] = []

    def _run(self, cmd: list[str]) -> None:
        self.log.append(" ".join(cmd))
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {(proc.stderr or proc.stdout).strip()}")

    def setup(self) -> None:
        if self.swap_file.exists():
            raise RuntimeError(f"{self.swap_file} already exists; remove it or pass --swap-file")
        fd = os.open(self.swap_file, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        self.swap_created = True
        try:
            os.posix_fallocate(fd, 0, self.swap_mib << 20)
        finally:
            os.close(fd)
        self._run(["mkswap", str(self.swap_file)])
        self._run(["swapon", str(self.swap_file)])
        self.swap_on = True
        self.cgroup.mkdir()
        self.cgroup_created = True
        self.log.append(f"mkdir {self.cgroup}")

    def set_limit(self, limit_bytes: int) -> None:
        """RAM limit of the cgroup, swap unlimited beyond it (bounded by the swap file)."""
        if self.flavour == "v1":
            self._write("memory.limit_in_bytes", str(limit_bytes))
        else:
            self._write("memory.max", str(limit_bytes))
            self._write("memory.swap.max", "max")

    def _write(self, name: str, value: str) -> None:
        self.log.append(f"echo {value} > {self.cgroup / name}")
        (self.cgroup / name).write_text(value)

    def enter(self) -> None:
        """Move the calling process into the cgroup (used in the child between fork and exec)."""
        (self.cgroup / "cgroup.procs").write_text(str(os.getpid()))

    def cleanup(self) -> list[str]:
        """Undo everything; returns the problems met (each step is tried regardless of the others)."""
        problems = []
        if self.cgroup_created:
            for _ in range(50):
                try:
                    self.cgroup.rmdir()
                    self.cgroup_created = False
                    break
                except OSError:
                    time.sleep(0.1)  # the last bench process may still be exiting
            if self.cgroup_created:
                problems.append(f"could not remove the cgroup {self.cgroup}")
        if self.swap_on:
            proc = subprocess.run(["swapoff", str(self.swap_file)], capture_output=True, text=True, check=False)
            if proc.returncode == 0:
                self.swap_on = False
            else:
                problems.append(f"swapoff {self.swap_file} failed: {proc.stderr.strip()}")
        if self.swap_created and not self.swap_on:
            try:
                self.swap_file.unlink()
                self.swap_created = False
            except OSError as e:
                problems.append(f"could not remove {self.swap_file}: {e}")
        return problems


class Interrupted(Exception):
    """SIGINT, SIGTERM or SIGHUP arrived: stop, clean up, write what finished."""


def _on_signal(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


# ---- the bench --------------------------------------------------------------------------------------------

def build_bench(root: Path) -> Path:
    """Build rust/benches/alloc_bench.rs (release) with cargo; returns the executable."""
    if shutil.which("cargo") is None:
        raise RuntimeError("cargo is not installed: install Rust (rustup) or pass --bench")
    env = dict(os.environ, CARGO_TARGET_DIR=str(root / "build" / "cargo"))
    proc = subprocess.run(["cargo", "bench", "--bench", "alloc_bench", "--no-run", "--message-format=json"],
                          cwd=root, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"cargo bench --no-run failed:\n{proc.stderr[-3000:]}")
    for line in proc.stdout.splitlines():
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") == "compiler-artifact" and msg.get("target", {}).get("name") == "alloc_bench" \
                and msg.get("executable"):
            return Path(msg["executable"])
    raise RuntimeError("cargo did not report the alloc_bench executable")


def run_bench(res: Resources, bench: Path, args: list[str], timeout: float) -> dict:
    """Run the bench inside the cgroup; returns its JSON results, or {'error': ...}."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
        out = Path(tmp.name)
    cmd = [str(bench), *args, "--json", str(out)]
    print("  $ " + " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, preexec_fn=res.enter, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=clean_environ())  # as in every experiment: no inherited preload or HAKMEM_*
    try:
        text, _ = proc.communicate(timeout=timeout)
    except BaseException:
        proc.kill()
        proc.wait()
        out.unlink(missing_ok=True)
        raise
    sys.stdout.write("".join("    " + line + "\n" for line in text.splitlines()))
    try:
        if proc.returncode != 0:
            killed = proc.returncode < 0 and -proc.returncode == signal.SIGKILL
            return {"error": f"exit status {proc.returncode}" + (" (killed: out of memory?)" if killed else ""),
                    "output": text[-2000:]}
        return json.loads(out.read_text())
    except (OSError, json.JSONDecodeError) as e:
        return {"error": f"no results: {e}", "output": text[-2000:]}
    finally:
        out.unlink(missing_ok=True)


# ---- report ----------------------------------------------------------------------------------------------

def fmt_ns(ns: float | None) -> str:
    if ns is None:
        return ""
    for div, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if ns >= div:
            return f"{ns / div:.3g} {unit}"
    return f"{ns:.0f} ns"


def ratio_label(run: dict) -> str:
    """How a sweep run's limit relates to the working set: the nominal 1:N, which leaves the allowance
    out, and the working set over the whole limit."""
    return f"1:{run['ratio']}, working set {run['total_mib'] / run['limit_mib']:.1f}x the limit"


def sweep_section(sweep: list[dict]) -> str:
    rows = []
    for run in sweep:
        label = f"{run['limit_mib']} MiB ({ratio_label(run)})"
        if "error" in run["result"]:
            rows.append((label, "failed: " + run["result"]["error"], "", "", "", "", ""))
            continue
        for s in run["result"]["strategies"]:
            rows.append((label, s["strategy"], report.fmt_int(s["ops_per_s"]), fmt_ns(s["p50_ns"]),
                         fmt_ns(s["p99_ns"]), fmt_ns(s["p999_ns"]), fmt_ns(s["max_ns"])))
    return "## Ratio sweep: random page reads, 1 reader thread\n\n" + report.table(
        ("RAM limit (ratio)", "strategy", "ops/s", "p50", "p99", "p99.9", "max"), rows)


def paging_section(paging: dict | None, limit_mib: int | None) -> str:
    if paging is None:
        return ""
    if "error" in paging:
        return f"## Paging run\n\nFailed: {paging['error']}"
    rr, rt = paging["random_read"], paging["realloc_touch"]
    rows = [("random_read", report.fmt_int(rr["ops_per_s"]), fmt_ns(rr["p50_ns"]), fmt_ns(rr["p99_ns"]),
             fmt_ns(rr["p999_ns"]), fmt_ns(rr["max_ns"])),
            ("realloc+touch", report.fmt_int(rt["ops_per_s"]), fmt_ns(rt["p50_ns"]), fmt_ns(rt["p99_ns"]),
             fmt_ns(rt["p999_ns"]), fmt_ns(rt["max_ns"]))]
    return (f"## Paging run: {limit_mib} MiB RAM, {paging['allocated_bytes'] >> 20} MiB allocated in 2 MiB regions\n\n"
            + report.table(("measure", "ops/s", "p50", "p99", "p99.9", "max"), rows, right=range(1, 6)))


def draw(out_dir: Path, sweep: list[dict], paging: dict | None) -> list[str]:
    """ccdf.png (CCDF of the paging run and of every strategy per ratio) and sweep.png (ops/s by ratio)."""
    images = []
    panels = []
    if paging and "random_read" in paging:
        pts = paging["random_read"]["ccdf"]
        panels.append(plots.LinePanel("paging run: random reads", {"random_read": (
            [p[0] / 1e3 for p in pts if p[1] > 0], [p[1] for p in pts if p[1] > 0])},
            xlabel="latency (µs)", ylabel="P(latency > x)", logx=True, logy=True))
    for run in sweep:
        if "strategies" not in run["result"]:
            continue
        series = {s["strategy"]: ([p[0] / 1e3 for p in s["ccdf"] if p[1] > 0], [p[1] for p in s["ccdf"] if p[1] > 0])
                  for s in run["result"]["strategies"]}
        panels.append(plots.LinePanel(f"{run['limit_mib']} MiB RAM ({ratio_label(run)})", series,
                                      xlabel="latency (µs)", ylabel="P(latency > x)", logx=True, logy=True))
    if panels and plots.lines(out_dir / "ccdf.png", "Random-read latency CCDF", panels):
        images.append("ccdf.png")
    ok = [r for r in sweep if "strategies" in r["result"]]
    if ok:
        names = [s["strategy"] for s in ok[0]["result"]["strategies"]]
        series = {n: ([r["total_mib"] / r["limit_mib"] for r in ok],
                      [next(s["ops_per_s"] for s in r["result"]["strategies"] if s["strategy"] == n) for r in ok])
                  for n in names}
        panel = plots.LinePanel("ops/s by working set : RAM", series, xlabel="working set / cgroup limit",
                                ylabel="reads per second", logx=True, logy=True)
        if plots.lines(out_dir / "sweep.png", "Ratio sweep", [panel]):
            images.append("sweep.png")
    return images


def write_report(out_dir: Path, args: argparse.Namespace, res: Resources | None, sweep: list[dict],
                 paging: dict | None, status: str, problems: list[str]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    images = draw(out_dir, sweep, paging)
    m = machine.describe(Path(args.root).resolve() if args.root else Path(__file__).resolve().parents[1])
    params = [("working set", f"{args.total_mib} MiB in one region"),
              ("RAM limits", f"working set / N + {args.allowance_mib} MiB for the bench's own memory, "
                             f"N in {args.ratios}"),
              ("paging run limit", f"1:{args.paging_ratio}" if args.paging_ratio else "skipped"),
              ("strategy run", f"at most {args.seconds} s or {args.ops} reads, warm-up 5% discarded"),
              ("prefetch thread / batch", f"{args.ahead} pages ahead / {args.batch} reads"),
              ("huge pages on regions", "yes" if args.huge else "no (4 KiB paging measured)"),
              ("cgroup", f"{res.flavour}: {res.cgroup}" if res else ""),
              ("swap", f"file {args.swap_file}, {res.swap_mib if res else ''} MiB")]
    sections = [report.machine_section(m), "## Setup\n\n" + report.table(("what", "value"), params, right=()),
                sweep_section(sweep), paging_section(paging, paging_limit_mib(args.total_mib, args.paging_ratio) if args.paging_ratio else None)]
    sections += [f"![{i}]({i})" for i in images]
    notes = ["The CCDF is P(latency > x) of single one-byte reads; resident pages take nanoseconds, pages "
             "read back from swap take microseconds to milliseconds.",
             "realloc+touch frees a random region of the swapped pool, allocates one again (the thread cache "
             "hands back the same addresses) and writes its first page."]
    if res:
        notes.append("Setup commands: " + "; ".join(f"`{c}`" for c in res.log))
    if problems:
        notes += [f"Cleanup problem: {p}" for p in problems]
    sections.append("## Notes\n\n" + "\n".join(f"- {n}" for n in notes))
    data = {"machine": m, "parameters": vars(args) | {"func": None}, "cgroup": res.flavour if res else None,
            "sweep": sweep, "paging": paging, "status": status, "cleanup_problems": problems}
    return report.write(out_dir, "Paging: hakmem regions under memory pressure", status, sections, data)


# ---- the sub-command -------------------------------------------------------------------------------------

def run_paging(args: argparse.Namespace) -> int:
    try:
        ratios = sorted({int(r) for r in args.ratios.split(",") if r.strip()})
    except ValueError:
        print(f"hakmem-lab paging: bad --ratios {args.ratios!r}", file=sys.stderr)
        return EXIT_MISSING
    if not ratios or min(ratios) < 1 or args.total_mib < 16:
        print("hakmem-lab paging: ratios must be >= 1 and --total-mib >= 16", file=sys.stderr)
        return EXIT_MISSING
    try:  # a timeout of 0 used to set up swap and the cgroup and then fail every run
        check_numbers(args, "timeout", "seconds", "ops", "batch", "swap_mib",
                      at_least_zero=("ahead", "allowance_mib", "paging_ratio"))
    except UsageError as e:
        print(f"hakmem-lab paging: {e}", file=sys.stderr)
        return EXIT_MISSING
    missing = missing_requirements()
    if missing:
        print("hakmem-lab paging cannot run here; missing:", file=sys.stderr)
        for m in missing:
            print(f"  - {m}", file=sys.stderr)
        return EXIT_MISSING
    root = Path(args.root).resolve() if args.root else Path(__file__).resolve().parents[1]
    out_dir = Path(args.out) if args.out else root / "results" / f"{dt.datetime.now():%Y-%m-%d-%H%M%S}-paging"
    try:
        prepare_out_dir(out_dir)
    except UsageError as e:
        print(f"hakmem-lab paging: {e}", file=sys.stderr)
        return EXIT_MISSING
    try:
        bench = Path(args.bench) if args.bench else build_bench(root)
    except RuntimeError as e:
        print(f"hakmem-lab paging: {e}", file=sys.stderr)
        return 1
    res = Resources(Path(args.swap_file), args.swap_mib or args.total_mib + 512)
    sweep: list[dict] = []
    paging = None
    status = "complete"
    old = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        res.setup()
        common = ["--seconds", str(args.seconds), "--ops", str(args.ops)] + (["--huge"] if args.huge else [])
        for r in ratios:
            limit_mib = max(8, args.total_mib // r) + args.allowance_mib
            print(f"ratio 1:{r}: RAM limit {limit_mib} MiB ({args.total_mib} MiB / {r} + {args.allowance_mib}), "
                  f"working set {args.total_mib} MiB", flush=True)
            res.set_limit(limit_mib << 20)
            result = run_bench(res, bench, ["--ratio-sweep", "--total-mib", str(args.total_mib), "--ahead",
                                            str(args.ahead), "--batch", str(args.batch), *common], args.timeout)
            sweep.append({"ratio": r, "limit_mib": limit_mib, "total_mib": args.total_mib, "result": result})
        if args.paging_ratio:
            limit_mib = paging_limit_mib(args.total_mib, args.paging_ratio)
            print(f"paging run: RAM limit {limit_mib} MiB, {3 * limit_mib} MiB allocated", flush=True)
            res.set_limit(limit_mib << 20)
            paging = run_bench(res, bench, ["--paging", *common], args.timeout)
    except (KeyboardInterrupt, Interrupted) as e:
        status = f"partial: interrupted ({e or 'SIGINT'})"
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        status = f"partial: {e}"
    finally:
        for s in old:
            signal.signal(s, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
        problems = res.cleanup()
        for s, h in old.items():
            signal.signal(s, h)
    for p in problems:
        print(f"hakmem-lab paging: cleanup: {p}", file=sys.stderr)
    failed = any("error" in r["result"] for r in sweep) or (paging is not None and "error" in paging)
    if failed and status == "complete":
        status = "complete, some runs failed"
    path = write_report(out_dir, args, res, sweep, paging, status, problems)
    print(f"report: {path}")
    if status.startswith("partial: interrupted"):
        return EXIT_INTERRUPTED
    return 1 if failed or problems or status != "complete" else 0
