import numpy as np
import pytest

from compiler.build import build
from compiler.ops.accel import Conv2d, Conv2dSpec, Dense, DenseSpec
from compiler.target import AcceleratorTarget
from compiler.tir.printer import print_ir
from compiler.tune import features as F
from hw.config import PRESETS

TINY = AcceleratorTarget(PRESETS["tiny"])
CONV = Conv2d(Conv2dSpec(1, 8, 6, 6, 16, 3, 1, 1), TINY)
DENSE = Dense(DenseSpec(4, 32, 24), TINY)


def _features(op, knobs):
    return F.features(F.lower_point(op.schedule(knobs), op.target, op.op), op.target)


def test_lowering_for_features_is_builds_final_ir():
    knobs = CONV.default_knobs()
    low = F.lower_point(CONV.schedule(knobs), TINY, "conv2d")
    built = build(CONV.schedule(knobs), TINY, "conv2d")
    assert print_ir(low.body) == print_ir(built.ir["inject_virtual_threads"])


def test_conv_and_dense_have_the_same_names_in_the_same_order():
    conv, dense = _features(CONV, CONV.default_knobs()), _features(DENSE, DENSE.default_knobs())
    assert list(conv) == list(dense) == F.names()
    assert len(F.names()) == len(set(F.names())) > 50
    assert all(np.isfinite(v) for v in (*conv.values(), *dense.values()))


def test_features_are_deterministic_and_differ_between_points():
    points = [k for k in CONV.points() if CONV.fits(k)][:40]
    first = np.array([F.vector(_features(CONV, k)) for k in points])
    again = np.array([F.vector(_features(CONV, k)) for k in points])
    assert np.array_equal(first, again)
    assert len({row.tobytes() for row in first}) == len(points)


def test_features_are_not_knob_values():
    # A schedule quantity, not a knob: threads show as the IR's virtual-thread product, the
    # GEMM work as micro-ops that do not depend on the tiling.
    one = _features(CONV, CONV.default_knobs(vthreads=1))
    two = _features(CONV, CONV.default_knobs(vthreads=2))
    assert one["virtual_threads"] == 1 and two["virtual_threads"] == 2
    assert one["gemm_uops"] == two["gemm_uops"]
    knobs = {"tile_b", "tile_h", "tile_w", "tile_oc", "tile_ic", "oc_threads", "h_threads"}
    assert not set(F.names()) & knobs


@pytest.mark.parametrize("op", [CONV, DENSE], ids=["conv2d", "dense"])
def test_static_instruction_count_is_close_to_the_program(op):
    for knobs in [k for k in op.points() if op.fits(k)][:12]:
        low = F.lower_point(op.schedule(knobs), op.target, op.op)
        emitted = build(op.schedule(knobs), op.target, op.op).program.insns.shape[0]
        counted = F.static_insns(low)
        # the count leaves out token-only NOPs, the micro-op load and FINISH
        assert counted <= emitted <= 2 * counted + 8
