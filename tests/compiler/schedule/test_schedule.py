"""Schedules: records print, save, load and replay to the identical Program; every illegal
record raises ScheduleError naming itself and the reason."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import te
from compiler.build import build
from compiler.errors import ScheduleError
from compiler.ops.accel import Conv2d, Conv2dKnobs, Conv2dSpec, Dense, DenseKnobs, DenseSpec, Epilogue
from compiler.schedule import Schedule, load_records
from compiler.schedule import records as R
from compiler.target import AcceleratorTarget
from hw.config import PRESETS

TINY = AcceleratorTarget(PRESETS["tiny"])


def _dense():  # type: ignore[no-untyped-def]
    op = Dense(DenseSpec(4, 16, 16), TINY)
    return op, op.schedule(DenseKnobs(tile_m=2, tile_k=2, tile_n=2, n_threads=2))


def test_save_load_replay_gives_the_identical_program(tmp_path):
    op, sched = _dense()
    path = tmp_path / "s.json"
    sched.save(path)
    records = load_records(path)
    assert records == sched.records
    again = Schedule.replay(op.tensors()["out"], records)
    a, b = build(sched, TINY).program, build(again, TINY).program
    assert np.array_equal(a.insns, b.insns)
    assert np.array_equal(a.constants["__uops"], b.constants["__uops"])
    assert str(again) == str(sched)
    assert str(sched).splitlines()[0] == "cache_read(data, scope=inp, readers=[gemm])"


def test_bad_schedule_files(tmp_path):
    with pytest.raises(ScheduleError, match="no such schedule file"):
        load_records(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ScheduleError, match="not valid JSON"):
        load_records(tmp_path / "bad.json")
    (tmp_path / "kind.json").write_text('{"records": [{"kind": "twist", "stage": "a"}]}')
    with pytest.raises(ScheduleError, match="unknown record kind 'twist'"):
        load_records(tmp_path / "kind.json")
    (tmp_path / "field.json").write_text('{"records": [{"kind": "split", "stage": "a"}]}')
    with pytest.raises(ScheduleError, match=r"missing \['axis', 'factor'\]"):
        load_records(tmp_path / "field.json")


def _records_error(op, records, match):
    with pytest.raises(ScheduleError, match=match):
        build(Schedule.replay(op.tensors()["out"], records), TINY)


@pytest.mark.parametrize("record,match", [
    (R.Split("nope", "m", 2), "no stage 'nope'"),
    (R.Split("out", "q", 2), r"split\(out, axis=q, factor=2\): stage out has no loop axis 'q'"),
    (R.Split("out", "m", 0), "factor must be a positive int"),
    (R.SetScope("gemm", "l2"), "unknown scope 'l2'"),
    (R.SetScope("out", "acc"), "an output must stay in DRAM"),
    (R.CacheRead("data", "inp", ("out",)), "out does not read data"),
    (R.VirtualThread("gemm", "ko", 2), "virtual threads cannot split a reduction axis"),
    (R.ComputeInline("gemm"), "a reduction cannot be inlined"),
    (R.ComputeAt("out", "gemm", "m"), "an output stage is computed at the root"),
    (R.Pragma("out", "m", "vectorize"), "unknown pragma 'vectorize'"),
    (R.Reorder("out", ("m", "m")), "an axis is named twice"),
    (R.Fuse("out", "m", "bi"), "bi must directly follow m"),
])
def test_illegal_records_name_themselves(record, match):
    op = Dense(DenseSpec(4, 16, 16), TINY)
    s = Schedule(op.tensors()["out"])
    with pytest.raises(ScheduleError, match=match):
        s.apply(record)


def test_compute_at_into_itself():
    op = Dense(DenseSpec(4, 16, 16), TINY)
    s = Schedule(op.tensors()["out"])
    s.set_scope("gemm", "acc")
    s.compute_at("gemm", "out", "m")
    with pytest.raises(ScheduleError, match="would be computed inside itself"):
        s.compute_at("gemm", "gemm", "m")


def test_split_that_does_not_divide():
    op, sched = _dense()
    records = [*sched.records, R.Split("gemm", "m", 3)]
    _records_error(op, records, r"split\(gemm, m, factor=3\): axis m has extent 2 here")


def test_tile_too_big_for_its_scratchpad():
    op = Dense(DenseSpec(4, 128, 64), TINY)
    with pytest.raises(ScheduleError, match=r"buffers in scope wgt need 512 elements \(weight.wgt 512\), "
                                            "more than the 256"):
        build(op.schedule(DenseKnobs(tile_m=1, tile_k=32, tile_n=16)), TINY)


def test_too_many_virtual_threads_for_the_buffers():
    op = Dense(DenseSpec(4, 64, 64), TINY)
    build(op.schedule(DenseKnobs(tile_m=1, tile_k=16, tile_n=8, n_threads=2)), TINY)
    with pytest.raises(ScheduleError, match=r"x 4 threads"):
        build(op.schedule(DenseKnobs(tile_m=1, tile_k=16, tile_n=8, n_threads=2, m_threads=2)), TINY)


def test_tensorize_that_does_not_match():
    op, sched = _dense()
    records = [r if not isinstance(r, R.Tensorize) else R.Tensorize("gemm", "oi") for r in sched.records]
    _records_error(op, records, r"tensorize\(gemm, gemm\): the loops from the tensorize axis inward")
    records = [r if not isinstance(r, R.Tensorize) else R.Tensorize("gemm", "bi", "conv")
               for r in sched.records]
    _records_error(op, records, "unknown intrinsic 'conv'")
    records = [r for r in sched.records if not isinstance(r, R.Tensorize)]
    _records_error(op, records, "a pass left it in the IR")


def test_dma_with_more_than_two_dimensions():
    op = Conv2d(Conv2dSpec(1, 8, 6, 6, 8, 3, 1, 1), TINY)
    sched = op.schedule(Conv2dKnobs(tile_h=3, tile_w=3, tile_oc=2, tile_ic=2))
    records = [R.Pragma(r.stage, "c", r.pragma) if isinstance(r, R.Pragma) and r.stage == "data_pad"
               else r for r in sched.records]
    _records_error(op, records, r"dma_copy of stage data_pad: the copy needs 3 dimensions .* more than "
                                "the DMA's 2")


def test_alu_immediate_out_of_range():
    op = Dense(DenseSpec(4, 16, 16, Epilogue(multiplier=40000)), TINY)
    with pytest.raises(ScheduleError, match="immediate 40000 of MUL does not fit"):
        build(op.schedule(op.default_knobs()), TINY)


def test_stage_left_in_dram():
    op = Dense(DenseSpec(4, 16, 16), TINY)
    s = Schedule(op.tensors()["out"])
    with pytest.raises(ScheduleError, match="stage gemm would be stored in DRAM"):
        build(s, TINY)


def test_a_stage_that_cannot_hold_a_whole_element():
    a = te.placeholder((2, 4, 1, 4), "int8", "a")
    b = te.compute((2, 4, 1, 2), lambda i, j, x, y: te.cast("int32", a[i, j, x, y]), "b")
    c = te.compute((2, 4, 1, 2), lambda i, j, x, y: te.cast("int8", b[i, j, x, y]), "c")
    s = Schedule(c)
    s.set_scope("b", "acc")
    with pytest.raises(ScheduleError, match=r"stage b in scope acc: its two innermost dimensions must be "
                                            r"one whole acc element \(1, 4\), not \(1, 2\)"):
        build(s, TINY)


@pytest.mark.parametrize("record,match", [
    (R.VirtualThread("out", "m", 0), r"^virtual_thread\(out, axis=m, count=0\): the thread count must be a "
                                     "positive int$"),
    (R.Fuse("gemm", "oi", "ko"), r"^fuse\(gemm, outer=oi, inner=ko\): cannot fuse a reduction and a spatial "
                                 "axis$"),
    (R.CacheRead("nope", "inp", ("gemm",)), "^no tensor 'nope'$"),
])
def test_more_illegal_records(record, match):
    op = Dense(DenseSpec(4, 16, 16), TINY)
    s = Schedule(op.tensors()["out"])
    with pytest.raises(ScheduleError, match=match):
        s.apply(record)


def test_a_copy_stage_name_is_taken():
    op = Dense(DenseSpec(4, 16, 16), TINY)
    s = Schedule(op.tensors()["out"])
    s.cache_write("gemm", "acc")
    with pytest.raises(ScheduleError, match=r"^cache_write\(gemm, scope=acc\): a stage named gemm\.acc "
                                            "already exists$"):
        s.cache_write("gemm", "acc")


def _reduction(*names: str) -> te.Tensor:
    a = te.placeholder((4, 2, 2), "int8", "a")
    k1, k2 = te.reduce_axis(2, names[0]), te.reduce_axis(2, names[1])
    return te.compute((4,), lambda i: te.sum(te.cast("int32", a[i, k1, k2]), [k1, k2]), "c")


def test_axis_names_of_a_stage_are_unique():
    with pytest.raises(ScheduleError, match=r"^stage c: axis names repeat: \['i', 'k', 'k'\]$"):
        Schedule(_reduction("k", "k"))
    s = Schedule(_reduction("k", "k.o"))  # a reduce axis may take any name, even a split's
    with pytest.raises(ScheduleError, match="^stage c: axis k.o exists already$"):
        s.split("c", "k", 2)


def test_schedule_files_hold_a_list_of_record_objects(tmp_path):
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(ScheduleError, match="list.json: expected an object with a list 'records'$"):
        load_records(tmp_path / "list.json")
    (tmp_path / "item.json").write_text('{"records": [[1]]}')
    with pytest.raises(ScheduleError, match=r"item.json record 0: a record must be an object with a 'kind', "
                                            r"not \[1\]$"):
        load_records(tmp_path / "item.json")
