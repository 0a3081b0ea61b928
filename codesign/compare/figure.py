"""The figure of a `CompareReport`: median latency per backend with its spread (interquartile
bars, min/max whiskers), simulated and measured backends told apart, titled with the model;
written as PNG and SVG."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from codesign.compare.records import CompareReport

if TYPE_CHECKING:  # matplotlib is imported when a figure is drawn, not when the CLI starts
    from matplotlib.figure import Figure


def write_figure(report: CompareReport, out_dir: str | Path) -> list[Path]:
    """`<model>_compare.png` and `.svg` in `out_dir` (created); their paths."""
    from codesign.plots.style import save

    return save(compare_figure(report), out_dir, f"{report.model}_compare")


def compare_figure(report: CompareReport) -> Figure:
    """The figure `write_figure` writes (for a notebook to show)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    import codesign.plots.style  # noqa: F401  (the Agg backend)

    rows = report.results
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(rows) + 2), 4.5))
    xs = range(len(rows))
    medians = [r.latency.median_ms for r in rows]
    colors = ["tab:orange" if r.timing == "simulated" else "tab:blue" for r in rows]
    bars = ax.bar(xs, medians, color=colors)
    for bar, r in zip(bars, rows, strict=True):
        if not r.faithful:  # outputs off: hatched and labelled, not ranked
            bar.set_hatch("//")
            bar.set_alpha(0.45)
    lower = [m - r.latency.min_ms for m, r in zip(medians, rows, strict=True)]
    upper = [r.latency.max_ms - m for m, r in zip(medians, rows, strict=True)]
    ax.errorbar(xs, medians, yerr=[lower, upper], fmt="none", ecolor="black", capsize=4)
    fastest = min(medians) if medians else 0.0
    for x, m, r in zip(xs, medians, rows, strict=True):  # above the whisker, clear of it
        label = f"{m:.2f} ms\n{m / fastest:.2f}x" if fastest else f"{m:.2f} ms"
        if not r.faithful:
            label += f"\noutputs off\n(cosine {r.cosine:.2f})"
        ax.annotate(label, (x, r.latency.max_ms),
                    ha="center", va="bottom", fontsize=8, xytext=(0, 4), textcoords="offset points")
    ax.set_ylim(0, max((r.latency.max_ms for r in rows), default=1.0) * 1.18)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{r.backend}\n({r.timing})" for r in rows], fontsize=8)
    ax.set_ylabel("latency per inference, ms (median; bars min-max)")
    threads = f"{report.threads} thread{'s' if report.threads > 1 else ''}"
    ax.set_title(f"{report.model}: latency by backend, batch 1, CPU {threads}; fastest {report.fastest}")
    ax.legend(handles=[Patch(color="tab:blue", label="measured on this host"),
                       Patch(color="tab:orange", label="simulated: accelerator cycles at the config's clock\n"
                                                         "+ the host steps it leaves, measured")],
              fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=2)
    fig.tight_layout()
    return fig
