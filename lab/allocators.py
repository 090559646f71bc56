"""allocators.py — which allocators the lab can run and how it proves each run used the right one.

Known allocators: hakmem (build/libhakmem.so), glibc (no preload), the Debian peers jemalloc, mimalloc and
tcmalloc, and hakmem-secure (build/libhakmem-secure.so, only when asked for by name). `--alloc NAME=PATH`
adds any other shared object. Every workload prints `allocator-check: <path of the object providing
malloc>`; `verify` compares that with the allocator the run was meant to use."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib")

# name, Debian package, file names to look for (first found wins)
PEERS = (
    ("jemalloc", "libjemalloc2", ("libjemalloc.so.2",)),
    ("mimalloc", "libmimalloc2.0", ("libmimalloc.so.2", "libmimalloc.so.2.0")),
    ("tcmalloc", "libtcmalloc-minimal4", ("libtcmalloc_minimal.so.4",)),
)

# allocators used when none are named: everything found except these
OPT_IN = ("hakmem-secure",)

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")

# LD_PRELOAD splits its value at spaces and colons: a library whose path holds one is preloaded through a
# symbolic link in a directory of this process (made on first need, removed at exit).
_PRELOAD_SEPARATORS = (" ", ":", "\t", "\n")
_links: dict[str, str] = {}  # library path -> its link


def preload_path(path: str) -> str:
    """A path to `path` that LD_PRELOAD can carry: itself, or a link to it in a directory without
    separators when its own path has one."""
    if not any(c in path for c in _PRELOAD_SEPARATORS):
        return path
    if path not in _links:
        folder = tempfile.mkdtemp(prefix="hakmem-lab-preload-")
        atexit.register(shutil.rmtree, folder, True)
        link = os.path.join(folder, re.sub(r"[^A-Za-z0-9_.+-]", "_", os.path.basename(path)))
        os.symlink(path, link)
        _links[path] = link
    return _links[path]


def is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


class AllocatorError(Exception):
    """A bad --alloc or --allocs argument."""


class AllocatorMismatch(Exception):
    """A run was not served by the allocator it was meant to use."""


@dataclass(frozen=True)
class Allocator:
    name: str
    path: str | None  # None: glibc, nothing preloaded
    package: str | None = None  # Debian package providing it, if any

    def env(self) -> dict[str, str]:
        return {"LD_PRELOAD": preload_path(self.path)} if self.path else {}

    def matches(self, check: str | None) -> bool:
        """True when `check` (the allocator-check path) names this allocator's shared object."""
        if not check or check == "unknown":
            return False
        if self.path is None:
            base = os.path.basename(os.path.realpath(check))
            return base.startswith("libc.so") or re.fullmatch(r"libc-[0-9.]+\.so", base) is not None
        return os.path.realpath(check) == os.path.realpath(self.path)

    def describe(self) -> str:
        return self.path if self.path else "glibc malloc (no LD_PRELOAD)"


@dataclass
class Missing:
    name: str
    reason: str  # what is wrong and the command that fixes it


@dataclass
class Discovery:
    found: list[Allocator] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)

    def names(self) -> list[str]:
        return [a.name for a in self.found]


def parse_alloc_spec(spec: str) -> Allocator:
    """`NAME=PATH` from --alloc: the file must exist; glibc is reserved."""
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise AllocatorError(f"--alloc wants NAME=PATH, got {spec!r}")
    if not NAME_RE.match(name):
        raise AllocatorError(f"allocator name {name!r}: use letters, digits and _.+-")
    if name == "glibc":
        raise AllocatorError("the name glibc is reserved for the system allocator")
    if not os.path.isfile(path):
        raise AllocatorError(f"--alloc {name}: no such file {path}")
    if not is_elf(path):
        raise AllocatorError(f"--alloc {name}: {path} is not a shared object (no ELF header)")
    return Allocator(name, os.path.abspath(path))


def _find(files: tuple[str, ...], lib_dirs: tuple[str, ...]) -> str | None:
    for d in lib_dirs:
        for f in files:
            p = os.path.join(d, f)
            if os.path.exists(p):
                return p
    return None


def discover(root: Path, lib_dirs: tuple[str, ...] = LIB_DIRS, extra: tuple[str, ...] = ()) -> Discovery:
    """Find our build, glibc and the peers; a missing one is listed with the command that provides it."""
    d = Discovery()
    for name, lib in (("hakmem", "libhakmem.so"), ("hakmem-secure", "libhakmem-secure.so")):
        path = root / "build" / lib
        if path.is_file():
            d.found.append(Allocator(name, str(path)))
        else:
            d.missing.append(Missing(name, f"{path} not built: run `make lib` in {root}"))
    d.found.append(Allocator("glibc", None, "libc6"))
    for name, package, files in PEERS:
        path = _find(files, lib_dirs)
        if path:
            d.found.append(Allocator(name, path, package))
        else:
            d.missing.append(Missing(name, f"not installed: `apt-get install {package}`"))
    for spec in extra:
        a = parse_alloc_spec(spec)
        d.found = [x for x in d.found if x.name != a.name] + [a]
        d.missing = [m for m in d.missing if m.name != a.name]
    return d


def select(d: Discovery, names: list[str] | None, extra: tuple[str, ...] = ()) -> list[Allocator]:
    """The allocators to run: the named ones (in that order), or every found one but the opt-in ones.
    Allocators given with --alloc are always included. A named allocator that is missing is an error."""
    by_name = {a.name: a for a in d.found}
    extra_names = [parse_alloc_spec(s).name for s in extra]
    for what, listed in (("--alloc", extra_names), ("--allocs", names or [])):
        repeated = sorted({n for n in listed if listed.count(n) > 1})
        if repeated:  # one key per allocator: a second entry would merge two series into one
            raise AllocatorError(f"{what} names {', '.join(repeated)} more than once")
    if names:
        chosen = []
        for n in names + [e for e in extra_names if e not in names]:
            if n in by_name:
                chosen.append(by_name[n])
                continue
            why = next((m.reason for m in d.missing if m.name == n), None)
            if why:
                raise AllocatorError(f"allocator {n}: {why}")
            raise AllocatorError(f"unknown allocator {n!r}; known: {', '.join(by_name)}")
        return chosen
    return [a for a in d.found if a.name not in OPT_IN or a.name in extra_names]


def verify(a: Allocator, check: str | None, command: str, stderr: str = "") -> None:
    """Raise AllocatorMismatch unless the run's allocator-check names allocator `a`; the run's stderr
    (where the dynamic loader says why a preload failed) goes into the message."""
    if a.matches(check):
        return
    said = stderr.strip()[-600:]
    raise AllocatorMismatch(
        f"allocator mismatch: the run meant for {a.name} ({a.describe()}) got malloc from "
        f"{check or 'nowhere (no allocator-check line)'}\n  command: {command}"
        + (f"\n  its stderr: {said}" if said else "")
    )


def package_versions(packages: list[str]) -> dict[str, str]:
    """Installed versions of Debian packages (dpkg-query), missing ones left out."""
    if not packages:
        return {}
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Package} ${Version}\\n", *packages],
            capture_output=True, text=True, timeout=30, check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    versions = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2:
            versions[parts[0].split(":")[0]] = parts[1]
    return versions
