"""The sweep report's page: `index.html` (figures inline, the best designs in a table) and the
same content as `report.md`, written beside the figures."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from codesign.report.figures import Design, label

# the columns of the best designs' table: (heading, metric, format)
COLUMNS = (
    ("latency (cycles)", "latency_cycles", "{:,.0f}"),
    ("latency (ms)", "latency_ms", "{:.3f}"),
    ("area (mm²)", "area_mm2", "{:.3f}"),
    ("energy (µJ)", "energy_uj", "{:.1f}"),
    ("EDP (µJ·ms)", "edp", "{:.3g}"),
)


@dataclass(frozen=True)
class Section:
    """A figure of the page: its title, what it shows, and its files (PNG first)."""

    title: str
    caption: str
    files: tuple[Path, ...]


def table(designs: Sequence[Design], params: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """The heading and rows of the best designs' table: parameters, objectives with the fidelity
    that produced them, and the RTL confirmation."""
    heading = ["#", "point", *params, *(h for h, _, _ in COLUMNS), "fidelity", "RTL confirmation"]
    rows = []
    for rank, d in enumerate(designs, 1):
        values = [fmt.format(d.result.metrics[m]) if m in d.result.metrics else "-" for _, m, fmt in COLUMNS]
        fidelity = ", ".join(sorted({d.result.fidelity.get(m, "?") for _, m, _ in COLUMNS
                                     if m in d.result.metrics}))
        rows.append([str(rank), d.point_id, *(str(d.params.get(p, "")) for p in params), *values, fidelity,
                     confirmation(d)])
    return heading, rows


def confirmation(d: Design) -> str:
    c = d.confirmation
    if not c:
        return "not run"
    if c.get("error"):
        return f"FAILED ({c['error']})"
    exact = "outputs exact" if c.get("fsim_exact") else "OUTPUTS DIFFER"
    same = "RTL = timing" if c.get("rtl_cycles") == c.get("timing_cycles") else "RTL ≠ timing"
    return f"{exact}; {same} ({c.get('rtl_cycles'):,} cycles)"


def write(directory: Path, title: str, summary: Sequence[str], best: Sequence[Design], params: Sequence[str],
          sections: Sequence[Section]) -> list[Path]:
    """index.html and report.md in `directory`; figures are referenced by relative path."""
    heading, rows = table(best, params)
    md = [f"# {title}", "", *(f"- {line}" for line in summary), "", "## Best designs", "",
          "| " + " | ".join(heading) + " |", "|" + "---|" * len(heading)]
    md += ["| " + " | ".join(r) + " |" for r in rows]
    page = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
            "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:2px 6px;font-size:small}img{max-width:100%}</style>",
            f"</head><body><h1>{html.escape(title)}</h1><ul>",
            *(f"<li>{html.escape(line)}</li>" for line in summary), "</ul><h2>Best designs</h2><table>",
            "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in heading) + "</tr>",
            *("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows), "</table>"]
    for s in sections:
        rel = [f.relative_to(directory).as_posix() for f in s.files]
        md += ["", f"## {s.title}", "", s.caption, "", f"![{s.title}]({rel[0]})"]
        page += [f"<h2>{html.escape(s.title)}</h2><p>{html.escape(s.caption)}</p>",
                 f"<a href='{rel[-1]}'><img src='{rel[0]}' alt='{html.escape(s.title)}'></a>"]
    page.append("</body></html>")
    paths = [directory / "index.html", directory / "report.md"]
    paths[0].write_text("\n".join(page) + "\n")
    paths[1].write_text("\n".join(md) + "\n")
    return paths


__all__ = ["COLUMNS", "Section", "label", "table", "write"]
