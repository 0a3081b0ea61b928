"""How fast can Verilator evaluate the GEMM array alone?  A floor for `codesign bench cosim`.

Builds two stand-alone models of a config's batch x block_in x block_out multiply-accumulate
array, both with registered operands and a registered result, evaluated every cycle:
* `amaranth`: hw/rtl/gemm.py's GemmDot (what the accelerator uses), through Amaranth's Verilog;
* `handwritten`: the same dot products as one Verilog always block with for loops, the form
  Verilator compiles best.
A C++ driver changes the operands every cycle and runs CYCLES cycles; both models must end with
the same checksum of their results (`agree`).  Prints JSON with cycles/s for each, on this
machine.  Usage: python benchmarks/gemm_array_verilator.py [CONFIG]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from amaranth import Module, Signal
from amaranth.back import verilog
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.config import AcceleratorConfig, resolve
from hw.rtl.gemm import GemmDot
from sim.rtl.build import VERILATOR_FLAGS

CYCLES = 1_000_000
DRIVER = """
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include "Vt.h"
// Ports are CData/SData/IData/QData or VlWide, all multiples of 8 bits here: move raw bytes.
template <class T> void put(T& port, unsigned i, unsigned x) {
    unsigned char* p = reinterpret_cast<unsigned char*>(&port);
    std::size_t n = sizeof port, k = (4 * std::size_t{i}) % n;
    std::memcpy(p + k, &x, std::min<std::size_t>(4, n - k));
}
template <class T> unsigned get(const T& port, unsigned i) {
    unsigned x = 0;
    const unsigned char* p = reinterpret_cast<const unsigned char*>(&port);
    std::size_t n = sizeof port, k = (4 * std::size_t{i}) % n;
    std::memcpy(&x, p + k, std::min<std::size_t>(4, n - k));
    return x;
}
int main() {
    VerilatedContext ctx; Vt t{&ctx};
    unsigned x = 1, sink = 0;
    auto start = std::chrono::steady_clock::now();
    for (unsigned i = 0; i < CYCLES; ++i) {
        x = x * 1664525u + 1013904223u;
        put(t.a, i, x); put(t.b, 7 * i, x ^ 0x5a5a5a5au);
        t.clk = 0; t.eval(); t.clk = 1; t.eval(); sink += get(t.q, i);
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    printf("%.0f %u\\n", CYCLES / s, sink);
}
"""


class Registered(wiring.Component):
    """GemmDot between operand and result registers (no reset)."""

    def __init__(self, cfg: AcceleratorConfig):
        self.cfg = cfg
        super().__init__({"a": In(cfg.inp_elem_bits), "b": In(cfg.wgt_elem_bits),
                          "q": Out(cfg.acc_elem_bits)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.dot = dot = GemmDot(self.cfg)
        a, b, q = (Signal(len(s), reset_less=True) for s in (self.a, self.b, self.q))
        m.d.sync += [a.eq(self.a), b.eq(self.b), q.eq(dot.dot)]
        m.d.comb += [dot.inp.eq(a), dot.wgt.eq(b), self.q.eq(q)]
        return m


def handwritten(cfg: AcceleratorConfig) -> str:
    i, w, acc = cfg.inp_bits, cfg.wgt_bits, cfg.acc_bits
    return f"""module t(input clk, input [{cfg.inp_elem_bits - 1}:0] a,
  input [{cfg.wgt_elem_bits - 1}:0] b, output reg [{cfg.acc_elem_bits - 1}:0] q);
  reg [{cfg.inp_elem_bits - 1}:0] ar; reg [{cfg.wgt_elem_bits - 1}:0] br;
  integer n, o, c; reg signed [{acc - 1}:0] s;  // signed: else the products are unsigned
  always @(posedge clk) begin
    ar <= a; br <= b;
    for (n = 0; n < {cfg.batch}; n = n + 1)
      for (o = 0; o < {cfg.block_out}; o = o + 1) begin
        s = 0;
        for (c = 0; c < {cfg.block_in}; c = c + 1)
          s = s + $signed(ar[{i}*(n*{cfg.block_in}+c) +: {i}]) * $signed(br[{w}*(o*{cfg.block_in}+c) +: {w}]);
        q[{acc}*(n*{cfg.block_out}+o) +: {acc}] <= s;
      end
  end
endmodule
"""


def speed(text: str, directory: Path) -> dict[str, float]:
    """Cycles per second of the model `t` in `text`, and its result checksum."""
    directory.mkdir()
    (directory / "t.v").write_text(text)
    (directory / "driver.cpp").write_text(DRIVER.replace("CYCLES", str(CYCLES)))
    flags = [f for f in VERILATOR_FLAGS if f not in ("-LDFLAGS", "-shared")]
    flags = [("t" if f == "accel" else "Vt" if f == "Vaccel" else f) for f in flags]
    start = time.perf_counter()
    subprocess.run(["verilator", *flags, "-CFLAGS", "-O3", "-Mdir", "obj", "-o", "drv", "t.v",
                    "driver.cpp"], cwd=directory, check=True, capture_output=True)
    build_s = time.perf_counter() - start
    out = subprocess.run([directory / "obj" / "drv"], check=True, capture_output=True, text=True)
    rate, checksum = out.stdout.split()
    return {"cycles_per_s": float(rate), "checksum": int(checksum), "build_s": round(build_s, 1)}


def main(name: str) -> dict[str, object]:
    cfg = resolve(name)
    generated = verilog.convert(Registered(cfg), name="t", emit_src=False)
    with tempfile.TemporaryDirectory() as tmp:
        ours = speed(generated, Path(tmp) / "amaranth")
        best = speed(handwritten(cfg), Path(tmp) / "handwritten")
    return {"config": cfg.name, "macs_per_cycle": cfg.batch * cfg.block_in * cfg.block_out,
            "agree": ours["checksum"] == best["checksum"], "amaranth": ours, "handwritten": best}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else "vta")))
