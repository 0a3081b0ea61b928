"""`inject_virtual_threads`: the tasks of virtual threads interleaved into one stream.

Expected from the contract: a virtual-thread loop disappears; a thread's task is [pops] [DMAs,
kernels or token-free loops of one queue] [pushes], repeated once per thread with the thread
variable bound, so that the threads' tasks alternate; loops that hold tokens stay loops and are
interleaved inside; serial loops of one iteration are spliced (their variable bound to 0) so that
a token around them joins its task; the threads together may not exceed the token counters.
"""

from __future__ import annotations

import numpy as np
import pytest

from compiler.build import build
from compiler.errors import ScheduleError
from compiler.target import AcceleratorTarget
from compiler.tir import stmt as S
from compiler.tir.printer import describe
from sim.fsim import FunctionalSimulator
from tests.compiler.conftest import ODD
from tests.compiler.passes.cases import TINY, conv, matmul, matmul_data
from tests.compiler.passes.tokens import outstanding


def test_two_threads_alternate_their_load_and_gemm_tasks():
    # per step of k.o: thread 0's load task (its pop, inp and wgt DMAs, its push), thread 1's,
    # then thread 0's GEMM task and thread 1's; thread t uses its copy of each buffer (sram t,
    # acc t) and its half of n (w[k.o + 2t], out[2m + t]); out.n.o.vi (one iteration) is gone
    expected = """\
for out.m in 0..1:
  push compute->load
  push compute->load
  kernel[][] gemm_reset acc[0]
  kernel[][] gemm_reset acc[1]
  for c.k.o in 0..2:
    pop compute->load
    dma_load INP a[(c.k.o + (out.m * 2))] <-> sram[0] y=1 x=1 stride=1  // load
    dma_load WGT w[c.k.o] <-> sram[0] y=1 x=1 stride=1  // load
    push load->compute
    pop compute->load
    dma_load INP a[(c.k.o + (out.m * 2))] <-> sram[1] y=1 x=1 stride=1  // load
    dma_load WGT w[(c.k.o + 2)] <-> sram[1] y=1 x=1 stride=1  // load
    push load->compute
    pop load->compute
    kernel[][] gemm acc[0] += inp[0] * wgt[0]
    push compute->load
    pop load->compute
    kernel[][] gemm acc[1] += inp[1] * wgt[1]
    push compute->load
  push compute->store
  push compute->store
  pop compute->store
  dma_store OUT out[(out.m * 2)] <-> sram[0] y=1 x=1 stride=1  // store
  pop compute->store
  dma_store OUT out[((out.m * 2) + 1)] <-> sram[1] y=1 x=1 stride=1  // store
  pop compute->load
  pop compute->load"""
    assert build(matmul(threads=2), TINY).print_ir() == expected


def test_a_single_iteration_loop_is_spliced_so_its_pop_joins_the_task():
    # conv.ic (one iteration) is spliced: the compute->load pop placed before it joins the
    # thread's loads; thread 1 reads padded rows vi + 1 (data rows 4 vi + 3 ..) into sram 18
    # (after thread 0's 3 x 6 elements), its kernel tile at wgt 9, its acc tile at 4
    expected = """\
for out.n in 0..1:
  for out.o in 0..1:
    push store->compute
    push store->compute
    for out.y.o.vi in 0..2:
      pop store->compute
      kernel[conv.x<4][] gemm_reset acc[conv.x]
      push compute->load
      pop store->compute
      kernel[conv.x<4][] gemm_reset acc[(conv.x + 4)]
      push compute->load
      pop compute->load
      dma_load INP data[(((out.n * 16) + (out.y.o.vi * 4)) + -5)] <-> sram[0] y=3 x=6 stride=4 pad_y((out.y.o.vi + -1) in [0,4)) pad_x(-1 in [0,4))  // load
      dma_load WGT kernel[(out.o * 9)] <-> sram[0] y=1 x=9 stride=9  // load
      push load->compute
      pop compute->load
      dma_load INP data[(((out.n * 16) + (out.y.o.vi * 4)) + 3)] <-> sram[18] y=3 x=6 stride=4 pad_y((out.y.o.vi + 1) in [0,4)) pad_x(-1 in [0,4))  // load
      dma_load WGT kernel[(out.o * 9)] <-> sram[9] y=1 x=9 stride=9  // load
      push load->compute
      pop load->compute
      kernel[conv.x<4 conv.ry<3][conv.rx<3] gemm acc[conv.x] += inp[((conv.rx + (conv.ry * 6)) + conv.x)] * wgt[(conv.rx + (conv.ry * 3))]
      push compute->store
      pop load->compute
      kernel[conv.x<4 conv.ry<3][conv.rx<3] gemm acc[(conv.x + 4)] += inp[(((conv.rx + (conv.ry * 6)) + conv.x) + 18)] * wgt[((conv.rx + (conv.ry * 3)) + 9)]
      push compute->store
      pop compute->store
      dma_store OUT out[(((out.n * 16) + (out.o * 16)) + (out.y.o.vi * 4))] <-> sram[0] y=1 x=4 stride=4  // store
      push store->compute
      pop compute->store
      dma_store OUT out[((((out.n * 16) + (out.o * 16)) + (out.y.o.vi * 4)) + 8)] <-> sram[4] y=1 x=4 stride=4  // store
      push store->compute
    pop store->compute
    pop store->compute"""  # noqa: E501
    assert build(conv(tile_h=1, threads=2), TINY).print_ir() == expected


def test_a_token_free_loop_is_one_task():
    # the store is a loop of one DMA per output block: each thread's loop follows its pop whole
    lines = build(matmul(n=4, tile_n=2, threads=2, store_at="b"), TINY).print_ir().splitlines()
    start = lines.index("  pop compute->store")
    assert lines[start : start + 6] == [
        "  pop compute->store",
        "  for out.n.i in 0..2:",
        "    dma_store OUT out[((out.m * 4) + out.n.i)] <-> sram[out.n.i] y=1 x=1 stride=1  // store",
        "  pop compute->store",
        "  for out.n.i in 0..2:",
        "    dma_store OUT out[(((out.m * 4) + out.n.i) + 2)] <-> sram[(out.n.i + 2)] y=1 x=1 stride=1  "
        "// store",
    ]


def _task_kinds(stmts: tuple[S.Stmt, ...]) -> list[str]:
    return [describe(s).split(" ")[0] + (f" {describe(s).split()[1]}" if isinstance(s, S.Dma) else "")
            for s in stmts]


def _loop(node: S.Stmt, name: str) -> S.For | None:
    """The first loop over variable `name` in `node`."""
    if isinstance(node, S.For) and node.var.name == name:
        return node
    children = node.stmts if isinstance(node, S.Seq) else (node.body,) if isinstance(node, S.For) else ()
    return next((f for c in children if (f := _loop(c, name)) is not None), None)


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
def test_any_thread_count_interleaves_whole_tasks_and_computes_exactly(threads):
    built = build(matmul(k=2, n=threads, threads=threads), TINY)
    loop = _loop(built.ir["inject_virtual_threads"], "c.k.o")
    assert loop is not None
    load = ["pop", "dma_load INP", "dma_load WGT", "push"]
    gemm = ["pop", "kernel[][]", "push"]
    assert _task_kinds(loop.body.stmts) == load * threads + gemm * threads  # type: ignore[union-attr]
    gemms = [s for s in loop.body.stmts if isinstance(s, S.Kernel)]  # type: ignore[union-attr]
    assert [describe(k) for k in gemms] == [f"kernel[][] gemm acc[{t}] += inp[{t}] * wgt[{t}]"
                                            for t in range(threads)]
    assert max(outstanding(built.ir["inject_virtual_threads"]).values()) == threads
    inputs, expected = matmul_data(n=threads, seed=threads)
    for seed in (None, 1, 2):  # the deterministic order, then random legal orders of the modules
        result = FunctionalSimulator(TINY.cfg, seed=seed).run(built.program, inputs)
        assert np.array_equal(result.outputs["out"], expected)


def test_threads_are_limited_by_the_token_counters():
    odd = AcceleratorTarget(ODD)  # token_counter_bits=2: 3 tokens per queue
    built = build(matmul(n=3, threads=3, t=odd), odd)
    assert max(outstanding(built.ir["inject_virtual_threads"]).values()) == 3
    with pytest.raises(ScheduleError, match=r"^virtual threads out\.n\.o\.vt \(4\) = 4 threads can leave 4 "
                                            "tokens outstanding on one queue; the token counters hold 3 "
                                            r"\(token_counter_bits=2\)$"):
        build(matmul(n=4, threads=4, t=odd), odd)
    nested = matmul(m=2, n=2, threads=2, t=odd)
    nested.virtual_thread("out", "m", 2)
    with pytest.raises(ScheduleError, match=r"^virtual threads out\.m\.vt \(2\) x out\.n\.o\.vt \(2\) = 4 "
                                            "threads can leave 4 tokens"):
        build(nested, odd)


def test_three_threads_on_three_token_slots_compute_exactly():
    odd = AcceleratorTarget(ODD)
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, (1, 2, 2, 8)).astype(np.int8)
    w = rng.integers(-128, 128, (3, 2, 4, 8)).astype(np.int8)
    result = FunctionalSimulator(ODD, seed=5).run(build(matmul(n=3, threads=3, t=odd), odd).program,
                                                 {"a": a, "w": w})
    expected = np.einsum("mkbi,nkoi->mnbo", a.astype(np.int64), w.astype(np.int64))
    assert np.array_equal(result.outputs["out"], expected.astype(np.int32).astype(np.int8))
