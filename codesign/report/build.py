"""`codesign report STORE -o DIR`: a sweep's store turned into figures and one page.

Reads the store only (any time, even while its sweep runs): the evaluated points, the objectives
the sweep minimised, the Pareto front over them.  Writes, in DIR: a Pareto figure for latency
against each other objective, coloured by the parameter that moves latency most; the per-layer
cycle breakdown of the best designs; the best design's roofline; each varied parameter's effect
on each objective; and index.html / report.md listing the best designs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codesign.report import figures, page
from codesign.report.figures import Design
from codesign.report.page import Section
from codesign.sweep.engine import pareto_front
from codesign.sweep.space import VARIABLE
from codesign.sweep.store import StoredPoint, SweepStore
from hw.config import AcceleratorConfig
from hw.errors import InputError


class ReportError(InputError):
    """A store a report cannot be made of; the message names the store and why."""


@dataclass(frozen=True)
class ReportSummary:
    """What `build_report` wrote and the designs it ranked best (on the front, by the first
    objective)."""

    store: str
    directory: str
    evaluated: int
    on_front: int
    objectives: tuple[str, ...]
    files: tuple[str, ...]
    best: tuple[dict[str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        return {"store": self.store, "directory": self.directory, "evaluated": self.evaluated,
                "on_front": self.on_front, "objectives": list(self.objectives), "files": list(self.files),
                "best": list(self.best)}


def build_report(store: str | Path, directory: str | Path, *, top: int = 5) -> ReportSummary:
    """Figures and the page of the sweep in `store`, written to `directory`."""
    if top < 1:
        raise ReportError(f"--top must be at least 1, not {top}")
    out = Path(directory)
    with SweepStore.read(store) as db:
        meta = db.meta()
        objectives = db.objectives()
        rows = [r for r in db.points("ok") if r.result is not None]
        if not rows:
            raise ReportError(f"{store}: the store holds no evaluated point yet "
                              f"({', '.join(f'{k} {v}' for k, v in db.counts().items() if v)})")
        front = {p.id for p in pareto_front(db, objectives)}
        confirmed = db.confirmations()
    try:
        designs = _designs(rows, front, confirmed)
    except (KeyError, TypeError) as exc:  # a confirmation row of the wrong shape
        raise ReportError(f"{store}: a damaged confirmation in the store ({type(exc).__name__}: {exc})") \
            from None
    best = sorted((d for d in designs if d.on_front), key=lambda d: d.metric(objectives[0]))[:top]
    params = varied(designs)
    sections = _figures(designs, best, params, objectives, out)
    summary_lines = [f"store: {store} (space {meta.get('space_name')}, strategy {meta.get('strategy')}, "
                     f"seed {meta.get('seed')})",
                     f"{len(designs)} designs evaluated, {len(front)} on the Pareto front of "
                     f"{', '.join(objectives)}",
                     f"varied parameters: {', '.join(params) or 'none'}"]
    files = page.write(out, f"Sweep {meta.get('space_name')}", summary_lines, best, params, sections)
    written = [str(f) for s in sections for f in s.files] + [str(f) for f in files]
    return ReportSummary(str(store), str(out), len(designs), len(front), objectives, tuple(written),
                         tuple({"id": d.point_id, **{p: d.params[p] for p in params},
                                **{m: d.result.metrics.get(m) for m in objectives}} for d in best))


def varied(designs: Sequence[Design]) -> list[str]:
    """The parameters whose value differs between designs, in the space's order."""
    return [p for p in VARIABLE if len({d.params[p] for d in designs}) > 1]


def strongest(designs: Sequence[Design], params: Sequence[str], objective: str) -> str | None:
    """The parameter whose values move `objective`'s median most (max over min median)."""
    def spread(param: str) -> float:
        medians = [float(np.median(v)) for v in figures.effect(designs, param, objective).values()]
        return max(medians) / max(min(medians), 1e-30)
    return max(params, key=spread) if params else None


def _designs(rows: Sequence[StoredPoint], front: set[str],
             confirmed: dict[str, list[dict[str, Any]]] | None = None) -> list[Design]:
    out = []
    for r in rows:
        cfg = AcceleratorConfig.from_dict(r.config, where=f"point {r.id}")
        assert r.result is not None
        found = (confirmed or {}).get(r.id)
        out.append(Design(cfg, {p: getattr(cfg, p) for p in VARIABLE}, r.result, r.id in front,
                          confirmation(found) if found else None))
    return out


def confirmation(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A design's confirmations (one per workload) as one: exact on fsim and the RTL only if every
    workload is, cycles summed over workloads; a failed confirmation keeps its reason."""
    failed = [r for r in rows if "error" in r or r.get("reason")]
    if failed:
        r = failed[0]
        why = (f"{r.get('status')}: {r.get('error')}" if "error" in r
               else f"{r['workload']} not run: {r['reason']}")
        return {"fsim_exact": False, "error": why}
    return {"fsim_exact": all(r["fsim_exact"] and r["rtl_exact"] for r in rows),
            "timing_cycles": sum(r["timing_cycles"] for r in rows),
            "rtl_cycles": sum(r["rtl_cycles"] for r in rows)}


def _figures(designs: Sequence[Design], best: Sequence[Design], params: Sequence[str],
             objectives: Sequence[str], out: Path) -> list[Section]:
    sections = []
    latency = "latency_cycles"
    color = strongest(designs, params, latency)
    for other in [m for m in objectives if m != latency] if latency in objectives else []:
        fig = figures.pareto_figure(designs, latency, other, color)
        stem = f"pareto_latency_{other.split('_')[0]}"
        sections.append(Section(f"Latency vs {figures.label(other).split(' (')[0]}",
                                f"Every evaluated design; the front of {', '.join(objectives)} ringed; "
                                f"coloured by {color}, the parameter that moves latency most.",
                                tuple(figures.save(fig, out, stem))))
    shown = [(d.point_id, d.result.workloads[0]) for d in best[:3] if d.result.workloads]
    if shown:
        fig = figures.breakdown_figure(shown)
        sections.append(Section("Where the cycles go", f"Per-layer cycles of {shown[0][1].name} on the "
                                "best designs: GEMM busy, other compute, compute idle waiting for memory.",
                                tuple(figures.save(fig, out, "layers"))))
        fig = figures.roofline_figure(best[0].config, shown[0][1], best[0].point_id)
        sections.append(Section("Roofline of the best design", "Each accelerator layer's achieved MACs "
                                 "per cycle against its operational intensity, under the design's roofs.",
                                 tuple(figures.save(fig, out, "roofline"))))
    if params:
        fig = figures.effects_figure(designs, params, objectives)
        sections.append(Section("Each parameter's effect", "Median and range of each objective over the "
                                "designs with each value of each varied parameter.",
                                tuple(figures.save(fig, out, "effects"))))
    return sections


__all__ = ["ReportError", "ReportSummary", "build_report", "strongest", "varied"]
