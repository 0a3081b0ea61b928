import pytest

from compiler.errors import ScheduleError
from compiler.ops.accel import Conv2d, Conv2dSpec, Dense, DenseSpec, Eltwise, EltwiseSpec
from compiler.target import AcceleratorTarget
from compiler.tune.space import build_space
from compiler.tune.workload import Workload, config_key
from hw.config import PRESETS

TINY = AcceleratorTarget(PRESETS["tiny"])
CONV = Conv2d(Conv2dSpec(1, 8, 4, 4, 8, 3, 1, 1), TINY)


class DictCache:
    """compiler.tune.space.FeatureCache in memory (codesign.exec.store keeps one on disk)."""

    def __init__(self):
        self.rows, self.hits = {}, 0

    def get_features(self, key):
        self.hits += key in self.rows
        return self.rows.get(key)

    def put_features(self, items):
        self.rows.update(items)


CACHE = DictCache()


def test_space_holds_fitting_points_under_the_instruction_bound():
    full = build_space(CONV, max_insns=10**9, cache=CACHE)
    cut = build_space(CONV, max_insns=60)
    again = build_space(CONV, max_insns=10**9, cache=CACHE)
    assert CACHE.hits >= len(full) and (again.features == full.features).all()
    assert len(full) == sum(CONV.fits(k) for k in CONV.points()) and not full.cut
    assert 0 < len(cut) < len(full) and len(cut) + len(cut.cut) == len(full)
    assert max(cut.insns) <= 60 and all(c.insns > 60 and c.reason == "insns" for c in cut.cut)
    assert cut.features.shape == (len(cut), full.features.shape[1])


def test_neighbours_differ_in_one_knob_by_one_step():
    space = build_space(CONV, max_insns=10**9, cache=CACHE)
    for i in range(0, len(space), 3):
        here = space.points[i].to_json()
        for j in space.neighbours(i):
            there = space.points[j].to_json()
            changed = [n for n in here if here[n] != there[n]]
            assert len(changed) == 1
            values = space.knob_values[changed[0]]
            assert abs(values.index(here[changed[0]]) - values.index(there[changed[0]])) == 1
            assert i in space.neighbours(j)


def test_no_point_under_the_bound_is_a_schedule_error():
    with pytest.raises(ScheduleError, match="no schedule point fits and issues at most 1 instructions"):
        build_space(CONV, max_insns=1, cache=CACHE)


def test_workload_round_trips_and_keys_are_stable():
    for op in (CONV, Dense(DenseSpec(4, 32, 24), TINY)):
        w = Workload.of(op)
        again = Workload.from_json(w.to_json()).make(TINY)
        assert again.describe() == op.describe() and Workload.of(again).key == w.key
    tiny = config_key(PRESETS["tiny"].to_dict())
    assert tiny != config_key(PRESETS["tiny"].with_params(dram_latency_cycles=9).to_dict())
    assert tiny == config_key(PRESETS["tiny"].with_params(name="other").to_dict())


def test_elementwise_operators_have_no_tuning_space():
    with pytest.raises(ScheduleError, match="cannot tune eltwise: tunable operators are conv2d, dense"):
        Workload.of(Eltwise(EltwiseSpec("add", 1, 16, 4, 4), TINY))
