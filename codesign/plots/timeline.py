"""Module activity over time, from a cycle-level run's trace (`sim.trace.Activity`, recorded by
the timing model or by the RTL's own busy signals): one lane per module, busy intervals drawn
over cycles, and the cycles in which load and compute were busy together (latency hidden)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from codesign.plots.style import plain_axis
from sim.trace import Activity, runs

COLOURS = {"load": "tab:blue", "compute": "tab:green", "store": "tab:purple", "gemm": "darkgreen"}
OVERLAP = "load ∧ compute"


def busy_mask(activity: Activity, track: str) -> np.ndarray:
    """One bool per cycle of the run: the track was busy in that cycle."""
    mask = np.zeros(activity.cycles, dtype=bool)
    for i in activity.tracks[track]:
        mask[i.start:i.end] = True
    return mask


def overlap_fraction(activity: Activity, a: str = "load", b: str = "compute") -> float:
    """The share of `a`'s busy cycles in which `b` was busy too: for load and compute, how much
    of the loading was hidden behind computation (0 with none busy)."""
    first = busy_mask(activity, a)
    busy = int(first.sum())
    return float((first & busy_mask(activity, b)).sum()) / busy if busy else 0.0


def timeline_figure(cases: Sequence[tuple[str, Activity]],
                    tracks: Sequence[str] = ("load", "compute", "store"), title: str = "",
                    window: tuple[int, int] | None = None) -> Figure:
    """One panel per `(name, activity)`, all on the same cycle axis (a faster case ends sooner):
    a lane per track with its busy intervals, and a lane marking the cycles where load and
    compute were both busy. `window` = (first, last) cycle shows only that range."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(cases), 1, figsize=(10, 1.0 + 0.42 * (len(tracks) + 1) * len(cases) + 0.9),
                             layout="constrained", squeeze=False, sharex=True)
    for ax, (name, activity) in zip(axes[:, 0], cases, strict=True):
        _panel(ax, name, activity, tracks)
    last = axes[-1, 0]
    last.set_xlabel("time (cycles from start)")
    plain_axis(last.xaxis)
    longest = max((a.cycles for _, a in cases), default=1) or 1
    last.set_xlim(*(window or (0, longest)))
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize="small")
    if title:
        fig.suptitle(title, fontsize="medium")
    return fig


def _panel(ax: Any, name: str, activity: Activity, tracks: Sequence[str]) -> None:
    lanes = [*tracks, OVERLAP]
    for row, track in enumerate(lanes):
        y = len(lanes) - 1 - row
        if track == OVERLAP:
            both = busy_mask(activity, "load") & busy_mask(activity, "compute")
            spans = [(a, b - a) for a, b in runs(both)]
            colour = "tab:orange"
        else:
            spans = [(i.start, i.cycles) for i in activity.tracks[track]]
            colour = COLOURS.get(track, "tab:gray")
        ax.broken_barh(spans, (y - 0.35, 0.7), facecolors=colour, label=track)
    ax.set_yticks(range(len(lanes)), list(reversed(lanes)), fontsize="small")
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    hidden = overlap_fraction(activity)
    ax.set_title(f"{name}: {activity.cycles:,} cycles ({activity.backend}); "
                 f"{hidden:.0%} of load cycles overlap compute", fontsize="medium", loc="left")
    ax.grid(True, axis="x", alpha=0.3)

