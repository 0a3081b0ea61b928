from pathlib import Path

from codesign.report import figures, page
from codesign.report.page import Section
from tests.codesign.report.test_figures import _designs


def test_table_lists_each_design_with_its_numbers_and_confirmation():
    designs = _designs(3)
    confirmed = list(designs)
    confirmed[0] = figures.Design(designs[0].config, designs[0].params, designs[0].result, True,
                                  {"fsim_exact": True, "timing_cycles": 1234, "rtl_cycles": 1234})
    heading, rows = page.table(confirmed, ["block_in"])
    assert heading[:3] == ["#", "point", "block_in"]
    assert [r[1] for r in rows] == ["p0", "p1", "p2"]
    col = heading.index("area (mm²)")
    assert rows[1][col] == f"{designs[1].metric('area_mm2'):.3f}"
    assert rows[0][-1] == "outputs exact; RTL = timing (1,234 cycles)"
    assert rows[1][-1] == "not run"


def test_page_links_every_figure_and_lists_the_best(tmp_path: Path):
    designs = _designs(4)
    fig = figures.pareto_figure(designs, "latency_cycles", "area_mm2")
    files = tuple(figures.save(fig, tmp_path, "front"))
    html, md = page.write(tmp_path, "Sweep of x", ["4 designs"], designs[:2], ["block_in"],
                          [Section("Latency vs area", "every design", files)])
    text = html.read_text()
    assert "front.png" in text and "Latency vs area" in text and "p1" in text and "p2" not in text
    assert "![Latency vs area](front.png)" in md.read_text()
