"""Yosys measurements of the logic of a sample of configs, the ground truth the area model is
calibrated on (`codesign.ppa.calibrate`).

Each config is synthesized with hw/area.py's generic flow (`GENERIC_SCRIPT`, ABC effort `fast`):
scratchpads and FIFO storage stay `$mem` cells (costed from the SRAM table instead), the rest
is mapped to Yosys's generic gates.  Unlike `hw.area.area_for`, only the generic flow runs (one
process, not two: the calibration runs niced beside other work) and the cell counts are kept by
type, so gate equivalents can be computed from per-cell weights, flip-flops included
(`gate_equivalents`).  One measurement takes ~10 s for 16 MACs to minutes for 256.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hw.area import _YOSYS, EFFORTS, GENERIC_SCRIPT, AreaError
from hw.config import AcceleratorConfig
from hw.verilog import verilog_for

# Gate equivalents per generic Yosys cell: energy_area.md §5.3 (2), Nangate45 X1 cell area over
# NAND2_X1 (0.798 µm²).  Flip-flop kinds match by prefix, longest first.
CELL_GE: dict[str, float] = {
    "$_BUF_": 0.67, "$_NOT_": 0.67, "$_NAND_": 1.0, "$_NOR_": 1.0,
    "$_AND_": 1.33, "$_OR_": 1.33, "$_ANDNOT_": 1.33, "$_ORNOT_": 1.33,
    "$_AOI3_": 1.33, "$_OAI3_": 1.33, "$_AOI4_": 1.67, "$_OAI4_": 1.67,
    "$_XOR_": 2.0, "$_XNOR_": 2.0, "$_MUX_": 2.33, "$_NMUX_": 2.33,
}
FF_GE: tuple[tuple[str, float], ...] = (
    ("$_SDFFE", 9.3), ("$_SDFFCE", 9.3), ("$_DFFSRE", 9.3), ("$_ALDFFE", 9.3),
    ("$_DFFE", 8.0), ("$_SDFF", 7.0), ("$_DFFSR", 7.0), ("$_ALDFF", 7.0), ("$_DFF", 5.67),
    ("$_DLATCH", 3.33),
)
_IGNORED = ("$mem", "$scopeinfo")


def cell_ge(cell: str) -> float:
    """Gate equivalents of one generic cell; raises KeyError for a cell type with no weight."""
    if cell in CELL_GE:
        return CELL_GE[cell]
    for prefix, weight in FF_GE:
        if cell.startswith(prefix):
            return weight
    raise KeyError(cell)


def gate_equivalents(cells: dict[str, int]) -> float:
    """Logic gate equivalents of a generic netlist's cell counts (memories excluded)."""
    return sum(n * cell_ge(cell) for cell, n in cells.items() if not cell.startswith(_IGNORED))


def measure(cfg: AcceleratorConfig, *, effort: str = "fast") -> dict[str, Any]:
    """Synthesize `cfg` with the generic flow: its cell counts by type, transistors, seconds."""
    verilog = verilog_for(cfg)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="codesign-ppa-") as tmp:
        shutil.copyfile(verilog, Path(tmp) / "accel.v")
        script = GENERIC_SCRIPT.format(v="accel.v", out="generic.json", abc=EFFORTS[effort])
        proc = subprocess.run([sys.executable, "-c", _YOSYS, "-q", "-p", script], cwd=tmp,
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise AreaError(f"yosys failed on {verilog} with exit status {proc.returncode}:\n"
                            f"{tail}")
        stat = json.loads((Path(tmp) / "generic.json").read_text())
    cells = _cells(stat)
    transistors = int(str(stat["design"]["estimated_num_transistors"]).rstrip("+"))
    return {"fingerprint": cfg.fingerprint(), "params": cfg.hardware_params(),
            "cells": cells, "transistors": transistors,
            "ge": round(gate_equivalents(cells), 2), "effort": effort,
            "seconds": round(time.perf_counter() - start, 1)}


def _cells(stat: dict[str, Any]) -> dict[str, int]:
    counts = stat["design"].get("num_cells_by_type")
    if counts is None:
        (module,) = stat["modules"].values()
        counts = module["num_cells_by_type"]
    return {str(t): int(n) for t, n in sorted(counts.items())}
