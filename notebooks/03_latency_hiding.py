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
# # 3. Latency hiding with virtual threads
#
# The accelerator has three modules (load, compute, store) that run concurrently and hand work
# to each other through dependency tokens. With **one** virtual thread a layer's loop loads a
# tile, computes on it, loads the next: compute waits while the tile arrives. With **two**, the
# compiler interleaves two independent halves of the loop, so one half's loads run while the
# other half computes.
#
# Here the same convolution (64 -> 64 channels, 3x3, 28x28, on `vta`) is compiled with 1, 2
# and 4 virtual threads over the same total tile, run on the cycle-exact timing model with its
# activity trace (the `--trace` Perfetto file of `codesign sim run`, drawn here with
# matplotlib), and one case is run on the Verilated RTL to show that its trace agrees.

# %%
from pathlib import Path

from IPython.display import Image, display

from codesign import plots
from compiler.ops.accel import Conv2d, Conv2dKnobs, Conv2dSpec, compile_op
from compiler.target import AcceleratorTarget
from hw.config import preset
from sim.backends import make_tracing_backend

OUT = Path("figures")
cfg = preset("vta")
op = Conv2d(Conv2dSpec(batch=1, in_channels=64, height=28, width=28, out_channels=64, kernel=3, pad=1),
            AcceleratorTarget(cfg))

# %% [markdown]
# Each thread takes `tile_h` rows of the output at a time; 14 rows with one thread, the same 14
# split over two threads, 7 rows each over four (so the scratchpads hold the same data).

# %%
knobs = {
    1: Conv2dKnobs(tile_h=14, tile_w=28, tile_oc=2, h_threads=1),
    2: Conv2dKnobs(tile_h=14, tile_w=28, tile_oc=2, h_threads=2),
    4: Conv2dKnobs(tile_h=7, tile_w=28, tile_oc=2, h_threads=4),
}
runs = {}
for threads, k in knobs.items():
    program = compile_op(op, knobs=k).built.program
    result, activity = make_tracing_backend("timing", cfg).run_traced(program, op.random_inputs(0))
    runs[threads] = (program, result.stats, activity)

print(f"{'threads':>7} {'cycles':>9} {'GEMM util':>9} {'load hidden':>11}")
for threads, (_, stats, activity) in runs.items():
    print(f"{threads:>7} {stats.cycles:>9,} {stats.gemm_uops / stats.cycles:>9.3f} "
          f"{plots.overlap_fraction(activity):>11.0%}")

# %% [markdown]
# The timeline: one lane per module, busy intervals over cycles, and an orange lane where load
# and compute were busy *at the same time*. With one thread the load bursts sit in gaps of the
# compute lane; with two they hide under it, and the run ends ~15% sooner.

# %%
cases = [(f"{t} virtual thread{'s' if t > 1 else ''}", activity) for t, (_, _, activity) in runs.items()]
fig = plots.timeline_figure(cases, title="conv 64->64, 3x3, 28x28 on vta: module activity (timing model)")
display(Image(plots.save_as(fig, OUT / "latency_hiding.png")))

# %% [markdown]
# ## The RTL agrees
#
# The same 2-thread Program on the Verilated RTL, traced from the hardware's own busy signals
# (the first run builds the `vta` model into the cache, ~30 s; later runs reuse it).

# %%
program, stats, timed = runs[2]
result, rtl = make_tracing_backend("rtl", cfg).run_traced(program, op.random_inputs(0))
fig = plots.timeline_figure([("timing model", timed), ("RTL", rtl)], title="2 virtual threads: timing vs RTL")
display(Image(plots.save_as(fig, OUT / "latency_hiding_rtl.png")))
same = {t: rtl.tracks[t] == timed.tracks[t] for t in ("load", "compute", "store")}
print("RTL cycles", result.stats.cycles, "timing cycles", stats.cycles, "same intervals:", same)

# %% [markdown]
# ## What this showed

# %%
hidden = {t: plots.overlap_fraction(a) for t, (_, _, a) in runs.items()}
cycles = {t: s.cycles for t, (_, s, _) in runs.items()}
assert hidden[2] > hidden[1] + 0.5, hidden           # two threads hide the loads one thread exposes
assert hidden[4] >= hidden[2] - 0.05, hidden
assert cycles[2] < 0.9 * cycles[1] and cycles[4] <= cycles[2], cycles
assert result.stats.cycles == stats.cycles and all(same.values())   # cycle-exact, interval for interval
assert (OUT / "latency_hiding.png").stat().st_size > 10_000
