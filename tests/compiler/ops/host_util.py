"""Shared by the host operator tests: run an op's kernel on seeded inputs against its reference."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from compiler.ops.host import HostOp

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
                 rtol: float = RTOL, atol: float = ATOL) -> np.ndarray:  # fmt: skip
    got, ref = run(op, seed, inputs)
    assert got.dtype == np.float32 and got.shape == ref.shape
    err = np.abs(got.astype(np.float64) - ref.astype(np.float64)) - rtol * np.abs(ref)
    assert err.max(initial=0.0) <= atol, f"{op}: worst excess error {err.max()}"
    return got
