"""`insert_tokens`: dependency-token pushes and pops between the load, compute and store queues.

Expected from the contract (TVM's CoProcSync): a push and a pop between consecutive statements
of different queues; for a loop whose body starts and ends on different queues, the carried edge
(pop at the start of the body, push at its end, a push before the loop and a pop after it); the
compute->load edge of a load/GEMM loop hoisted as a chain out of the enclosing loops; loops of
one iteration carry nothing; virtual-thread loops place their own fix-ups.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.build import build
from sim.fsim import FunctionalSimulator
from tests.compiler.passes.cases import TINY, conv, matmul, matmul_data
from tests.compiler.passes.tokens import outstanding


def test_a_load_gemm_loop_carries_a_chain_hoisted_to_the_program():
    # k.o loop: loads then GEMM, so its carried compute->load edge is the chain, whose entry push
    # and exit pop go up through out.n.o and out.m to the program; out.n.o: reset ... store, so
    # its carried edge is store->compute (the next tile's reset waits for this tile's store)
    expected = """\
push compute->load
for out.m in 0..1:
  push store->compute
  for out.n.o in 0..2:
    pop store->compute
    kernel[][] gemm_reset acc[0]
    for c.k.o in 0..2:
      pop compute->load
      dma_load INP a[(c.k.o + (out.m * 2))] <-> sram[0] y=1 x=1 stride=1  // load
      dma_load WGT w[(c.k.o + (out.n.o * 2))] <-> sram[0] y=1 x=1 stride=1  // load
      push load->compute
      pop load->compute
      kernel[][] gemm acc[0] += inp[0] * wgt[0]
      push compute->load
    push compute->store
    pop compute->store
    dma_store OUT out[((out.m * 2) + out.n.o)] <-> sram[0] y=1 x=1 stride=1  // store
    push store->compute
  pop store->compute
pop compute->load"""
    assert build(matmul(), TINY).print_ir("insert_tokens") == expected


def test_a_loop_of_one_iteration_carries_nothing():
    # conv.ic has one iteration: no chain; its loads follow the reset, so a compute->load token
    # orders them after the previous tile's GEMMs; out.y.o carries store->compute
    expected = """\
for out.n in 0..1:
  for out.o in 0..1:
    push store->compute
    for out.y.o in 0..2:
      pop store->compute
      kernel[conv.y<2 conv.x<4][] gemm_reset acc[(conv.x + (conv.y * 4))]
      push compute->load
      pop compute->load
      for conv.ic in 0..1:
        dma_load INP data[((((conv.ic * 16) + (out.n * 16)) + (out.y.o * 8)) + -5)] <-> sram[0] y=4 x=6 stride=4 pad_y(((out.y.o * 2) + -1) in [0,4)) pad_x(-1 in [0,4))  // load
        dma_load WGT kernel[((conv.ic * 9) + (out.o * 9))] <-> sram[0] y=1 x=9 stride=9  // load
        push load->compute
        pop load->compute
        kernel[conv.x<4 conv.ry<3][conv.y<2 conv.rx<3] gemm acc[(conv.x + (conv.y * 4))] += inp[(((conv.rx + (conv.ry * 6)) + conv.x) + (conv.y * 6))] * wgt[(conv.rx + (conv.ry * 3))]
      push compute->store
      pop compute->store
      dma_store OUT out[(((out.n * 16) + (out.o * 16)) + (out.y.o * 8))] <-> sram[0] y=1 x=8 stride=8  // store
      push store->compute
    pop store->compute"""  # noqa: E501
    assert build(conv(), TINY).print_ir("insert_tokens") == expected


def test_each_virtual_thread_places_its_own_fix_ups():
    # the chain's entry push and exit pop stop at the thread loop: each thread has its own
    expected = """\
for out.m in 0..1:
  for vthread out.n.o.vt in 0..2:
    push compute->load
    for out.n.o.vi in 0..1:
      kernel[][] gemm_reset acc[out.n.o.vt]
      for c.k.o in 0..2:
        pop compute->load
        dma_load INP a[(c.k.o + (out.m * 2))] <-> sram[out.n.o.vt] y=1 x=1 stride=1  // load
        dma_load WGT w[((c.k.o + (out.n.o.vi * 2)) + (out.n.o.vt * 2))] <-> sram[out.n.o.vt] y=1 x=1 stride=1  // load
        push load->compute
        pop load->compute
        kernel[][] gemm acc[out.n.o.vt] += inp[out.n.o.vt] * wgt[out.n.o.vt]
        push compute->load
      push compute->store
      pop compute->store
      dma_store OUT out[(((out.m * 2) + out.n.o.vi) + out.n.o.vt)] <-> sram[out.n.o.vt] y=1 x=1 stride=1  // store
    pop compute->load"""  # noqa: E501
    assert build(matmul(threads=2), TINY).print_ir("insert_tokens") == expected


@st.composite
def _schedules(draw):  # type: ignore[no-untyped-def]
    if draw(st.booleans()):
        tile_h, threads = draw(st.sampled_from([(1, 1), (1, 2), (1, 4), (2, 1), (2, 2), (4, 1)]))
        return f"conv(tile_h={tile_h}, threads={threads})", conv(tile_h=tile_h, threads=threads), threads
    k, tile_k = draw(st.sampled_from([(1, 1), (2, 1), (2, 2), (4, 2)]))
    tile_n, threads = draw(st.sampled_from([1, 2])), draw(st.sampled_from([1, 2, 3]))
    n = tile_n * threads * draw(st.sampled_from([1, 2]))
    m, epilogue = draw(st.sampled_from([1, 2])), draw(st.booleans())
    args = dict(m=m, k=k, n=n, tile_k=tile_k, tile_n=tile_n, threads=threads, epilogue=epilogue)
    return f"matmul(**{args})", matmul(**args), threads  # type: ignore[arg-type]


@settings(max_examples=30, deadline=None, derandomize=True)
@given(_schedules())
def test_tokens_balance_in_program_order(case):
    # per thread (the threads run one after the other here) at most one token is outstanding on
    # a queue pair, none is popped before it is pushed and none is left; interleaved, at most
    # one per thread
    _, sched, threads = case
    built = build(sched, TINY)
    assert max(outstanding(built.ir["insert_tokens"]).values()) == 1
    assert max(outstanding(built.ir["inject_virtual_threads"]).values()) <= threads


def test_a_carried_edge_from_store_to_load_is_relayed_through_compute():
    # the entry push and exit pop of a loop whose body starts with a load and ends with a store
    # go through compute too (a direct store->load token does not exist)
    built = build(matmul(loads_per_tile=True), TINY)
    outstanding(built.ir["insert_tokens"])  # out.n.o: loads, reset, GEMM, store
    inputs, expected = matmul_data()
    result = FunctionalSimulator(TINY.cfg).run(built.program, inputs)
    assert (result.outputs["out"] == expected).all()
