"""Energy of one run: event counts from `sim.backend.Stats` times the per-event energies of
`codesign.ppa.table`, plus SRAM leakage over the run's time (energy_area.md §7).

Events, per counter (E(buf) is one access of a buffer's full row, `codesign.ppa.sram`):
* each GEMM micro-op: batch*block_in*block_out MACs (`e_mac`), one inp row read, one wgt tile
  read, one acc row read and one acc row write, which the RTL mirrors into the out buffer
  (an out row write);
* each ALU micro-op: batch*block_out 32-bit adds (`e_add32`), two acc row reads and one acc
  row write (+ the out mirror);
* each micro-op (GEMM or ALU): one uop-SRAM read;
* loaded bytes: DRAM bits and the destination buffer's row writes (acc loads also write out);
* stored bytes: DRAM bits and out-buffer row reads;
* each instruction: 128 bits of DRAM fetched, one command-queue write and read.
Leakage: every scratchpad's and command queue's leakage power for cycles / clock_mhz.

Approximations the counters force: reset GEMMs (which zero accumulators) are not in `gemm_uops`,
so their acc writes are left out; an ALU micro-op with an immediate reads acc once, not twice
(the counters do not tell them apart: two reads are charged); load bytes count elements, not
padding, as the DMA moves them; an 8-bit accumulator load is charged as full acc rows; the
ALU's min/max/shift cost as adds; control logic and clock-tree energy are not modelled.  A run
without cycles (fsim) has no time: its leakage is 0 and `seconds` is None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from codesign.ppa.sram import SramCost, buffers, sram_cost
from codesign.ppa.table import DEFAULT_DRAM, constant, dram_pj_per_bit, node_scale
from hw import isa
from hw.config import AcceleratorConfig
from sim.backend import Stats

_COUNTERS = ("gemm_uops", "alu_uops", "inp_load_bytes", "wgt_load_bytes", "acc_load_bytes",
             "uop_load_bytes", "out_store_bytes", "load_insns", "compute_insns", "store_insns")


@dataclass(frozen=True)
class EnergyEstimate:
    """Energy of one run in pJ: `total_pj` = sum of `components` (mac, alu, uop, inp, wgt, acc,
    out, queues, dram, leakage); `seconds` of the run at the config's clock (None without
    cycles)."""

    total_pj: float
    components: dict[str, float]
    leakage_pj: float
    seconds: float | None
    node_nm: int
    dram: str

    @property
    def edp_js(self) -> float | None:
        """Energy-delay product in joule-seconds (None without a run time)."""
        return None if self.seconds is None else self.total_pj * 1e-12 * self.seconds

    def to_json(self) -> dict[str, Any]:
        return {"total_pj": self.total_pj, "components": dict(self.components),
                "leakage_pj": self.leakage_pj, "seconds": self.seconds, "edp_js": self.edp_js,
                "node_nm": self.node_nm, "dram": self.dram}


def energy_model(stats: Stats | Mapping[str, Any], cfg: AcceleratorConfig, *, node_nm: int = 45,
                 dram: str = DEFAULT_DRAM) -> EnergyEstimate:
    """Energy of the run whose counters are `stats` (a Stats or its to_dict()) on `cfg`."""
    counts = _counts(stats)
    _, energy_x = node_scale(node_nm)
    pj_per_dram_bit = dram_pj_per_bit(dram)
    srams = {name: sram_cost(cap, width) for name, (cap, width) in buffers(cfg).items()}
    dynamic = _dynamic_pj(counts, cfg, srams)
    components = {name: pj * energy_x for name, pj in dynamic.items()}
    components["dram"] = _dram_bits(counts) * pj_per_dram_bit
    seconds = _seconds(stats, cfg)
    leak_mw = sum(cost.leak_mw for cost in srams.values()) * energy_x
    leakage_pj = 0.0 if seconds is None else leak_mw * 1e-3 * seconds * 1e12
    components["leakage"] = leakage_pj
    return EnergyEstimate(sum(components.values()), components, leakage_pj, seconds, node_nm, dram)


def _counts(stats: Stats | Mapping[str, Any]) -> dict[str, int]:
    data = stats.to_dict() if isinstance(stats, Stats) else stats
    return {name: int(data.get(name) or 0) for name in _COUNTERS}


def _dynamic_pj(c: dict[str, int], cfg: AcceleratorConfig,
                srams: dict[str, SramCost]) -> dict[str, float]:
    """On-chip dynamic energy at 45 nm, by component."""
    gemm, alu = c["gemm_uops"], c["alu_uops"]
    acc_rows_loaded = c["acc_load_bytes"] / cfg.acc_elem_bytes
    acc_writes = gemm + alu + acc_rows_loaded
    insns = c["load_insns"] + c["compute_insns"] + c["store_insns"]
    return {
        "mac": gemm * cfg.macs_per_cycle * constant("e_mac"),
        "alu": alu * cfg.batch * cfg.block_out * constant("e_add32"),
        "uop": (gemm + alu) * srams["uop"].read_pj
        + c["uop_load_bytes"] / cfg.uop_elem_bytes * srams["uop"].write_pj,
        "inp": gemm * srams["inp"].read_pj
        + c["inp_load_bytes"] / cfg.inp_elem_bytes * srams["inp"].write_pj,
        "wgt": gemm * srams["wgt"].read_pj
        + c["wgt_load_bytes"] / cfg.wgt_elem_bytes * srams["wgt"].write_pj,
        "acc": (gemm + 2 * alu) * srams["acc"].read_pj + acc_writes * srams["acc"].write_pj,
        "out": acc_writes * srams["out"].write_pj
        + c["out_store_bytes"] / cfg.out_elem_bytes * srams["out"].read_pj,
        "queues": insns * (srams["queues"].write_pj + srams["queues"].read_pj),
    }


def _dram_bits(c: dict[str, int]) -> int:
    moved = (c["inp_load_bytes"] + c["wgt_load_bytes"] + c["acc_load_bytes"]
             + c["uop_load_bytes"] + c["out_store_bytes"])
    insns = c["load_insns"] + c["compute_insns"] + c["store_insns"]
    return 8 * moved + isa.INSN_BITS * insns


def _seconds(stats: Stats | Mapping[str, Any], cfg: AcceleratorConfig) -> float | None:
    cycles = stats.cycles if isinstance(stats, Stats) else stats.get("cycles")
    return None if cycles is None else cycles / (cfg.clock_mhz * 1e6)
