"""The figure of a `CompareReport`: median latency per backend with its spread (interquartile
bars, min/max whiskers), simulated and measured backends told apart, titled with the model;
written as PNG and SVG."""

from __future__ import annotations

from pathlib import Path

from codesign.compare.records import CompareReport


def write_figure(report: CompareReport, out_dir: str | Path) -> list[Path]:
    """`<model>_compare.png` and `.svg` in `out_dir` (created); their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = report.results
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(rows) + 2), 4.5))
    xs = range(len(rows))
    medians = [r.latency.median_ms for r in rows]
    colors = ["tab:orange" if r.timing == "simulated" else "tab:blue" for r in rows]
    ax.bar(xs, medians, color=colors)
    lower = [m - r.latency.min_ms for m, r in zip(medians, rows, strict=True)]
    upper = [r.latency.max_ms - m for m, r in zip(medians, rows, strict=True)]
    ax.errorbar(xs, medians, yerr=[lower, upper], fmt="none", ecolor="black", capsize=4)
    fastest = min(medians) if medians else 0.0
    for x, m in zip(xs, medians, strict=True):
        ax.annotate(f"{m:.2f} ms\n{m / fastest:.2f}x" if fastest else f"{m:.2f} ms", (x, m),
                    ha="center", va="bottom", fontsize=8, xytext=(0, 3), textcoords="offset points")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{r.backend}\n({r.timing})" for r in rows], fontsize=8)
    ax.set_ylabel("latency per inference, ms (median; bars min-max)")
    threads = f"{report.threads} thread{'s' if report.threads > 1 else ''}"
    ax.set_title(f"{report.model}: latency by backend, batch 1, CPU {threads}; fastest {report.fastest}")
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(color="tab:blue", label="measured on this host"),
                       Patch(color="tab:orange", label="simulated (timing model at the config's clock)")],
              fontsize=8)
    fig.tight_layout()
    paths = [out / f"{report.model}_compare.{ext}" for ext in ("png", "svg")]
    for p in paths:
        fig.savefig(p, dpi=120)
    plt.close(fig)
    return paths
