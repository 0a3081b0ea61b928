"""codesign/cli/output.py: --json output is strict JSON, whatever the numbers."""

from __future__ import annotations

import json
import math

from codesign.cli.output import emit, finite


def test_json_never_prints_nan_or_infinity(capsys):
    emit({"cosine": math.nan, "rows": [{"err": math.inf}, (1.5, -math.inf)], "ok": True}, True)
    text = capsys.readouterr().out
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"cosine": None, "rows": [{"err": None}, [1.5, None]], "ok": True}


def test_finite_keeps_everything_else():
    value = {"a": 1, "b": 2.5, "c": "nan", "d": None, "e": [True, 0.0]}
    assert finite(value) == value
