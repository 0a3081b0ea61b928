"""Stacked GEMM products bound to one Scratchpads: what `sim.gemm._run_product` computes for P
products of one shape, as a few numpy calls per run.

Operands are strided views of the float mirrors where the indices form a lattice and the
arrangement the BLAS call needs is a view (`x`: P x (T*batch) x (k*block_in); `w`:
P x (k*block_in) x (G*block_out), or its transpose), else buffers filled per run by one strided
copy or one `take`.  The indices are found as lattices with the product and row axes each split
in two where needed (an output block of rows, a grid of depthwise products); where the inputs or
weights repeat along a product axis, the product broadcasts instead of copying them.  The
reduction is cut into chunks exact in floating point as in `sim.gemm`,
chunks are added as integers, and the sum is added to (or, with `assign`, written into) the
accumulators: bit for bit the result of `_run_product` on each product in turn (their
accumulators are distinct, and their operands are never written by a GEMM).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from hw import isa
from hw.config import AcceleratorConfig
from sim.scratchpads import Lattice, Scratchpads, lattice


class ProductGroup:
    """Products of one shape stacked: `src` (P, T, k) inp indices, `wgt` (P, G, k) wgt indices,
    `written` (P, T, G) distinct acc indices, each with its `Split` where it forms one."""

    def __init__(self, products: Sequence[Any]) -> None:
        first = products[0]
        rows = first.src.shape[0]
        # a stack of one is a view of the product's own arrays
        self.src = np.stack([p.src for p in products]) if len(products) > 1 else first.src[None]
        self.wgt = np.stack([p.wgt for p in products]) if len(products) > 1 else first.wgt[None]
        self.written = np.stack([p.written.reshape(rows, -1) for p in products])
        self.src_split = split_lattice(self.src)
        self.wgt_split = split_lattice(self.wgt)
        self.out_split: Split | None
        if len(products) == 1 and first.out is not None:  # the recording found it already
            out = first.out
            self.out_split = Split(Lattice(out.first, (1, *out.shape), (0, *out.steps)), (1,), (rows,))
        else:  # distinct by construction: no need to check it again
            self.out_split = split_lattice(self.written)
        self.span = (int(self.written.min()), int(self.written.max()) + 1)  # around the written


class Split(NamedTuple):
    """A lattice over an index (P, T, ...) reshaped to (*p_parts, *t_parts, ...)."""

    lattice: Lattice
    p_parts: tuple[int, ...]
    t_parts: tuple[int, ...]

    def expand(self, order: tuple[int, ...]) -> tuple[int, ...]:
        """`order` of the axes (P, T, ...) as an order of the split axes."""
        np_, nt = len(self.p_parts), len(self.t_parts)
        axes = [list(range(np_)), list(range(np_, np_ + nt))]
        out: list[int] = []
        for a in order:
            out.extend(axes[a] if a < 2 else [a + np_ + nt - 2])
        return tuple(out)


def split_lattice(index: np.ndarray) -> Split | None:
    """`index` (P, T, ...) as a lattice, its P and T axes each split in two where needed (a
    block of output rows, products in a grid); None where no split gives one."""
    p, t = index.shape[:2]
    for ps in _splits(p):
        for ts in _splits(t):
            found = lattice(index.reshape(*ps, *ts, *index.shape[2:]), distinct=False)
            if found is not None:
                return Split(found, ps, ts)
    return None


def _splits(n: int) -> list[tuple[int, ...]]:
    return [(n,)] + [(d, n // d) for d in range(2, n) if n % d == 0]


def product_groups(products: Sequence[Any]) -> list[ProductGroup]:
    """`sim.gemm._Product`s stacked by shape (T, k, G)."""
    by_shape: dict[tuple[int, ...], list[Any]] = {}
    for p in products:
        by_shape.setdefault((*p.src.shape, p.wgt.shape[0]), []).append(p)
    return [ProductGroup(ps) for ps in by_shape.values()]


class ProductKernel:
    """A `ProductGroup` bound to `spads`; call it (with the DRAM, unused) to run the products."""

    def __init__(self, cfg: AcceleratorConfig, spads: Scratchpads, group: ProductGroup,
                 assign: bool, scratch: Scratch) -> None:
        mi, mw, acc = spads.mirror[isa.MemType.INP], spads.mirror[isa.MemType.WGT], spads.acc
        scratch.start()
        n, rows, k = group.src.shape
        b, bi, g = cfg.batch, cfg.block_in, group.wgt.shape[1]
        self.fills: list[Any] = []
        xs, ws = _aligned(group.src_split, group.wgt_split)
        # products in a grid whose inputs or weights repeat along an axis: a broadcast product
        share = xs is not None and ws is not None and xs.p_parts == ws.p_parts
        x = _arranged(mi, group.src, xs, [(0, 1, 3, 2, 4)], (rows * b, k * bi), share, self.fills,
                      scratch)
        w = _arranged(mw, group.wgt, ws, [(0, 2, 4, 1, 3), (0, 1, 3, 2, 4)],
                      (k * bi, g * cfg.block_out), share, self.fills, scratch)
        y = scratch.take((*np.broadcast_shapes(x.shape[:-2], w.shape[:-2]), rows * b, w.shape[-1]),
                         mi.dtype)
        step = spads.exact_terms * bi
        self.chunks = [(_squeeze(x[..., a : a + step]), _squeeze(w[..., a : a + step, :]))
                       for a in range(0, k * bi, step)]
        self.y, self.assign, self.acc = _squeeze(y), assign, acc
        split = group.out_split
        parts = (n, rows) if split is None else (*split.p_parts, *split.t_parts)
        y_t = y.reshape(*parts, b, g, cfg.block_out)  # y's (p, t, batch, g, o) in acc's order:
        self.y_t = y_t.transpose(*range(len(parts)), len(parts) + 1, len(parts), len(parts) + 2)
        self.out = None if split is None else split.lattice.view(acc)
        self.index = group.written.reshape(-1)
        exact = np.int32 if mi.dtype == np.float32 else np.int64
        # the integer products, laid out as the accumulators they go to (a fast add)
        self.sums = scratch.like(self.y_t if self.out is None else self.out, exact)
        self.part = scratch.like(self.sums, exact) if len(self.chunks) > 1 else self.sums
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
                np.copyto(self.out, self.sums, casting="unsafe")
            else:  # int32 + int32 wraps like acc; a narrower acc wraps in the cast
                np.add(self.out, self.sums, out=self.out, casting="unsafe")
            return
        values = self.sums.reshape(-1, *self.acc.shape[1:])
        if not self.assign:
            values = self.acc[self.index] + values
        self.acc[self.index] = values.astype(self.acc.dtype)

    def _sum(self) -> None:
        """sums = the products, each exact chunk converted to integers and added (wrapping)."""
        for index, (x, w) in enumerate(self.chunks):
            np.matmul(x, w, out=self.y)
            if index == 0:
                np.copyto(self.sums, self.y_t, casting="unsafe")
            else:
                np.copyto(self.part, self.y_t, casting="unsafe")
                np.add(self.sums, self.part, out=self.sums)


def _squeeze(a: np.ndarray) -> np.ndarray:
    """A stack of one as a plain matrix (2-D BLAS calls are cheaper than batched ones)."""
    return a[(0,) * (a.ndim - 2)] if a.size == a.shape[-1] * a.shape[-2] else a


def _aligned(xs: Split | None, ws: Split | None) -> tuple[Split | None, Split | None]:
    """The operands' splits where their stacks line up: P split alike in both, or whole in both
    (a split whose P parts the other's do not match is dropped: that operand's tiles are
    gathered by index instead, a slower way to the same values)."""
    if xs is not None and ws is not None and xs.p_parts == ws.p_parts:
        return xs, ws
    return (None if xs is not None and len(xs.p_parts) > 1 else xs,
            None if ws is not None and len(ws.p_parts) > 1 else ws)


def _arranged(mirror: np.ndarray, index: np.ndarray, split: Split | None,
              orders: list[tuple[int, ...]], matrix: tuple[int, int], broadcast: bool,
              fills: list[Any], scratch: Scratch) -> np.ndarray:
    """The tiles `mirror[index]` (index (P, a, c), tiles (r, s)) as a stack of `matrix`es: in the
    first of `orders` whose arrangement reshapes to it as a view (or, for a second order, to it
    transposed); else a buffer in the first order that `fills` fill per run.  The stack's axes
    are P's (split) parts; with `broadcast`, those the index does not move have size 1."""
    if split is None:
        tiles = scratch.take(index.shape + mirror.shape[1:], mirror.dtype)
        fills.append(_Take(mirror, index.reshape(-1), tiles.reshape(-1, *mirror.shape[1:])))
        split = Split(Lattice(0, (), ()), index.shape[:1], index.shape[1:2])
    else:
        tiles = split.lattice.view(mirror)
        if broadcast:
            tiles = tiles[tuple(slice(0, 1) if step == 0 else slice(None)
                                for step in split.lattice.steps[: len(split.p_parts)])]
    stack = tiles.shape[: len(split.p_parts)]
    for n, order in enumerate(orders):
        want = (*stack, *matrix) if n == 0 else (*stack, matrix[1], matrix[0])
        try:
            view = np.reshape(tiles.transpose(split.expand(order)), want, copy=False)
        except ValueError:
            continue
        return view if n == 0 else view.swapaxes(-1, -2)
    arranged = tiles.transpose(split.expand(orders[0]))
    buffer = scratch.take(arranged.shape, mirror.dtype)
    fills.append(_Copy(buffer, arranged))
    return buffer.reshape(*stack, *matrix)


class Scratch:
    """Buffers a kernel uses only while it runs (gathered operands, products, sums), carved from
    one block that the kernels bound to one SRAM share (they run one at a time): less memory,
    and buffers that stay in cache.  `start` before a kernel's buffers: each `take` after it is
    disjoint from the others since `start`."""

    def __init__(self) -> None:
        self.block, self.offset = np.empty(1 << 16, np.uint8), 0

    def start(self) -> None:
        self.offset = 0

    def take(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """A C-contiguous buffer."""
        size = -(-int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize // 64) * 64
        if self.offset + size > self.block.size:  # a new block; buffers taken keep the old one
            self.block, self.offset = np.empty(max(2 * self.block.size, size), np.uint8), 0
        out = np.ndarray(shape, dtype, self.block, self.offset)
        self.offset += size
        return out

    def like(self, view: np.ndarray, dtype: Any) -> np.ndarray:
        """A buffer of `view`'s shape whose memory order is `view`'s (largest stride first)."""
        order = sorted(range(view.ndim), key=lambda a: -abs(view.strides[a]))
        base = self.take(tuple(view.shape[a] for a in order), dtype)
        return base.transpose(np.argsort(order))


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
