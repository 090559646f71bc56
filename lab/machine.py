"""machine.py — describes the machine a report was measured on: CPU model, cores (and how many this
process may run on, which `taskset` narrows), RAM, kernel, glibc, transparent huge pages, compiler,
strace, the versions of the peer allocator packages (dpkg-query) and the hakmem commit measured."""

from __future__ import annotations

import os
import platform
import subprocess

from lab.allocators import PEERS, package_versions


def _first_line(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if out.returncode == 0 and text else None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_gib() -> float | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / (1 << 20), 1)
    except (OSError, ValueError):
        pass
    return None


def _thp() -> str | None:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


def _hakmem_commit(root: str | os.PathLike | None) -> str | None:
    """The checked-out commit of the hakmem tree, with " (modified)" when it has uncommitted changes outside
    docs/ (where reports are written: one report saved there must not mark the next run)."""
    if root is None:
        return None
    head = _first_line(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"])
    if head is None:
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--",
                              ".", ":(exclude)docs"],
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return head
    return head + (" (modified)" if out.returncode == 0 and out.stdout.strip() else "")


def describe(root: str | os.PathLike | None = None) -> dict[str, object]:
    """A dict of facts; absent ones are None. `root` is the hakmem tree whose commit is recorded."""
    glibc = os.confstr("CS_GNU_LIBC_VERSION") if "CS_GNU_LIBC_VERSION" in os.confstr_names else None
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "hakmem_commit": _hakmem_commit(root),
        "ram_gib": _mem_total_gib(),
        "kernel": platform.release(),
        "glibc": glibc,
        "thp": _thp(),
        "compiler": _first_line(["cc", "--version"]),
        "strace": _first_line(["strace", "-V"]),
        "python": platform.python_version(),
        "packages": package_versions([p for _, p, _ in PEERS] + ["libc6"]),
    }
