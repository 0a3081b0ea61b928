"""The configs the area model is calibrated on (`FIT`) and judged on (`HELD_OUT`).

They vary what changes the logic: the GEMM shape (batch 1-2, block_in and block_out 4-32, up to
256 MACs: one Yosys run took 35 s at 16 MACs, 4-8 minutes at 256, niced), the bus width,
requests in flight, burst length, command-queue depth and the scratchpad sizes (their address
widths).  The held-out configs lie inside the fitted ranges: the benchmark measures
interpolation, not extrapolation.
"""

from __future__ import annotations

import dataclasses

from hw.config import PRESETS, AcceleratorConfig

_TINY = PRESETS["tiny"]


def _cfg(name: str, batch: int, block_in: int, block_out: int, **changes: int) -> AcceleratorConfig:
    # Buffers default to 256 rows of inp, acc and wgt tiles and 1 KB of micro-ops, as `tiny`.
    inp = 256 * batch * block_in
    wgt = 256 * block_in * block_out
    acc = 256 * batch * block_out * 4
    base = {"uop_bytes": 1024, "inp_bytes": inp, "wgt_bytes": wgt, "acc_bytes": acc}
    return dataclasses.replace(_TINY, name=name, batch=batch, block_in=block_in,
                               block_out=block_out, **{**base, **changes})


FIT: tuple[AcceleratorConfig, ...] = (
    _cfg("s1x4x4", 1, 4, 4),
    _cfg("s1x8x8", 1, 8, 8, cmd_queue_depth=32, mem_inflight=8),
    _cfg("s1x4x16", 1, 4, 16),
    _cfg("s1x16x4", 1, 16, 4),
    _cfg("s2x4x4", 2, 4, 4),
    _cfg("s1x8x8-bus256", 1, 8, 8, bus_bits=256),
    _cfg("s1x4x4-bus512", 1, 4, 4, bus_bits=512, max_burst_beats=4),
    _cfg("s1x8x8-big", 1, 8, 8, uop_bytes=16384, inp_bytes=16384, wgt_bytes=65536,
         acc_bytes=65536, cmd_queue_depth=512, mem_inflight=16, max_burst_beats=64),
    _cfg("s2x8x16", 2, 8, 16, bus_bits=128, max_burst_beats=16, mem_inflight=8,
         cmd_queue_depth=64),
    _cfg("s1x32x4", 1, 32, 4),
    _cfg("s1x4x32", 1, 4, 32, bus_bits=128),
    _cfg("s1x16x16", 1, 16, 16, bus_bits=64, max_burst_beats=16, mem_inflight=8,
         cmd_queue_depth=128),
    # One parameter at a time from s1x4x4, for the small terms the others cannot separate.
    _cfg("s1x4x4-inflight64", 1, 4, 4, mem_inflight=64),
    _cfg("s1x4x4-queue4096", 1, 4, 4, cmd_queue_depth=4096),
    _cfg("s1x4x4-burst256", 1, 4, 4, max_burst_beats=256),
)

HELD_OUT: tuple[AcceleratorConfig, ...] = (
    _cfg("h1x4x8", 1, 4, 8),
    _cfg("h1x8x4", 1, 8, 4, mem_inflight=2),
    _cfg("h2x8x8", 2, 8, 8, bus_bits=128),
    _cfg("h1x8x16", 1, 8, 16, cmd_queue_depth=64),
    _cfg("h1x16x8", 1, 16, 8, bus_bits=128, mem_inflight=16),
    _cfg("h2x4x8", 2, 4, 8, max_burst_beats=32),
    _cfg("h1x8x8-bus128", 1, 8, 8, bus_bits=128, cmd_queue_depth=256),
    _cfg("h1x4x4-deep", 1, 4, 4, uop_bytes=4096, inp_bytes=4096, wgt_bytes=16384,
         acc_bytes=16384, cmd_queue_depth=128),
    _cfg("h2x16x8", 2, 16, 8, bus_bits=256, max_burst_beats=32, mem_inflight=8),
)
