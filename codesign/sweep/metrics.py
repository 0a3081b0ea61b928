"""A hardware point's objectives from its workloads' results: latency, area, energy, EDP.

`point_metrics` gives the `metrics` and `fidelity` dicts of a `PointResult`.  Latency comes from
the workloads (their fidelity: 'timing' or 'rtl'); area and energy are the analytical models of
`codesign.ppa` ('estimate').
"""

from __future__ import annotations

from collections.abc import Sequence

from codesign.ppa.area import area_model
from codesign.ppa.energy import energy_model
from codesign.ppa.table import DEFAULT_DRAM, PpaError
from codesign.sweep.records import WorkloadResult
from hw.config import AcceleratorConfig


def point_metrics(cfg: AcceleratorConfig, workloads: Sequence[WorkloadResult], *,
                  node_nm: int = 45, dram: str = DEFAULT_DRAM
                  ) -> tuple[dict[str, float], dict[str, str]]:
    """(metrics, fidelity by metric) of the point `cfg` from its `workloads`.

    Per inference (a workload's run covers `batch` inferences), averaged over the workloads
    with their weights normalised to sum to 1:
    * `latency_cycles`: accelerator cycles per inference; `latency_ms` the same at
      cfg.clock_mhz;
    * `energy_uj`: µJ per inference, from each workload's summed `stats` (`energy_model`), with
      its breakdown as `energy_uj.<component>`;
    * `edp`: energy_uj x latency_ms, in µJ·ms (= 1e-9 J·s);
    * `area_mm2` at `node_nm` (`area_model`), with its breakdown as `area_mm2.<component>`,
      and `logic_kge`.
    """
    if not workloads:
        raise PpaError("a point needs at least one workload result to have metrics")
    weights = _weights(workloads)
    cycles = sum(w * r.cycles / r.batch for w, r in zip(weights, workloads, strict=True))
    energy: dict[str, float] = {}
    for w, r in zip(weights, workloads, strict=True):
        estimate = energy_model(r.stats, cfg, node_nm=node_nm, dram=dram)
        for name, pj in estimate.components.items():
            energy[name] = energy.get(name, 0.0) + w * pj * 1e-6 / r.batch
    area = area_model(cfg, node_nm=node_nm)
    latency_ms = cycles / (cfg.clock_mhz * 1e3)
    energy_uj = sum(energy.values())
    metrics = {"latency_cycles": cycles, "latency_ms": latency_ms, "area_mm2": area.total_mm2,
               "logic_kge": area.logic_kge, "energy_uj": energy_uj, "edp": energy_uj * latency_ms}
    metrics.update({f"area_mm2.{k}": v for k, v in area.components.items()})
    metrics.update({f"energy_uj.{k}": v for k, v in energy.items()})
    return metrics, _fidelity(metrics, workloads)


def _weights(workloads: Sequence[WorkloadResult]) -> list[float]:
    total = sum(r.weight for r in workloads)
    if any(r.weight < 0 for r in workloads) or total <= 0:
        weights = ", ".join(f"{r.name}={r.weight}" for r in workloads)
        raise PpaError(f"workload weights must be non-negative with a positive sum, not {weights}")
    return [r.weight / total for r in workloads]


def _fidelity(metrics: dict[str, float], workloads: Sequence[WorkloadResult]) -> dict[str, str]:
    """Latency has its workloads' fidelity (the lowest when they differ); the rest 'estimate'."""
    order = ("estimate", "timing", "rtl", "measured")
    latency = min((r.fidelity for r in workloads), key=order.index)
    measured = {"latency_cycles", "latency_ms"}
    return {name: latency if name in measured else "estimate" for name in metrics}
