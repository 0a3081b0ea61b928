"""Packing to the accelerator's layout and back, exactly, and element-wise add/mul."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.ops.accel import Conv2d, Conv2dSpec, Dense, DenseSpec
from compiler.ops.cpu import Add, Mul, Pack, Unpack
from compiler.target import AcceleratorTarget
from tests.compiler.conftest import CONFIGS
from tests.compiler.ops.cpu.util import SIZES, assert_close, assert_exact, run


@pytest.mark.parametrize("cfg", CONFIGS, ids=[c.name for c in CONFIGS])
def test_pack_matches_the_accelerator_operators(cfg):
    t = AcceleratorTarget(cfg)
    rng = np.random.default_rng(0)
    n = 2 * t.batch
    conv = Conv2d(Conv2dSpec(n, 3, 5, 7, t.block_out, 3), t)
    x = rng.integers(-128, 128, (n, 3, 5, 7)).astype(np.int8)
    packed, _ = run(Pack(x.shape, t.batch, t.block_in), inputs=[x])
    assert np.array_equal(packed, conv.pack_data(x))
    unpacked, _ = run(Unpack(x.shape, t.batch, t.block_in), inputs=[packed])
    assert np.array_equal(unpacked, x)
    dense = Dense(DenseSpec(n, 2 * t.block_in + 1, t.block_out), t)
    m = rng.integers(-128, 128, (n, 2 * t.block_in + 1)).astype(np.int8)
    assert np.array_equal(run(Pack(m.shape, t.batch, t.block_in), inputs=[m])[0], dense.pack_data(m))


@settings(max_examples=8, deadline=None)
@given(st.integers(1, 3), SIZES, st.lists(SIZES, max_size=2), st.sampled_from([1, 2, 4]),
       st.sampled_from([1, 3, 8, 16]), st.sampled_from(["int8", "int32", "float32"]),
       st.integers(0, 99))
def test_pack_and_unpack_any_rank(batches, channels, spatial, b, c, dtype, seed):
    shape = (batches * b, channels, *spatial)
    pack = Pack(shape, b, c, dtype)
    assert_exact(pack, seed)
    packed = pack.reference(*pack.random_inputs(seed))
    assert packed.shape == pack.packed_shape
    assert_exact(Unpack(shape, b, c, dtype), inputs=[packed])


def test_padded_channels_are_zero():
    x = np.full((1, 3, 2, 2), 7, np.int8)
    packed, _ = run(Pack(x.shape, 1, 4), inputs=[x])
    assert packed.shape == (1, 1, 2, 2, 1, 4)
    assert np.all(packed[..., :3] == 7) and np.all(packed[..., 3] == 0)


@settings(max_examples=6, deadline=None)
@given(st.lists(SIZES, min_size=1, max_size=3), st.data(), st.integers(0, 99))
def test_add_and_mul_broadcast_like_numpy(shape, data, seed):
    other = [1 if data.draw(st.booleans()) else n for n in shape[data.draw(st.integers(0, len(shape) - 1)):]]
    assert_close(Add(tuple(shape), tuple(other)), seed)
    assert_close(Mul(tuple(other), tuple(shape)), seed)


def test_integer_add_and_mul_wrap_like_numpy():
    assert_exact(Add((5, 3), (3,), "int8"))
    assert_exact(Mul((4, 1), (1, 6), "int8"))
    assert_exact(Mul((7,), (7,), "uint8"), seed=2)


@pytest.mark.parametrize(
    "cls,params,message",
    [(Pack, dict(shape=(3, 4, 2), batch_block=2), "batch 3 is not a multiple of the batch block 2"),
     (Pack, dict(shape=(4,)), r"shape must have at least 2 dimensions, not \(4,\)"),
     (Unpack, dict(shape=(2, 4), channel_block=0), "channel_block must be an int >= 1, not 0"),
     (Add, dict(a_shape=(2, 3), b_shape=(4,)), r"add: shapes \(2, 3\) and \(4,\) do not broadcast"),
     (Mul, dict(a_shape=(2,), b_shape=(2,), dtype="bool"), "operand dtype must be one of")],
)
def test_bad_parameters(cls, params, message):
    with pytest.raises(ValueError, match=message):
        cls(**params)
