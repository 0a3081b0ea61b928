"""Static memory planning: buffers live at the same time never overlap, and reuse shrinks the
arena below one buffer per value."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.graph.builder import append
from compiler.graph.ir import Graph
from compiler.graph.memory import ALIGN_BYTES, plan_memory


def _check(g: Graph) -> None:
    plan = plan_memory(g)
    names = list(plan.lifetimes)
    assert set(names) == {n for n, v in g.values.items() if not v.is_const}
    for a, b in itertools.combinations(names, 2):
        la, lb = plan.lifetimes[a], plan.lifetimes[b]
        if la.overlaps(lb):
            oa, ob = plan.offsets[a], plan.offsets[b]
            assert oa + la.size_bytes <= ob or ob + lb.size_bytes <= oa, (a, b)
    assert all(o % ALIGN_BYTES == 0 for o in plan.offsets.values())
    assert plan.arena_bytes <= plan.unshared_bytes


@st.composite
def graphs(draw):  # type: ignore[no-untyped-def]
    """Random DAGs of Relu and Add over one shape, several outputs."""
    shape = (1, draw(st.integers(1, 8)), draw(st.integers(1, 5)))
    g = Graph("random")
    g.add_input("x", shape, "float32")
    names = ["x"]
    for i in range(draw(st.integers(1, 25))):
        if draw(st.booleans()) and len(names) > 1:
            a, b = draw(st.sampled_from(names)), draw(st.sampled_from(names))
            append(g, "Add", [a, b], [f"v{i}"])
        else:
            append(g, "Relu", [draw(st.sampled_from(names))], [f"v{i}"])
        names.append(f"v{i}")
    g.outputs = sorted(set(draw(st.lists(st.sampled_from(names[1:]), min_size=1, max_size=3))))
    return g.remove_dead()


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_live_buffers_never_overlap(g: Graph) -> None:
    _check(g)


def test_a_chain_needs_two_buffers_not_one_per_value() -> None:
    g = Graph("chain")
    g.add_input("x", (1, 16), "float32")  # 64 bytes each
    prev = "x"
    for i in range(10):
        append(g, "Relu", [prev], [f"r{i}"])
        prev = f"r{i}"
    g.outputs = [prev]
    plan = plan_memory(g)
    assert plan.unshared_bytes == 11 * 64 and plan.arena_bytes == 2 * 64
    assert plan.lifetimes["x"].first == -1 and plan.lifetimes["r9"].last == 10
    arena = np.zeros(plan.arena_bytes, np.uint8)
    view = plan.view(arena, "r3", (1, 16), "float32")
    view[:] = 7.0
    assert view.base is not None and np.shares_memory(view, arena)
