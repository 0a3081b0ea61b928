"""Backends by name, so tools and tests pick a fidelity with a string."""

from __future__ import annotations

from typing import Any

from hw.config import AcceleratorConfig
from sim.backend import Backend

NAMES = ("fsim", "timing", "rtl")


def make_backend(name: str, cfg: AcceleratorConfig, **options: Any) -> Backend:
    """`fsim` (options: seed), `timing` (options: see sim.timing.TimingSimulator) or `rtl`
    (options: see sim.rtl.backend.RtlSimulator)."""
    if name == "fsim":
        from sim.fsim import FunctionalSimulator

        return FunctionalSimulator(cfg, **options)
    if name == "timing":
        from sim.timing import TimingSimulator

        return TimingSimulator(cfg, **options)
    if name == "rtl":
        from sim.rtl.backend import RtlSimulator

        return RtlSimulator(cfg, **options)  # type: ignore[no-any-return]
    raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(NAMES)}")
