"""Wall-clock speed of the timing model against the rtl backend on the long programs, in one run.

The long GEMMs of `codesign bench` and the compiled ResNet-18 layers; each program runs once on
rtl and `--repeats` times on one timing simulator (its first run includes decoding and checking
the program, later runs reuse them; builds are made beforehand and excluded).  Prints JSON: per program the
cycles (which must agree), rtl seconds, timing seconds (first run and best), and the ratios;
overall, the ratio of the sums.

Usage: python benchmarks/timing_speed.py [CONFIG] [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import time

from codesign.bench.fidelity import long_gemms, resnet18_layers
from hw.config import resolve
from sim.rtl.backend import RtlSimulator
from sim.timing import TimingSimulator


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("config", nargs="?", default="vta")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    cfg = resolve(args.config)
    RtlSimulator(cfg), TimingSimulator(cfg)  # builds, excluded from the timings
    rows = []
    for p in long_gemms(cfg) + resnet18_layers(cfg):
        start = time.perf_counter()
        rtl = RtlSimulator(cfg).run(p.program, p.inputs).stats
        rtl_s = time.perf_counter() - start
        times = []
        sim = TimingSimulator(cfg)
        for _ in range(max(1, args.repeats)):
            start = time.perf_counter()
            timing = sim.run(p.program, p.inputs).stats
            times.append(time.perf_counter() - start)
        rows.append({"name": p.name, "cycles_rtl": rtl.cycles, "cycles_timing": timing.cycles,
                     "rtl_s": round(rtl_s, 4), "timing_first_s": round(times[0], 6),
                     "timing_best_s": round(min(times), 6), "ratio_first": round(rtl_s / times[0]),
                     "ratio_best": round(rtl_s / min(times))})
    total_rtl = sum(r["rtl_s"] for r in rows)
    print(json.dumps({
        "config": cfg.name, "programs": rows, "repeats": args.repeats,
        "speed_ratio_first": round(total_rtl / sum(r["timing_first_s"] for r in rows)),
        "speed_ratio_best": round(total_rtl / sum(r["timing_best_s"] for r in rows)),
        "min_ratio_best": min(r["ratio_best"] for r in rows),
        "exact": all(r["cycles_rtl"] == r["cycles_timing"] for r in rows),
    }))


if __name__ == "__main__":
    main()
