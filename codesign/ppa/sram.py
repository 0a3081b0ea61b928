"""SRAM energy, area and leakage for any capacity and row width, from the CACTI rows of
`codesign.ppa.table` (energy_area.md §2.3).

Inside the table: log-log interpolation, in capacity along each tabulated width, then in width.
Outside it, the documented rules of the tools the table comes from:
* capacity beyond a width's column: energy ~ depth^0.78, area and leakage ~ depth
  (hwcomponents `cacti_depth_energy`, §2.1);
* rows narrower than 64 bits: the 64-bit array of the same depth, energy x (0.7 w/64 + 0.3),
  area and leakage x w/64 (Accelergy CactiSRAM's narrow-width rule, §2.1);
* rows wider than 512 bits: side-by-side 512-bit arrays each holding its share of the capacity,
  read in parallel ("banks as separate arrays", §2.3 and §7).
Leakage is tabulated at 64 bits only and taken as independent of the width at a given capacity
(Accelergy scales it with width x depth, i.e. with the bits).  Other nodes: the Stillmaker-Baas
factors of `table.node_scale` (leakage with the energy factor).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from codesign.ppa.table import SRAM_AREA_45, SRAM_ENERGY_45, SRAM_LEAK_45, PpaError, constant, node_scale
from hw import isa
from hw.config import AcceleratorConfig

_MIN_W = 64
_ENERGY_WIDTHS = (64, 128, 256, 512)
_AREA_WIDTHS = (64, 512)


@dataclass(frozen=True)
class SramCost:
    """One SRAM: energy per access of its full row (pJ), area (mm²), leakage (mW)."""

    read_pj: float
    write_pj: float
    area_mm2: float
    leak_mw: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def sram_cost(capacity_bytes: int, width_bits: int, *, node_nm: int = 45) -> SramCost:
    """Cost of an SRAM of `capacity_bytes` with rows of `width_bits`, at `node_nm`."""
    if capacity_bytes <= 0 or width_bits <= 0:
        raise PpaError(f"an SRAM needs a positive capacity and width, not {capacity_bytes} bytes "
                       f"x {width_bits} bits")
    area_x, energy_x = node_scale(node_nm)
    cost = _cost_45(float(capacity_bytes), float(width_bits))
    return SramCost(cost.read_pj * energy_x, cost.write_pj * energy_x, cost.area_mm2 * area_x,
                    cost.leak_mw * energy_x)


def buffers(cfg: AcceleratorConfig) -> dict[str, tuple[int, int]]:
    """(capacity bytes, row bits) of each scratchpad and of the command queues (three FIFOs of
    `cmd_queue_depth` instructions, modelled as one SRAM each)."""
    return {"uop": (cfg.uop_bytes, cfg.uop_elem_bits), "inp": (cfg.inp_bytes, cfg.inp_elem_bits),
            "wgt": (cfg.wgt_bytes, cfg.wgt_elem_bits), "acc": (cfg.acc_bytes, cfg.acc_elem_bits),
            "out": (cfg.out_bytes, cfg.out_elem_bits),
            "queues": (cfg.cmd_queue_depth * isa.INSN_BITS // 8, isa.INSN_BITS)}


def _cost_45(cap: float, width: float) -> SramCost:
    max_w = constant("sram.max_array_bits")
    if width > max_w:
        n = math.ceil(width / max_w)
        one = _cost_45(cap / n, width / n)
        return SramCost(n * one.read_pj, n * one.write_pj, n * one.area_mm2, n * one.leak_mw)
    if width < _MIN_W:
        fixed = constant("sram.narrow_energy_fixed")
        share = width / _MIN_W
        wide = _cost_45(cap / share, _MIN_W)
        e = (1 - fixed) * share + fixed
        return SramCost(wide.read_pj * e, wide.write_pj * e, wide.area_mm2 * share,
                        wide.leak_mw * share)
    read = _across_widths(width, _ENERGY_WIDTHS, lambda w: _column(w, 0)(cap))
    write = _across_widths(width, _ENERGY_WIDTHS, lambda w: _column(w, 1)(cap))
    area = _across_widths(width, _AREA_WIDTHS, lambda w: _area_column(w)(cap))
    leak = _leak_column()(cap)
    return SramCost(read, write, area, leak)


def _across_widths(width: float, widths: tuple[int, ...], at: Callable[[int], float]) -> float:
    """Log-log interpolation of `at(w)` between the tabulated `widths` bracketing `width`."""
    if width in widths:
        return at(int(width))
    i = bisect.bisect(widths, width)
    lo, hi = widths[i - 1], widths[i]
    t = math.log(width / lo) / math.log(hi / lo)
    return math.exp((1 - t) * math.log(at(lo)) + t * math.log(at(hi)))


def _column(width: int, which: int) -> Callable[[float], float]:
    """Read (0) or write (1) energy vs capacity at a tabulated `width`."""
    points = [(cap, row[width][which]) for cap, row in SRAM_ENERGY_45.items() if width in row]
    return _loglog(points, constant("sram.depth_energy_exp"))


def _area_column(width: int) -> Callable[[float], float]:
    points = [(cap, row[width]) for cap, row in SRAM_AREA_45.items() if width in row]
    return _loglog(points, 1.0)


def _leak_column() -> Callable[[float], float]:
    return _loglog(list(SRAM_LEAK_45.items()), 1.0)


def _loglog(points: list[tuple[int, float]], exponent: float) -> Callable[[float], float]:
    """f(capacity): piecewise linear in log-log through `points`, ~ capacity^exponent beyond."""
    caps = [float(c) for c, _ in points]
    values = [float(v) for _, v in points]

    def f(cap: float) -> float:
        if cap <= caps[0]:
            return values[0] * (cap / caps[0]) ** exponent
        if cap >= caps[-1]:
            return values[-1] * (cap / caps[-1]) ** exponent
        i = bisect.bisect(caps, cap)
        t = math.log(cap / caps[i - 1]) / math.log(caps[i] / caps[i - 1])
        return math.exp((1 - t) * math.log(values[i - 1]) + t * math.log(values[i]))

    return f
