# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 1. Co-simulate a model on a candidate design
#
# A model from the zoo (BERT-tiny: 2 encoder layers, hidden 128, sequence 128) is imported,
# quantized to int8 and compiled for two designs: `vta` (the published VTA default: a 16x16
# GEMM core, 64-bit bus, DRAM at 64 cycles and 8 bytes per cycle) and a variant made with
# `dataclasses.replace`: the same core on a slower memory (200 cycles, 2 bytes per cycle), the
# kind of board a low-power product would get. Each compiled model runs on the three backends:
#
# | backend | computes values | counts cycles | what it is |
# |---|---|---|---|
# | `fsim` | yes | no | the functional simulator, the executable definition of the ISA |
# | `timing` | no | yes | the C++ event model of the micro-architecture, cycle-exact with the RTL |
# | `rtl` | yes | yes | the Amaranth RTL, Verilated (built once per hardware config, then cached) |
#
# The DRAM model is a runtime parameter of the RTL's harness, so both designs share one build.

# %%
import dataclasses
from pathlib import Path

import onnx
from IPython.display import Image, display

from codesign import plots, zoo
from codesign.run.inputs import sample_inputs
from codesign.run.model import load_model, run
from hw.config import preset
from sim.backends import make_backend

OUT = Path("figures")
onnx.save(zoo.build("bert-tiny"), "bert-tiny.onnx")
designs = {
    "vta": preset("vta"),
    "vta-lpddr": dataclasses.replace(preset("vta"), name="vta-lpddr", dram_latency_cycles=200,
                                     dram_bytes_per_cycle=2),
}

# %% [markdown]
# Compile for each design (import, calibration on the zoo's sample data, int8 quantization,
# partitioning: the dense layers go to the accelerator, softmax, layer norm and GELU to the host
# as native kernels), then run one input on every backend.

# %%
reports = {}
for name, cfg in designs.items():
    loaded = load_model("bert-tiny.onnx", cfg)
    inputs = sample_inputs(loaded.model.graph, loaded.zoo_name, 1, seed=0)
    reports[name] = {b: run(loaded, inputs, make_backend(b, cfg)) for b in ("fsim", "timing", "rtl")}
    print(f"{name}: compiled in {loaded.compile_s:.1f} s, "
          f"{loaded.model.offloaded_macs_fraction():.1%} of MACs on the accelerator")

print(f"\n{'design':>10} {'backend':>7} {'exact':>6} {'cycles':>10} {'ms at 100 MHz':>13} {'cosine':>8}")
for name, by_backend in reports.items():
    for backend, r in by_backend.items():
        cycles = "" if r.cycles is None else f"{r.cycles:,}"
        ms = "" if r.cycles is None else f"{r.cycles / 100e3:.2f}"
        exact = "" if r.correct_int8 is None else str(r.correct_int8)
        cosine = "" if r.cosine is None else f"{r.cosine:.5f}"
        print(f"{name:>10} {backend:>7} {exact:>6} {cycles:>10} {ms:>13} {cosine:>8}")

# %% [markdown]
# `cosine` is the output's agreement with onnxruntime running the float model; `exact` compares
# every integer tensor the accelerator produced with the quantized graph's integer reference, bit
# for bit (the timing model computes no values, so it has none). The RTL's cycles equal the
# timing model's, layer by layer. Where do they go? Per layer, the compute module's cycles split
# into GEMM busy, other compute (ALU epilogue, micro-op loads), stalls on a dependency (waiting
# for a load or for the store to drain) and idle, with the load and store modules' busy cycles
# beside (they overlap compute's when latency is hidden):

# %%
panels = [(f"BERT-tiny on {name} (timing model)", plots.from_steps(r["timing"].operators))
          for name, r in reports.items()]
fig = plots.layers_figure(panels, title="Where the cycles go, per accelerator layer")
display(Image(plots.save_as(fig, OUT / "cosimulate_layers.png")))

# %% [markdown]
# On `vta` the GEMM core is busy for a good part of each dense layer; on the slower memory the
# weights take four times as long to arrive and the compute module mostly waits (red). The same
# GEMM work (micro-ops), the same results: only the memory changed.
#
# ## What this showed

# %%
fast, slow = reports["vta"], reports["vta-lpddr"]
for r in (fast, slow):
    assert r["fsim"].correct_int8 and r["rtl"].correct_int8                 # bit-exact on fsim and the RTL
    assert r["rtl"].cycles == r["timing"].cycles                            # cycle-exact, whole model
    assert [o.cycles for o in r["rtl"].operators] == [o.cycles for o in r["timing"].operators]
    assert r["fsim"].cosine > 0.99                                          # int8 close to fp32
layers = {name: plots.from_steps(r["timing"].operators) for name, r in reports.items()}
assert len(layers["vta"]) >= 10
assert slow["timing"].cycles > 1.5 * fast["timing"].cycles                  # the memory costs cycles
stalls = {name: sum(x.compute_stall for x in found) for name, found in layers.items()}
assert stalls["vta-lpddr"] > 2 * stalls["vta"]                              # ... as compute waiting
gemm_uops = {name: sum(o.gemm_uops or 0 for o in r["rtl"].operators) for name, r in reports.items()}
assert gemm_uops["vta-lpddr"] == gemm_uops["vta"] > 0                       # for the same work
