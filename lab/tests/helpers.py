"""helpers.py — runs the lab's command line as a user would, for the end-to-end tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_lab(root: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `python3 -m lab ARGS` from the repository root."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    return subprocess.run([sys.executable, "-m", "lab", *args], cwd=root, capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)
