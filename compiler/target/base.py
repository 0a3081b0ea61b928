"""`Target`: what every target is to the code that does not care which one it has."""

from __future__ import annotations

from typing import Protocol


class Target(Protocol):
    """A target: `name` is its kind ("accel", "cpu"); the rest is per target (compiler.target.accel
    and compiler.target.cpu describe what each one offers)."""

    @property
    def name(self) -> str: ...
