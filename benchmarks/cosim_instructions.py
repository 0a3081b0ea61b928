"""Instructions the Verilated model executes per simulated cycle (callgrind; deterministic, unlike
wall-clock speed on a shared machine).  Needs valgrind.  Prints JSON.

Usage: python benchmarks/cosim_instructions.py [CONFIG]   (a 64x576x64 blocked GEMM)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

SHAPE = (64, 576, 64)


def simulate(name: str) -> int:
    """Run the workload on the rtl backend; returns its cycle count."""
    from codesign.bench.fsim import tiling_for
    from hw.config import resolve
    from sim.rtl.backend import RtlSimulator
    from sim.workloads import blocked_gemm

    cfg = resolve(name)
    work = blocked_gemm(cfg, tiling_for(cfg, SHAPE), seed=0)
    return RtlSimulator(cfg).run(work.program, work.inputs).stats.cycles or 0


def main(name: str) -> dict[str, object]:
    simulate(name)  # build outside valgrind
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        run = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                              sys.executable, __file__, "--inner", name],
                             capture_output=True, text=True, check=True)
        cycles = int(run.stdout.split()[-1])
        report = subprocess.run(["callgrind_annotate", "--threshold=100", "--inclusive=yes", out],
                                capture_output=True, text=True, check=True).stdout
    # Vaccel::eval_step is everything the model does in one eval() (the harness calls two a cycle)
    match = re.search(r"^\s*([\d,]+) .*Vaccel::eval_step\(\)", report, re.M)
    if match is None:
        raise SystemExit("Vaccel::eval_step not found in the callgrind report")
    instructions = int(match.group(1).replace(",", ""))
    return {"config": name, "shape": SHAPE, "cycles": cycles,
            "model_instructions_per_cycle": round(instructions / cycles)}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--inner"]:
        print(simulate(sys.argv[2]))
    else:
        print(json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else "vta")))
