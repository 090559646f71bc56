"""lab — the hakmem benchmark lab: runs the bench/ workloads under several allocators (LD_PRELOAD), checks
that each run really used the intended allocator, and writes ranked reports with plots. Entry point:
`hakmem-lab` or `python3 -m lab` (see lab.cli)."""

__version__ = "0.1.0"
