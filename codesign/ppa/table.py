"""The one table of energy and area constants ("wb-45", shared/reference/energy_area.md §7).

Every number the area and energy models use is a `Constant` row here, with its unit, the node
and supply voltage it was stated at, and its source (paper or tool, and the note's section).
`voltage` is None where the source does not state one (CACTI's LSTP cells, the DRAM tables);
`node_nm` is None for off-chip DRAM, which the logic node does not scale.  Rows at 45 nm scale
to other nodes with the Stillmaker-Baas factors (`node_scale`), always from 45 nm (§1.3: the
factors are exact only from a node on their grid).

The SRAM rows are CACTI 7 run with Accelergy's inputs (1 bank, 1 RW port, itrs-lstp cells,
§2.3), reproducing Accelergy's reference logs; `codesign.ppa.sram` interpolates them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from hw.errors import InputError


class PpaError(InputError):
    """A bad argument of the area or energy model: an unknown node, DRAM kind or constant."""


@dataclass(frozen=True)
class Constant:
    """One row: `value` in `unit` at `node_nm` (None: off-chip, not scaled) and `voltage`
    (None: not stated by the source), from `source`."""

    name: str
    value: float
    unit: str
    node_nm: int | None
    voltage: float | None
    source: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_HOROWITZ = "Horowitz, ISSCC 2014, Fig. 1.1.9 (energy_area.md §1.1)"
_SZE = "Sze et al., Proc. IEEE 2017, reproducing Horowitz 2014 (energy_area.md §1.1)"
_NANGATE = "Nangate45 Open Cell Library LEF, OpenROAD test/Nangate45 (energy_area.md §3, §5.2)"
_CACTI = "CACTI 7 @1ffd8df with Accelergy's cacti plug-in inputs, itrs-lstp (energy_area.md §2.3)"
_STILLMAKER = ("Stillmaker & Baas, Integration 58 (2017), via Accelergy hwcomponents "
               "techscaling.py (energy_area.md §1.3)")
_ACCELERGY_DRAM = "Accelergy CactiDRAM.type2energy (energy_area.md §4)"

_LOGIC: tuple[Constant, ...] = (
    Constant("e_mul8", 0.2, "pJ", 45, 0.9, _HOROWITZ),
    Constant("e_add8", 0.03, "pJ", 45, 0.9, _HOROWITZ),
    Constant("e_add16", 0.05, "pJ", 45, 0.9, _SZE),
    Constant("e_add32", 0.1, "pJ", 45, 0.9, _HOROWITZ),
    Constant("e_mac", 0.3, "pJ", 45, 0.9,
             "derived: e_mul8 + e_add32, Horowitz 2014 (energy_area.md §1.1, §7)"),
    Constant("a_mac", 419.0, "um2", 45, 0.9,
             "derived: 8-bit mult 282 + 32-bit add 137, Horowitz via Sze 2017 (energy_area.md §3)"),
    Constant("e_reg_bit", 0.010, "pJ", 45, None,
             "Aladdin register 0.009 pJ/bit at 40 nm via Accelergy, scaled to 45 nm "
             "(energy_area.md §1.2, §7)"),
    Constant("a_ge", 0.798, "um2", 45, 1.1, f"NAND2_X1 0.57 x 1.4 um; {_NANGATE}"),
    Constant("a_ff", 4.522, "um2", 45, 1.1, f"DFF_X1 3.23 x 1.4 um; {_NANGATE}"),
    Constant("a_ffe", 6.384, "um2", 45, 1.1, f"DFF_X1 + MUX2_X1; {_NANGATE}"),
    Constant("clock_mhz_asic", 1000.0, "MHz", 45, None,
             "Accelergy examples' global_cycle_seconds = 1e-9 (energy_area.md §6, §7)"),
)

# pJ per bit; sensitivity alternatives as §4 and §7 list them.
_DRAM: tuple[Constant, ...] = (
    Constant("dram.lpddr4", 8.0, "pJ/bit", None, None, f"{_ACCELERGY_DRAM}, 'Public data'"),
    Constant("dram.lpddr", 40.0, "pJ/bit", None, None, f"{_ACCELERGY_DRAM}; Malladi et al., ISCA'12"),
    Constant("dram.ddr3", 70.0, "pJ/bit", None, None, f"{_ACCELERGY_DRAM}; Chatterjee et al., MICRO'17"),
    Constant("dram.gddr5", 14.0, "pJ/bit", None, None, "accelergy-cacti-plug-in (energy_area.md §4)"),
    Constant("dram.hbm2", 3.9, "pJ/bit", None, None, "accelergy-cacti-plug-in (energy_area.md §4)"),
    Constant("dram.hmc", 4.2, "pJ/bit", None, None,
             "accelergy-cacti-plug-in, ASPLOS'17 doi 10.1145/3093336.3037702 (energy_area.md §4)"),
)
DEFAULT_DRAM = "lpddr4"

# node -> (area factor, energy factor at 0.8 V), from 45 nm.
_SCALES = {65: (1.5, 1.24), 45: (1.0, 1.0), 40: (0.79, 0.87), 32: (0.46, 0.66),
           28: (0.377, 0.513), 22: (0.252, 0.294), 16: (0.19, 0.174), 14: (0.17, 0.139),
           7: (0.059, 0.094)}
_NODE_ROWS: tuple[Constant, ...] = tuple(
    row for node, (area, energy) in _SCALES.items() for row in (
        Constant(f"scale.area.{node}nm", area, "x", node, None, f"{_STILLMAKER}, from 45 nm"),
        Constant(f"scale.energy.{node}nm", energy, "x", node, 0.8, f"{_STILLMAKER}, from 45 nm"),
    )
)

# CACTI 45 nm: capacity -> {width: (read pJ, write pJ)} per access of `width` bits (§2.3).
SRAM_ENERGY_45: dict[int, dict[int, tuple[float, float]]] = {
    1 << 10: {64: (1.67, 3.49), 128: (3.38, 5.11), 256: (9.13, 10.68)},
    2 << 10: {64: (2.76, 4.24), 128: (3.80, 7.44), 256: (9.46, 12.93), 512: (29.84, 32.96)},
    4 << 10: {64: (3.39, 6.45), 128: (4.43, 11.89), 256: (10.20, 17.49), 512: (30.50, 37.44)},
    8 << 10: {64: (6.14, 7.88), 128: (7.92, 14.05), 256: (11.48, 26.41), 512: (31.90, 46.47)},
    16 << 10: {64: (11.61, 10.70), 128: (10.75, 23.22), 256: (14.32, 44.52), 512: (34.48, 64.33)},
    32 << 10: {64: (17.04, 15.40), 128: (20.31, 27.53), 256: (26.84, 51.79), 512: (39.91, 100.31)},
    64 << 10: {64: (25.87, 19.65), 128: (39.33, 36.04), 256: (51.80, 66.24), 512: (76.73, 126.63)},
    128 << 10: {64: (32.2859, 26.065), 128: (50.26, 46.97), 256: (73.76, 88.20),
                512: (97.77, 198.38)},
    256 << 10: {64: (44.72, 38.49), 128: (76.12, 63.68), 256: (124.61, 118.03),
                512: (199.38, 228.26)},
    512 << 10: {64: (68.35, 51.35), 128: (100.19, 87.75), 256: (167.91, 161.33),
                512: (274.52, 333.30)},
    1 << 20: {64: (93.52, 76.18), 128: (153.43, 129.13), 256: (251.86, 245.29),
              512: (434.07, 492.85)},
}
# capacity -> {width: area mm²} (only widths 64 and 512 are tabulated), and leakage mW at w=64.
SRAM_AREA_45: dict[int, dict[int, float]] = {
    1 << 10: {64: 0.0036}, 2 << 10: {64: 0.0075, 512: 0.0325},
    4 << 10: {64: 0.0135, 512: 0.0381}, 8 << 10: {64: 0.0263, 512: 0.0492},
    16 << 10: {64: 0.0507, 512: 0.0714}, 32 << 10: {64: 0.0949, 512: 0.1155},
    64 << 10: {64: 0.2090, 512: 0.2220}, 128 << 10: {64: 0.429589, 512: 0.3913},
    256 << 10: {64: 0.8721, 512: 1.0387}, 512 << 10: {64: 1.6446, 512: 1.8282},
    1 << 20: {64: 3.2628, 512: 3.9530},
}
SRAM_LEAK_45: dict[int, float] = {
    1 << 10: 0.00005, 2 << 10: 0.0001, 4 << 10: 0.0001, 8 << 10: 0.0003, 16 << 10: 0.0005,
    32 << 10: 0.0009, 64 << 10: 0.0017, 128 << 10: 0.0033, 256 << 10: 0.0067,
    512 << 10: 0.0125, 1 << 20: 0.0250,
}


def _sram_rows() -> tuple[Constant, ...]:
    rows = []
    for cap, widths in SRAM_ENERGY_45.items():
        for width, (read, write) in widths.items():
            rows.append(Constant(f"sram.read.{cap}B.w{width}", read, "pJ", 45, None, _CACTI))
            rows.append(Constant(f"sram.write.{cap}B.w{width}", write, "pJ", 45, None, _CACTI))
    for cap, areas in SRAM_AREA_45.items():
        rows += [Constant(f"sram.area.{cap}B.w{w}", a, "mm2", 45, None, _CACTI)
                 for w, a in areas.items()]
    leak_1k = "; 1 KB is printed as <0.0001 mW, taken as half of that"
    rows += [Constant(f"sram.leak.{cap}B.w64", mw, "mW", 45, None,
                      _CACTI + (leak_1k if cap == 1 << 10 else ""))
             for cap, mw in SRAM_LEAK_45.items()]
    return tuple(rows)


SRAM_RULES: tuple[Constant, ...] = (
    Constant("sram.depth_energy_exp", 0.78, "1", None, None,
             "hwcomponents cacti_depth_energy, 'empirical measurement of CACTI' (energy_area.md §2.1)"),
    Constant("sram.narrow_energy_fixed", 0.3, "1", None, None,
             "Accelergy CactiSRAM narrow-width rule: energy x (0.7 w/w0 + 0.3) (energy_area.md §2.1)"),
    Constant("sram.max_array_bits", 512.0, "bit", None, None,
             "widest CACTI column; wider buffers are side-by-side arrays, 'banks as separate "
             "arrays' (energy_area.md §2.3, §7)"),
)

TABLE: tuple[Constant, ...] = _LOGIC + _DRAM + _NODE_ROWS + _sram_rows() + SRAM_RULES
_BY_NAME = {row.name: row for row in TABLE}


def constant(name: str) -> float:
    """The value of the row `name` (at its own node)."""
    try:
        return _BY_NAME[name].value
    except KeyError:
        raise PpaError(f"unknown constant {name!r}") from None


def nodes() -> tuple[int, ...]:
    return tuple(sorted(_SCALES, reverse=True))


def dram_kinds() -> tuple[str, ...]:
    return tuple(row.name.removeprefix("dram.") for row in _DRAM)


def node_scale(node_nm: int) -> tuple[float, float]:
    """(area factor, energy factor) from 45 nm to `node_nm`."""
    if node_nm not in _SCALES or isinstance(node_nm, bool):
        raise PpaError(f"unknown node {node_nm!r} nm; choices: "
                       f"{', '.join(str(n) for n in nodes())}")
    area = constant(f"scale.area.{node_nm}nm")
    return area, constant(f"scale.energy.{node_nm}nm")


def dram_pj_per_bit(kind: str) -> float:
    """Energy per DRAM bit moved, for the DRAM `kind` (not node-scaled: off-chip)."""
    if f"dram.{kind}" not in _BY_NAME:
        raise PpaError(f"unknown DRAM kind {kind!r}; choices: {', '.join(dram_kinds())}")
    return constant(f"dram.{kind}")
