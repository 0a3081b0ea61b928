"""QConv's integer reference for its common shapes (depthwise, pointwise) as fused, blocked
kernels: the accumulator and the epilogue of one block of channels or positions at a time, so
that every intermediate stays in the core's cache and no full-size int32 or float32 temporary
is made (a 5 MiB temporary costs more in page faults than the arithmetic on it). The integer
reference runs every layer of a model once per checked input (`codesign run`'s correct_int8):
EfficientNet-Lite1's took 0.10-0.15 s per input unfused, a third of the budget of a whole fsim
run; fused it takes 0.6-0.75 of that (float32 GEMMs and matrix-vector products are now most of
it, then numpy's per-call costs).

Exactness, element for element the same int8 values as `qops.qconv_acc` + `qops.requantize`:

- every step of the plain epilogue before the shift (bias add, multiply, residual add,
  rounding add) wraps at 32 bits, i.e. is arithmetic modulo 2**32, where
  ((acc + bias) * mult + residual * mult_r + round) == acc * mult + residual * mult_r +
  (bias * mult + round): the per-channel constant `offset` is folded once, and int32 numpy
  arithmetic (which wraps) computes the rest. The accumulator itself is needed only modulo
  2**32, so int32 sums that would wrap are still right;
- float32 holds every integer up to 2**24, and a sum of at most 2**10 products of two int8
  values (|p| <= 2**14) stays below it whatever the order of the additions: depthwise tap sums
  (at most 2**10 taps; larger kernels take the general path) are float32 matrix-vector
  products, pointwise sums float32 GEMMs over chunks of at most 2**10 input channels, each
  converted to int32 exactly and the chunks added in int32 (modulo 2**32, as above);
- the precise epilogue (`split` > 0) clamps the wrapped int32 sum and multiplies in int64,
  as `qops.precise_requantize` does.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from compiler.graph.ir import AttrValue, attr_int, attr_ints

# int32 elements of one block's accumulator (512 KiB): small enough to stay in a core's cache,
# large enough that numpy's per-call costs vanish.
BLOCK_ELEMS = 1 << 17
# Products per float32 sum (input channels per GEMM, taps per depthwise kernel): every sum of
# that many int8 x int8 products (|p| <= 2**14) is an integer below 2**24, exact in float32.
F32_TERMS = 1 << 10
# float32 elements of a depthwise block's stacked tap inputs (1 MiB).
STACK_ELEMS = 1 << 18


class _Scratch(threading.local):
    """Work buffers kept from one call to the next, per thread: a fresh 1 MiB numpy array costs
    its page faults on first touch (the allocator hands large blocks back to the system when
    they are freed), more than the arithmetic done in it. Only a call's temporaries live here,
    never a value it returns."""

    def __init__(self) -> None:
        self.buffers: dict[str, np.ndarray] = {}

    def take(self, name: str, shape: tuple[int, ...], dtype: type) -> np.ndarray:
        """An uninitialized array of `shape` and `dtype` in the buffer called `name` (grown as
        needed); valid until the next `take` of the same name."""
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        buf = self.buffers.get(name)
        if buf is None or buf.nbytes < nbytes:
            buf = self.buffers[name] = np.empty(max(nbytes, 1), np.uint8)
        return buf[:nbytes].view(dtype).reshape(shape)


_SCRATCH = _Scratch()


def _int32(v: np.ndarray | int) -> np.ndarray:
    """Integer values wrapped to int32 (two's complement)."""
    return np.asarray(v, np.int64).astype(np.int32)


@dataclass(frozen=True)
class Epilogue:
    """A QConv's per-output-channel requantization, applied to int32 accumulator blocks. Plain:
    y = clip((acc * mult + residual * mult_r + offset) >> shift), all modulo 2**32 before the
    shift, offset = bias * mult + 2**(shift - 1) (0 for shift 0). Precise (`clamp` set):
    y = clip((clamp(acc + bias) * mult + 2**(shift - 1)) >> shift) in int64, `offset` holding
    the bias."""

    mult: np.ndarray  # int32 (channels,)
    offset: np.ndarray  # int32 (channels,)
    shift: int
    clip_lo: int
    clip_hi: int
    mult_r: int = 0
    clamp: tuple[np.ndarray, np.ndarray] | None = None  # int32 clamp_lo, clamp_hi (precise)

    @classmethod
    def of(cls, xs: Sequence[np.ndarray], attrs: Mapping[str, AttrValue]) -> Epilogue:
        """The epilogue of a QConv with inputs `xs` (x, w, bias, mult[, residual | clamp_lo,
        clamp_hi]) and attributes `attrs`."""
        bias, mult = (np.asarray(v, np.int64) for v in xs[2:4])
        shift, lo, hi = (attr_int(attrs, k) for k in ("shift", "clip_lo", "clip_hi"))
        if attr_int(attrs, "split") > 0:
            clamp = (_int32(xs[4]), _int32(xs[5]))
            return cls(_int32(mult), _int32(bias), shift, lo, hi, clamp=clamp)
        rounding = 1 << (shift - 1) if shift > 0 else 0
        offset = _int32(bias * _int32(mult) + rounding)
        return cls(_int32(mult), offset, shift, lo, hi, attr_int(attrs, "mult_r"))

    def apply(self, t: np.ndarray, channels: slice, residual: np.ndarray | None, out: np.ndarray,
              last: bool = False) -> None:
        """Requantize the int32 block `t` (overwritten) of output `channels` into int8 `out`
        (`t`'s shape). The channels are on axis 0, or on the last axis if `last` (numpy applies
        a per-channel vector one row at a time, at about 0.3 us a row: the longer rows win);
        `residual`: the int8 residual block laid out as `t`, or None."""
        shape = (-1,) if last else (-1,) + (1,) * (t.ndim - 1)
        mult, offset = self.mult[channels].reshape(shape), self.offset[channels].reshape(shape)
        if self.clamp is not None:
            lo_t, hi_t = (v[channels].reshape(shape) for v in self.clamp)
            t += offset
            np.clip(t, lo_t, hi_t, out=t)
            wide = t.astype(np.int64)
            wide *= mult
            wide += 1 << (self.shift - 1)
            wide >>= self.shift
            out[...] = np.clip(wide, np.int64(self.clip_lo), np.int64(self.clip_hi), out=wide)
            return
        t *= mult
        t += offset
        if residual is not None:
            r = _SCRATCH.take("residual", t.shape, np.int32)
            np.copyto(r, residual)
            r *= _int32(self.mult_r)
            t += r
        if self.shift > 0:
            t >>= self.shift
        out[...] = np.clip(t, np.int32(self.clip_lo), np.int32(self.clip_hi), out=t)

    def blocked(self, acc: np.ndarray, residual: np.ndarray | None) -> np.ndarray:
        """The int8 output of an accumulator `acc` (N, channels, ...; int32 or int64 holding
        values to wrap), requantized a block of channels at a time; `acc` is left unchanged."""
        out = np.empty(acc.shape, np.int8)
        per_channel = math.prod(acc.shape[2:])
        block = max(1, BLOCK_ELEMS // max(per_channel, 1))
        for n in range(acc.shape[0]):
            for c0 in range(0, acc.shape[1], block):
                cs = slice(c0, min(acc.shape[1], c0 + block))
                r = None if residual is None else residual[n, cs]
                t = _SCRATCH.take("blocked", acc[n, cs].shape, np.int32)
                np.copyto(t, acc[n, cs], casting="unsafe")  # wraps int64 values as astype does
                self.apply(t, cs, r, out[n, cs])
        return out


def fused_qconv(xs: Sequence[np.ndarray], attrs: Mapping[str, AttrValue]) -> np.ndarray | None:
    """A QConv's int8 output for inputs `xs` and attributes `attrs` by a fused kernel: a
    depthwise convolution, or a pointwise (1x1, unpadded) one; None for any other shape."""
    x, w = xs[0], xs[1]
    group, strides, pads = attr_int(attrs, "group"), attr_ints(attrs, "strides"), attr_ints(attrs, "pads")
    residual = xs[4] if len(xs) == 5 else None
    if group == x.shape[1] == w.shape[0] and w.shape[1] == 1 and w.shape[2] * w.shape[3] <= F32_TERMS:
        return _depthwise(x, w, strides, pads, attr_int(attrs, "pad_value"), Epilogue.of(xs, attrs), residual)
    if group == 1 and w.shape[2:] == (1, 1) and not any(pads):
        return _pointwise(x, w, strides, Epilogue.of(xs, attrs), residual)
    return None


def _pointwise(x: np.ndarray, w: np.ndarray, strides: Sequence[int], epi: Epilogue,
               residual: np.ndarray | None) -> np.ndarray:
    """A 1x1 convolution, a block of output positions at a time: int8 inputs to float32, GEMMs
    over chunks of F32_TERMS input channels, int32 sums, the epilogue (channels first where
    a channel's positions make long rows, else last)."""
    x = x[:, :, :: strides[0], :: strides[1]]
    n, c, k = x.shape[0], x.shape[1], w.shape[0]
    positions = math.prod(x.shape[2:])
    chunks = [slice(i, i + F32_TERMS) for i in range(0, c, F32_TERMS)]
    w_all = _SCRATCH.take("w", (k, c), np.float32)
    np.copyto(w_all, w.reshape(k, c))
    weights = [w_all[:, part] for part in chunks]
    cols = min(positions, max(1, BLOCK_ELEMS // max(k, c)))
    last = k > cols  # the longer rows for the epilogue's broadcasts
    x_block = _SCRATCH.take("x", (c, cols), np.float32)
    shape = (cols, k) if last else (k, cols)
    acc_block, t_block = _SCRATCH.take("acc", shape, np.float32), _SCRATCH.take("t", shape, np.int32)
    t8_block = _SCRATCH.take("t8", shape, np.int8)
    out = np.empty((n, k, positions), np.int8)
    for b in range(n):
        rows = x[b].reshape(c, positions)
        res = None if residual is None else residual[b].reshape(k, positions)
        for p0 in range(0, positions, cols):
            ps = slice(p0, min(positions, p0 + cols))
            xb = x_block[:, : ps.stop - p0]
            span = (slice(0, ps.stop - p0),) if last else (slice(None), slice(0, ps.stop - p0))
            acc, t, t8 = acc_block[span], t_block[span], t8_block[span]
            np.copyto(xb, rows[:, ps])
            for i, (part, wf) in enumerate(zip(chunks, weights, strict=True)):
                if last:  # exact integers below 2**24
                    np.matmul(xb[part].T, wf.T, out=acc)
                else:
                    np.matmul(wf, xb[part], out=acc)
                if i == 0:
                    np.copyto(t, acc, casting="unsafe")
                else:
                    t += acc.astype(np.int32)
            r = None if res is None else res[:, ps]
            if last:
                epi.apply(t, slice(None), None if r is None else np.ascontiguousarray(r.T), t8, last=True)
                out[b, :, ps] = t8.T
            else:
                epi.apply(t, slice(None), r, out[b, :, ps])
    return out.reshape(n, k, *x.shape[2:])


@dataclass(frozen=True)
class _Phases:
    """A depthwise convolution's input in `depthwise.py`'s phase form: the padded input split
    into its stride x stride phases, each `rows` x `cols` flattened per channel (plus a row of
    slack), so that a kernel tap's inputs for every output are one contiguous slice of
    `length` = out_rows * cols values (the columns past the output's are dropped)."""

    kernel: tuple[int, int]
    strides: tuple[int, int]
    out: tuple[int, int]
    rows: int
    cols: int

    @classmethod
    def of(cls, shape: tuple[int, ...], kernel: tuple[int, int], strides: Sequence[int],
           pads: Sequence[int]) -> _Phases:
        (h, w), (kh, kw), (sh, sw) = shape[2:], kernel, strides
        oh, ow = (h + pads[0] + pads[2] - kh) // sh + 1, (w + pads[1] + pads[3] - kw) // sw + 1
        rows = max(oh + (kh - 1) // sh, -(-(pads[0] + h) // sh))
        cols = max(ow + (kw - 1) // sw, -(-(pads[1] + w) // sw))
        return cls((kh, kw), (sh, sw), (oh, ow), rows, cols)

    @property
    def size(self) -> int:
        return self.rows * self.cols + self.cols  # a tap's slice may run a row past its phase

    @property
    def length(self) -> int:
        return self.out[0] * self.cols

    @property
    def span(self) -> int:
        """Values of a phase that one kernel column's taps read (stride 1)."""
        return (self.kernel[0] - 1) * self.cols + self.length

    @property
    def stacked_per_channel(self) -> int:
        """float32 values a channel stacks: each kernel column's span (stride 1), else each tap's
        slice."""
        kh, kw = self.kernel
        return kw * self.span if self.strides == (1, 1) else kh * kw * self.length


def _depthwise(x: np.ndarray, w: np.ndarray, strides: Sequence[int], pads: Sequence[int], fill: int,
               epi: Epilogue, residual: np.ndarray | None) -> np.ndarray:
    """A depthwise convolution, a block of channels at a time: the padded input in phase form,
    float32 copies of the slices the taps read, float32 matrix-vector products per channel
    (exact: a few dozen products of int8 values, far below 2**24), and the epilogue."""
    n, c = x.shape[:2]
    geo = _Phases.of(x.shape, w.shape[2:], strides, pads)
    (oh, ow), (sh, sw) = geo.out, geo.strides
    block = max(1, STACK_ELEMS // geo.stacked_per_channel)
    phases = _SCRATCH.take("phases", (sh, sw, block, geo.size), np.int8) if geo.strides != (1, 1) else None
    last = min(block, c) > oh * ow  # the longer rows for the epilogue's broadcasts
    t_block = _SCRATCH.take("t", (oh, ow, block) if last else (block, oh, ow), np.int32)
    t8_block = _SCRATCH.take("t8", (oh, ow, block), np.int8)
    wf = w[:, 0].astype(np.float32)
    out = np.empty((n, c, oh, ow), np.int8)
    for b in range(n):
        for c0 in range(0, c, block):
            cs = slice(c0, min(c, c0 + block))
            k = cs.stop - c0
            if geo.strides == (1, 1):
                acc = _column_sums(x[b, cs], wf[cs], geo, pads, fill)
            else:
                assert phases is not None
                _fill_phases(phases[:, :, :k], x[b, cs], pads, (geo.rows, geo.cols), fill)
                acc = _tap_sums(phases[:, :, :k], wf[cs], geo)
            acc = acc.reshape(k, oh, geo.cols)[..., :ow]
            res = None if residual is None else residual[b, cs]
            if last:
                t_out, t8 = t_block[..., :k], t8_block[..., :k]
                np.copyto(t_out, acc.transpose(1, 2, 0), casting="unsafe")
                res_t = None if res is None else np.ascontiguousarray(res.transpose(1, 2, 0))
                epi.apply(t_out, cs, res_t, t8, last=True)
                out[b, cs] = t8.transpose(2, 0, 1)
            else:
                t_out = t_block[:k]
                np.copyto(t_out, acc, casting="unsafe")
                epi.apply(t_out, cs, res, out[b, cs])
    return out


def _tap_sums(phases: np.ndarray, w: np.ndarray, geo: _Phases) -> np.ndarray:
    """Each channel's tap sums (k, 1, length), float32: every tap's slice copied into a
    (k, taps, length) stack, then one matrix-vector product per channel."""
    (kh, kw), (sh, sw), k = geo.kernel, geo.strides, phases.shape[2]
    stack = _SCRATCH.take("stack", (k, kh * kw, geo.length), np.float32)
    for ky in range(kh):
        for kx in range(kw):  # tap (ky, kx) reads phase (ky mod s, kx mod s) from row ky // s, column kx // s
            start = (ky // sh) * geo.cols + kx // sw
            stack[:, ky * kw + kx] = phases[ky % sh, kx % sw, :, start : start + geo.length]
    acc = _SCRATCH.take("acc", (k, 1, geo.length), np.float32)
    return np.matmul(w.reshape(k, 1, kh * kw), stack, out=acc)


def _column_sums(x: np.ndarray, w: np.ndarray, geo: _Phases, pads: Sequence[int], fill: int) -> np.ndarray:
    """`_tap_sums` for stride 1, from the input `x` (k, H, W) itself, with kh times fewer
    copies: the padded input is made once, as float32, flattened per channel; kernel column
    kx's taps all read it shifted by kx (a contiguous copy per channel, in a (k, kw, ...)
    stack), kernel row ky's ky rows further on: a matrix-vector product per channel and kernel
    row, summed."""
    (kh, kw), k, cols, span = geo.kernel, x.shape[0], geo.cols, geo.span
    stack = _SCRATCH.take("stack", (k, kw, span + kw - 1), np.float32)
    grid = stack[:, 0]  # the padded input, with kw - 1 values of slack that shifts read
    grid.fill(fill)
    rows, r1, c1 = span // cols, pads[0] + x.shape[1], pads[1] + x.shape[2]  # cols >= pads[1] + W
    grid[:, : rows * cols].reshape(k, rows, cols)[:, pads[0] : r1, pads[1] : c1] = x[:, : rows - pads[0]]
    for kx in range(1, kw):
        stack[:, kx, :span] = grid[:, kx : kx + span]
    acc = _SCRATCH.take("acc", (k, 1, geo.length), np.float32)
    row = _SCRATCH.take("row", (k, 1, geo.length), np.float32)
    for ky in range(kh):
        reads = stack[:, :, ky * cols : ky * cols + geo.length]
        np.matmul(w[:, None, ky], reads, out=row if ky else acc)
        if ky:
            acc += row  # exact: integers below 2**24
    return acc


def _fill_phases(phases: np.ndarray, x: np.ndarray, pads: Sequence[int], size: tuple[int, int],
                 fill: int) -> None:
    """Phase (py, px) of `phases` (sh, sw, channels, rows * cols + cols): the padded input's
    rows py, py + sh, ... and columns px, px + sw, ..., flattened per channel; every cell
    outside `x` (placed at pads[0], pads[1]) reads `fill`."""
    sh, sw = phases.shape[:2]
    rows, cols = size
    phases.fill(fill)
    for py in range(sh):
        r0, x_row = _first(pads[0], py, sh)
        for px in range(sw):
            c0, x_col = _first(pads[1], px, sw)
            src = x[:, x_row::sh, x_col::sw]
            grid = phases[py, px, :, : rows * cols].reshape(x.shape[0], rows, cols)
            grid[:, r0 : r0 + src.shape[1], c0 : c0 + src.shape[2]] = src


def _first(pad: int, phase: int, stride: int) -> tuple[int, int]:
    """The first phase index whose padded position (index * stride + phase) lies in the input,
    and that input position."""
    index = max(0, -(-(pad - phase) // stride))
    return index, index * stride + phase - pad
