"""session.py — what every experiment shares: the command-line options common to all sub-commands, the
repository root, the bench programs (built on demand), the chosen allocators, the output directory, the
progress bar, the log of exact commands, and the handling of Ctrl-C (keep what finished, mark the report
partial) and of an allocator mismatch (stop, say so loudly)."""

from __future__ import annotations

import argparse
import datetime as dt
import math
import re
import shlex
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from lab import allocators as al
from lab import machine, report, runner
from lab.progress import Progress
from lab.workloads import PRESETS, WORKLOADS

EXIT_FAILED_RUNS = 1
EXIT_MISMATCH = 3
EXIT_INTERRUPTED = 130


def add_common_options(p: argparse.ArgumentParser, reps: int | None = 3, size: str = "standard") -> None:
    """Options of every experiment; reps=None leaves out --reps (for one-run experiments)."""
    p.add_argument("--allocs", help="comma-separated allocator names (default: every one found, "
                                    "hakmem-secure only when named)")
    p.add_argument("--alloc", action="append", default=[], metavar="NAME=PATH",
                   help="add an allocator: a shared object to LD_PRELOAD (repeatable)")
    p.add_argument("--size", choices=PRESETS, default=size, help=f"workload size preset (default {size})")
    if reps is not None:
        p.add_argument("--reps", type=int, default=reps, help=f"timed repetitions, interleaved (default {reps})")
    p.add_argument("--out", help="output directory (default results/<date>-<command>)")
    p.add_argument("--root", help="hakmem repository (default: found from the current directory)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds before one run is killed (default 600)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def find_root(given: str | None) -> Path:
    """The repository: --root, else the first directory upwards from here with bench/Makefile, else the
    directory holding this package."""
    if given:
        return Path(given).resolve()
    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        if (d / "bench" / "Makefile").is_file() and (d / "lab").is_dir():
            return d
    return Path(__file__).resolve().parents[1]


def ensure_built(root: Path, libraries: bool) -> list[str]:
    """Bring the bench programs (make -C bench) and, when `libraries`, hakmem's two libraries up to date,
    so that a report does not record the checked-out commit while measuring an older build; make does
    nothing when they are. Where make is missing or fails, the builds already there are measured and
    the returned warning (also printed) goes into the report; missing bench programs stop the lab."""
    steps = []
    if libraries and (root / "Makefile").is_file():
        steps.append(["make", "-s", "-C", str(root), "build/libhakmem.so", "build/libhakmem-secure.so"])
    if (root / "bench" / "Makefile").is_file():
        steps.append(["make", "-s", "-C", str(root / "bench")])
    warnings = []
    for step in steps:
        try:
            if subprocess.run([*step, "-q"], capture_output=True, check=False).returncode == 0:
                continue  # up to date
            print(f"hakmem-lab: building: {shlex.join(step)}", file=sys.stderr)
            proc = subprocess.run(step, capture_output=True, text=True, check=False)
            if proc.returncode == 0:
                continue
            why = f"`{shlex.join(step)}` failed: {proc.stderr.strip()[-500:]}"
        except OSError as e:
            why = f"cannot run make: {e.strerror}"
        warnings.append(f"{why}; the builds already in build/ are measured and may be older than the code")
        print(f"hakmem-lab: {warnings[-1]}", file=sys.stderr)
    missing = [w.name for w in WORKLOADS.values() if not w.binary(root).is_file()]
    if missing and not (root / "bench").is_dir():  # an installed hakmem-lab run outside a checkout
        raise SystemExit(f"hakmem-lab: bench programs missing from {root / 'build' / 'bench'}, and {root} is not "
                         "a hakmem checkout: run the lab inside one, or give --root PATH-OF-A-CHECKOUT")
    if missing:
        raise SystemExit(f"hakmem-lab: bench programs missing from {root / 'build' / 'bench'}: {', '.join(missing)}"
                         f" (build them with `make -C {root / 'bench'}`)")
    return warnings


_signal_received: str | None = None


def raise_interrupt(signum: int, frame: object) -> None:
    """Handler of SIGTERM and SIGHUP (cli.main): end the run as Ctrl-C does, so that the workload running
    is killed and the report is written with what finished."""
    global _signal_received
    _signal_received = signal.Signals(signum).name
    raise KeyboardInterrupt


def interruption() -> str:
    return _signal_received or "Ctrl-C"


class UsageError(Exception):
    """A bad command line (an unknown name, a value out of range): cli.main prints it and exits 2."""


def check_numbers(args: argparse.Namespace, *names: str, at_least_zero: tuple[str, ...] = ()) -> None:
    """Raise UsageError unless each option of `names` that was given as a number is finite and above 0,
    and each of `at_least_zero` finite and 0 or more."""
    for name in (*names, *at_least_zero):
        value = getattr(args, name, None)
        least_zero = name in at_least_zero
        if isinstance(value, (int, float)) and not (value >= 0 if least_zero else value > 0):
            raise UsageError(f"--{name.replace('_', '-')} must be {'at least 0' if least_zero else 'above 0'}, "
                             f"got {value}")
        if isinstance(value, float) and not math.isfinite(value):  # inf broke the watchdog and strace's timeout
            raise UsageError(f"--{name.replace('_', '-')} must be a finite number, got {value}")


def prepare_out_dir(out: Path) -> None:
    """Make the report's folder before anything runs and check that it takes files: a folder that cannot
    be written used to lose the whole run at its end. A folder that already holds a report is reused
    (its files are replaced, others stay), with a warning."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write-test-"):
            pass
    except OSError as e:
        raise UsageError(f"--out {out}: cannot write there ({e.strerror or e})") from None
    if (out / "report.md").exists():
        print(f"hakmem-lab: {out} already holds a report; its files will be replaced", file=sys.stderr)


def missing_fix(reason: str) -> str:
    """The command that provides a missing allocator, from its reason ("not installed: `apt-get install
    libmimalloc2.0`" -> "apt-get install libmimalloc2.0"), else the reason itself."""
    found = re.search(r"`([^`]+)`", reason)
    return found.group(1) if found else reason


def missing_status(missing: list[al.Missing]) -> str:
    """The status suffix naming the allocators a default run skipped: " (peers missing: mimalloc —
    apt-get install libmimalloc2.0)", "" when none were."""
    if not missing:
        return ""
    return " (peers missing: " + "; ".join(f"{m.name} — {missing_fix(m.reason)}" for m in missing) + ")"


class Session:
    def __init__(self, name: str, args: argparse.Namespace):
        self.name = name
        self.args = args
        self.root = find_root(args.root)
        self.started = dt.datetime.now()
        stamp = self.started.strftime("%Y-%m-%d-%H%M%S")
        self.out_dir = Path(args.out) if args.out else self.root / "results" / f"{stamp}-{name}"
        self.lab_command = "python3 -m lab " + shlex.join(sys.argv[1:])
        if getattr(args, "reps", 1) < 1:
            raise UsageError("--reps must be at least 1")
        check_numbers(args, "timeout", "threads")
        names = [n for n in (args.allocs or "").split(",") if n] or None
        self.notes: list[str] = ensure_built(self.root, names is None or any(n.startswith("hakmem") for n in names))
        try:
            self.discovery = al.discover(self.root, extra=tuple(args.alloc))
            self.allocators = al.select(self.discovery, names, tuple(args.alloc))
        except al.AllocatorError as e:
            raise UsageError(str(e)) from None
        prepare_out_dir(self.out_dir)
        self.machine = machine.describe(self.root)
        self.commands: list[str] = []
        self.runs: list[runner.Run] = []
        self.failures: list[runner.Run] = []
        self.status = "complete"
        self.exit_code = 0
        self.bar: Progress | None = None
        # Allocators a run of the default field skips because they are missing: named in the status line,
        # the report's summary and data.json, so that ranks among the others are not read as a win over
        # the whole field. (A named allocator that is missing is a usage error; an opt-in one is no loss.)
        self.missing: list[al.Missing] = [m for m in self.discovery.missing
                                          if names is None and m.name not in al.OPT_IN]
        self.missing_peers: list[dict] = [{"name": m.name, "reason": m.reason} for m in self.missing]
        for m in self.missing:
            print(f"hakmem-lab: skipping {m.name}: {m.reason}", file=sys.stderr)

    # ---- running ------------------------------------------------------------------------------------

    def start_progress(self, total: float, unit: str = "run") -> None:
        self.bar = Progress(total, self.name, enabled=not self.args.no_progress, unit=unit)

    def _log(self, command: str) -> None:
        if command not in self.commands:
            self.commands.append(command)

    def run(self, spec: runner.Spec, advance: float = 1, keep: Callable[[runner.Run], object] | None = None,
            **kw) -> runner.Run:
        """One timed run, logged and counted; a failed run is kept and reported, not raised. `keep` gets
        the run too, a run that used the wrong allocator included, before that mismatch ends the
        experiment: the experiment's own tables then count it as failed."""
        if self.bar:
            self.bar.note(f"{spec.workload.name} @ {spec.allocator.name}")
        try:
            r = runner.run(spec, self.root, timeout=self.args.timeout, **kw)
        except al.AllocatorMismatch as e:
            bad = getattr(e, "run", None)
            if bad is not None:
                self._log(bad.command)
                self.runs.append(bad)
                self.failures.append(bad)
                if keep is not None:
                    keep(bad)
            raise
        self._log(r.command)
        self.runs.append(r)
        if keep is not None:
            keep(r)
        if not r.ok:
            self.failures.append(r)
            self.exit_code = EXIT_FAILED_RUNS
            msg = f"FAILED: {r.workload} under {r.allocator}: {r.error}\n  command: {r.command}"
            (self.bar.write if self.bar else print)(msg)
        if self.bar:
            self.bar.advance(advance)
        return r

    def strace(self, spec: runner.Spec, advance: float = 1) -> runner.SyscallCount | str:
        """Counted system calls of one untimed traced run, or why there are none."""
        if self.bar:
            self.bar.note(f"strace {spec.workload.name} @ {spec.allocator.name}")
        res = runner.count_syscalls(spec, self.root, timeout=self.args.timeout)
        if isinstance(res, runner.SyscallCount):
            self._log(res.command)
        elif "system calls: " + res not in self.notes:
            self.notes.append("system calls: " + res)
            msg = f"hakmem-lab: no system-call counts: {res}"
            (self.bar.write if self.bar else print)(msg)
        if self.bar:
            self.bar.advance(advance)
        return res

    @contextmanager
    def measuring(self) -> Iterator[None]:
        """Wrap the measurement loop: Ctrl-C or an allocator mismatch ends it; the report still gets
        written with what finished."""
        try:
            yield
        except KeyboardInterrupt:
            self.status = (f"PARTIAL — interrupted ({interruption()}) after {len(self.runs)} timed runs; "
                           "the figures below use what finished")
            self.exit_code = EXIT_INTERRUPTED
        except al.AllocatorMismatch as e:
            self.status = f"ABORTED — {e}"
            self.exit_code = EXIT_MISMATCH
            print(f"\nhakmem-lab: {e}", file=sys.stderr)
        finally:
            if self.bar:
                self.bar.close()
        if self.failures and self.exit_code == 0:
            self.exit_code = EXIT_FAILED_RUNS
        if self.failures and self.status == "complete":
            self.status = f"complete, with {len(self.failures)} failed runs (see Failures)"
        self.status += missing_status(self.missing)

    # ---- writing ------------------------------------------------------------------------------------

    def failures_section(self) -> str:
        if not self.failures:
            return ""
        rows = [(f.workload, f.allocator, f.error, f"`{f.command}`") for f in self.failures]
        return "## Failures\n\n" + report.table(("workload", "allocator", "error", "command"), rows, right=())

    def write(self, title: str, sections: list[str], summary: dict, preamble: str = "") -> Path:
        versions = self.machine.get("packages") or {}
        head = [preamble] if preamble else []
        sections = head + sections + [
            self.failures_section(),
            report.allocators_section(self.allocators, self.discovery.missing, versions),
            report.machine_section(self.machine),
            report.commands_section(self.lab_command, self.commands, self.notes),
        ]
        data = {
            "experiment": self.name,
            "status": self.status,
            "started": self.started.isoformat(timespec="seconds"),
            "finished": dt.datetime.now().isoformat(timespec="seconds"),
            "lab_command": self.lab_command,
            "machine": self.machine,
            "allocators": [{"name": a.name, "path": a.path, "package": a.package} for a in self.allocators],
            "missing": [{"name": m.name, "reason": m.reason} for m in self.discovery.missing],
            "missing_peers": self.missing_peers,  # those of `missing` this run would have measured
            "commands": self.commands,
            "notes": self.notes,
            "summary": summary,
            "runs": [r.to_dict() for r in self.runs],
        }
        stamp = self.started.strftime("%Y-%m-%d %H:%M")
        path = report.write(self.out_dir, f"hakmem lab — {title} ({stamp})", self.status, sections, data)
        print(f"report: {path}", file=sys.stderr)
        return path
