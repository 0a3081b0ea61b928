from codesign.cli import main
from codesign.sweep.engine import run_sweep
from codesign.sweep.space import space_from_text

from ..report.test_build import evaluate_with_layers
from ..sweep.conftest import TINY_SPACE


def test_report_command_lines(capsys, tmp_path):
    store = tmp_path / "s.db"
    space = space_from_text(TINY_SPACE, path=tmp_path / "tiny.toml")
    run_sweep(space, store, evaluate_with_layers, strategy="grid", workers=0)
    assert main(["report", str(store), "-o", str(tmp_path / "r"), "--top", "1"]) == 0
    lines = dict(line.split(": ", 1) for line in capsys.readouterr().out.splitlines())
    assert lines["evaluated"] == "9" and lines["page"].endswith("r/index.html")
    assert (tmp_path / "r" / "index.html").exists() and "best[1]" not in lines
    assert lines["best[0]"].startswith("id=") and "latency_cycles=" in lines["best[0]"]


def test_report_of_a_missing_store_is_one_line_with_status_2(capsys, tmp_path):
    assert main(["report", str(tmp_path / "none.db"), "-o", str(tmp_path / "r")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.strip().count("\n") == 0 and "none.db: no such store" in err
