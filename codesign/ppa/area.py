"""Analytical area of an `AcceleratorConfig`, per component, at a stated node.

Logic (everything Yosys maps to gates: the GEMM array, the ALU, the DMA engines and their
packers, queue pointers, fetch, decode and control) is a linear model in gate equivalents whose
features are the config quantities each component scales with (`logic_features`); the
coefficients are fitted once against Yosys on a sample of configs (`codesign.ppa.calibrate`)
and read from the committed `area_calibration.json`, so no sweep runs Yosys.  Storage (the five
scratchpads and the three command queues, which Yosys keeps as `$mem`) comes from the CACTI
SRAM table (`codesign.ppa.sram`).  mm² = GE x NAND2 area (Nangate45 0.798 µm²) x the node's
area factor; kGE is node-free.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codesign.ppa.sram import buffers, sram_cost
from codesign.ppa.table import constant, node_scale
from hw.config import AcceleratorConfig

CALIBRATION = Path(__file__).with_name("area_calibration.json")

# feature -> the component whose logic it measures.
FEATURE_COMPONENT = {
    "macs": "gemm", "inp_lanes": "gemm",
    "acc_lanes": "alu",
    "pack_bits": "dma", "bus_bits": "dma", "inflight_bits": "dma", "burst_log2": "dma",
    "queue_log2": "queues", "index_bits": "control", "one": "control",
}


@dataclass(frozen=True)
class AreaEstimate:
    """Area at `node_nm`: `total_mm2` = logic + SRAM; `components` in mm² (gemm, alu, dma,
    control, queues (pointers and storage), uop, inp, wgt, acc, out (SRAM)); `logic_kge` is the
    logic in thousands of NAND2 gate equivalents (node-free)."""

    total_mm2: float
    logic_kge: float
    sram_mm2: float
    components: dict[str, float]
    node_nm: int

    def to_json(self) -> dict[str, Any]:
        return {"total_mm2": self.total_mm2, "logic_kge": self.logic_kge,
                "sram_mm2": self.sram_mm2, "components": dict(self.components),
                "node_nm": self.node_nm}


def logic_features(cfg: AcceleratorConfig) -> dict[str, float]:
    """What each logic component scales with (see FEATURE_COMPONENT)."""
    elems = (cfg.inp_elem_bits, cfg.wgt_elem_bits, cfg.acc_elem_bits, cfg.uop_elem_bits,
             cfg.out_elem_bits)
    return {
        "macs": cfg.macs_per_cycle,  # multipliers and adder trees
        "inp_lanes": cfg.batch * cfg.block_in,  # input operand fan-out
        "acc_lanes": cfg.batch * cfg.block_out,  # accumulators and ALU lanes
        # Packers and unpackers gather max(element, beat) bits for each buffer.
        "pack_bits": sum(max(e, cfg.bus_bits) for e in elems),
        "bus_bits": cfg.bus_bits,
        "inflight_bits": cfg.mem_inflight.bit_length(),  # credit counters, id-FIFO pointers
        "burst_log2": cfg.max_burst_beats.bit_length() - 1,
        "queue_log2": cfg.cmd_queue_depth.bit_length() - 1,
        "index_bits": cfg.inp_index_bits + cfg.wgt_index_bits + cfg.acc_index_bits
        + cfg.uop_index_bits,
        "one": 1.0,
    }


@functools.cache
def coefficients() -> dict[str, float]:
    """GE per unit of each feature, from the committed calibration."""
    data = json.loads(CALIBRATION.read_text())
    return {name: float(value) for name, value in data["coefficients"].items()}


def logic_ge(cfg: AcceleratorConfig, coef: dict[str, float] | None = None) -> dict[str, float]:
    """Logic gate equivalents of `cfg` by component."""
    coef = coefficients() if coef is None else coef
    out: dict[str, float] = {}
    for name, value in logic_features(cfg).items():
        component = FEATURE_COMPONENT[name]
        out[component] = out.get(component, 0.0) + coef.get(name, 0.0) * value
    return out


def area_model(cfg: AcceleratorConfig, node_nm: int = 45) -> AreaEstimate:
    """The area of `cfg` at `node_nm` (nodes: `codesign.ppa.table.nodes()`)."""
    area_x, _ = node_scale(node_nm)
    ge = logic_ge(cfg)
    mm2_per_ge = constant("a_ge") * 1e-6 * area_x
    components = {name: g * mm2_per_ge for name, g in ge.items()}
    sram = {name: sram_cost(cap, width, node_nm=node_nm).area_mm2
            for name, (cap, width) in buffers(cfg).items()}
    for name, mm2 in sram.items():
        components[name] = components.get(name, 0.0) + mm2
    sram_mm2 = sum(sram.values())
    return AreaEstimate(total_mm2=sum(components.values()), logic_kge=sum(ge.values()) / 1000,
                        sram_mm2=sram_mm2, components=components, node_nm=node_nm)
