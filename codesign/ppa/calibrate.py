"""Fit the area model's logic coefficients to Yosys, and keep the measurements with them.

`area_calibration.json` (beside this module, committed) holds every Yosys measurement of the
sample (`codesign.ppa.sample`: FIT and HELD_OUT), the design digest they were made on, and the
coefficients fitted on the FIT configs only: non-negative least squares on the *relative*
error (each row divided by its measured GE), since the model is judged in percent.  Logic GE
is Yosys's generic cell counts times per-cell Nangate45 weights (energy_area.md §5.3 (2)),
not `stat -tech cmos` transistors / 4: that count leaves out every flip-flop (a fifth of the
logic of `tiny`), which would have to be added back from another flow.

Re-run (measures only the configs not yet in the file, or all with --remeasure; minutes per
config, one at a time):  python -m codesign.ppa.calibrate [--remeasure]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import nnls

from codesign.ppa.area import CALIBRATION, FEATURE_COMPONENT, logic_features
from codesign.ppa.sample import FIT, HELD_OUT
from hw.config import AcceleratorConfig
from hw.verilog import default_design, design_digest

Measure = Callable[[AcceleratorConfig], dict[str, Any]]


def fit(measurements: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Non-negative GE per feature minimizing the squared relative errors on `measurements`
    (each with the config's `params` and its measured `ge`)."""
    names = list(FEATURE_COMPONENT)
    rows, targets = [], []
    for m in measurements:
        feats = logic_features(AcceleratorConfig(**m["params"]))
        rows.append([feats[n] / m["ge"] for n in names])
        targets.append(1.0)
    solution, _ = nnls(np.array(rows), np.array(targets))
    return {name: round(float(x), 4) for name, x in zip(names, solution, strict=True)}


def load(path: Path = CALIBRATION) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {"measurements": []}


def recalibrate(*, path: Path = CALIBRATION, remeasure: bool = False,
                measure: Measure | None = None,
                log: Callable[[str], None] = print) -> dict[str, Any]:
    """Measure the sample's configs missing from `path` (all with `remeasure`), refit on FIT,
    and rewrite `path`.  Returns the written data."""
    if measure is None:
        from codesign.ppa.yosys_sample import measure as yosys_measure

        measure = yosys_measure
    digest = design_digest(default_design())
    data = load(path)
    known = {} if remeasure or data.get("design_digest") != digest else {
        m["fingerprint"]: m for m in data["measurements"]}
    measurements = []
    for split, cfgs in (("fit", FIT), ("held_out", HELD_OUT)):
        for cfg in sorted(cfgs, key=lambda c: c.macs_per_cycle):
            m = known.get(cfg.fingerprint())
            if m is None:
                m = measure(cfg)
                log(f"{cfg.name}: {m['ge']:.0f} GE in {m['seconds']} s")
            measurements.append({**m, "name": cfg.name, "split": split})
    data = {"design_digest": digest, "ge_method": "generic cells x Nangate45 GE weights "
            "(energy_area.md §5.3 (2)), memories excluded",
            "features": dict(FEATURE_COMPONENT),
            "coefficients": fit([m for m in measurements if m["split"] == "fit"]),
            "measurements": measurements}
    path.write_text(json.dumps(data, indent=1) + "\n")
    return data


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codesign.ppa.calibrate", description=__doc__)
    parser.add_argument("--remeasure", action="store_true", help="re-run Yosys on every config")
    args = parser.parse_args(argv)
    data = recalibrate(remeasure=args.remeasure)
    print(json.dumps(data["coefficients"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
