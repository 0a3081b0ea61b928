"""Stacked GEMM products bound to one Scratchpads: what `sim.gemm._run_product` computes for P
products of one shape, as a few numpy calls per run.

Operands are strided views of the float mirrors where the indices form a lattice and the
arrangement the BLAS call needs is a view (`x`: P x (T*batch) x (k*block_in); `w`:
P x (k*block_in) x (G*block_out), or its transpose), else buffers filled per run by one strided
copy or one `take`.  The reduction is cut into chunks exact in floating point as in `sim.gemm`,
chunks are added as integers, and the sum is added to (or, with `assign`, written into) the
accumulators: bit for bit the result of `_run_product` on each product in turn (their
accumulators are distinct, and their operands are never written by a GEMM).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hw import isa
from hw.config import AcceleratorConfig
from sim.scratchpads import Lattice, Scratchpads, lattice


class ProductGroup:
    """Products of one shape stacked: `src` (P, T, k) inp indices, `wgt` (P, G, k) wgt indices,
    `written` (P, T, G) distinct acc indices, each with its lattice where it forms one."""

    def __init__(self, products: Sequence[Any]) -> None:
        first = products[0]
        rows = first.src.shape[0]
        self.src = np.stack([p.src for p in products])
        self.wgt = np.stack([p.wgt for p in products])
        self.written = np.stack([p.written.reshape(rows, -1) for p in products])
        self.src_lattice = lattice(self.src, distinct=False)
        self.wgt_lattice = lattice(self.wgt, distinct=False)
        if len(products) == 1:  # the recording found it (or found none) already
            out = first.out
            self.out_lattice = None if out is None else Lattice(out.first, (1, *out.shape), (0, *out.steps))
        else:  # distinct by construction: no need to check it again
            self.out_lattice = lattice(self.written, distinct=False)


def product_groups(products: Sequence[Any]) -> list[ProductGroup]:
    """`sim.gemm._Product`s stacked by shape (T, k, G)."""
    by_shape: dict[tuple[int, ...], list[Any]] = {}
    for p in products:
        by_shape.setdefault((*p.src.shape, p.wgt.shape[0]), []).append(p)
    return [ProductGroup(ps) for ps in by_shape.values()]


class ProductKernel:
    """A `ProductGroup` bound to `spads`; call it (with the DRAM, unused) to run the products."""

    def __init__(self, cfg: AcceleratorConfig, spads: Scratchpads, group: ProductGroup,
                 assign: bool) -> None:
        mi, mw, acc = spads.mirror[isa.MemType.INP], spads.mirror[isa.MemType.WGT], spads.acc
        src, wgt, written = group.src, group.wgt, group.written
        n, rows, k = src.shape
        b, bi, cols = cfg.batch, cfg.block_in, wgt.shape[1] * cfg.block_out
        self.fills: list[Any] = []
        x = _arranged(mi, src, group.src_lattice, [(0, 1, 3, 2, 4)], (n, rows * b, k * bi),
                      self.fills)
        w = _arranged(mw, wgt, group.wgt_lattice, [(0, 2, 4, 1, 3), (0, 1, 3, 2, 4)],
                      (n, k * bi, cols), self.fills)
        y = np.empty((n, rows * b, cols), mi.dtype)
        step = spads.exact_terms * bi
        self.chunks = [(_squeeze(x[..., a : a + step]), _squeeze(w[:, a : a + step]))
                       for a in range(0, k * bi, step)]
        self.y = _squeeze(y)
        self.iy = np.empty(self.y.shape, np.int32 if mi.dtype == np.float32 else np.int64)
        self.part = np.empty_like(self.iy) if len(self.chunks) > 1 else self.iy
        self.assign = assign
        shape = (n, rows, b, wgt.shape[1], cfg.block_out)
        by_acc = (0, 1, 3, 2, 4)  # y's (p, t, batch, g, o) in the order of acc's (p, t, g) elements
        self.y_t, self.iy_t = (a.reshape(shape).transpose(by_acc) for a in (y, self.iy))
        self.out = group.out_lattice.view(acc) if group.out_lattice is not None else None
        self.acc, self.index = acc, written.reshape(-1)
        # floats below 2**24 convert exactly; int32 acc: no narrower wrap needed
        self.direct = assign and self.out is not None and len(self.chunks) == 1 and \
            mi.dtype == np.float32 and acc.dtype == np.int32

    def __call__(self, dram: np.ndarray) -> None:
        for fill in self.fills:
            fill()
        if self.direct:
            x, w = self.chunks[0]
            np.matmul(x, w, out=self.y)
            np.copyto(self.out, self.y_t, casting="unsafe")  # type: ignore[arg-type]
            return
        self._sum()
        if self.out is not None:
            if self.assign:
                np.copyto(self.out, self.iy_t, casting="unsafe")
            else:  # int32 + int32 wraps like acc; a narrower acc wraps in the cast
                np.add(self.out, self.iy_t, out=self.out, casting="unsafe")
            return
        values = self.iy_t.reshape(-1, *self.acc.shape[1:])
        if not self.assign:
            values = self.acc[self.index] + values
        self.acc[self.index] = values.astype(self.acc.dtype)

    def _sum(self) -> None:
        """iy = the products, each exact chunk converted to integers and added (wrapping)."""
        for index, (x, w) in enumerate(self.chunks):
            np.matmul(x, w, out=self.y)
            if index == 0:
                np.copyto(self.iy, self.y, casting="unsafe")
            else:
                np.copyto(self.part, self.y, casting="unsafe")
                np.add(self.iy, self.part, out=self.iy)


def _squeeze(a: np.ndarray) -> np.ndarray:
    """A stack of one as a plain matrix (2-D BLAS calls are cheaper than batched ones)."""
    return a[0] if a.shape[0] == 1 else a


def _arranged(mirror: np.ndarray, index: np.ndarray, lat: Lattice | None,
              orders: list[tuple[int, ...]], shape: tuple[int, int, int], fills: list[Any]) -> np.ndarray:
    """The tiles `mirror[index]` (index (P, a, c), tiles (r, s)) in the first of `orders` that
    reshapes to `shape` (or, for a second order, to `shape` transposed) as a view; else a buffer
    in the first order that `fills` fill per run."""
    if lat is not None:
        tiles = lat.view(mirror)
    else:
        tiles = np.empty(index.shape + mirror.shape[1:], mirror.dtype)
        fills.append(_Take(mirror, index.reshape(-1), tiles.reshape(-1, *mirror.shape[1:])))
    for n, order in enumerate(orders):
        want = shape if n == 0 else (shape[0], shape[2], shape[1])
        try:
            view = np.reshape(tiles.transpose(order), want, copy=False)
        except ValueError:
            continue
        return view if n == 0 else view.transpose(0, 2, 1)
    buffer = np.empty(tiles.transpose(orders[0]).shape, mirror.dtype)
    fills.append(_Copy(buffer, tiles.transpose(orders[0])))
    return buffer.reshape(shape)


class _Take:
    __slots__ = ("index", "mirror", "out")

    def __init__(self, mirror: np.ndarray, index: np.ndarray, out: np.ndarray) -> None:
        self.mirror, self.index, self.out = mirror, index, out

    def __call__(self) -> None:  # indices were checked when the GEMM was planned
        np.take(self.mirror, self.index, axis=0, out=self.out, mode="clip")


class _Copy:
    __slots__ = ("dst", "src")

    def __init__(self, dst: np.ndarray, src: np.ndarray) -> None:
        self.dst, self.src = dst, src

    def __call__(self) -> None:
        np.copyto(self.dst, self.src)
