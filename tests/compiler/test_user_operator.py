"""An operator the compiler does not ship, written from the public TE and schedule primitives
alone: a batched matmul C[g] = (A[g] @ B[g]^T * 5) >> 4 clipped to [-50, 50], run on fsim and rtl."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import te
from compiler.build import build
from compiler.schedule import Schedule
from compiler.target import AcceleratorTarget
from hw.config import PRESETS
from sim.fsim import FunctionalSimulator

G, M, K, N = 3, 2, 4, 3  # in blocks


def batched_matmul(t: AcceleratorTarget) -> tuple[Schedule, list[te.Tensor]]:
    a = te.placeholder((G, M, K, t.batch, t.block_in), "int8", "A")
    b = te.placeholder((G, N, K, t.block_out, t.block_in), "int8", "B")
    k, ki = te.reduce_axis(K, "k"), te.reduce_axis(t.block_in, "ki")
    shape = (G, M, N, t.batch, t.block_out)
    prod = te.compute(shape, lambda g, m, n, bi, oi: te.sum(
        te.cast("int32", a[g, m, k, bi, ki]) * te.cast("int32", b[g, n, k, oi, ki]), [k, ki]), "prod")
    scaled = te.compute(shape, lambda g, m, n, bi, oi: te.minimum(
        te.maximum((prod[g, m, n, bi, oi] * 5) >> 4, -50), 50), "scaled")
    out = te.compute(shape, lambda g, m, n, bi, oi: te.cast("int8", scaled[g, m, n, bi, oi]), "C")
    s = Schedule(out)
    s.cache_read("A", "inp", ["prod"])
    s.cache_read("B", "wgt", ["prod"])
    s.set_scope("prod", "acc")
    s.set_scope("scaled", "acc")
    s.virtual_thread("C", "g", 3)  # one thread per batch element
    s.compute_at("prod", "C", "g.vi")
    s.compute_at("scaled", "C", "g.vi")
    s.pragma("scaled", "g", "alu")
    s.pragma("C", "m", "dma_copy")
    s.reorder("prod", "k", "g", "m", "n", "bi", "oi", "ki")
    s.tensorize("prod", "bi")
    for stage in ("A.inp", "B.wgt"):
        s.compute_at(stage, "prod", "k")
        s.pragma(stage, "i1", "dma_copy")
    return s, [a, b]


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    acc = np.einsum("gmkbi,gnkoi->gmnbo", a.astype(np.int64), b.astype(np.int64)).astype(np.int32)
    return np.clip((acc.astype(np.int64) * 5).astype(np.int32) >> 4, -50, 50).astype(np.int8)


def _run(cfg, backend):  # type: ignore[no-untyped-def]
    t = AcceleratorTarget(cfg)
    sched, (a, b) = batched_matmul(t)
    program = build(sched, t).program
    rng = np.random.default_rng(7)
    inputs = {"A": rng.integers(-128, 128, a.shape).astype(np.int8),
              "B": rng.integers(-128, 128, b.shape).astype(np.int8)}
    result = backend(cfg).run(program, inputs)
    assert np.array_equal(result.outputs["C"], reference(inputs["A"], inputs["B"]))
    return result


@pytest.mark.parametrize("name", ["tiny", "rect", "vta"])
def test_batched_matmul_on_fsim(name):
    result = _run(PRESETS[name], FunctionalSimulator)
    assert result.stats.gemm_uops == G * M * N * K


@pytest.mark.rtl
@pytest.mark.parametrize("name", ["tiny", "rect"])
def test_batched_matmul_on_rtl(name):
    from sim.rtl.backend import RtlSimulator

    result = _run(PRESETS[name], RtlSimulator)
    assert result.stats.gemm_uops == G * M * N * K and result.stats.cycles > 0
