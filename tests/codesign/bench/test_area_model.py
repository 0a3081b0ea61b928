import json

from codesign.bench import area_model
from codesign.cli.main import main


def test_held_out_error_meets_issue_22_must_show_4():
    result = area_model.run()
    assert result.held_out >= 8
    assert result.held_out_mae_pct <= 5.0
    assert result.held_out_worst_pct <= 10.0
    held = [r for r in result.configs if r.split == "held_out"]
    assert max(abs(r.error_pct) for r in held) == result.held_out_worst_pct


def test_cli_prints_json(capsys):
    assert main(["bench", "area-model", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["held_out"] == len([c for c in data["configs"] if c["split"] == "held_out"])
    assert {"held_out_mae_pct", "held_out_worst_pct", "stale", "coefficients"} <= set(data)


def test_cli_prints_a_table(capsys):
    assert main(["bench", "area-model"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["config", "split", "macs", "yosys_ge", "model_ge", "err%"]
    assert "held-out" in out.splitlines()[-1]
