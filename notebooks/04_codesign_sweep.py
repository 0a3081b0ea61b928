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
# # 4. A co-design sweep
#
# A design space is one TOML file: a base config, the parameters that vary, the objectives and
# the workloads (README, "Design spaces"). Each point is judged with schedules chosen for its
# own hardware, every layer's candidates run on the cycle-exact timing model; area comes from an
# analytical model fitted to Yosys, energy from the run's event counts. Here: the GEMM core's
# shape and the input and weight scratchpads, on BERT-tiny, every feasible point evaluated (15
# of 36 combinations: a smaller core with a large scratchpad needs more index bits than an
# instruction has, and is refused by `AcceleratorConfig` as invalid).

# %%
from pathlib import Path

from IPython.display import Image, display

from codesign.report.build import build_report
from codesign.sweep import pipeline
from codesign.sweep.engine import run_sweep
from codesign.sweep.finalists import confirm_best
from codesign.sweep.space import load_space

Path("space.toml").write_text('''
name = "notebook"
base = "vta"
objectives = ["latency", "area", "energy"]

[params]
block_in = [8, 16]
block_out = [8, 16]
inp_bytes = ["8KiB", "16KiB", "32KiB"]
wgt_bytes = ["64KiB", "128KiB", "256KiB"]

[[workloads]]
model = "bert-tiny"
''')
space = load_space("space.toml").with_area(pipeline.make_area())
print(space.census())

# %%
evaluate = pipeline.make_evaluate(space)   # quantizes each workload once
summary = run_sweep(space, "sweep.db", evaluate, strategy="grid", workers=0)
print(f"{summary.evaluated} designs evaluated in {summary.wall_s:.1f} s; the Pareto front of "
      f"{', '.join(summary.objectives)}:")
for p in summary.front:
    shape = {k: p.config[k] for k in ("block_in", "block_out", "inp_bytes", "wgt_bytes")}
    print(" ", p.id, shape, {k: round(p.metrics[k], 3) for k in summary.objectives})

# %% [markdown]
# ## The best design, confirmed on the RTL
#
# The front's fastest design is compiled with the schedules the sweep chose and run whole on
# fsim (outputs against the integer reference), the timing model and the Verilated RTL (a new
# hardware config: its Verilog and Verilator model are built first, then cached).

# %%
(confirmed,) = confirm_best("sweep.db", space.metrics, evaluate.confirm, 1)
print({k: confirmed[k] for k in ("point_id", "fsim_exact", "rtl_exact", "timing_cycles", "rtl_cycles",
                                 "swept_cycles", "accel_steps")})
print(f"the sweep's layer-by-layer figure: {confirmed['swept_cycles']:,} cycles; the whole model on the "
      f"timing model: {confirmed['timing_cycles']:,}; on the RTL: {confirmed['rtl_cycles']:,}")

# %% [markdown]
# The RTL agrees with the timing model to the cycle and computes the same integers, and the whole
# compiled model takes exactly the cycles the sweep summed layer by layer: the sweep measured the
# programs the model runs. The store keeps the confirmation beside the design.
#
# ## The report: Pareto front and each parameter's effect
#
# `codesign report` (here `build_report`) draws the figures and writes `index.html`.

# %%
report = build_report("sweep.db", "report", top=3)
for stem in ("pareto_latency_area", "effects", "layers"):
    display(Image(f"report/{stem}.png"))

# %% [markdown]
# ## What this showed

# %%
assert summary.evaluated == summary.by_status["ok"] == 15                   # every feasible point, no failure
assert 2 <= len(summary.front) < summary.evaluated                          # a trade-off, not one winner
assert confirmed["fsim_exact"] and confirmed["rtl_exact"]                   # exact on fsim and the RTL
assert confirmed["rtl_cycles"] == confirmed["timing_cycles"]                # cycle-exact
assert confirmed["swept_cycles"] == confirmed["timing_cycles"]              # the sweep measured this model
assert confirmed["ok"]
assert Path("report/index.html").exists() and report.on_front == len(summary.front)
