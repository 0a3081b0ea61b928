"""Packed int8 conv2d with a fused epilogue: TE definition, schedule space, default schedule.

Layouts (VTA's): data NCHW{batch}n{block_in}c = (N/b, C/ci, H, W, b, ci); kernel
OIHW{block_out}o{block_in}i = (K/co, C/ci, R, R, co, ci); bias (K/co, b, co) int32; output
(N/b, K/co, OH, OW, b, co) int8.  Channels that are not a multiple of the block are padded with
zeros by `pack_*`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from compiler.errors import ScheduleError
from compiler.ops.accel.common import (
    Epilogue,
    Tiling,
    best_point,
    check_knobs,
    divisors,
    grid,
    knob_grid,
    load_into_acc,
    precise_tensors,
    random_vectors,
    stage_epilogue,
    tile_table,
    tiling_cycles,
    tiling_events,
)
from compiler.schedule.schedule import Schedule
from compiler.target.accel import AcceleratorTarget
from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, placeholder, reduce_axis, sum
from hw.errors import InputError


@dataclass(frozen=True)
class Conv2dSpec:
    batch: int
    in_channels: int
    height: int
    width: int
    out_channels: int
    kernel: int
    stride: int = 1
    pad: int = 0
    epilogue: Epilogue = field(default_factory=Epilogue)

    def __post_init__(self) -> None:
        for name in ("batch", "in_channels", "height", "width", "out_channels", "kernel", "stride"):
            if getattr(self, name) < 1:
                raise InputError(f"conv2d {name} must be positive, not {getattr(self, name)}")
        if self.pad < 0:
            raise InputError(f"conv2d pad must be >= 0, not {self.pad}")
        if self.out_height < 1 or self.out_width < 1:
            raise InputError(f"conv2d kernel {self.kernel} is larger than the padded input "
                             f"{self.height + 2 * self.pad}x{self.width + 2 * self.pad}")

    @property
    def out_height(self) -> int:
        return (self.height + 2 * self.pad - self.kernel) // self.stride + 1

    @property
    def out_width(self) -> int:
        return (self.width + 2 * self.pad - self.kernel) // self.stride + 1

    @property
    def macs(self) -> int:
        return (self.batch * self.out_channels * self.out_height * self.out_width
                * self.in_channels * self.kernel * self.kernel)

    def name(self) -> str:
        return (f"conv2d_{self.height}x{self.width}_{self.in_channels}to{self.out_channels}"
                f"_k{self.kernel}s{self.stride}p{self.pad}")


@dataclass(frozen=True)
class Conv2dKnobs:
    """One point of the schedule space: tiles in blocks (channels) or pixels, thread counts."""

    tile_b: int = 1
    tile_h: int = 1
    tile_w: int = 1
    tile_oc: int = 1
    tile_ic: int = 1
    oc_threads: int = 1
    h_threads: int = 1

    @property
    def threads(self) -> int:
        return self.oc_threads * self.h_threads

    def to_json(self) -> dict[str, int]:
        return asdict(self)


class Conv2d:
    """The operator for one spec on one target."""

    op = "conv2d"

    def __init__(self, spec: Conv2dSpec, target: AcceleratorTarget) -> None:
        self.spec, self.target = spec, target
        t = target
        if spec.batch % t.batch:
            raise ScheduleError(f"conv2d batch {spec.batch} is not a multiple of the core's batch {t.batch}")
        self.nb = spec.batch // t.batch
        self.cb = -(-spec.in_channels // t.block_in)
        self.kb = -(-spec.out_channels // t.block_out)

    @property
    def row_step(self) -> int:
        """Input rows the input stage steps over per output row: a 1xN kernel with stride > 1
        never reads the rows between strides, so its input tile takes every stride-th row (one
        2-D DMA with a longer row pitch) instead of the whole span."""
        s = self.spec
        # (without padding only: a padding condition must step with the copied rows)
        return s.stride if s.kernel == 1 and s.stride > 1 and s.pad == 0 else 1

    def _in_rows(self, tile_h: Any) -> Any:
        s = self.spec
        return (tile_h - 1) * (s.stride // self.row_step) + s.kernel

    def _rows_ok(self, tile_h: int) -> bool:
        s = self.spec
        if self.row_step > 1:  # unpadded: every tile reads real rows only
            return True
        return _pads_ok(s.out_height, tile_h, s.stride, s.kernel, s.pad, s.height, self.target)

    # -- the what ----------------------------------------------------------------------------------
    def tensors(self) -> dict[str, Tensor]:
        s, t = self.spec, self.target
        p, st, r = s.pad, s.stride, s.kernel
        acc = t.acc_dtype
        data = placeholder((self.nb, self.cb, s.height, s.width, t.batch, t.block_in), t.inp_dtype, "data")
        kernel = placeholder((self.kb, self.cb, r, r, t.block_out, t.block_in), t.wgt_dtype, "kernel")
        out: dict[str, Tensor] = {"data": data, "kernel": kernel}
        row_step = self.row_step
        src = data
        if p or row_step > 1:
            h, w = s.height, s.width
            rows = s.out_height if row_step > 1 else h + 2 * p

            def padded(n: E.Expr, c: E.Expr, y: E.Expr, x: E.Expr, bi: E.Expr, ci: E.Expr) -> E.Expr:
                value = data[n, c, y * row_step - p, x - p, bi, ci]
                if not p:
                    return value
                inside = E.all_of(E.ge(y, p), E.lt(y, h + p), E.ge(x, p), E.lt(x, w + p))
                return E.if_then_else(inside, value, 0)

            src = compute((self.nb, self.cb, rows, w + 2 * p, t.batch, t.block_in), padded,
                          "data_pad" if p else "data_rows")
        ic, ry, rx = reduce_axis(self.cb, "ic"), reduce_axis(r, "ry"), reduce_axis(r, "rx")
        ii = reduce_axis(t.block_in, "ii")
        shape = (self.nb, self.kb, s.out_height, s.out_width, t.batch, t.block_out)
        y_step = st // row_step
        conv = compute(shape, lambda n, o, y, x, bi, oi: sum(
            E.cast(acc, src[n, ic, y * y_step + ry, x * st + rx, bi, ii])
            * E.cast(acc, kernel[o, ic, ry, rx, oi, ii]), [ic, ry, rx, ii]), "conv")
        result = conv
        ep = s.epilogue
        if ep.alu_ops:
            vec = {v: placeholder((self.kb, t.batch, t.block_out), acc, v) for v in ep.vectors}
            out.update(vec)
            if ep.split:
                result = precise_tensors(ep, shape, conv, vec, lambda i: (i[1], i[4], i[5]))
            else:
                result = self._epilogue(out, conv, vec)
        out["out"] = compute(
            shape, lambda n, o, y, x, bi, oi: E.cast(t.out_dtype, result[n, o, y, x, bi, oi]), "out")
        return out

    def _epilogue(self, out: dict[str, Tensor], conv: Tensor, vec: dict[str, Tensor]) -> Tensor:
        """The `epi` stage over the accumulators; a residual operand (added to `out`) is scaled
        by an ALU stage of its own, in place."""
        ep, t = self.spec.epilogue, self.target
        shape, acc = conv.shape, t.acc_dtype
        res = None
        if ep.residual is not None:
            out["res"] = placeholder(shape, t.out_dtype, "res")
            res = out["res"] if ep.residual == 1 else compute(shape, lambda n, o, y, x, bi, oi: (
                ep.scaled_residual(out["res"][n, o, y, x, bi, oi], {"rmult": vec["rmult"][o, bi, oi]}
                                   if ep.residual_vector else {}, acc)), "res_scaled")

        def body(n, o, y, x, bi, oi):  # type: ignore[no-untyped-def]
            r = None if res is None else E.cast(acc, res[n, o, y, x, bi, oi])
            return ep.expr(conv[n, o, y, x, bi, oi], {v: vec[v][o, bi, oi] for v in vec}, r)

        return compute(shape, body, "epi")

    # -- the space -----------------------------------------------------------------------------------
    def space(self) -> dict[str, list[int]]:
        s = self.spec
        return {
            "tile_b": divisors(self.nb), "tile_h": divisors(s.out_height),
            "tile_w": divisors(s.out_width), "tile_oc": divisors(self.kb),
            "tile_ic": divisors(self.cb), "oc_threads": [1, 2, 4], "h_threads": [1, 2, 4],
        }

    def points(self) -> list[Conv2dKnobs]:
        return grid(Conv2dKnobs, self.space())  # type: ignore[no-any-return]

    def footprint(self, k: Conv2dKnobs) -> dict[str, int]:
        """Scratchpad elements the point needs (all threads), as lowering will allocate them."""
        s = self.spec
        in_h, in_w = self._in_rows(k.tile_h), (k.tile_w - 1) * s.stride + s.kernel
        vectors = self.kb * len(s.epilogue.vectors)
        # the accumulators (and the residual, or a precise epilogue's copies)
        tiles = s.epilogue.acc_tiles + int(s.epilogue.residual is not None)
        return {
            "inp": k.threads * k.tile_b * k.tile_ic * in_h * in_w,
            "wgt": k.threads * k.tile_oc * k.tile_ic * s.kernel * s.kernel,
            "acc": k.threads * k.tile_b * k.tile_oc * k.tile_h * k.tile_w * tiles + vectors,
        }

    def fits(self, k: Conv2dKnobs) -> bool:
        s = self.spec
        if self.kb % (k.tile_oc * k.oc_threads) or s.out_height % (k.tile_h * k.h_threads):
            return False
        if k.threads > self.target.token_capacity:
            return False
        if not (self._rows_ok(k.tile_h)
                and _pads_ok(s.out_width, k.tile_w, s.stride, s.kernel, s.pad, s.width, self.target)):
            return False
        need = self.footprint(k)
        return all(need[n] <= self.target.scope(n).depth for n in need)

    def tiling(self, b: Any, h: Any, w: Any, oc: Any, ic: Any) -> Tiling:
        """The tile counts and sizes of points with these tiles (scalars or the grid's arrays)."""
        s, cfg = self.spec, self.target.cfg
        in_h, in_w = self._in_rows(h), (w - 1) * s.stride + s.kernel
        tiles = (self.nb // b) * (self.kb // oc) * (s.out_height // h) * (s.out_width // w)
        acc = b * oc * h * w
        return Tiling(tiles, tiles * (self.cb // ic), acc, acc * ic * s.kernel**2,
                      b * ic * in_h * in_w * cfg.inp_elem_bytes, oc * ic * s.kernel**2 * cfg.wgt_elem_bytes,
                      b * ic + 1, s.epilogue.alu_ops)

    def _tiling_of(self, k: Conv2dKnobs) -> Tiling:
        return self.tiling(k.tile_b, k.tile_h, k.tile_w, k.tile_oc, k.tile_ic)

    def estimate(self, k: Conv2dKnobs) -> float | None:
        """A quick analytic cycle estimate (None when the point does not fit), used only to pick
        the default (`tiling_cycles`)."""
        if not self.fits(k):
            return None
        return float(tiling_cycles(self._tiling_of(k), self.target.cfg, k.threads))

    def events(self, k: Conv2dKnobs) -> dict[str, int]:
        """The timing model's event counters of point `k` (`tiling_events`), without running it."""
        return {name: int(v) for name, v in tiling_events(self._tiling_of(k), self.target.cfg).items()}

    def estimates(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """`estimate` of every point of the space at once: each knob's values in `points()`'s
        order, and the estimates (NaN where a point does not fit), equal to `estimate`'s."""
        s, t = self.spec, self.target
        space = self.space()
        g = knob_grid(space)
        b, h, w, oc, ic = g["tile_b"], g["tile_h"], g["tile_w"], g["tile_oc"], g["tile_ic"]
        threads = g["oc_threads"] * g["h_threads"]
        in_h, in_w = self._in_rows(h), (w - 1) * s.stride + s.kernel
        ep = s.epilogue
        fits = ((self.kb % (oc * g["oc_threads"]) == 0) & (s.out_height % (h * g["h_threads"]) == 0)
                & (threads <= t.token_capacity)
                & tile_table(space["tile_h"], self._rows_ok, h)
                & tile_table(space["tile_w"], lambda v: _pads_ok(s.out_width, v, s.stride, s.kernel, s.pad,
                                                                 s.width, t), w)
                & (threads * b * ic * in_h * in_w <= t.scope("inp").depth)
                & (threads * oc * ic * s.kernel * s.kernel <= t.scope("wgt").depth)
                & (threads * b * oc * h * w * (ep.acc_tiles + int(ep.residual is not None))
                   + self.kb * len(ep.vectors) <= t.scope("acc").depth))
        return g, np.where(fits, tiling_cycles(self.tiling(b, h, w, oc, ic), t.cfg, threads), np.nan)

    def default_knobs(self, vthreads: int | None = None) -> Conv2dKnobs:
        """The best point under `estimate`: re-derived for every config, never a fixed table."""
        g, costs = self.estimates()
        return best_point(Conv2dKnobs, g, costs, g["oc_threads"] * g["h_threads"], vthreads)  # type: ignore[no-any-return]

    # -- the how -----------------------------------------------------------------------------------
    def schedule(self, k: Conv2dKnobs) -> Schedule:
        """The VTA-style schedule of point `k`, written with the public primitives."""
        check_knobs(k, self.space(), "conv2d")
        s_ = self.spec
        ts = self.tensors()
        s = Schedule(ts["out"])
        staged = [name for name in ("data_pad", "data_rows") if name in s.stages]
        inp = staged[0] if staged else s.cache_read("data", "inp", ["conv"])
        s.set_scope(inp, "inp")
        wgt = s.cache_read("kernel", "wgt", ["conv"])
        s.set_scope("conv", "acc")
        ep = s_.epilogue
        epi_stages = stage_epilogue(s, ep, {"rmult": "res_scaled"})
        s.split("out", "n", k.tile_b)
        s.split("out", "o", k.tile_oc)
        s.split("out", "y", k.tile_h)
        s.split("out", "x", k.tile_w)
        s.virtual_thread("out", "o.o", k.oc_threads)
        s.virtual_thread("out", "y.o", k.h_threads)
        s.reorder("out", "o.o.vt", "y.o.vt", "n.o", "o.o.vi", "y.o.vi", "x.o", "n.i", "o.i", "y.i", "x.i")
        for stage in ("conv", *epi_stages):
            s.compute_at(stage, "out", "x.o")
        if "res" in ts:  # the residual tile beside the accumulators, scaled in place
            load_into_acc(s, "res", "epi", ("out", "x.o"), "res_scaled" if "res_scaled" in s.stages else None)
        store_at = "o.i" if k.tile_w == s_.out_width else "y.i"
        s.pragma("out", store_at, "dma_copy")
        for stage in epi_stages:
            s.pragma(stage, "i0" if ep.split else "n", "alu")
        s.split("conv", "ic", k.tile_ic)
        s.reorder("conv", "ic.o", "n", "o", "y", "x", "ic.i", "ry", "rx", "bi", "oi", "ii")
        s.tensorize("conv", "bi")
        for stage in (inp, wgt):
            s.compute_at(stage, "conv", "ic.o")
        s.pragma(inp, "y" if staged else "i2", "dma_copy")
        s.pragma(wgt, "i0", "dma_copy")
        return s

    # -- data and reference --------------------------------------------------------------------------
    def random_inputs(self, seed: int) -> dict[str, np.ndarray]:
        """Seeded int8 data and weights (zeros in padded channels) and int32 bias, packed."""
        s = self.spec
        rng = np.random.default_rng(seed)
        data = rng.integers(-128, 128, (s.batch, s.in_channels, s.height, s.width))
        kernel = rng.integers(-128, 128, (s.out_channels, s.in_channels, s.kernel, s.kernel))
        out = {"data": self.pack_data(data), "kernel": self.pack_kernel(kernel)}
        for name, vector in random_vectors(s.epilogue, rng, s.out_channels).items():
            out[name] = self.pack_bias(vector)
        if s.epilogue.residual is not None:
            out["res"] = self.pack_output(rng.integers(-128, 128, (s.batch, s.out_channels, s.out_height,
                                                                    s.out_width)))
        return out

    def pack_output(self, x: np.ndarray) -> np.ndarray:
        """An NCHW tensor shaped like the output, in the output's packed layout (the residual)."""
        t = self.target
        return _pack_nchw(x, self.nb, t.batch, self.kb, t.block_out, t.out_dtype)

    def pack_data(self, x: np.ndarray) -> np.ndarray:
        t = self.target
        return _pack_nchw(x, self.nb, t.batch, self.cb, t.block_in, t.inp_dtype)

    def pack_kernel(self, w: np.ndarray) -> np.ndarray:
        t = self.target
        k, c, r, _ = w.shape
        w = np.pad(w, ((0, self.kb * t.block_out - k), (0, self.cb * t.block_in - c), (0, 0), (0, 0)))
        w = w.reshape(self.kb, t.block_out, self.cb, t.block_in, r, r).transpose(0, 2, 4, 5, 1, 3)
        return np.ascontiguousarray(w).astype(t.wgt_dtype)

    def pack_bias(self, b: np.ndarray) -> np.ndarray:
        """A per-channel int32 vector (bias or multiplier) as (K/co, batch, co)."""
        t = self.target
        b = np.pad(b, (0, self.kb * t.block_out - b.shape[0])).reshape(self.kb, 1, t.block_out)
        return np.ascontiguousarray(np.broadcast_to(b, (self.kb, t.batch, t.block_out))).astype(t.acc_dtype)

    def reference(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """Exact numpy conv2d + epilogue on the packed inputs, packed output."""
        s = self.spec
        data, kernel = inputs["data"], inputs["kernel"]
        nb, cb, h, w, b, ci = data.shape
        x = data.transpose(0, 4, 1, 5, 2, 3).reshape(nb * b, cb * ci, h, w).astype(np.float64)
        kb, _, r, _, co, _ = kernel.shape
        wt = kernel.transpose(0, 4, 1, 5, 2, 3).reshape(kb * co, cb * ci, r, r).astype(np.float64)
        x = np.pad(x, ((0, 0), (0, 0), (s.pad, s.pad), (s.pad, s.pad)))
        win = np.lib.stride_tricks.sliding_window_view(x, (r, r), axis=(2, 3))
        win = win[:, :, :: s.stride, :: s.stride][:, :, : s.out_height, : s.out_width]
        acc = np.einsum("nchwij,kcij->nkhw", win, wt, optimize=True)  # exact: |sums| < 2**53
        acc = acc.astype(np.int64)
        vectors = {v: inputs[v][:, 0, :].reshape(-1)[None, :, None, None] for v in s.epilogue.vectors}
        res = None
        if "res" in inputs:  # packed like the output -> (N, K, OH, OW)
            res = inputs["res"].transpose(0, 4, 1, 5, 2, 3).reshape(acc.shape)
        y = s.epilogue.apply(acc, vectors, res)  # (N, K, OH, OW) int8
        y = y.reshape(nb, b, kb, co, s.out_height, s.out_width).transpose(0, 2, 4, 5, 1, 3)
        return np.ascontiguousarray(y)

    def describe(self) -> dict[str, Any]:
        return {"op": self.op, **{k: v for k, v in asdict(self.spec).items() if k != "epilogue"},
                "epilogue": self.spec.epilogue.to_json()}


def _pack_nchw(x: np.ndarray, nb: int, batch: int, blocks: int, block: int, dtype: str) -> np.ndarray:
    """NCHW -> (N/batch, C/block, H, W, batch, block), channels zero-padded to `blocks` blocks."""
    _, c, h, w = x.shape
    x = np.pad(x, ((0, 0), (0, blocks * block - c), (0, 0), (0, 0)))
    x = x.reshape(nb, batch, blocks, block, h, w).transpose(0, 2, 4, 5, 1, 3)
    return np.ascontiguousarray(x).astype(dtype)


def _pads_ok(out: int, tile: int, stride: int, kernel: int, pad: int, size: int,
             target: AcceleratorTarget) -> bool:
    """Every input tile along one axis reads at least one real row and pads at most max_pad."""
    span = (tile - 1) * stride + kernel
    for start in range(0, out, tile):
        low = start * stride - pad
        before, after = max(-low, 0), max(low + span - size, 0)
        if before + after >= span or max(before, after) > target.max_pad:
            return False
    return True
