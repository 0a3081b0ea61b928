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
# # 2. Inside the compiler: one convolution from tensor expression to Program
#
# An accelerator operator is three objects: **what** it computes (a tensor expression, no
# tiling), **how** (a schedule: a list of primitive records), and **where** (a target built from
# the `AcceleratorConfig`). Lowering turns the schedule into a loop IR; passes insert DMA,
# tensorize the GEMM, lower the epilogue to ALU micro-ops, fold micro-op kernels, insert
# dependency tokens and interleave virtual threads; emission writes a `Program`.
#
# The layer: 64 -> 64 channels, 3x3, 14x14 input, padding 1, on `vta` (a 16x16 GEMM core).

# %%
from dataclasses import replace
from pathlib import Path

import numpy as np
from IPython.display import Image, display

from codesign import plots
from codesign.cli.isa import dump_lines
from compiler.ops.accel import Conv2d, Conv2dSpec, compile_op
from compiler.target import AcceleratorTarget
from hw.config import preset
from sim.backends import make_backend

OUT = Path("figures")
cfg = preset("vta")
op = Conv2d(Conv2dSpec(batch=1, in_channels=64, height=14, width=14, out_channels=64, kernel=3, pad=1),
            AcceleratorTarget(cfg))

# %% [markdown]
# ## 1. The tensor expression
#
# Data and weights are packed in blocks of the core's shape (`bi` batch, `ci`/`ii` input and
# `oi` output channels of a block). Each computed tensor, producers first:

# %%
tensors = op.tensors()
pending, order = [tensors["out"]], []
while pending:
    t = pending.pop()
    order.insert(0, t)
    pending += [i for i in t.inputs() if not i.is_placeholder and i not in order]
for t in order:
    print(f"{t.name}[{', '.join(a.var.name for a in t.op.axes)}] = {t.op.body}\n")
placeholders = [t for t in tensors.values() if t.is_placeholder]
print("inputs:", ", ".join(f"{t.name}{list(t.shape)} {t.dtype}" for t in placeholders))

# %% [markdown]
# ## 2. The schedule
#
# The operator's default point of its schedule space (tiles in blocks or pixels, thread counts),
# chosen from the config by an analytic estimate, and the records it expands to:

# %%
knobs = op.default_knobs()
print(knobs)
schedule = op.schedule(knobs)
print(schedule)

# %% [markdown]
# ## 3. The loop IR, after lowering and after the passes

# %%
compiled = compile_op(op, knobs=knobs)
built = compiled.built
print("stages:", " -> ".join(built.ir))
lowered = built.print_ir("lower").splitlines()
print(f"after lowering ({len(lowered)} lines), the first 30:")
print("\n".join(lowered[:30]))

# %%
print(built.print_ir())  # after the last pass: DMA, GEMM and ALU kernels, tokens between the modules

# %% [markdown]
# ## 4. The Program: instructions with the token queues' running counts

# %%
program = built.program
print("\n".join(dump_lines(program, cfg)))

# %% [markdown]
# ## 5. Run it, then change a tile
#
# On fsim (values, checked against numpy) and on the cycle-exact timing model (cycles, counters).
# Then the same layer with output tiles of 2 rows instead of 14: every tile reloads its
# weights and runs its own short GEMM loops, so the instructions multiply and the GEMM core
# waits. And with `tile_ic=1`, which streams the input channels one block at a time.

# %%
variants = {"default": knobs, "tile_h=2": replace(knobs, tile_h=2), "tile_ic=1": replace(knobs, tile_ic=1)}
inputs = op.random_inputs(0)
want = op.reference(inputs)
results = {}
for name, k in variants.items():
    p = compile_op(op, knobs=k).built.program
    exact = np.array_equal(make_backend("fsim", cfg).run(p, inputs).outputs["out"], want)
    stats = make_backend("timing", cfg).run(p, inputs).stats
    results[name] = (len(p.insns), exact, stats)
    print(f"{name:>10}: {len(p.insns):>4} instructions, {stats.cycles:>7,} cycles, "
          f"GEMM utilization {stats.gemm_uops / stats.cycles:.3f}, "
          f"{stats.inp_load_bytes + stats.wgt_load_bytes:>8,} bytes loaded, exact on fsim: {exact}")

# %%
layers = [plots.LayerCycles.of(name, s.cycles, s.to_dict()) for name, (_, _, s) in results.items()]
fig = plots.layers_figure([("conv 64->64, 3x3, 14x14 on vta: three schedules (timing model)", layers)],
                          summary=False)
display(Image(plots.save_as(fig, OUT / "schedules.png")))

# %% [markdown]
# ## What this showed

# %%
default, small, streamed = (results[k] for k in variants)
assert all(exact for _, exact, _ in results.values())                 # every schedule computes the same
assert small[0] > 2 * default[0]                                      # smaller tiles, more instructions
assert small[2].cycles > 1.3 * default[2].cycles                      # ... and more cycles
assert small[2].gemm_uops == default[2].gemm_uops                     # the same work
assert small[2].wgt_load_bytes > default[2].wgt_load_bytes            # weights reloaded per tile
assert abs(streamed[2].cycles - default[2].cycles) < 0.1 * default[2].cycles
