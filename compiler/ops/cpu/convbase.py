"""The grouped 2-D convolution shared by the host's float32 conv2d (compiler.ops.cpu.convf) and
int8 qconv2d (compiler.ops.cpu.qconv): parameters, padded input, accumulation and schedules.

acc[n, k, y, x] = sum_{c, ry, rx} data_pad[n, g(k)*C/group + c, y*sh + ry, x*sw + rx] *
weight[k, c, ry, rx] with g(k) = k // (K/group) and padding (top, left, bottom, right) that
reads `pad_fill` (zero, but qconv2d's `pad_value`), each operand cast to the accumulator's
dtype (float32, or int32 for int8 data) and the sum taken in (c, ry, rx) order; then each
output is `acc` of its channel through the operator's epilogue (a bias add, a
requantization).  `group` is 1, C (depthwise) or any common divisor of C and K.

Three schedules, named by `strategy` or chosen from the shape ("auto": "channels" for group 1
with at least 8 output channels, "depthwise" for K = C = group with output rows of at most the
operator's `depthwise_max_width` pixels, else "rows"):
- "channels" (group 1): the weights reordered to (C, R, S, K) in the accumulator's dtype and each
  output row accumulated channels last in a stack temporary, a few pixels at a time, vectorised
  across output channels (one weight vector serves several pixels, one input value is broadcast
  across the lanes), then taken through the epilogue into NCHW (compiler.ops.cpu.conv's
  schedule);
- "depthwise" (one input channel per output channel, K = C = group): the padded input is
  transposed to channels last (in the input's dtype) once, and each output row accumulated
  channels last, vectorised across channels; for narrow images, whose rows are too short to
  vectorise;
- "rows" (any group): each output row accumulated in NCHW, vectorised along the row, from a
  padded copy of the input (one plane at a time when each group has one output channel,
  else the whole input once).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.errors import ScheduleError
from compiler.ops.cpu.base import HostOp, check_int, check_shape, pair
from compiler.ops.cpu.convpairs import pack_pairs, pair_accumulation, unpack_pairs
from compiler.ops.cpu.qops import vectorize_loop
from compiler.schedule.schedule import Schedule
from compiler.target.cpu import CpuTarget, host_target
from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, placeholder, reduce_axis, sum

STRATEGIES = ("auto", "channels", "depthwise", "rows")


def pads4(op: str, value: int | Sequence[int]) -> tuple[int, int, int, int]:
    """Padding as (top, left, bottom, right): from one int, a pair (height, width) or four."""
    single = isinstance(value, int | np.integer) and not isinstance(value, bool)
    items: tuple[int, ...] = (value,) * 4 if single else tuple(value)  # type: ignore[arg-type, assignment]
    if len(items) == 2:
        items = items * 2
    if len(items) != 4 or any(isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 0
                              for v in items):
        raise ValueError(f"{op}: pads must be an int >= 0, a pair (height, width) or four "
                         f"(top, left, bottom, right), not {value!r}")
    return int(items[0]), int(items[1]), int(items[2]), int(items[3])


@dataclass(frozen=True)
class ConvOp(HostOp):
    """A convolution's geometry, accumulation and schedules.  `shape` is the data's (N, C, H, W),
    `weight_shape` (K, C/group, R, S); `pads` one int, a pair (height, width) or ONNX's four
    (top, left, bottom, right).

    A subclass is a frozen dataclass that adds its own parameters, a `strategy` among them
    (declared there, so that each operator keeps its own positional order), sets the dtypes and
    the "auto" threshold, and fills in `_check_params`, `_channel_inputs` and `_epilogue`."""

    shape: tuple[int, int, int, int]
    weight_shape: tuple[int, int, int, int]
    strides: int | tuple[int, int] = 1
    pads: int | tuple[int, ...] = 0
    group: int = 1
    inp_dtype: ClassVar[str]  # data and weight
    acc_dtype: ClassVar[str]  # the products and their sum
    depthwise_max_width: ClassVar[int]  # "auto" picks "depthwise" up to this output width
    pair_reduction: ClassVar[bool] = False  # int8: the register tile reduces channel pairs

    @property
    def strategy(self) -> str:
        """One of STRATEGIES: a field of each subclass."""
        raise NotImplementedError

    @property
    def pixels(self) -> int:
        """The register tile's pixels (0: the target's default): a field of each subclass."""
        raise NotImplementedError

    @property
    def order(self) -> str:
        """The register tile's loop order, one of ORDERS: a field of each subclass."""
        raise NotImplementedError

    @property
    def packed(self) -> bool:
        """Whether the weight argument comes packed as the "channels" schedule reads it,
        (C, R, S, K) (`pack_weight`), by a caller that packs constant weights once: a field of
        each subclass."""
        raise NotImplementedError

    def __post_init__(self) -> None:
        name = self.op
        object.__setattr__(self, "shape", check_shape(name, self.shape, rank=4))
        object.__setattr__(self, "weight_shape", check_shape(name, self.weight_shape, rank=4))
        object.__setattr__(self, "strides", pair(name, "strides", self.strides, 1))
        object.__setattr__(self, "pads", pads4(name, self.pads))
        object.__setattr__(self, "group", check_int(name, "group", self.group, 1))
        self._check_params()
        (_, c, _, _), (k, cg, _, _) = self.shape, self.weight_shape
        if c % self.group or k % self.group:
            raise ValueError(f"{name}: group {self.group} must divide the input channels {c} and "
                             f"the output channels {k}")
        if cg * self.group != c:
            raise ValueError(f"{name}: weight {self.weight_shape} takes {cg} input channels per "
                             f"group, but data {self.shape} has {c} in {self.group} groups")
        oh, ow = self.out_hw
        if oh < 1 or ow < 1:
            raise ValueError(f"{name}: kernel {self.weight_shape[2:]} is larger than the padded input")
        self._check_strategy()
        self._check_tile()

    def _check_strategy(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"{self.op}: strategy must be one of {', '.join(STRATEGIES)}, not "
                             f"{self.strategy!r}")
        if self.strategy == "channels" and self.group != 1:
            raise ValueError(f"{self.op}: strategy 'channels' needs group 1, not {self.group}")
        if self.packed and self.chosen_strategy != "channels":
            raise ValueError(f"{self.op}: a packed weight needs the 'channels' schedule, not "
                             f"{self.chosen_strategy!r}")
        if self.strategy == "depthwise" and not self.depthwise:
            raise ValueError(f"{self.op}: strategy 'depthwise' needs one input channel per output "
                             f"channel (K = C = group), not weight {self.weight_shape} with group "
                             f"{self.group}")

    # -- what a subclass adds ---------------------------------------------------------------------
    def _check_params(self) -> None:
        """Check (and normalise) the subclass's own parameters, before the channel checks."""
        raise NotImplementedError

    def _channel_inputs(self) -> dict[str, Tensor]:
        """The per-output-channel inputs after data and weight, in argument order."""
        raise NotImplementedError

    def _epilogue(self, ins: dict[str, Tensor], acc: E.Expr, at: tuple[E.Expr, ...]) -> E.Expr:
        """The output of accumulator value `acc` at output index `at` (n, k, y, x): its channel
        is `at[1]` (a fused residual reads the whole index)."""
        raise NotImplementedError

    # -- derived sizes --------------------------------------------------------------------------
    @property
    def stride_hw(self) -> tuple[int, int]:
        return self.strides  # type: ignore[return-value]  # a pair after __post_init__

    @property
    def pad_tlbr(self) -> tuple[int, int, int, int]:
        return self.pads  # type: ignore[return-value]  # four after __post_init__

    @property
    def out_hw(self) -> tuple[int, int]:
        (_, _, h, w), (_, _, r, s) = self.shape, self.weight_shape
        (sh, sw), (top, left, bottom, right) = self.stride_hw, self.pad_tlbr
        return (h + top + bottom - r) // sh + 1, (w + left + right - s) // sw + 1

    @property
    def out_shape(self) -> tuple[int, int, int, int]:
        return (self.shape[0], self.weight_shape[0], *self.out_hw)

    @property
    def depthwise(self) -> bool:
        """One input channel per output channel: K = C = group."""
        return self.weight_shape[1] == 1 and self.weight_shape[0] == self.group

    @property
    def chosen_strategy(self) -> str:
        if self.strategy != "auto":
            return self.strategy
        if self.group == 1 and self.weight_shape[0] >= 8:
            return "channels"
        if self.depthwise and self.out_hw[1] <= self.depthwise_max_width:
            return "depthwise"
        return "rows"

    # -- TE -------------------------------------------------------------------------------------
    def tensors(self) -> dict[str, Tensor]:
        ins = {
            "data": placeholder(self.shape, self.inp_dtype, "data"),
            "weight": placeholder(self.packed_weight_shape if self.packed else self.weight_shape,
                                  self.packed_dtype if self.packed else self.inp_dtype, "weight"),
            **self._channel_inputs(),
        }
        strategy = self.chosen_strategy
        if strategy == "channels" and self.pairs:
            acc = pair_accumulation(self, ins["data"], ins["weight"])
        elif strategy == "channels":
            acc = self._acc_channels(ins["data"], ins["weight"])
        elif strategy == "depthwise":
            acc = self._acc_depthwise(ins["data"], ins["weight"])
        else:
            acc = self._acc_rows(ins["data"], ins["weight"])
        nchw = strategy == "rows"  # else acc is (N, OH, OW, K)

        def out(b: E.Expr, ch: E.Expr, y: E.Expr, x: E.Expr) -> E.Expr:
            return self._epilogue(ins, acc[b, ch, y, x] if nchw else acc[b, y, x, ch], (b, ch, y, x))

        return {**ins, "out": compute(self.out_shape, out, "out")}

    def _widen(self, x: E.Expr) -> E.Expr:
        """`x` in the accumulator's dtype (no cast where it is the input's already)."""
        return E.cast(self.acc_dtype, x)

    @property
    def pad_fill(self) -> int:
        """The value padding reads: 0 here; a subclass may have its own."""
        return 0

    def _padded(self, data: Tensor, channels_last: bool) -> Tensor:
        """The padded input (`pad_fill` outside), NCHW or transposed to NHWC."""
        n, c, h, w = self.shape
        top, left, bottom, right = self.pad_tlbr
        hp, wp = h + top + bottom, w + left + right

        fill = E.const(self.pad_fill, self.inp_dtype)

        def value(b: E.Expr, ch: E.Expr, y: E.Expr, x: E.Expr) -> E.Expr:
            inside = E.all_of(E.ge(y, top), E.lt(y, h + top), E.ge(x, left), E.lt(x, w + left))
            return E.if_then_else(inside, data[b, ch, y - top, x - left], fill)

        if channels_last:
            return compute((n, hp, wp, c), lambda b, y, x, ch: value(b, ch, y, x), "data_pad")
        return compute((n, c, hp, wp), value, "data_pad")

    def _acc_rows(self, data: Tensor, weight: Tensor) -> Tensor:
        k_out, cg, r, s = self.weight_shape
        kg = k_out // self.group
        sh, sw = self.stride_hw
        src = self._padded(data, False) if any(self.pad_tlbr) else data
        ic, ry, rx = reduce_axis(cg, "ic"), reduce_axis(r, "ry"), reduce_axis(s, "rx")
        wide = self._widen

        def channel(k: E.Expr) -> E.Expr:  # the first input channel of k's group; affine if kg 1
            return k * cg if kg == 1 else (k // kg) * cg

        return compute(self.out_shape, lambda b, k, y, x: sum(
            wide(src[b, channel(k) + ic.var, y * sh + ry, x * sw + rx]) * wide(weight[k, ic, ry, rx]),
            [ic, ry, rx]), "acc")

    @property
    def weight_block(self) -> int:
        """Output channels per block of the "channels" schedule's weights: its register tile's
        lanes (a whole vector of output channels), or every channel when they are no multiple
        of a vector."""
        return register_tile(self.out_hw[1], self.weight_shape[0], self.acc_dtype)[1] or self.weight_shape[0]

    @property
    def tile(self) -> tuple[int, int, str]:
        """The "channels" schedule's register tile and loop order: (pixels, lanes, order), the
        op's `pixels` and `order` where set, else register_tile's and `default_order`."""
        pixels, lanes = register_tile(self.out_hw[1], self.weight_shape[0], self.acc_dtype)
        return self.pixels or pixels, lanes or self.weight_shape[0], self.tile_order

    @property
    def tile_order(self) -> str:
        return self.order if self.order != "auto" else self.default_order()

    def default_order(self, target: CpuTarget | None = None) -> str:
        """"rows" when the input is larger than half the L2 cache and the weights are not (a
        row's inputs then stay in cache while every block's weights stream), else "channels"."""
        target = host_target() if target is None else target
        (_, c, h, w), (k, _, r, s) = self.shape, self.weight_shape
        size = 2 if self.pairs else E.BITS[self.inp_dtype] // 8  # the source the tile reads
        data = c * (h + self.pad_tlbr[0] + self.pad_tlbr[2]) * (w + self.pad_tlbr[1] + self.pad_tlbr[3])
        weights = k * c * r * s * (2 if self.pairs else E.BITS[self.acc_dtype] // 8)
        half = target.l2_bytes // 2
        return "rows" if data * size > half and weights <= half else "channels"

    def _check_tile(self) -> None:
        """The register tile's knobs: ScheduleError where they cannot apply."""
        if self.order not in ORDERS:
            raise ScheduleError(f"{self.op}: order must be one of {', '.join(ORDERS)}, not {self.order!r}")
        if not self.pixels and self.order == "auto":
            return
        strategy = self.chosen_strategy
        lanes = register_tile(self.out_hw[1], self.weight_shape[0], self.acc_dtype)[1]
        if strategy != "channels" or not lanes:
            raise ScheduleError(f"{self.op}: pixels and order shape the 'channels' schedule's register "
                                f"tile, which needs group 1 and output channels a multiple of the "
                                f"vector; this convolution takes the {strategy!r} schedule"
                                + ("" if strategy != "channels" else
                                   f" with {self.weight_shape[0]} channels, no multiple of "
                                   f"{host_target().lanes(E.BITS[self.acc_dtype])}"))
        if self.pixels:
            most, target = max_pixels(host_target()), host_target()
            whole = isinstance(self.pixels, int) and not isinstance(self.pixels, bool)
            if not whole or not 1 <= self.pixels <= most:
                raise ScheduleError(f"{self.op}: a register tile of {self.pixels!r} pixels needs "
                                    f"that many accumulator registers and two more; {target.cpu} has "
                                    f"{target.vector_registers}, so pixels must be in [1, {most}]")
            if self.out_hw[1] % self.pixels:
                raise ScheduleError(f"{self.op}: {self.pixels} pixels do not divide the output "
                                    f"width {self.out_hw[1]}")

    @property
    def pairs(self) -> bool:
        """Whether the "channels" schedule's register tile reduces input channels in pairs
        (compiler.ops.cpu.convpairs): the int8 convolution's, where its register tile applies."""
        return (self.pair_reduction and self.chosen_strategy == "channels"
                and register_tile(self.out_hw[1], self.weight_shape[0], self.acc_dtype)[1] is not None)

    @property
    def packed_dtype(self) -> str:
        """The packed weight's dtype: int16 pairs (`pairs`), else the input's."""
        return "int16" if self.pairs else self.inp_dtype

    @property
    def packed_weight_shape(self) -> tuple[int, ...]:
        """(K/L, C, R, S, L) for weight blocks of L = `weight_block` output channels: the weights
        one block of output channels reads over its whole reduction are contiguous; with
        `pairs`, (K/L, ceil(C/2), R, S, L, 2): each lane's two channels of a pair adjacent (an
        odd C padded with a zero channel)."""
        k, c, r, s = self.weight_shape
        lanes = self.weight_block
        if self.pairs:
            return k // lanes, -(-c // 2), r, s, lanes, 2
        return k // lanes, c, r, s, lanes

    def _acc_channels(self, data: Tensor, weight: Tensor) -> Tensor:
        k_out, c, r, s = self.weight_shape
        sh, sw = self.stride_hw
        src = self._padded(data, False) if any(self.pad_tlbr) else data
        wide = self._widen
        lanes = self.weight_block
        wt = weight if self.packed else compute(
            self.packed_weight_shape, lambda ko, ch, ry, rx, ki: weight[ko * lanes + ki, ch, ry, rx], "wt")
        ic, ry, rx = reduce_axis(c, "ic"), reduce_axis(r, "ry"), reduce_axis(s, "rx")
        n, _, oh, ow = self.out_shape
        return compute((n, oh, ow, k_out), lambda b, y, x, k: sum(
            wide(src[b, ic, y * sh + ry, x * sw + rx]) * wide(wt[k // lanes, ic, ry, rx, k % lanes]),
            [ic, ry, rx]), "acc")

    def pack_weight(self, weight: np.ndarray) -> np.ndarray:
        """A (K, C, R, S) weight as a packed weight argument takes it: `packed_weight_shape`,
        contiguous, in `packed_dtype`."""
        k, c, r, s = self.weight_shape
        lanes = self.weight_block
        if self.pairs:
            return pack_pairs(weight, lanes)
        blocks = np.asarray(weight).reshape(k // lanes, lanes, c, r, s)
        return np.ascontiguousarray(blocks.transpose(0, 2, 3, 4, 1))

    def logical_weight(self, weight: np.ndarray) -> np.ndarray:
        """The weight argument as (K, C/group, R, S), unpacked if it comes packed."""
        if not self.packed:
            return weight
        if self.pairs:
            return unpack_pairs(weight, self.weight_shape[1]).astype(self.inp_dtype)
        return weight.transpose(0, 4, 1, 2, 3).reshape(self.weight_shape)

    def _acc_depthwise(self, data: Tensor, weight: Tensor) -> Tensor:
        k_out, _, r, s = self.weight_shape
        sh, sw = self.stride_hw
        src = self._padded(data, True)
        wide = self._widen
        wt = compute((r, s, k_out), lambda ry, rx, k: wide(weight[k, 0, ry, rx]), "wt")
        ry, rx = reduce_axis(r, "ry"), reduce_axis(s, "rx")
        n, _, oh, ow = self.out_shape
        return compute((n, oh, ow, k_out), lambda b, y, x, k: sum(
            wide(src[b, y * sh + ry, x * sw + rx, k]) * wt[ry, rx, k], [ry, rx]), "acc")

    # -- schedules ------------------------------------------------------------------------------
    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        s = Schedule(ts["out"])
        strategy = self.chosen_strategy
        if strategy == "rows":
            return self._schedule_rows(s)
        if strategy == "depthwise":
            return self._schedule_depthwise(s)
        pixels, lanes = register_tile(self.out_hw[1], self.weight_shape[0], self.acc_dtype)
        if lanes:
            return self._schedule_channel_blocks(s, *self.tile)
        s.reorder("out", "y", "ch", "x")
        s.compute_at("acc", "out", "y")  # one output row, channels last, in the stack
        s.split("acc", "x", pixels)
        if True:
            s.reorder("acc", "x.o", "ic", "ry", "rx", "x.i", "k")
            vectorize_loop(s, "acc", "k", self.weight_shape[0])
        return s

    def _schedule_channel_blocks(self, s: Schedule, pixels: int, lanes: int, order: str) -> Schedule:
        """A block of `lanes` output channels at a time (its weights, C*R*S*lanes values, stay
        in cache over the whole image), `pixels` output pixels of a row at a time: their
        `pixels` x `lanes` accumulators are a small temporary (a register tile) computed inside
        the pixel block, the reduction outside its pixel and lane loops (one weight vector
        serves `pixels` pixels, one broadcast input value `lanes` channels; the lanes are one
        vector operation and LLVM unrolls the pixels, so the tile stays in registers over the
        whole reduction), then taken through the epilogue into NCHW.  `order` "channels" puts the
        channel blocks outermost (a block's weights stay in cache over the image), "rows" the
        output rows (a row's input rows stay in cache over every block)."""
        s.split("out", "ch", lanes)
        s.split("out", "x", pixels)
        if self.tile_order == "rows":
            s.reorder("out", "y", "ch.o", "x.o", "ch.i", "x.i")
        else:
            s.reorder("out", "ch.o", "y", "x.o", "ch.i", "x.i")
        s.compute_at("acc", "out", "x.o")
        s.reorder("acc", "ic", "ry", "rx", "x", "k")
        s.vectorize("acc", "k")
        return s

    def _schedule_depthwise(self, s: Schedule) -> Schedule:
        """Channels last, `lanes` channels a vector: the transposed copy and the transpose back
        through the epilogue in tiles of `lanes` channels (contiguous vector stores and loads);
        each output row accumulated a few pixels at a time, the window loops inside a channel
        tile."""
        lanes = next((f for f in (16, 8, 4) if self.weight_shape[0] % f == 0), 1)
        s.split("data_pad", "ch", lanes)
        s.reorder("data_pad", "y", "ch.o", "x", "ch.i")
        s.split("out", "ch", lanes)
        s.reorder("out", "y", "ch.o", "x", "ch.i")
        s.compute_at("acc", "out", "y")  # one output row, channels last, in the stack
        s.split("acc", "x", next(f for f in (4, 2, 1) if self.out_hw[1] % f == 0))
        s.split("acc", "k", lanes)
        s.reorder("acc", "x.o", "k.o", "ry", "rx", "x.i", "k.i")
        for stage, axis in (("data_pad", "ch.i"), ("out", "ch.i"), ("acc", "k.i")):
            vectorize_loop(s, stage, axis, lanes)
        return s

    def _schedule_rows(self, s: Schedule) -> Schedule:
        """NCHW, vectorised along each output row.  With unit width stride and a width that 8
        divides, the row goes in chunks of 16 or 8 pixels, the reduction loops inside a chunk
        (measured on int8: 10-20% faster; with stride 2 the chunked loops came out 7-10x
        slower)."""
        s.compute_at("acc", "out", "y")  # one output row in the stack
        ow, sw = self.out_hw[1], self.stride_hw[1]
        if sw == 1 and ow % 8 == 0:
            s.split("acc", "x", 16 if ow % 16 == 0 else 8)
            s.reorder("acc", "x.o", "ic", "ry", "rx", "x.i")
            s.vectorize("acc", "x.i")
        else:
            s.reorder("acc", "ic", "ry", "rx", "x")
            vectorize_loop(s, "acc", "x", ow)
        vectorize_loop(s, "out", "x", ow)
        kg = self.weight_shape[0] // self.group
        if any(self.pad_tlbr) and kg == 1:  # each padded plane serves one output channel
            s.compute_at("data_pad", "out", "ch")
        return s


ORDERS = ("auto", "channels", "rows")  # the "channels" schedule's outer loop: see ConvOp.tile


def register_tile(width: int, channels: int, acc_dtype: str,
                  target: CpuTarget | None = None) -> tuple[int, int | None]:
    """The "channels" schedule's default register tile on `target` (the host by default):
    pixels of an output row (the largest divisor of `width` up to half the target's vector
    registers: measured on ResNet-18's convolutions on an AVX2 host, 7-8 pixels ran 1.1-2.8x
    faster than 14, the most that max_pixels allows, whose 16 live vectors spill) by one vector
    of output channels (`lanes`, the target's vector width
    in the accumulator's dtype; None: the channels stay one vectorised loop, when they are no
    multiple of a vector).  On an AVX2 host (16 ymm): up to 8 pixels by 8 float32 channels."""
    target = host_target() if target is None else target
    lanes = target.lanes(E.BITS[acc_dtype])
    pixels = max(p for p in range(1, target.vector_registers // 2 + 1) if width % p == 0)
    if channels % lanes:
        return next(f for f in (4, 2, 1) if width % f == 0), None
    return pixels, lanes


def max_pixels(target: CpuTarget) -> int:
    """The most pixels a register tile holds: every vector register but two."""
    return target.vector_registers - 2


def conv_reference64(data: np.ndarray, weight: np.ndarray, strides: tuple[int, int],
                     pads: tuple[int, int, int, int], group: int,
                     pad_fill: int = 0) -> np.ndarray:
    """numpy: the grouped convolution NCHW x (K, C/group, R, S) -> NKHW, in float64 (BLAS),
    padding with `pad_fill`."""
    (n, _, _, _), (k, cg, r, s) = data.shape, weight.shape
    top, left, bottom, right = pads
    sides = ((0, 0), (0, 0), (top, bottom), (left, right))
    x = np.pad(data.astype(np.float64), sides, constant_values=pad_fill)
    win = np.lib.stride_tricks.sliding_window_view(x, (r, s), axis=(2, 3))[:, :, :: strides[0], :: strides[1]]
    oh, ow = win.shape[2:4]
    win = win.reshape(n, group, cg, oh, ow, r, s)
    w = weight.astype(np.float64).reshape(group, k // group, cg, r, s)
    out = np.einsum("ngchwij,gkcij->ngkhw", win, w, optimize=True)
    return out.reshape(n, k, oh, ow)
