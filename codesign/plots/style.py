"""What every figure of the workbench shares: the Agg backend (no display needed), writing a
figure as PNG (+ SVG), log axes with plain tick labels, short tick names."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, Locator, LogLocator, MaxNLocator, NullLocator

DPI = 120
MIN_LOG_TICKS = 3  # fewer 1-2-5 ticks than this in view: the axis spans under a decade


def save(fig: Figure, directory: str | Path, stem: str,
         formats: Sequence[str] = ("png", "svg")) -> list[Path]:
    """`fig` written as `stem`.png (and the other `formats`) in `directory` (created); the
    figure is closed."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}.{ext}" for ext in formats]
    for path in paths:
        fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return paths


def save_as(fig: Figure, path: str | Path) -> Path:
    """`fig` written to `path` in the format its suffix names (.png, .svg, .pdf); closed."""
    target = Path(path)
    if target.parent != Path():
        target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=DPI)
    plt.close(fig)
    return target


def log_axes(ax: Any, axes: str) -> None:
    """Log scale on `axes` ("x", "y" or "xy") with plain tick labels: matplotlib's default
    mathtext labels (10^k on every minor tick) cost most of a figure's drawing time."""
    plain = FuncFormatter(lambda v, _: number(v))
    for name in axes:
        axis = ax.xaxis if name == "x" else ax.yaxis
        getattr(ax, f"set_{name}scale")("log")
        axis.set_major_locator(LogTicks())
        axis.set_major_formatter(plain)
        axis.set_minor_locator(NullLocator())


class LogTicks(Locator):
    """Major ticks of a log axis: 1, 2 and 5 per decade; on an axis spanning less than a decade
    (a sweep's latencies from 6 M to 12 M cycles) where those leave fewer than MIN_LOG_TICKS in
    view, every integer multiple (6M, 7M, ... 10M), and failing that evenly spaced values."""

    def __call__(self) -> Any:
        assert self.axis is not None, "a locator is called once it is set on an axis"
        low, high = self.axis.get_view_interval()
        return self.tick_values(low, high)

    def tick_values(self, vmin: float, vmax: float) -> Any:
        low, high = sorted((vmin, vmax))
        for subs in ((1.0, 2.0, 5.0), tuple(float(k) for k in range(1, 10))):
            ticks = np.asarray(LogLocator(base=10, subs=subs, numticks=1000).tick_values(low, high))
            if np.count_nonzero((ticks >= low) & (ticks <= high)) >= MIN_LOG_TICKS:
                return ticks
        return MaxNLocator(MIN_LOG_TICKS + 1).tick_values(low, high)


def plain_axis(axis: Any) -> None:
    """A linear axis labelled 20k, 1.5M instead of an offset exponent."""
    axis.set_major_formatter(FuncFormatter(lambda v, _: number(v)))


def number(v: float) -> str:
    """A tick label: 2k, 1.5M, 0.02."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:g}{suffix}"
    return f"{v:g}"


def tick_names(names: Sequence[str], width: int = 26) -> list[str]:
    """Tick labels for many layer names: the dotted parts (`encoder`, `layer`, `Add`, `2d`) that
    three quarters of the names or more share are dropped where the rest stays distinct, then
    each name is shortened (`short`)."""
    parts = [short(n, 10**6).split(".") for n in names]
    counts: dict[str, int] = {}
    for p in parts:
        for word in set(p):
            counts[word] = counts.get(word, 0) + 1
    common = {w for w, c in counts.items() if len(names) >= 4 and c >= 0.75 * len(names)}
    kept = [".".join(w for w in p if w not in common) or ".".join(p) for p in parts]
    if len(set(kept)) < len(set(names)):
        kept = [".".join(p) for p in parts]
    return [short(k, width) for k in kept]


def short(name: str, width: int = 22) -> str:
    """A step's name for a tick label: a fused step by its first node (`conv+relu` -> `conv`)."""
    name = name.split("+")[0]
    return name if len(name) <= width else "…" + name[-(width - 1):]
