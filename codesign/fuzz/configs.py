"""Fuzzing accelerator config files (`--config FILE`, `codesign config show FILE --json`).

Bases: presets saved as JSON (`AcceleratorConfig.save`) and the output of `codesign config show
--json` (parameters, derived values and the fingerprint).  A case runs `codesign config show FILE
--json`; an accepted file must print strict JSON (no NaN or Infinity) that reads back, as a
config file, to the same fingerprint and parameters.
"""

from __future__ import annotations

import json
from pathlib import Path

from codesign.cli.config import describe
from codesign.fuzz.engine import Kind, run_cli, strict_json
from codesign.fuzz.mutators import mutate_bytes, mutate_json
from hw.config import PRESETS, AcceleratorConfig


def _saved(name: str) -> bytes:
    return (json.dumps(PRESETS[name].to_dict(), indent=2) + "\n").encode()


def _shown(name: str) -> bytes:
    return (json.dumps(describe(PRESETS[name]), indent=2) + "\n").encode()


def check(path: Path) -> str:
    """`codesign config show PATH --json`: "accepted" when it prints strict JSON that reads
    back to the same config, else the refusal; AssertionError for a wrong answer."""
    result, out = run_cli(["config", "show", str(path), "--json"])
    if result != "accepted":
        return result
    shown = strict_json(out)
    assert isinstance(shown, dict), "config show --json printed no object"
    again = path.with_name(path.stem + "-again.json")
    again.write_text(out)
    cfg = AcceleratorConfig.load(again)
    assert cfg.fingerprint() == shown["fingerprint"], "the shown config reads back to another fingerprint"
    assert describe(cfg) == shown, "the shown config reads back to other parameters"
    return "accepted"


KIND = Kind(
    name="config", suffix=".json",
    bases={"vta-saved": lambda: _saved("vta"), "tiny-saved": lambda: _saved("tiny"),
           "vta-shown": lambda: _shown("vta"), "tiny-shown": lambda: _shown("tiny")},
    mutations={"json": mutate_json, "bytes": mutate_bytes},
    check=check,
)
