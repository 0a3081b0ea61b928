"""The GPU's schedule records (bind, unroll) and scopes (shared, local): application errors,
JSON round trip; the other targets' lowerings refuse them."""

from __future__ import annotations

import pytest

from compiler.errors import ScheduleError
from compiler.lower.cpu import lower_host
from compiler.lower.lower import lower
from compiler.schedule import records as R
from compiler.schedule.schedule import Schedule
from compiler.target import AcceleratorTarget
from compiler.te.tensor import compute, placeholder, reduce_axis, sum
from hw.config import PRESETS


def _matmul(dtype: str = "float32") -> Schedule:
    a, b = placeholder((8, 4), dtype, "a"), placeholder((4, 8), dtype, "b")
    k = reduce_axis(4, "k")
    return Schedule(compute((8, 8), lambda i, j: sum(a[i, k] * b[k, j], k), "out"))


def test_bind_marks_the_loop_with_its_thread() -> None:
    s = _matmul()
    s.bind("out", "i", "blockIdx.x")
    s.unroll("out", "k")
    assert s.stage("out").loop_kinds == {"i": "blockIdx.x", "k": "unroll"}


@pytest.mark.parametrize("record, message", [
    (R.Bind("out", "i", "warp.x"), r"bind\(out, axis=i, thread=warp.x\): unknown thread 'warp.x'; known: "
                                   r"blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x"),
    (R.Bind("out", "k", "threadIdx.x"), r"bind\(out, axis=k, thread=threadIdx.x\): a reduction axis cannot "
                                        r"be bound to threads"),
    (R.Bind("out", "q", "threadIdx.x"), r"stage out has no loop axis 'q'"),
])
def test_bind_errors(record: R.Bind, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        _matmul().apply(record)


def test_a_thread_is_bound_once_per_stage() -> None:
    s = _matmul()
    s.bind("out", "i", "threadIdx.x")
    with pytest.raises(ScheduleError, match=r"bind\(out, axis=j, thread=threadIdx.x\): stage out binds "
                                            r"threadIdx.x already"):
        s.bind("out", "j", "threadIdx.x")


def test_a_loop_takes_one_mark() -> None:
    s = _matmul()
    s.bind("out", "i", "threadIdx.x")
    with pytest.raises(ScheduleError, match=r"unroll\(out, axis=i\): i is marked threadIdx.x already"):
        s.unroll("out", "i")
    s.unroll("out", "j")
    with pytest.raises(ScheduleError, match=r"bind\(out, axis=j, thread=blockIdx.x\): j is marked unroll "
                                            r"already"):
        s.bind("out", "j", "blockIdx.x")


def test_gpu_records_round_trip_through_json() -> None:
    for rec in (R.Bind("out", "i.o", "blockIdx.y"), R.Unroll("out", "k.i")):
        assert R.from_json(R.to_json(rec)) == rec


def test_shared_and_local_are_scopes() -> None:
    s = _matmul()
    assert s.cache_read("a", "shared", ["out"]) == "a.shared"
    assert "local" in R.SCOPES


def test_the_host_lowering_refuses_gpu_records() -> None:
    s = _matmul()
    s.bind("out", "i", "threadIdx.x")
    with pytest.raises(ScheduleError, match=r"threadIdx.x on out.i is a GPU record \(bind or unroll\); the "
                                            r"host lowering does not take it"):
        lower_host(s)


def test_the_accelerator_lowering_refuses_gpu_records() -> None:
    s = _matmul("int8")
    s.bind("out", "i", "blockIdx.x")
    with pytest.raises(ScheduleError, match=r"blockIdx.x\(out, i\) is a GPU record; the accelerator lowering "
                                            r"does not take it"):
        lower(s, AcceleratorTarget(PRESETS["vta"]))


def test_the_accelerator_lowering_refuses_gpu_scopes() -> None:
    s = _matmul("int8")
    s.cache_read("a", "shared", ["out"])
    with pytest.raises(ScheduleError, match=r"stage a.shared is in scope shared, a GPU scope; the "
                                            r"accelerator's "
                                            r"scopes are inp, wgt and acc"):
        lower(s, AcceleratorTarget(PRESETS["vta"]))
