"""`codesign bench area-model`: the area model's logic GE against Yosys on configs it was not
fitted on (issue 22, must-show 4: mean absolute error <= 5%, worst <= 10%).

Reads the committed Yosys measurements (`codesign/ppa/area_calibration.json`); runs no Yosys.
`stale` says the RTL changed since they were made (re-run `python -m codesign.ppa.calibrate`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from codesign.ppa.area import area_model, logic_ge
from codesign.ppa.calibrate import load
from hw.config import AcceleratorConfig
from hw.verilog import default_design, design_digest


@dataclass(frozen=True)
class ConfigAccuracy:
    """One config: Yosys's and the model's logic GE, the signed error in percent."""

    name: str
    split: str
    macs: int
    yosys_ge: float
    model_ge: float
    error_pct: float
    total_mm2: float


@dataclass(frozen=True)
class AreaModelAccuracy:
    held_out_mae_pct: float
    held_out_worst_pct: float
    fit_mae_pct: float
    held_out: int
    fitted: int
    stale: bool
    coefficients: dict[str, float]
    configs: list[ConfigAccuracy]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def run() -> AreaModelAccuracy:
    data = load()
    rows = [_row(m) for m in data["measurements"]]
    held = [abs(r.error_pct) for r in rows if r.split == "held_out"]
    fitted = [abs(r.error_pct) for r in rows if r.split == "fit"]
    return AreaModelAccuracy(
        held_out_mae_pct=round(sum(held) / len(held), 2), held_out_worst_pct=round(max(held), 2),
        fit_mae_pct=round(sum(fitted) / len(fitted), 2), held_out=len(held), fitted=len(fitted),
        stale=data["design_digest"] != design_digest(default_design()),
        coefficients=data["coefficients"], configs=rows)


def _row(m: dict[str, Any]) -> ConfigAccuracy:
    cfg = AcceleratorConfig(name=m["name"], **m["params"])
    model = sum(logic_ge(cfg).values())
    return ConfigAccuracy(name=m["name"], split=m["split"], macs=cfg.macs_per_cycle,
                       yosys_ge=m["ge"], model_ge=round(model, 1),
                       error_pct=round(100 * (model - m["ge"]) / m["ge"], 2),
                       total_mm2=round(area_model(cfg).total_mm2, 4))


def table(result: AreaModelAccuracy) -> str:
    lines = [f"{'config':<20}{'split':<10}{'macs':>6}{'yosys_ge':>11}{'model_ge':>11}{'err%':>8}"]
    lines += [f"{r.name:<20}{r.split:<10}{r.macs:>6}{r.yosys_ge:>11.0f}{r.model_ge:>11.0f}"
              f"{r.error_pct:>8.2f}" for r in result.configs]
    lines.append(f"held-out ({result.held_out}): mean |error| {result.held_out_mae_pct}%, worst "
                 f"{result.held_out_worst_pct}%; fitted ({result.fitted}): mean "
                 f"{result.fit_mae_pct}%" + ("; STALE: the RTL changed since" if result.stale else ""))
    return "\n".join(lines)
