"""The CPU target's schedule spaces (compiler.tune.cpu): derived from the target, every point
exact against numpy (int8 bit for bit, float32 within rounding), knobs outside them refused."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.errors import ScheduleError
from compiler.ops.cpu import compile_host_op, host_op
from compiler.ops.cpu.convbase import max_pixels, register_tile
from compiler.target.cpu import CpuTarget
from compiler.tune.cpu import (
    ConvTuning,
    conv_space,
    read_log,
    spec_key,
    tune_conv,
    tune_model,
    tuned_table,
    write_log,
)
from hw.errors import InputError

AVX2 = CpuTarget("x86_64-unknown-linux-gnu", "znver3", "+avx,+avx2,+fma")
AVX512 = CpuTarget("x86_64-unknown-linux-gnu", "znver4", "+avx,+avx2,+fma,+avx512f")


def test_the_tile_follows_the_target():
    assert (AVX2.vector_bits, AVX2.vector_registers, AVX512.vector_bits, AVX512.vector_registers) == \
        (256, 16, 512, 32)
    assert register_tile(56, 64, "float32", AVX2) == (8, 8)
    assert register_tile(56, 64, "float32", AVX512) == (14, 16)  # 16 of 32 registers, 16 lanes
    assert register_tile(7, 64, "int32", AVX2) == (7, 8)
    assert register_tile(56, 12, "float32", AVX2) == (4, None)  # 12 channels: no whole vector
    assert (max_pixels(AVX2), max_pixels(AVX512)) == (14, 30)


def test_the_space_is_every_divisor_of_the_width_in_registers_by_order():
    params = {"shape": (1, 8, 12, 12), "weight_shape": (16, 8, 3, 3), "pads": 1}
    space = conv_space("conv2d", params, AVX2)
    assert {p["pixels"] for p in space} == {1, 2, 3, 4, 6, 12}
    assert {p["order"] for p in space} == {"channels", "rows"} and len(space) == 12
    assert conv_space("conv2d", {**params, "weight_shape": (8, 1, 3, 3), "group": 8}, AVX2) == []


def _conv_params(draw: st.DrawFn, int8: bool) -> dict:
    c, k = draw(st.sampled_from([1, 3, 8])), draw(st.sampled_from([8, 16, 24]))
    r = draw(st.sampled_from([1, 3]))
    stride, pad = draw(st.sampled_from([1, 2])), draw(st.sampled_from([0, 1]))
    h, w = draw(st.integers(r, 9)), draw(st.integers(r, 12))
    params = {"shape": (1, c, h, w), "weight_shape": (k, c, r, r), "strides": stride, "pads": pad}
    if int8:
        params.update(shift=draw(st.integers(0, 12)), residual=draw(st.booleans()))
    else:
        params.update(bias=draw(st.booleans()), residual=draw(st.booleans()), act_lo=0.0)
    return params


@st.composite
def _points(draw: st.DrawFn) -> tuple[str, dict]:
    int8 = draw(st.booleans())
    name = "qconv2d" if int8 else "conv2d"
    params = _conv_params(draw, int8)
    space = conv_space(name, params)
    knobs = draw(st.sampled_from(space)) if space else {}
    return name, {**params, **knobs, "packed": draw(st.booleans()) and bool(space)}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_points())
def test_every_point_of_the_space_is_exact(point):
    name, params = point
    op = host_op(name, **params)
    inputs = op.random_inputs(3)  # a packed op's weight comes packed
    got = compile_host_op(name, **params)(*inputs)
    want = op.reference(*inputs)
    if name == "qconv2d":
        assert np.array_equal(got, want)
    else:  # each output within (C*R*S + 3) float32 steps of sum |products| (+ |bias| + |residual|)
        logical = op.logical_weight(inputs[1])
        mag = np.abs(type(op)(**{**params, "packed": False, "bias": False, "residual": False,
                                 "act_lo": -np.inf}).reference(np.abs(inputs[0]), np.abs(logical)))
        extra = sum(np.abs(x) if x.ndim == 4 else np.abs(x)[:, None, None] for x in inputs[2:])
        c, r, s = op.weight_shape[1:]
        bound = (c * r * s + 3) * np.finfo(np.float32).eps * (mag + extra)
        assert np.all(np.abs(got - want) <= bound)


@pytest.mark.parametrize(("params", "message"), [
    ({"pixels": 5}, r"conv2d: 5 pixels do not divide the output width 12"),
    ({"pixels": 99}, r"conv2d: a register tile of 99 pixels needs that many accumulator registers "
                     r"and two more; \S+ has \d+, so pixels must be in \[1, \d+\]"),
    ({"order": "cols"}, r"conv2d: order must be one of auto, channels, rows, not 'cols'"),
    ({"pixels": 2, "group": 8, "weight_shape": (8, 1, 3, 3)},
     r"conv2d: pixels and order shape the 'channels' schedule's register tile, which needs group 1 "
     r"and output channels a multiple of the vector; this convolution takes the 'depthwise' schedule"),
    ({"order": "rows", "weight_shape": (12, 8, 3, 3)},
     r"conv2d: pixels and order shape .* takes the 'channels' schedule with 12 channels, no "
     r"multiple of \d+"),
])
def test_a_tile_that_cannot_apply_is_a_schedule_error(params, message):
    base = {"shape": (1, 8, 12, 12), "weight_shape": (16, 8, 3, 3), "pads": 1}
    with pytest.raises(ScheduleError, match=message):
        host_op("conv2d", **{**base, **params})


def test_tuning_keeps_the_default_unless_a_point_is_faster():
    params = {"shape": (1, 8, 6, 6), "weight_shape": (8, 8, 3, 3), "pads": 1}
    result = tune_conv("conv2d", params, repeat=1)
    assert result.trials == 1 + len(conv_space("conv2d", params))
    assert result.best_s <= result.default_s
    assert (result.best == {}) == (result.best_s == result.default_s)
    table = tuned_table([result])
    assert table == ({spec_key("conv2d", params): result.best} if result.best else {})
    assert spec_key("conv2d", {**params, "pixels": 3, "order": "rows"}) == spec_key("conv2d", params)


def _tuning(best: dict, pixels_width: int = 6) -> ConvTuning:
    params = {"shape": (1, 8, pixels_width, pixels_width), "weight_shape": (8, 8, 3, 3), "pads": 1}
    return ConvTuning("conv2d", params, best, 2e-3, 1e-3 if best else 2e-3, 9)


def test_a_tuning_log_gives_back_the_improved_convolutions(tmp_path):
    path = tmp_path / "tune.json"
    kept, same = _tuning({"pixels": 3, "order": "rows"}), _tuning({}, 4)
    write_log(path, [kept, same], model="m.onnx", precision="fp32", target=AVX2)
    assert read_log(path, AVX2) == {spec_key("conv2d", kept.params): {"pixels": 3, "order": "rows"}}


@pytest.mark.parametrize(("text", "message"), [
    (None, r"tuning log \S+missing.json: No such file or directory"),
    ("{oops", r"tuning log \S+ is not JSON"),
    ('{"format": "other"}',
     r"\S+ is no CPU tuning log \(codesign tune model MODEL --target cpu --log FILE\)"),
])
def test_a_bad_tuning_log_is_refused(tmp_path, text, message):
    path = tmp_path / "missing.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(InputError, match=message):
        read_log(path, AVX2)


def test_a_log_measured_on_another_cpu_is_refused(tmp_path):
    path = tmp_path / "tune.json"
    write_log(path, [_tuning({"pixels": 2, "order": "rows"})], model="m.onnx", precision="fp32",
              target=AVX512)
    with pytest.raises(InputError, match=r"tuning log \S+ was measured on a znver4 CPU; this host is a "
                                         r"znver3: tune again here"):
        read_log(path, AVX2)


def test_tuning_a_model_takes_its_largest_convolution_first_and_stops_at_the_budget():
    small = ("conv2d", {"shape": (1, 8, 4, 4), "weight_shape": (8, 8, 1, 1)})
    large = ("conv2d", {"shape": (1, 8, 6, 6), "weight_shape": (8, 8, 3, 3), "pads": 1})
    assert tune_model([small, large, small], repeat=1, budget_s=0.0) == []
    done = []
    results = tune_model([small, large, ("relu", {})], repeat=1, progress=lambda d, t: done.append((d, t)))
    assert [r.params for r in results] == [large[1], small[1]] and done == [(1, 2), (2, 2)]
