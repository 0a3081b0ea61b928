"""Quantized graph operators on the accelerator: QConv (groups 1), QGemm and QAdd become the
compiled operators of compiler/ops/accel, with their constants packed once and their activations
packed and unpacked by native host kernels around each run.

The integer semantics are those of the quantized-graph contract (compiler/quant): requantization
(+ bias, * per-channel multiplier, + rounding, >> shift, clip) wraps at 32 bits exactly like
`Epilogue.apply`, which is what the accelerator's ALU does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compiler.errors import ScheduleError
from compiler.ops.accel import (
    CompiledOp,
    Conv2d,
    Conv2dSpec,
    Dense,
    DenseSpec,
    Eltwise,
    EltwiseSpec,
    compile_op,
)
from compiler.ops.accel.common import Epilogue
from compiler.ops.cpu import compile_host_op
from compiler.runtime.cpu import LIGHT_OPT_LEVEL
from compiler.target.accel import AcceleratorTarget

Layout = tuple[int, int, int]  # (rank, batch block, channel block) of a packed activation
# the schedule point for an operator (a tuning log's best, say), or None for its default
KnobsFor = Callable[[Any], Any]


@dataclass
class AccelStep:
    """One operator compiled for the accelerator: its Program, packed constants, and the host
    kernels that pack its activations in and unpack its output."""

    name: str
    op: Any
    compiled: CompiledOp
    constants: dict[str, np.ndarray]
    activations: tuple[str, ...]  # the Program's activation inputs, in the node's input order
    out_shape: tuple[int, ...]
    info: dict[str, Any] = field(default_factory=dict)
    in_ranks: tuple[int, ...] = (4,)
    sources: tuple[int, ...] = (0,)  # the node input each activation is

    def activation_inputs(self, node_inputs: tuple[str, ...]) -> list[str]:
        """The node's input names that the Program's activations are, in activation order."""
        return [node_inputs[j] for j in self.sources]

    def in_layout(self, i: int) -> Layout:
        """How activation `i` is packed: (rank, batch block, channel block)."""
        t = self.op.target
        block = t.block_in if self.activations[i] == "data" else t.block_out
        return (self.in_ranks[i], t.batch, block)

    @property
    def out_layout(self) -> Layout:
        t = self.op.target
        return (len(self.out_shape), t.batch, t.block_out)

    def pack_one(self, i: int, x: np.ndarray) -> np.ndarray:
        """Activation `i` (NCHW or [M, K] int8) in the Program's packed layout."""
        return _one(self._packer(i, x.shape)(np.ascontiguousarray(x, dtype=np.int8)))

    def _packer(self, i: int, shape: tuple[int, ...]) -> Any:
        _, batch, block = self.in_layout(i)
        return compile_host_op("pack", LIGHT_OPT_LEVEL, shape=tuple(shape), batch_block=batch,
                               channel_block=block, dtype="int8")

    def warm(self, shapes: list[tuple[int, ...]]) -> None:
        """Compile the packing kernels now, so that running the step never waits for the JIT."""
        for i, shape in enumerate(shapes):
            self._packer(i, shape)
        t = self.op.target
        compile_host_op("unpack", LIGHT_OPT_LEVEL, shape=self.out_shape, batch_block=t.batch,
                        channel_block=t.block_out, dtype="int8")

    def pack(self, arrays: list[np.ndarray]) -> dict[str, np.ndarray]:
        """The Program's inputs for these activations (NCHW or [M, K] int8)."""
        out = dict(self.constants)
        for i, x in enumerate(arrays):
            out[self.activations[i]] = self.pack_one(i, x)
        return out

    def unpack(self, packed: np.ndarray) -> np.ndarray:
        t = self.op.target
        kernel = compile_host_op("unpack", LIGHT_OPT_LEVEL, shape=self.out_shape, batch_block=t.batch,
                                 channel_block=t.block_out, dtype="int8")
        return _one(kernel(np.ascontiguousarray(packed)))


def _one(result: np.ndarray | tuple[np.ndarray, ...]) -> np.ndarray:
    """The single output of a host kernel."""
    assert isinstance(result, np.ndarray)
    return result


@dataclass(frozen=True)
class Precise:
    """A QConv/QGemm's precise requantization (attribute `split`, inputs clamp_lo, clamp_hi)."""

    split: int
    clamp_lo: np.ndarray
    clamp_hi: np.ndarray


def _vectors(op: Any, ep: Epilogue, bias: np.ndarray, mult: np.ndarray,
             precise: Precise | None = None) -> dict[str, np.ndarray]:
    """The requantization's per-channel inputs, packed: the multiplier, the bias scaled by it
    with the rounding folded in (see `requant_epilogue`), and a residual's multiplier when it is
    not an immediate; for a precise one the bias, the clamp bounds and the two multiplier parts."""
    given: dict[str, np.ndarray] = {"bias": ep.scale_bias(bias, mult), "mult": mult}
    if precise is not None:
        given = {"bias": bias, "clamp_lo": precise.clamp_lo, "clamp_hi": precise.clamp_hi,
                 **ep.split_mult(mult)}
    return {v: op.pack_bias(given[v] if v in given else ep.vector_values(v, len(mult))) for v in ep.vectors}


def requant_epilogue(shift: int, clip_lo: int, clip_hi: int, residual: int | None = None,
                     split: int = 0) -> Epilogue:
    """The quantized ops' requantization, clip(((acc + bias) * mult [+ res * residual] +
    2**(shift-1)) >> shift), as acc * mult + (bias * mult + 2**(shift-1)) [+ res * residual]: the
    same int32 modulo 2**32, with one ALU instruction fewer.  With `split` > 0 the precise one,
    without the final clip: the contract's checks put every output within the clip already."""
    if split:
        return Epilogue(bias=True, shift=shift, clip=None, channel_multiplier=True, round=True, split=split)
    return Epilogue(bias=True, shift=shift, clip=(clip_lo, clip_hi), channel_multiplier=True,
                    scaled_bias=True, residual=residual)


def conv_step(name: str, target: AcceleratorTarget, x_shape: tuple[int, ...], weight: np.ndarray,
              bias: np.ndarray, mult: np.ndarray, *, strides: tuple[int, ...], pads: tuple[int, ...],
              shift: int, clip: tuple[int, int], residual: int | None = None,
              knobs_for: KnobsFor | None = None, precise: Precise | None = None) -> AccelStep:
    """A QConv with one group, a square kernel, equal strides and symmetric padding; with
    `residual` (its multiplier), the step's second activation is added in the epilogue; with
    `precise`, the precise requantization."""
    n, c, h, w = x_shape
    k, c_w, r, s = weight.shape
    if c_w != c or r != s or len(set(strides)) != 1 or len(set(pads)) != 1:
        raise ScheduleError(f"{name}: the accelerator runs square kernels with one group, equal "
                            f"strides and symmetric padding (kernel {r}x{s}, strides {strides}, "
                            f"pads {pads}, {c // c_w} groups)")
    if n % target.batch:
        raise ScheduleError(f"{name}: batch {n} is not a multiple of the core's batch {target.batch}")
    split = precise.split if precise else 0
    spec = Conv2dSpec(n, c, h, w, k, r, strides[0], pads[0], requant_epilogue(shift, *clip, residual, split))
    op = Conv2d(spec, target)
    consts = {"kernel": op.pack_kernel(weight), **_vectors(op, spec.epilogue, bias, mult, precise)}
    compiled = compile_op(op, knobs=knobs_for(op) if knobs_for else None)
    out_shape = (n, k, spec.out_height, spec.out_width)
    fused = residual is not None
    return AccelStep(name, op, compiled, consts, ("data", "res") if fused else ("data",), out_shape,
                     {"macs": spec.macs}, (4, 4) if fused else (4,), (0, 4) if fused else (0,))


def dense_step(name: str, target: AcceleratorTarget, x_shape: tuple[int, ...], weight: np.ndarray,
               bias: np.ndarray, mult: np.ndarray, *, shift: int, clip: tuple[int, int],
               knobs_for: KnobsFor | None = None, precise: Precise | None = None) -> AccelStep:
    m, k = x_shape
    n, k_w = weight.shape
    if k_w != k:
        raise ScheduleError(f"{name}: weight is {weight.shape}, input has {k} features")
    if m % target.batch:
        raise ScheduleError(f"{name}: {m} rows are not a multiple of the core's batch {target.batch}")
    epilogue = requant_epilogue(shift, *clip, split=precise.split if precise else 0)
    op = Dense(DenseSpec(m, k, n, epilogue), target)
    consts = {"weight": op.pack_weight(weight), **_vectors(op, op.spec.epilogue, bias, mult, precise)}
    compiled = compile_op(op, knobs=knobs_for(op) if knobs_for else None)
    return AccelStep(name, op, compiled, consts, ("data",), (m, n), {"macs": m * k * n}, (2,))


def add_step(name: str, target: AcceleratorTarget, shape: tuple[int, ...], *, mult_a: int, mult_b: int,
             shift: int, clip: tuple[int, int], knobs_for: KnobsFor | None = None) -> AccelStep:
    if len(shape) != 4:
        raise ScheduleError(f"{name}: the accelerator adds NCHW tensors, not shape {shape}")
    n, c, h, w = shape
    if n % target.batch:
        raise ScheduleError(f"{name}: batch {n} is not a multiple of the core's batch {target.batch}")
    op = Eltwise(EltwiseSpec("add", n, c, h, w, clip, mult_a, mult_b, shift), target)
    compiled = compile_op(op, knobs=knobs_for(op) if knobs_for else None)
    return AccelStep(name, op, compiled, op.constants(), ("a", "b"), tuple(shape), {"macs": 0}, (4, 4),
                     (0, 1))
