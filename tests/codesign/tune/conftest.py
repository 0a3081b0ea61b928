"""A small tuning problem shared by the tests: a conv on the tiny config whose whole space
measures in seconds on the timing model."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.exec.store import Store
from codesign.tune.measure import Measurer, task_for
from compiler.ops.accel import Conv2d, Conv2dSpec
from compiler.target import AcceleratorTarget
from compiler.tune.space import build_space
from hw.config import PRESETS

TINY = PRESETS["tiny"]


@pytest.fixture(scope="session")
def store(tmp_path_factory):
    return Store(tmp_path_factory.mktemp("tune") / "cache.sqlite")


@pytest.fixture(scope="session")
def problem(store):
    """(space, exhaustive cycles) of a 1x8x8x8 -> 16 3x3 conv on tiny (147 points)."""
    op = Conv2d(Conv2dSpec(1, 8, 8, 8, 16, 3, 1, 1), AcceleratorTarget(TINY))
    space = build_space(op, max_insns=300, cache=store)
    measurer = Measurer(store=store, workers=2)
    cycles = np.full(len(space), np.inf)
    for i, res, _ in measurer.run([task_for(space.workload, TINY, k) for k in space.points]):
        if res.status == "ok":
            cycles[i] = res.cycles
    measurer.close()
    return space, cycles
