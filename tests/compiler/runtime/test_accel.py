"""Quantized-graph operators on the accelerator against the contract's integer semantics,
written here independently in numpy (int64 arithmetic, explicit 32-bit wrapping)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.errors import ScheduleError
from compiler.runtime.accel import add_step, conv_step, dense_step
from compiler.target import AcceleratorTarget
from hw.config import PRESETS
from sim.backends import make_backend


def _wrap(x: np.ndarray) -> np.ndarray:
    return (x + 2**31) % 2**32 - 2**31


def _requant(acc: np.ndarray, bias, mult, shift, lo, hi) -> np.ndarray:  # type: ignore[no-untyped-def]
    t = _wrap(_wrap(acc + bias) * mult)
    if shift:
        t = _wrap(t + 2 ** (shift - 1))
    return np.clip(t >> shift, lo, hi).astype(np.int8)


def _conv_ref(x, w, stride, pad):  # type: ignore[no-untyped-def]
    n, _, h, wd = x.shape
    k, _, r, _ = w.shape
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - r) // stride + 1, (wd + 2 * pad - r) // stride + 1
    out = np.zeros((n, k, oh, ow), np.int64)
    for i in range(r):
        for j in range(r):
            patch = xp[:, :, i : i + stride * oh : stride, j : j + stride * ow : stride]
            out += np.einsum("nchw,kc->nkhw", patch, w[:, :, i, j].astype(np.int64))
    return out


def _run(step, arrays, backend):  # type: ignore[no-untyped-def]
    result = backend.run(step.compiled.built.program, step.pack(arrays))
    return step.unpack(result.outputs["out"])


@pytest.mark.parametrize("name", ["tiny", "vta"])
@pytest.mark.parametrize("c,k,size,r,stride,pad",
                         [(3, 20, 9, 3, 2, 1), (40, 16, 6, 1, 1, 0), (17, 33, 7, 3, 1, 1)])
def test_qconv_on_the_accelerator_matches_the_contract(name, c, k, size, r, stride, pad):
    cfg = PRESETS[name]
    t = AcceleratorTarget(cfg)
    rng = np.random.default_rng(c * k)
    x = rng.integers(-128, 128, (t.batch, c, size, size)).astype(np.int8)
    w = rng.integers(-128, 128, (k, c, r, r)).astype(np.int8)
    bias = rng.integers(-5000, 5000, k).astype(np.int32)
    mult = rng.integers(1, 3000, k).astype(np.int32)
    step = conv_step("conv", t, x.shape, w, bias, mult, strides=(stride, stride), pads=(pad,) * 4,
                     shift=14, clip=(0, 127))
    got = _run(step, [x], make_backend("fsim", cfg))
    want = _requant(_conv_ref(x, w, stride, pad), bias[None, :, None, None], mult[None, :, None, None],
                    14, 0, 127)
    np.testing.assert_array_equal(got, want)


def test_qgemm_and_qadd_on_the_accelerator_match_the_contract():
    cfg = PRESETS["rect"]
    t, fsim = AcceleratorTarget(cfg), make_backend("fsim", cfg)
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (2 * t.batch, 50)).astype(np.int8)
    w = rng.integers(-128, 128, (30, 50)).astype(np.int8)
    bias, mult = rng.integers(-999, 999, 30), rng.integers(-300, 300, 30)
    step = dense_step("fc", t, x.shape, w, bias, mult, shift=9, clip=(-128, 127))
    want = _requant(x.astype(np.int64) @ w.T.astype(np.int64), bias, mult, 9, -128, 127)
    np.testing.assert_array_equal(_run(step, [x], fsim), want)
    a, b = (rng.integers(-128, 128, (t.batch, 19, 3, 5)).astype(np.int8) for _ in range(2))
    step = add_step("res", t, a.shape, mult_a=700, mult_b=-300, shift=10, clip=(0, 127))
    t_ = _wrap(a.astype(np.int64) * 700 + b.astype(np.int64) * -300) + 2**9
    np.testing.assert_array_equal(_run(step, [a, b], fsim), np.clip(t_ >> 10, 0, 127).astype(np.int8))


def test_what_the_accelerator_does_not_run_is_refused():
    t = AcceleratorTarget(PRESETS["tiny"])
    w = np.zeros((16, 8, 3, 3), np.int8)
    z = np.zeros(16, np.int32)
    with pytest.raises(ScheduleError, match=r"conv: the accelerator runs square kernels with one group, "
                                            r"equal strides and symmetric padding \(kernel 3x3, strides "
                                            r"\(1, 1\), pads \(0, 1, 0, 1\), 2 groups\)"):
        conv_step("conv", t, (1, 16, 5, 5), w, z, z, strides=(1, 1), pads=(0, 1, 0, 1), shift=0, clip=(0, 1))
    with pytest.raises(ScheduleError, match="add: the accelerator adds NCHW tensors, not shape"):
        add_step("add", t, (4, 16), mult_a=1, mult_b=1, shift=0, clip=(0, 1))
