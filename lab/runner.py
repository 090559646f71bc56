"""runner.py — runs one workload process under one allocator (LD_PRELOAD) and measures it: wall time,
user and sys time, peak RSS and page faults from os.wait4's rusage, the workload's own RESULT figures, its
PROGRESS lines, its latency histogram and, on request, VmRSS sampled from /proc/<pid>/status. Every run is
checked against the intended allocator. A separate `strace -f -c` pass counts memory system calls; traced
runs are never timed."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lab.allocators import Allocator, AllocatorMismatch, verify
from lab.parse import parse_output, parse_strace_summary
from lab.workloads import Workload

SYSCALLS = ("mmap", "munmap", "mremap", "madvise", "mprotect", "mincore", "brk", "futex")


@dataclass
class Spec:
    """One workload command under one allocator."""

    workload: Workload
    allocator: Allocator
    args: list[str]
    threads: int | None = None
    flags: list[str] = field(default_factory=list)  # harness flags: -l, -H, -d SEC, -p MS
    env: dict[str, str] = field(default_factory=dict)  # extra environment (e.g. an option under A/B)
    unset: tuple[str, ...] = ()  # variables removed from the environment

    def argv(self, root: Path) -> list[str]:
        argv = [str(self.workload.binary(root))]
        if self.threads is not None:
            argv += ["-t", str(self.threads)]
        return argv + self.flags + self.args

    def full_env(self) -> dict[str, str]:
        """The variables this run sets on top of the (cleaned) environment."""
        return {**self.allocator.env(), **self.env}

    def shell(self, root: Path) -> str:
        """The command as one would type it in a shell."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.full_env().items())
        unset = " ".join(f"-u {k}" for k in self.unset)
        prefix = f"env {unset} " if unset else ""
        return prefix + (env + " " if env else "") + shlex.join(self.argv(root))


@dataclass
class Run:
    workload: str
    allocator: str
    command: str
    threads: int | None
    env: dict[str, str]
    returncode: int = 0
    wall_s: float = 0.0
    user_s: float = 0.0
    sys_s: float = 0.0
    maxrss_kb: int | None = None  # the workload's own VmHWM; None when it printed none (rusage's ru_maxrss
    # is no substitute: it counts the launcher's peak too)
    rusage_maxrss_kb: int = 0
    minflt: int = 0
    majflt: int = 0
    results: dict = field(default_factory=dict)
    progress: list = field(default_factory=list)
    hist: list = field(default_factory=list)
    rss_samples: list = field(default_factory=list)  # (seconds since start, VmRSS KiB)
    allocator_check: str | None = None
    error: str | None = None
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None

    def value(self, key: str) -> float | None:
        v = self.results.get(key)
        return float(v) if isinstance(v, (int, float)) else None

    def to_dict(self) -> dict:
        return asdict(self)


# Variables that change which allocator runs or how it behaves: each run gets only those the lab sets
# itself (the allocator's LD_PRELOAD, an A/B's variable), so a report describes what ran.
TUNING_PREFIXES = ("HAKMEM_", "MALLOC_", "MIMALLOC_", "TCMALLOC_", "JEMALLOC_", "JE_MALLOC_")
TUNING_NAMES = ("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GLIBC_TUNABLES")


def is_tuning(name: str) -> bool:
    """Whether an environment variable preloads or tunes an allocator (glibc's MALLOC_* included)."""
    return name in TUNING_NAMES or name.startswith(TUNING_PREFIXES)


def inherited_tuning(environ: dict[str, str] | None = None) -> list[str]:
    """The allocator variables set in the caller's environment, which every run leaves out."""
    return sorted(k for k in (os.environ if environ is None else environ) if is_tuning(k))


def clean_environ(unset: tuple[str, ...] = ()) -> dict[str, str]:
    """The parent's environment without any preload or allocator tuning inherited from the caller."""
    return {k: v for k, v in os.environ.items() if not is_tuning(k) and k not in unset}


def _read_vmrss(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _describe_status(code: int) -> str:
    return f"killed by signal {-code}" if code < 0 else f"exit status {code}"


class _Child:
    """Kills a child that os.wait4 reaps. Popen.kill is not used: it polls first, and a poll that reaps a
    child which has just exited leaves the os.wait4 that follows with no child to wait for. The kill goes
    through a pidfd taken while the child could not yet have been reaped, so a kill that comes late (a
    Ctrl-C or the watchdog just after the reaping) cannot reach another process given the same pid."""

    def __init__(self, pid: int):
        self.pid = pid
        try:
            self.pidfd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):  # kernels before 5.3
            self.pidfd = None

    def kill(self) -> None:
        try:
            if self.pidfd is not None:
                try:
                    signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
                    return
                except ProcessLookupError:
                    return
                except OSError:  # pidfd_send_signal refused (a seccomp filter): the plain kill below
                    pass
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def reap_after_interrupt(self) -> None:
        """Kill and reap the child after an exception; an interrupted os.wait4 may have reaped it already."""
        self.kill()
        try:
            os.wait4(self.pid, 0)
        except ChildProcessError:
            pass

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def run(spec: Spec, root: Path, timeout: float | None = None, rss_interval: float | None = None,
        on_line: Callable[[str], None] | None = None) -> Run:
    """Run the spec once, timed. Raises AllocatorMismatch when the process did not use spec.allocator;
    a crash, a bad exit status or a timeout is recorded in Run.error."""
    argv = spec.argv(root)
    env = {**clean_environ(spec.unset), **spec.full_env()}
    result = Run(spec.workload.name, spec.allocator.name, spec.shell(root), spec.threads, spec.full_env())
    with tempfile.TemporaryFile(mode="w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env=env, text=True, bufsize=1)
        child = _Child(proc.pid)
        timed_out = threading.Event()
        done = threading.Event()
        watchdog = None
        sampler = None
        lines = []
        try:  # from here on, whatever happens, the child is killed and reaped and its pidfd closed
            if timeout is not None:
                def expire() -> None:
                    timed_out.set()
                    child.kill()
                watchdog = threading.Timer(timeout, expire)
                watchdog.daemon = True
                watchdog.start()
            if rss_interval:
                def sample() -> None:
                    while not done.wait(rss_interval):
                        kb = _read_vmrss(proc.pid)
                        if kb is not None:
                            result.rss_samples.append((round(time.perf_counter() - start, 3), kb))
                sampler = threading.Thread(target=sample, daemon=True)
                sampler.start()
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if on_line is not None:
                    on_line(line)
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            child.reap_after_interrupt()
            proc.returncode = -9
            raise
        finally:
            try:
                done.set()
                if watchdog is not None:
                    watchdog.cancel()
                    if watchdog.is_alive():
                        watchdog.join()  # a kill under way finishes before its pidfd is closed
                if sampler is not None:
                    sampler.join()
            finally:
                child.close()
        result.wall_s = time.perf_counter() - start
        proc.returncode = result.returncode = os.waitstatus_to_exitcode(status)
        proc.stdout.close()
        err.seek(0)
        result.stderr_tail = err.read()[-8000:]
    result.user_s, result.sys_s = usage.ru_utime, usage.ru_stime
    result.rusage_maxrss_kb, result.minflt, result.majflt = usage.ru_maxrss, usage.ru_minflt, usage.ru_majflt
    try:
        out = parse_output("".join(lines))
    except ValueError as e:
        result.error = f"unparsable output: {e}"
        return result
    result.results, result.progress, result.hist = out.results, out.progress, out.hist
    result.allocator_check = out.allocator_check
    hwm = out.results.get("peak_rss_kb")
    result.maxrss_kb = int(hwm) if isinstance(hwm, int) else None  # never ru_maxrss: the launcher's own peak
    if timed_out.is_set():
        result.error = f"timed out after {timeout:g} s"
    elif result.returncode != 0:
        result.error = f"{_describe_status(result.returncode)}: {result.stderr_tail.strip()[-300:]}"
    if out.allocator_check is not None or result.returncode == 0:
        try:
            verify(spec.allocator, out.allocator_check, result.command, result.stderr_tail)
        except AllocatorMismatch as e:  # the run goes with the exception, so that its cell counts it as failed
            result.error = f"allocator mismatch: malloc from {out.allocator_check or 'nowhere'}"
            e.run = result
            raise
    if result.ok and "ops" not in out.results:
        result.error = "no RESULT line"
    return result


def error_kind(error: str) -> str:
    """A run's error without the stderr it quotes: "timed out after 1.5 s", "killed by signal 11",
    "exit status 1", "unparsable output", "no RESULT line", "allocator mismatch"."""
    return error.split(":", 1)[0].strip()


def cell_failure(runs: list[Run], good: Callable[[Run], bool]) -> dict | None:
    """How the runs of one cell (a workload under an allocator, a value, a thread count) failed, or None
    when every run is good. One failed run voids the whole cell: a median of the runs that happened to
    finish would rank an allocator that hangs or crashes now and then on its lucky runs. The dict says how
    many runs failed of how many, and why (error kind -> count)."""
    bad = [r for r in runs if not (r.ok and good(r))]
    if not bad:
        return None
    errors: dict[str, int] = {}
    for r in bad:
        kind = error_kind(r.error) if r.error else "no figure in its output"
        errors[kind] = errors.get(kind, 0) + 1
    return {"failed": True, "failed_runs": len(bad), "of_runs": len(runs), "errors": errors}


def peak_rss_kb(runs: list[Run]) -> int | None:
    """The largest peak RSS of the runs, or None when any run printed no `peak_rss_kb`: its peak is
    unknown and may have been the largest."""
    if not runs or any(r.maxrss_kb is None for r in runs):
        return None
    return max(r.maxrss_kb for r in runs)


RSS_MISSING = ("n/a: the workload printed no `peak_rss_kb` (rusage's ru_maxrss is not used in its place: "
               "it is the launcher's peak)")


def strace_path() -> str | None:
    return shutil.which("strace")


def strace_command(spec: Spec, root: Path, out_file: str) -> list[str]:
    """strace follows threads (-f), counts (-c) only the memory system calls, and passes the allocator and
    options to the traced program alone (-E), so strace itself runs on plain glibc."""
    cmd = [strace_path() or "strace", "-f", "-c", "-qq", "--seccomp-bpf", "-e", "trace=" + ",".join(SYSCALLS),
           "-o", out_file]
    for k in spec.unset:
        cmd += ["-E", k]
    for k, v in spec.full_env().items():
        cmd += ["-E", f"{k}={v}"]
    return cmd + ["--", *spec.argv(root)]


@dataclass
class SyscallCount:
    calls: dict[str, int]
    ops: int
    command: str

    @property
    def total(self) -> int:
        return sum(self.calls.get(s, 0) for s in SYSCALLS)

    def per_op(self) -> float | None:
        return self.total / self.ops if self.ops else None


def count_syscalls(spec: Spec, root: Path, timeout: float | None = None) -> SyscallCount | str:
    """Run the spec under strace; the counts, or a string saying why there are none."""
    if strace_path() is None:
        return "strace not installed (`apt-get install strace`)"
    with tempfile.TemporaryDirectory() as tmp:
        out_file = os.path.join(tmp, "strace.txt")
        cmd = strace_command(spec, root, out_file)
        # strace and the workload it traces share a process group of their own: a timeout or Ctrl-C kills
        # both (killing strace alone left the workload running, detached, through the timed runs after it)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=clean_environ(spec.unset), start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except BaseException as e:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            if isinstance(e, subprocess.TimeoutExpired):
                return f"strace run timed out after {timeout:g} s"
            raise
        shown = shlex.join(cmd).replace(out_file, "strace.txt")
        out = parse_output(stdout)
        if proc.returncode != 0:
            return f"strace run failed ({_describe_status(proc.returncode)}): {stderr.strip()[-300:]}"
        verify(spec.allocator, out.allocator_check, shown, stderr)
        try:
            with open(out_file, encoding="utf-8", errors="replace") as f:
                calls = parse_strace_summary(f.read())
        except OSError as e:
            return f"no strace summary: {e}"
    ops = out.results.get("ops")
    return SyscallCount({s: calls.get(s, 0) for s in SYSCALLS}, int(ops) if isinstance(ops, int) else 0, shown)
