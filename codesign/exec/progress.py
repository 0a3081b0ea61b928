"""A progress bar on stderr (stdout stays clean for --json).

Drawn only when stderr is a terminal; otherwise one line per stage when it completes, so logs of
unattended runs stay short.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Bar:
    def __init__(self, stream: TextIO | None = None, width: int = 30) -> None:
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self.width = width
        self.start = time.monotonic()
        self.last = 0.0

    def update(self, stage: str, done: int, total: int, note: str = "") -> None:
        now = time.monotonic()
        if self.live and (now - self.last > 0.1 or done >= total):
            self.last = now
            filled = self.width * done // max(total, 1)
            bar = "#" * filled + "-" * (self.width - filled)
            self.stream.write(f"\r{stage:<11} [{bar}] {done}/{total} {now - self.start:6.1f}s {note}\x1b[K")
            self.stream.flush()
        if done >= total:
            if self.live:
                self.stream.write("\n")
            else:
                self.stream.write(f"{stage}: {done}/{total} in {now - self.start:.1f}s {note}\n")
            self.stream.flush()
