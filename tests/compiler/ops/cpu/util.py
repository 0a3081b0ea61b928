"""Shared by the host operator tests: run an op's kernel on seeded inputs against its reference."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st

from compiler.ops.cpu import HostKernel, HostOp, compile_host_op
from compiler.ops.cpu.convbase import ConvOp

# Float ops are compared with float64 references written in numpy: |got - ref| <= ATOL + RTOL*|ref|
# for standard normal inputs (float32 rounding of sums of up to a few thousand terms).
RTOL, ATOL = 1e-5, 1e-6

# Sizes: 1, small odd and even, non-powers of two, a power of two.
SIZES = st.sampled_from([1, 2, 3, 5, 7, 8, 12, 17])


def run(op: HostOp, seed: int = 0, inputs: list[np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's output and the numpy reference on the same (seeded) inputs."""
    inputs = op.random_inputs(seed) if inputs is None else inputs
    got = op.build()(*inputs)
    assert isinstance(got, np.ndarray)
    return got, op.reference(*inputs)


def assert_exact(op: HostOp, seed: int = 0, inputs: list[np.ndarray] | None = None) -> None:
    got, ref = run(op, seed, inputs)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    assert np.array_equal(got, ref), f"{op}: {int(np.sum(got != ref))} of {ref.size} elements differ"


def assert_close(op: HostOp, seed: int = 0, inputs: list[np.ndarray] | None = None,
                 rtol: float = RTOL, atol: float = ATOL) -> np.ndarray:
    got, ref = run(op, seed, inputs)
    assert got.dtype == np.float32 and got.shape == ref.shape
    err = np.abs(got.astype(np.float64) - ref.astype(np.float64)) - rtol * np.abs(ref)
    assert err.max(initial=0.0) <= atol, f"{op}: worst excess error {err.max()}"
    return got


# -- convolutions (conv2d, qconv2d: compiler.ops.cpu.convbase) ---------------------------------


def kernel_of(op: HostOp) -> HostKernel:
    """The registry's kernel of `op`: compiled once per distinct parameters in the session."""
    return compile_host_op(op.op, **{f.name: getattr(op, f.name) for f in dataclasses.fields(op)})  # type: ignore[arg-type]


def assert_conv_parameters_normalise(cls: type[ConvOp]) -> None:
    """Shapes as lists or tuples, strides and pads as one int, a pair or four give one operator,
    so equal convolutions share a kernel."""
    a = cls([1, 4, 6, 6], [4, 1, 3, 3], 1, 1, 4)  # type: ignore[arg-type]
    b = cls((1, 4, 6, 6), (4, 1, 3, 3), (1, 1), (1, 1, 1, 1), 4)
    assert a == b and a.pads == (1, 1, 1, 1) and a.strides == (1, 1)
    assert cls((1, 1, 5, 5), (1, 1, 3, 3), pads=(1, 2)).pads == (1, 2, 1, 2)
    assert kernel_of(a) is kernel_of(b)


CONV = dict(shape=(1, 3, 4, 4), weight_shape=(4, 3, 3, 3))  # a valid convolution to spoil
DEPTHWISE = dict(shape=(1, 4, 4, 4), weight_shape=(4, 1, 3, 3), group=4)  # a valid depthwise one
# Parameters every convolution refuses, with the message (after the operator's name).
BAD_CONV_PARAMETERS = [
    (dict(shape=(1, 6, 4, 4), weight_shape=(4, 2, 3, 3), group=4), "group 4 must divide the input channels"),
    (dict(shape=(1, 6, 4, 4), weight_shape=(4, 2, 3, 3), group=2),
     r"weight \(4, 2, 3, 3\) takes 2 input channels per group, but data \(1, 6, 4, 4\) has 6 in 2 groups"),
    (dict(shape=(1, 3, 2, 2), weight_shape=(4, 3, 5, 5)), "kernel .* is larger than the padded input"),
    (dict(shape=(3, 4, 4), weight_shape=(4, 3, 3, 3)), "shape must have 4 dimensions, not 3"),
    (CONV | dict(weight_shape=(4, 3, 0, 3)), "shape must be positive ints"),
    (CONV | dict(pads=(1, 1, 1)), "pads must be an int >= 0, a pair"),
    (CONV | dict(pads=-1), "pads must be an int >= 0"),
    (CONV | dict(strides=0), "strides must be an int >= 1"),
    (CONV | dict(group=0), "group must be an int >= 1, not 0"),
    (CONV | dict(strategy="fast"), "strategy must be one of auto, "),
    (DEPTHWISE | dict(strategy="channels"), "'channels' needs group 1, not 4"),
    (DEPTHWISE | dict(weight_shape=(8, 1, 3, 3), strategy="depthwise"),
     "'depthwise' needs one input channel per"),
]
