"""The sweep report's figures, drawn with matplotlib (Agg) from evaluated designs.

Each function takes typed records (`Design`, `WorkloadResult`) and returns a Figure; `save`
(codesign.plots.style's, re-exported: the shared style lives there) writes it as PNG and SVG.
Nothing here reads a store or runs a model: the caller gathers the designs
(codesign.report.build) and decides which are on the Pareto front.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from codesign.plots.layers import from_steps, layers_figure
from codesign.plots.style import log_axes, save, tick_names

__all__ = ["LABELS", "Design", "breakdown_figure", "effect", "effects_figure", "label", "pareto_figure",
           "roofline_figure", "save"]
from codesign.sweep.pareto import non_dominated
from codesign.sweep.records import PointResult, WorkloadResult
from hw.config import AcceleratorConfig

# how each objective is labelled on an axis
LABELS = {
    "latency_cycles": "latency (cycles per inference)",
    "latency_ms": "latency (ms per inference)",
    "area_mm2": "area (mm²)",
    "energy_uj": "energy (µJ per inference)",
    "edp": "energy-delay product (µJ·ms)",
}


@dataclass(frozen=True)
class Design:
    """One evaluated hardware point as a report shows it: its config, the parameters the space
    varies (name -> value), its result, and whether it is on the Pareto front."""

    config: AcceleratorConfig
    params: Mapping[str, Any]
    result: PointResult
    on_front: bool = False
    # the RTL confirmation of its workloads where one ran: fsim_exact (outputs equal to the
    # integer reference), timing_cycles, rtl_cycles
    confirmation: Mapping[str, Any] | None = None

    @property
    def point_id(self) -> str:
        return self.result.point_id

    def metric(self, name: str) -> float:
        return float(self.result.metrics[name])


# the same, short enough for a small panel
SHORT_LABELS = {
    "latency_cycles": "latency (cycles)",
    "latency_ms": "latency (ms)",
    "area_mm2": "area (mm²)",
    "energy_uj": "energy (µJ)",
    "edp": "EDP (µJ·ms)",
}


def label(metric: str) -> str:
    return LABELS.get(metric, metric)


def pareto_figure(designs: Sequence[Design], x: str, y: str, color: str | None = None) -> Figure:
    """Every design as a dot at (`x`, `y`), coloured by the parameter `color`; the Pareto front's
    designs ringed and joined in order of `x`."""
    fig, ax = plt.subplots(figsize=(6.4, 4.8), layout="constrained")
    xs = np.array([d.metric(x) for d in designs])
    ys = np.array([d.metric(y) for d in designs])
    if color is not None:
        values = [d.params.get(color) for d in designs]
        keys = sorted({v for v in values if v is not None})
        index = {v: i for i, v in enumerate(keys)}
        cmap = plt.get_cmap("viridis", max(len(keys), 2))
        for v in keys:
            rows = [i for i, w in enumerate(values) if w == v]
            ax.scatter(xs[rows], ys[rows], s=14, color=cmap(index[v]), label=f"{color}={_value(v)}")
    else:
        ax.scatter(xs, ys, s=14, color="tab:blue", label="designs")
    ringed = [i for i, d in enumerate(designs) if d.on_front]
    if ringed:
        ax.scatter(xs[ringed], ys[ringed], s=70, facecolors="none", edgecolors="crimson",
                   label="on the sweep's Pareto front")
    # the trade-off of these two objectives alone: a staircase through their own front
    pairs = np.column_stack([xs, ys])
    front = sorted(np.flatnonzero(non_dominated(pairs)), key=lambda i: (xs[i], ys[i]))
    ax.step(xs[front], ys[front], where="post", color="crimson", lw=1, alpha=0.7,
            label=f"front of {label(y).split(' (')[0]} and {label(x).split(' (')[0]}")
    ax.legend(fontsize="small", loc="best")
    log_axes(ax, "xy")
    ax.set_xlabel(label(x))
    ax.set_ylabel(label(y))
    ax.set_title(f"Pareto front: {label(y).split(' (')[0]} vs {label(x).split(' (')[0]} "
                 f"({len(designs)} designs, {len(ringed)} on the front)", fontsize="medium")
    ax.grid(True, alpha=0.3)
    return fig


def breakdown_figure(workloads: Sequence[tuple[str, WorkloadResult]]) -> Figure:
    """Per-layer cycles of a workload on a few designs (one panel each, `(design label, result)`),
    drawn by `codesign.plots.layers_figure`: each accelerator layer's bar split into GEMM busy,
    other compute, compute stalled and compute idle, with the load and store busy cycles beside."""
    panels = [(f"{wl.name} on {name} ({wl.offloaded_macs_fraction:.0%} of MACs offloaded)",
               from_steps(wl.layers)) for name, wl in workloads]
    return layers_figure(panels, ylabel="cycles per run of the workload's batch")


def roofline_figure(config: AcceleratorConfig, wl: WorkloadResult, name: str) -> Figure:
    """Each accelerator layer at (operational intensity = MACs per DRAM byte, achieved MACs per
    cycle), under the design's roofs: the GEMM's MACs per cycle and the DRAM's bytes per cycle."""
    fig, ax = plt.subplots(figsize=(6.4, 4.8), layout="constrained")
    layers = [layer for layer in wl.layers if layer.placement == "accel" and layer.stats and layer.cycles]
    intensity = np.array([layer.macs / max(_dram_bytes(layer.stats), 1) for layer in layers])  # type: ignore[arg-type]
    achieved = np.array([layer.macs / float(layer.cycles) for layer in layers])  # type: ignore[arg-type]
    peak = float(config.macs_per_cycle)
    bandwidth = float(min(config.dram_bytes_per_cycle, config.bus_bits // 8))
    lo = min(float(intensity.min()) if len(layers) else 1.0, peak / bandwidth) / 4
    hi = max(float(intensity.max()) if len(layers) else 1.0, peak / bandwidth) * 4
    grid = np.geomspace(lo, hi, 200)
    ax.plot(grid, np.minimum(peak, grid * bandwidth), color="black", lw=1.5,
            label=f"roof: {peak:.0f} MACs/cycle, {bandwidth:.0f} B/cycle")
    ax.scatter(intensity, achieved, s=22, color="tab:blue", zorder=3, label="layers")
    texts = tick_names([layer.name for layer in layers])
    for i, (x, y, text) in enumerate(zip(intensity, achieved, texts, strict=True)):  # alternate: near points
        ax.annotate(text, (x, y), fontsize="x-small", xytext=(5, 2 if i % 2 else -9),
                    textcoords="offset points")
    log_axes(ax, "xy")
    ax.set_xlabel("operational intensity (MACs per DRAM byte)")
    ax.set_ylabel("achieved MACs per cycle")
    ax.set_title(f"Roofline of {wl.name} on {name}", fontsize="medium")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")
    return fig


def effects_figure(designs: Sequence[Design], params: Sequence[str], objectives: Sequence[str]) -> Figure:
    """For each varied parameter (column) and objective (row): the median and the range of the
    objective over the designs having each value of the parameter."""
    fig, axes = plt.subplots(len(objectives), len(params), figsize=(2.6 * len(params) + 0.8,
                             2.2 * len(objectives) + 0.6), layout="constrained", squeeze=False)
    for r, objective in enumerate(objectives):
        for c, param in enumerate(params):
            ax = axes[r, c]
            groups = effect(designs, param, objective)
            keys = list(groups)
            pos = np.arange(len(keys))
            med = np.array([np.median(groups[k]) for k in keys])
            lo = np.array([np.min(groups[k]) for k in keys])
            hi = np.array([np.max(groups[k]) for k in keys])
            ax.vlines(pos, lo, hi, color="tab:gray", lw=3, alpha=0.5)
            ax.plot(pos, med, "o-", color="tab:blue", ms=4)
            log_axes(ax, "y")
            ax.set_xticks(pos, [_value(k) for k in keys], fontsize="x-small", rotation=45)
            if r == len(objectives) - 1:
                ax.set_xlabel(param, fontsize="small")
            if c == 0:
                ax.set_ylabel(SHORT_LABELS.get(objective, objective), fontsize="small")
            ax.tick_params(axis="y", labelsize="x-small")
    fig.suptitle("Each parameter's effect on each objective (median and range over the designs)",
                 fontsize="medium")
    return fig


def effect(designs: Sequence[Design], param: str, objective: str) -> dict[Any, list[float]]:
    """The `objective`'s values grouped by the value of `param`, values in ascending order."""
    groups: dict[Any, list[float]] = {}
    for d in designs:
        if param in d.params:
            groups.setdefault(d.params[param], []).append(d.metric(objective))
    return dict(sorted(groups.items()))


def _dram_bytes(stats: Mapping[str, Any]) -> int:
    keys = ("inp_load_bytes", "wgt_load_bytes", "acc_load_bytes", "uop_load_bytes", "out_store_bytes")
    return sum(int(stats.get(k) or 0) for k in keys)


def _value(v: Any) -> str:
    if isinstance(v, int) and v >= 1024 and v % 1024 == 0:
        return f"{v // 1024}Ki"
    return str(v)
