"""A small design space and a fake evaluation for the sweep's tests (the real one is slow)."""

import pytest

from codesign.sweep.records import PointResult
from codesign.sweep.space import space_from_text

# 3 x 3 x 2 = 18 combinations of `tiny`, all valid; SRAM = 7 KiB + wgt_bytes, so the
# 12 KiB budget makes the 9 with 8 KiB of weights infeasible: 9 feasible points.
TINY_SPACE = '''
name = "tiny-test"
base = "tiny"
objectives = ["latency", "area"]
[params]
block_in = [4, 8, 16]
block_out = [4, 8, 16]
wgt_bytes = ["4KiB", "8KiB"]
[constraints]
max_sram_bytes = "12KiB"
[[workloads]]
model = "mlp"
'''


def fake_metrics(cfg):
    """Latency falls and area grows with the MACs per cycle: every point trades one for the other."""
    macs = cfg.macs_per_cycle
    return {"latency_cycles": 1e6 / macs + cfg.block_in, "area_mm2": 0.01 * macs + cfg.block_out / 100}


def fake_evaluate(point):
    return PointResult(point.id, (), fake_metrics(point.config), {"latency_cycles": "estimate"})


@pytest.fixture
def tiny_space(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY_SPACE)
    return space_from_text(TINY_SPACE, path=path)
