"""workloads.py — the registry of bench/ workload programs: what each measures, its positional arguments
for each run size (tiny for tests, quick for `make bench`, standard, full), which figure ranks it, and how
to point it at one block size (for `ab`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

PRESETS = ("tiny", "quick", "standard", "full")


@dataclass(frozen=True)
class Workload:
    name: str
    summary: str
    presets: dict[str, tuple[str, ...]]
    threaded: bool = False
    metric: str = "ops_per_sec"  # the RESULT key that ranks allocators
    higher_is_better: bool = True
    unit: str = "ops/s"
    size_args: tuple[int, ...] = ()  # positional slots set to the block size by `ab --sizes`
    sized_results: bool = False  # prints ns_per_op_<size> per size
    fixed_args: dict[int, str] = field(default_factory=dict)  # defaults for slots before size_args
    ranked: bool = True  # False: no malloc in it (the floor), so allocators are not ranked on it
    min_threads: int = 1  # fewest threads the program really runs (prodcons: a producer and a consumer)

    def args(self, preset: str, size: int | None = None) -> list[str]:
        if preset not in self.presets:
            raise ValueError(f"unknown size preset {preset!r}; use one of {', '.join(PRESETS)}")
        args = list(self.presets[preset])
        if size is None:
            return args
        if not self.size_args:
            raise ValueError(f"workload {self.name} has no block-size argument")
        need = max(self.size_args) + 1
        for i in range(len(args), need):
            args.append(self.fixed_args.get(i, "0"))
        for i in self.size_args:
            args[i] = str(size)
        return args

    def binary(self, root: Path) -> Path:
        return root / "build" / "bench" / self.name


def _p(tiny: str, quick: str, standard: str, full: str, *rest: str) -> dict[str, tuple[str, ...]]:
    """Presets that differ in their first argument only."""
    return {k: (v, *rest) for k, v in zip(PRESETS, (tiny, quick, standard, full))}


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("random_mixed", "1 thread, random slot of 8192: free if full else malloc 16..1040 B",
                 _p("200K", "4M", "20M", "100M"), size_args=(3, 4),
                 fixed_args={1: "8192", 2: "42"}),
        Workload("larson",
                 "larson-style server: 8..1000 B replaced at random, objects handed to a new thread each round",
                 {"tiny": ("4", "20000"), "quick": ("10", "100000"), "standard": ("80", "200000"),
                  "full": ("200", "400000")}, threaded=True),
        Workload("tiny_hot", "batches of 64 blocks of one size, per size class 8..1024 B",
                 _p("64K", "500K", "4M", "20M"), size_args=(2,), sized_results=True, fixed_args={1: "64"}),
        Workload("mid_large_mt", "threads replacing 8..32 KiB blocks in private working sets",
                 _p("50K", "500K", "8M", "32M"), threaded=True),
        Workload("vm", "malloc 2 MiB, touch every page, free; latency per operation",
                 _p("200", "5000", "20000", "100000"), metric="ns_per_op", higher_is_better=False, unit="ns/op"),
        Workload("prodcons", "producers malloc, consumers free (every free remote)",
                 _p("100K", "1M", "4M", "16M"), threaded=True, min_threads=2),
        Workload("false_sharing", "small objects from one thread written by others (cache-scratch)",
                 _p("1000", "20000", "100000", "500000"), threaded=True),
        Workload("big", "5..25 MiB blocks, at most 20 live",
                 _p("50", "400", "2000", "10000")),
        Workload("churn", "threads created and destroyed while their objects survive",
                 _p("20", "150", "600", "2000"), threaded=True),
        Workload("realistic", "service-like job: tiny strings, realloc'd vectors, maps, 40 % remote frees, big buffers",
                 {"tiny": ("10", "1000", "1", "16"), "quick": ("60", "4000", "2", "128"),
                  "standard": ("150", "4000", "3", "256"), "full": ("600", "4000", "6", "384")},
                 threaded=True, metric="seconds", higher_is_better=False, unit="s"),
        Workload("floor", "physical floor: thread-local free-list pop+push, no malloc",
                 _p("2M", "20M", "200M", "1G"), metric="ns_per_op", higher_is_better=False, unit="ns/op",
                 ranked=False),
        Workload("pair", "hot malloc+free pair for 16/64/256/1024 B",
                 _p("200K", "2M", "20M", "100M"), metric="ns_per_op", higher_is_better=False, unit="ns/op",
                 size_args=(1,), sized_results=True),
    )
}

QUICK = ("random_mixed", "tiny_hot", "larson", "mid_large_mt", "prodcons", "vm", "big", "churn", "realistic",
         "floor", "pair")
THREADED = tuple(n for n, w in WORKLOADS.items() if w.threaded)


def get(name: str) -> Workload:
    try:
        return WORKLOADS[name]
    except KeyError:
        raise ValueError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}") from None


def parse_list(text: str | None, default: tuple[str, ...]) -> list[Workload]:
    """The workloads of a --workloads list (the default when empty). A name given twice is an error, as
    in --allocs: its runs would land under one key and count twice in every summary."""
    names = [n for n in (text or "").split(",") if n] or list(default)
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"--workloads names {', '.join(repeated)} more than once")
    return [get(n) for n in names]
