"""GemmDot against numpy, exact, on non-square configs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from amaranth.sim import Simulator

from hw.config import PRESETS
from hw.rtl.gemm import GemmDot


def pack(values: np.ndarray, bits: int) -> int:
    word = 0
    for i, v in enumerate(values.reshape(-1).tolist()):
        word |= (int(v) & ((1 << bits) - 1)) << (i * bits)
    return word


def unpack(word: int, count: int, bits: int) -> np.ndarray:
    raw = [(word >> (i * bits)) & ((1 << bits) - 1) for i in range(count)]
    return np.array([r - (1 << bits) if r >> (bits - 1) else r for r in raw], dtype=np.int64)


@pytest.mark.parametrize("shape", [(1, 4, 4), (2, 4, 8), (2, 8, 4)])
def test_dot_matches_numpy(shape: tuple[int, int, int]) -> None:
    batch, block_in, block_out = shape
    cfg = dataclasses.replace(PRESETS["tiny"], batch=batch, block_in=block_in, block_out=block_out,
                              inp_bytes=4096, wgt_bytes=8192, acc_bytes=8192)
    dut = GemmDot(cfg)
    rng = np.random.default_rng(sum(shape))
    cases = [rng.integers(-128, 128, (batch, block_in)) for _ in range(4)]
    wgts = [rng.integers(-128, 128, (block_out, block_in)) for _ in range(4)]
    cases.append(np.full((batch, block_in), -128))
    wgts.append(np.full((block_out, block_in), -128))

    async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
        for inp, wgt in zip(cases, wgts, strict=True):
            ctx.set(dut.inp, pack(inp, cfg.inp_bits))
            ctx.set(dut.wgt, pack(wgt, cfg.wgt_bits))
            got = unpack(ctx.get(dut.dot), batch * block_out, cfg.acc_bits)
            want = (inp @ wgt.T).reshape(-1)
            np.testing.assert_array_equal(got, want)

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
