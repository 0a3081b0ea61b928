"""Where each layer's cycles go, from the counters every cycle-level backend reports (`Stats`):
one stacked bar per layer splitting its cycles by what the compute module did (GEMM, other
compute, stalled on a dependency, idle), and beside it the load and store modules' busy cycles,
which overlap compute's when latency is hidden."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from codesign.plots.style import plain_axis, tick_names

# the stacked parts of a bar (they add up to the layer's cycles): field, legend, colour
PARTS = (
    ("gemm_busy", "GEMM busy (compute module)", "tab:green"),
    ("other_compute", "other compute (ALU, micro-op and acc loads)", "tab:olive"),
    ("compute_stall", "compute stalled on a dependency (waiting for load/store)", "tab:red"),
    ("compute_idle", "compute idle (no instruction: start-up, store tail)", "lightgray"),
)
# the thin bars beside each stacked one: field, legend, colour
BESIDE = (
    ("load_busy", "load module busy", "tab:blue"),
    ("store_busy", "store module busy", "tab:purple"),
)


@dataclass(frozen=True)
class LayerCycles:
    """One accelerator layer's cycles (times `count` where a workload runs the same step several
    times), split as the figure shows them: `gemm_busy + other_compute + compute_stall +
    compute_idle == cycles`; `load_busy` and `store_busy` overlap those."""

    name: str
    cycles: float
    gemm_busy: float
    other_compute: float
    compute_stall: float
    compute_idle: float
    load_busy: float
    store_busy: float

    @classmethod
    def of(cls, name: str, cycles: float, stats: Mapping[str, Any], count: int = 1) -> LayerCycles:
        """From a run's `Stats.to_dict()`; a counter a backend did not report counts as 0."""
        def get(key: str) -> float:
            return float(stats.get(key) or 0) * count

        total = float(cycles) * count
        gemm, busy = get("gemm_busy_cycles"), get("compute_busy_cycles")
        busy = max(busy, gemm)
        stall = min(get("compute_stall_cycles"), max(total - busy, 0.0))
        return cls(name, total, gemm, busy - gemm, stall, max(total - busy - stall, 0.0),
                   get("load_busy_cycles"), get("store_busy_cycles"))


def from_steps(steps: Iterable[Any]) -> list[LayerCycles]:
    """The accelerator steps of a model run (`ModelResult.steps`, `ModelReport.operators` or a
    sweep's `LayerResult`s): anything with `name`, `cycles`, `stats` and a placement (`where`
    or `placement` equal to "accel"); `count` where it has one."""
    out = []
    for s in steps:
        where = getattr(s, "where", None) or getattr(s, "placement", None)
        if where == "accel" and s.stats and s.cycles:
            out.append(LayerCycles.of(s.name, s.cycles, s.stats, getattr(s, "count", 1)))
    return out


def layers_figure(panels: Sequence[tuple[str, Sequence[LayerCycles]]], title: str = "",
                  summary: bool = True, ylabel: str = "cycles per inference") -> Figure:
    """One panel per `(title, layers)`, the same y scale in every panel so designs compare at a
    glance; each layer a stacked bar (PARTS) with the load and store busy cycles beside it.
    `summary` adds each panel's total cycles and GEMM share to its title (leave it out where the
    bars are alternatives, not parts of one run)."""
    import matplotlib.pyplot as plt

    widest = max((len(layers) for _, layers in panels), default=1)
    size = (max(10.0, 0.45 * widest + 2.5), 2.9 * len(panels) + 1.3)
    fig, axes = plt.subplots(len(panels), 1, figsize=size, layout="constrained", squeeze=False, sharey=True)
    for ax, (name, layers) in zip(axes[:, 0], panels, strict=True):
        _panel(ax, name, layers, summary)
    if len(panels) == 1:
        axes[0, 0].set_ylabel(ylabel)
    else:  # one label for the shared scale: a panel is too short for a long one
        fig.supylabel(ylabel)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3, fontsize="small")
    if title:
        fig.suptitle(title, fontsize="medium")
    return fig


def _panel(ax: Any, name: str, layers: Sequence[LayerCycles], summary: bool) -> None:
    pos = np.arange(len(layers))
    bottom = np.zeros(len(layers))
    for key, text, colour in PARTS:
        height = np.array([getattr(layer, key) for layer in layers])
        ax.bar(pos - 0.12, height, width=0.56, bottom=bottom, color=colour, label=text, gid="stacked")
        bottom += height
    for k, (key, text, colour) in enumerate(BESIDE):
        height = np.array([getattr(layer, key) for layer in layers])
        ax.bar(pos + 0.23 + 0.12 * k, height, width=0.11, color=colour, label=text, gid="beside")
    total = sum(layer.cycles for layer in layers)
    gemm = sum(layer.gemm_busy for layer in layers)
    ax.set_title(f"{name}: {total:,.0f} accelerator cycles, GEMM busy {gemm / max(total, 1):.0%} of them"
                 if summary else name, fontsize="medium")
    few = len(layers) <= 6
    ax.set_xticks(pos, tick_names([layer.name for layer in layers]), rotation=0 if few else 55,
                  ha="center" if few else "right", fontsize="x-small" if len(layers) > 12 else "small")
    ax.set_xlim(-0.7, len(layers) - 0.3)
    plain_axis(ax.yaxis)
    ax.grid(True, axis="y", alpha=0.3)
