"""Host lowering: printed loop IR of small schedules, temporaries, and the records it refuses
(and the accelerator lowering refusing host-only constructs)."""

from __future__ import annotations

import pytest

from compiler import te
from compiler.errors import ScheduleError
from compiler.lower.cpu import STACK_BYTES, lower_host, print_host
from compiler.lower.lower import lower
from compiler.schedule import Schedule, load_records
from compiler.schedule import records as R
from compiler.target import AcceleratorTarget
from hw.config import PRESETS


def _softmax(n: int = 8, rows: int = 3) -> tuple[te.Tensor, te.Tensor]:
    x = te.placeholder((rows, n), "float32", "x")
    k1, k2 = te.reduce_axis(n, "k"), te.reduce_axis(n, "k")
    top = te.compute((rows,), lambda i: te.max_reduce(x[i, k1], k1), "top")
    e = te.compute((rows, n), lambda i, j: te.exp(x[i, j] - top[i]), "e")
    total = te.compute((rows,), lambda i: te.sum(e[i, k2], k2), "total")
    return x, te.compute((rows, n), lambda i, j: e[i, j] / total[i], "out")


def test_softmax_per_row():
    _, out = _softmax()
    s = Schedule(out)
    for st in ("top", "e", "total"):
        s.compute_at(st, "out", "i")
    s.vectorize("total", "k")
    assert print_host(lower_host(s, "softmax")) == """\
kernel softmax(x: float32[3, 8], out: float32[3, 8])
  stack top: float32[1]
  stack e: float32[1, 8]
  stack total: float32[1]
  for out.i in 0..3:
    top[0] = -inf
    for top.k in 0..8:
      top[0] = max(top[0], x[out.i, top.k])
    for e.j in 0..8:
      e[0, e.j] = exp((x[out.i, e.j] - top[0]))
    total[0] = 0.0
    for vectorize total.k in 0..8:
      total[0] = (total[0] + e[0, total.k])
    for out.j in 0..8:
      out[out.i, out.j] = (e[0, out.j] / total[0])"""


def test_root_stages_get_whole_temporaries_and_big_ones_go_to_the_heap():
    n = STACK_BYTES // 4 + 1  # one float more than the stack takes
    x = te.placeholder((n,), "float32", "x")
    y = te.compute((n,), lambda i: x[i] * 2.0, "y")
    small = te.compute((4,), lambda i: x[i] + 1.0, "small")
    out = te.compute((n,), lambda i: y[i] + small[i % 4], "out")
    func = lower_host(Schedule(out), "k")
    assert {b.name: (b.scope, b.shape) for b in func.buffers.values()} == {
        "y": ("heap", (n,)), "small": ("stack", (4,))}


def test_compute_at_region_starts_at_the_loop():
    x = te.placeholder((10,), "int32", "x")
    t = te.compute((10,), lambda i: x[i] * 3, "t")
    out = te.compute((8,), lambda i: t[i] + t[i + 2], "out")
    s = Schedule(out)
    s.split("out", "i", 4)
    s.compute_at("t", "out", "i.o")
    assert print_host(lower_host(s, "k")) == """\
kernel k(x: int32[10], out: int32[8])
  stack t: int32[6]
  for out.i.o in 0..2:
    for t.i in 0..6:
      t[t.i] = (x[((out.i.o * 4) + t.i)] * 3)
    for out.i.i in 0..4:
      out[(out.i.i + (out.i.o * 4))] = (t[out.i.i] + t[(out.i.i + 2)])"""


def test_input_order_is_the_callers():
    a = te.placeholder((2,), "float32", "a")
    b = te.placeholder((2,), "float32", "b")
    out = te.compute((2,), lambda i: b[i] - a[i], "out")
    assert [t.name for t in lower_host(Schedule(out), "k").inputs] == ["b", "a"]
    assert [t.name for t in lower_host(Schedule(out), "k", [a, b]).inputs] == ["a", "b"]
    with pytest.raises(ScheduleError, match=r"inputs \['a'\] do not match the schedule's placeholders"):
        lower_host(Schedule(out), "k", [a])


def _two_stage() -> Schedule:
    x = te.placeholder((4, 4), "int8", "x")
    y = te.compute((4, 4), lambda i, j: te.cast("int32", x[i, j]) + 1, "y")
    return Schedule(te.compute((4, 4), lambda i, j: y[i, j] * 2, "out"))


@pytest.mark.parametrize(
    "record,message",
    [(R.CacheRead("x", "inp", ("y",)), "stage x.inp is in scope inp: the host has no scratchpads"),
     (R.SetScope("y", "acc"), "stage y is in scope acc: the host has no scratchpads"),
     (R.Pragma("out", "i", "dma_copy"), r"pragma\(out, i, dma_copy\) is an accelerator record"),
     (R.Tensorize("out", "j"), r"tensorize\(out, j\) is an accelerator record"),
     (R.VirtualThread("out", "i", 2), "virtual_thread on stage out is an accelerator record"),
     (R.Vectorize("out", "i"), r"vectorize\(out, i\): i is not the innermost loop of out; its loops are"),
     ],
)
def test_host_lowering_refuses(record, message):
    s = _two_stage()
    s.apply(record)
    with pytest.raises(ScheduleError, match=message):
        lower_host(s)


def test_vectorize_must_stay_a_loop_with_nothing_inside():
    s = _two_stage()
    s.vectorize("out", "j")
    s.split("out", "j", 2)
    with pytest.raises(ScheduleError, match=r"vectorize\(out, j\): j is no longer a loop of out"):
        lower_host(s)
    s = _two_stage()
    s.vectorize("out", "j")
    s.compute_at("y", "out", "j")
    with pytest.raises(ScheduleError, match=r"vectorize\(out, j\): a stage is computed inside j"):
        lower_host(s)
    with pytest.raises(ScheduleError, match="has no loop axis 'k'"):
        s.vectorize("out", "k")


def test_vectorize_record_saves_and_replays(tmp_path):
    s = _two_stage()
    s.vectorize("out", "j")
    assert str(s) == "vectorize(out, axis=j)"
    s.save(tmp_path / "s.json")
    assert load_records(tmp_path / "s.json") == [R.Vectorize("out", "j")]


def test_accelerator_lowering_refuses_host_constructs():
    target = AcceleratorTarget(PRESETS["tiny"])
    _, out = _softmax()
    with pytest.raises(ScheduleError, match="stage top: the accelerator computes sum reductions only, not"):
        lower(Schedule(out), target)
    x = te.placeholder((4,), "float32", "x")
    with pytest.raises(ScheduleError, match="stage y: the accelerator computes on integers, not float32"):
        lower(Schedule(te.compute((4,), lambda i: x[i] * 2.0, "y")), target)
    s = _two_stage()
    s.vectorize("out", "j")
    with pytest.raises(ScheduleError, match=r"vectorize\(out, j\) is a host record"):
        lower(s, target)


def test_divisions_by_a_block_fold_to_the_block_loops():
    w = te.placeholder((2, 8), "float32", "w")
    out = te.compute((16,), lambda k: w[k // 8, k % 8] + w[(k + 1) // 8, 0], "out")
    s = Schedule(out)
    s.split("out", "k", 8)
    text = print_host(lower_host(s, "k", [w]))
    assert "w[out.k.o, out.k.i]" in text  # k = 8*k.o + k.i with 0 <= k.i < 8
    assert "((out.k.i + (out.k.o * 8)) + 1) // 8" in text  # k.i + 1 reaches 8: left as it is
