"""cli.py — the `hakmem-lab` command (also `python3 -m lab`): parses the sub-command and runs it.
Sub-commands: compare, quick, paired, scaling, ab, soak, latency, paging (lab/paging.py), list.
Exit status: 0 success, 1 some runs failed, 2 bad usage, 3 a run used the wrong allocator, 130 interrupted
by Ctrl-C, SIGTERM or SIGHUP (a partial report is still written)."""

from __future__ import annotations

import argparse
import signal
import sys

from lab import __version__, ab, compare, latency, paging, scaling, soak
from lab import workloads as wl
from lab.allocators import AllocatorError, discover
from lab.runner import inherited_tuning
from lab.session import UsageError, find_root, raise_interrupt


def list_things(args: argparse.Namespace) -> int:
    root = find_root(args.root)
    try:
        d = discover(root, extra=tuple(args.alloc))
    except AllocatorError as e:
        raise UsageError(str(e)) from None
    print("allocators:")
    for a in d.found:
        print(f"  {a.name:<14} {a.describe()}")
    for m in d.missing:
        print(f"  {m.name:<14} MISSING: {m.reason}")
    print("workloads:")
    for w in wl.WORKLOADS.values():
        print(f"  {w.name:<14} {'threaded ' if w.threaded else ''}{w.summary}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hakmem-lab", description="Benchmark lab of hakmem: workloads under "
                                "hakmem, glibc, jemalloc, mimalloc and tcmalloc, with reports in results/.")
    p.add_argument("--version", action="version", version=f"hakmem-lab {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    compare.add_parsers(sub)
    compare.add_paired_parser(sub)
    scaling.add_parser(sub)
    ab.add_parser(sub)
    soak.add_parser(sub)
    latency.add_parser(sub)
    paging.add_parser(sub)
    ls = sub.add_parser("list", help="the allocators found and the workloads")
    ls.add_argument("--root")
    ls.add_argument("--alloc", action="append", default=[], metavar="NAME=PATH")
    ls.set_defaults(func=list_things)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    dropped = inherited_tuning()
    if dropped and args.command != "list":
        print(f"hakmem-lab: not passing {', '.join(dropped)} from your environment to the runs: each allocator "
              "runs with its defaults (ab --env varies one hakmem option)", file=sys.stderr)
    if args.command != "paging":  # paging handles its own signals: it must undo the swap file and cgroup
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, raise_interrupt)
    try:
        return int(args.func(args) or 0)
    except UsageError as e:
        print(f"hakmem-lab: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
