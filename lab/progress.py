"""progress.py — the progress bar shown on stderr while an experiment runs (tqdm), or nothing when
disabled or when tqdm is not installed."""

from __future__ import annotations

import sys


class Progress:
    def __init__(self, total: float, desc: str, enabled: bool = True, unit: str = "run"):
        self._bar = None
        if not enabled:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self._bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True, mininterval=0.5,
                         leave=True)

    def note(self, text: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=False)

    def advance(self, n: float = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def write(self, text: str) -> None:
        if self._bar is not None:
            self._bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
