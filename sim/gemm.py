"""GEMM instructions of the functional simulator, vectorized through cached plans.

A GEMM instruction's micro-op loops are affine, so everything but the arithmetic depends only on
the micro-ops and the loop fields: which accumulators are written, which inputs and weights each
one sums.  That analysis (and the bounds checks) is a `GemmPlan`, built once per instruction shape
and reused until the micro-op buffer is reloaded.

The common plan is a matrix product: micro-ops are grouped by dst, loops whose dst factor is 0
are reductions that join the K dimension, and groups that read the same inputs share one BLAS
call `(T*batch, K*block_in) @ (K*block_in, G*block_out)` in floating point.  The products are
exact: the reduction is cut into chunks whose partial sums stay below the mantissa's 2**24 (or
2**53), and chunks are added as integers.  Addition wraps modulo 2**acc_bits, so the grouping
gives the sequential result bit for bit.  Other shapes take a chunked einsum with a scatter-add.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from hw import isa
from hw.config import AcceleratorConfig
from hw.memo import Memo
from sim.backend import SimulationError
from sim.product import ProductGroup, product_groups
from sim.scratchpads import Lattice, Scratchpads, distinct_elements, lattice

_CHUNK = 1 << 14  # iterations per einsum chunk on the general path
_SHARED_MAX = 1 << 10  # steps a config's shared table keeps (a model has a few hundred)
Loop = tuple[int, int, int, int]  # extent, dst factor, src factor, wgt factor


@dataclass(frozen=True)
class _Product:
    src: np.ndarray  # (T, terms) inp indices
    wgt: np.ndarray  # (G, terms) wgt indices
    written: np.ndarray  # (T*G,) acc indices, t-major
    out: Lattice | None = None  # `written` as a (T, G) lattice, where it is one


@dataclass(frozen=True)
class GemmPlan:
    uops: int
    reset_dst: np.ndarray | None = None
    reset_lattice: Lattice | None = None
    products: tuple[_Product, ...] = ()
    general: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None


def loop_indices(insn: isa.Gemm | isa.Alu, base: np.ndarray, out: int, inner: int) -> np.ndarray:
    """base[k] + i*out + j*inner over (i, j, k), flattened in execution order."""
    i = np.arange(insn.iter_out, dtype=np.int64)[:, None, None] * out
    j = np.arange(insn.iter_in, dtype=np.int64)[None, :, None] * inner
    return (base[None, None, :] + i + j).reshape(-1)


def decoded_uops(cfg: AcceleratorConfig, spads: Scratchpads, insn: isa.Gemm | isa.Alu) -> dict:
    if insn.uop_end < insn.uop_bgn:
        raise SimulationError(f"uop_end {insn.uop_end} is before uop_bgn {insn.uop_bgn}")
    if insn.uop_end > cfg.uop_depth:
        raise SimulationError(
            f"uop_end {insn.uop_end} is outside the UOP buffer of {cfg.uop_depth} micro-ops"
        )
    words = spads.sram[isa.MemType.UOP][insn.uop_bgn : insn.uop_end]
    return isa.decode_uops(words, cfg)


@functools.lru_cache(maxsize=16)
def shared_steps(cfg: AcceleratorConfig) -> Memo[Any, Any]:
    """Prepared GEMM and ALU steps of `cfg`, shared by every machine of this process, keyed by
    what a step depends on: the instruction's fields and the micro-op words it reads (a model's
    Programs repeat micro-op tables; a step is stateless).  See `shared_step`."""
    return Memo(_SHARED_MAX)


def shared_step(cfg: AcceleratorConfig, spads: Scratchpads, key: Any, insn: isa.Gemm | isa.Alu,
                prepare: Any) -> Any:
    """`prepare()`, the step of `insn` (identified by `key`) on the micro-ops `spads` holds now,
    from `shared_steps(cfg)` where another machine prepared it already: a step depends only on
    the config, its key and those micro-op words (its checks raise before anything is kept)."""
    words = spads.sram[isa.MemType.UOP][insn.uop_bgn : insn.uop_end].tobytes()
    table = shared_steps(cfg)
    full = (key, insn.uop_bgn, insn.uop_end, words)
    step = table.get(full)
    if step is None:
        step = table.keep(full, prepare())
    return step


def check_affine(spads: Scratchpads, m: isa.MemType, what: str, insn: isa.Gemm | isa.Alu,
                 base: np.ndarray, field: str) -> None:
    """Bounds of base[k] + i*factor_out + j*factor_in, from the extremes (factors are >= 0)."""
    if not insn.uop_iterations:
        return
    reach = (insn.iter_out - 1) * getattr(insn, f"{field}_factor_out")
    reach += (insn.iter_in - 1) * getattr(insn, f"{field}_factor_in")
    spads.check_range(m, f"{what} index", int(base.min()), int(base.max()) + reach)


class GemmUnit:
    """Executes GEMM instructions on `spads`, caching a plan per instruction shape."""

    def __init__(self, cfg: AcceleratorConfig, spads: Scratchpads) -> None:
        self.cfg, self.spads = cfg, spads
        self.plans: dict[tuple, GemmStep] = {}
        spads.on_uop_load = self.plans.clear

    def execute(self, insn: isa.Gemm) -> int:
        """Run `insn`; returns the micro-ops counted (reset GEMMs count none)."""
        step = self.prepare(insn)
        step(self.spads)
        return step.uops

    def prepare(self, insn: isa.Gemm) -> GemmStep:
        """Check `insn` against the micro-ops loaded now; the step that executes it."""
        key = (insn.reset, insn.uop_bgn, insn.uop_end, insn.iter_out, insn.iter_in,
               insn.dst_factor_out, insn.dst_factor_in, insn.src_factor_out,
               insn.src_factor_in, insn.wgt_factor_out, insn.wgt_factor_in)
        step = self.plans.get(key)
        if step is None:
            step = self.plans[key] = shared_step(self.cfg, self.spads, key, insn,
                                                 lambda: GemmStep(self.cfg, self._plan(insn)))
        return step

    def _plan(self, insn: isa.Gemm) -> GemmPlan:
        u = decoded_uops(self.cfg, self.spads, insn)
        check_affine(self.spads, isa.MemType.ACC, "GEMM dst", insn, u["dst"], "dst")
        if insn.reset:
            d = loop_indices(insn, u["dst"], insn.dst_factor_out, insn.dst_factor_in)
            nest = (insn.iter_out, insn.iter_in, -1)
            return GemmPlan(0, reset_dst=d, reset_lattice=lattice(d.reshape(nest)) if d.size else None)
        check_affine(self.spads, isa.MemType.INP, "GEMM src", insn, u["src"], "src")
        check_affine(self.spads, isa.MemType.WGT, "GEMM wgt", insn, u["wgt"], "wgt")
        if not insn.uop_iterations:
            return GemmPlan(0)
        products = _structured(insn, u)
        if products is not None:
            return GemmPlan(insn.uop_iterations, products=products)
        general = tuple(
            loop_indices(insn, u[f], getattr(insn, f"{f}_factor_out"), getattr(insn, f"{f}_factor_in"))
            for f in ("dst", "src", "wgt")
        )
        return GemmPlan(insn.uop_iterations, general=general)  # type: ignore[arg-type]



class GemmStep:
    """One planned GEMM instruction, run on any machine of the same config."""

    def __init__(self, cfg: AcceleratorConfig, plan: GemmPlan) -> None:
        self.cfg, self.plan, self.uops = cfg, plan, plan.uops
        self._groups: list[ProductGroup] | None = None

    def product_groups(self) -> list[ProductGroup]:
        """The plan's products stacked by shape (`sim.product`), once per step: a replay of
        every Program that runs this step shares them."""
        if self._groups is None:
            self._groups = product_groups(self.plan.products)
        return self._groups

    def __call__(self, spads: Scratchpads) -> None:
        plan = self.plan
        if plan.reset_lattice is not None:
            plan.reset_lattice.view(spads.acc)[...] = 0
        elif plan.reset_dst is not None:
            spads.acc[plan.reset_dst] = 0
        for product in plan.products:
            _run_product(self.cfg, spads, product)
        if plan.general is not None:
            _run_general(spads, *plan.general)


def _run_product(cfg: AcceleratorConfig, spads: Scratchpads, p: _Product) -> None:
    """acc[written] += inp[src] @ wgt[wgt]^T, in exact chunks of the terms (float32 chunks sum
    below 2**24, so they are added as int32, which wraps like acc)."""
    mirror = spads.mirror
    terms = p.src.shape[1]
    step = spads.exact_terms
    exact32 = mirror[isa.MemType.INP].dtype == np.float32
    y: np.ndarray | None = None
    for start in range(0, terms, step):
        part = slice(start, start + step)
        x = mirror[isa.MemType.INP][p.src[:, part]]  # (T, k, batch, block_in)
        x = x.transpose(0, 2, 1, 3).reshape(p.src.shape[0] * cfg.batch, -1)
        w = mirror[isa.MemType.WGT][p.wgt[:, part]]  # (G, k, block_out, block_in)
        w = w.transpose(1, 3, 0, 2).reshape(x.shape[1], -1)
        chunk = (x @ w).astype(np.int32 if exact32 else np.int64)
        y = chunk if y is None else y + chunk
    assert y is not None
    y = y.reshape(-1, cfg.batch, p.wgt.shape[0], cfg.block_out).transpose(0, 2, 1, 3)
    acc = spads.acc
    if p.out is not None:
        view = p.out.view(acc)  # in place: int32 + int32 wraps; a narrower acc wraps in the cast
        np.add(view, y.reshape(view.shape), out=view, casting="unsafe")
        return
    acc[p.written] = (acc[p.written] + y.reshape(-1, cfg.batch, cfg.block_out)).astype(acc.dtype)


def _run_general(spads: Scratchpads, d: np.ndarray, s: np.ndarray, w: np.ndarray) -> None:
    mirror = spads.mirror
    acc64 = spads.acc.astype(np.int64)
    for start in range(0, d.size, _CHUNK):
        part = slice(start, start + _CHUNK)
        x, wm = mirror[isa.MemType.INP][s[part]], mirror[isa.MemType.WGT][w[part]]
        np.add.at(acc64, d[part], np.einsum("nbi,noi->nbo", x, wm).astype(np.int64))
    spads.acc[:] = acc64.astype(spads.acc.dtype)


def _loops(insn: isa.Gemm) -> list[Loop]:
    """The loops that iterate more than once."""
    loops = [
        (insn.iter_out, insn.dst_factor_out, insn.src_factor_out, insn.wgt_factor_out),
        (insn.iter_in, insn.dst_factor_in, insn.src_factor_in, insn.wgt_factor_in),
    ]
    return [loop for loop in loops if loop[0] > 1]


def _offsets(loops: list[Loop], column: int) -> np.ndarray:
    """Offsets in `column` (1 dst, 2 src, 3 wgt) over the nest of `loops`, in order."""
    out = np.zeros(1, dtype=np.int64)
    for loop in loops:
        out = (out[:, None] + np.arange(loop[0], dtype=np.int64)[None, :] * loop[column]).reshape(-1)
    return out


def _structured(insn: isa.Gemm, u: dict) -> tuple[_Product, ...] | None:
    """Products for the common shapes, or None when a loop moves dst, src and wgt together or
    two iterations write the same accumulator.

    Loops that move dst but not wgt give rows (T), loops that move dst and wgt but not src give
    columns, beside the micro-ops' own dst groups (G); loops that leave dst fixed are the
    reduction. Micro-op groups that read the same weights from inputs a fixed distance apart
    are rows too."""
    loops = _loops(insn)
    rows = [loop for loop in loops if loop[1] != 0 and loop[3] == 0]
    cols = [loop for loop in loops if loop[1] != 0 and loop[3] != 0 and loop[2] == 0]
    reduction = [loop for loop in loops if loop[1] == 0]
    if len(rows) + len(cols) + len(reduction) != len(loops):
        return None
    dsts, group = np.unique(u["dst"], return_inverse=True)
    group = group.reshape(-1)
    order = np.argsort(group, kind="stable")
    src, wgt, sizes = u["src"][order], u["wgt"][order], np.bincount(group)
    k = int(sizes[0])
    same_size = bool(np.all(sizes == k))
    s2 = src.reshape(-1, k) if same_size else None
    w2 = wgt.reshape(-1, k) if same_size else None
    shift = (s2 - s2[:, :1]) if s2 is not None else None
    if s2 is not None and w2 is not None and shift is not None and dsts.size > 1 and \
            np.all(w2 == w2[0]) and np.all(shift == shift[0]):  # groups as rows
        base_d, base_s = dsts[:, None], s2[:, :1]
        row_d = (base_d + _offsets(rows, 1)[None, :]).reshape(-1)
        row_s = (base_s + _offsets(rows, 2)[None, :]).reshape(-1)
        return _products(row_d, row_s, np.array([0]), s2[0] - s2[0, 0], w2[:1], cols, reduction)
    row_d, row_s = _offsets(rows, 1), _offsets(rows, 2)
    if s2 is not None and w2 is not None and np.all(s2 == s2[0]):  # one product: groups as columns
        return _products(row_d, row_s, dsts, s2[0], w2, cols, reduction)
    starts = np.concatenate(([0], np.cumsum(sizes)))
    parts = [
        _products(row_d, row_s, dsts[g : g + 1], src[starts[g] : starts[g + 1]],
                  wgt[None, starts[g] : starts[g + 1]], cols, reduction)
        for g in range(dsts.size)
    ]
    if any(part is None for part in parts):
        return None
    written = np.concatenate([p.written for part in parts for p in part])  # type: ignore[union-attr]
    if not distinct_elements(written):
        return None
    return tuple(p for part in parts for p in part)  # type: ignore[union-attr]


def _products(row_d: np.ndarray, row_s: np.ndarray, dsts: np.ndarray, src: np.ndarray, wgt: np.ndarray,
              cols: list[Loop], reduction: list[Loop]) -> tuple[_Product, ...] | None:
    """The product of rows (acc offsets `row_d`, inp offsets `row_s`) and columns (the dst
    groups `dsts` with their weights `wgt` [G, k] times the column loops' offsets), summing the
    k micro-ops' terms (inp `src` [k]) over the reduction loops; None when two (row, column)
    pairs write the same accumulator."""
    col_d, col_w = _offsets(cols, 1), _offsets(cols, 3)
    red_s, red_w = _offsets(reduction, 2), _offsets(reduction, 3)
    written = row_d[:, None, None] + dsts[None, :, None] + col_d[None, None, :]  # (T, G, C)
    if not distinct_elements(written):
        return None
    s_idx = (src[None, None, :] + row_s[:, None, None] + red_s[None, :, None]).reshape(row_s.size, -1)
    w_idx = wgt[:, None, None, :] + col_w[None, :, None, None] + red_w[None, None, :, None]
    written = written.reshape(row_s.size, -1)
    w_idx = w_idx.reshape(dsts.size * col_w.size, -1)
    return (_Product(s_idx, w_idx, written.reshape(-1), lattice(written)),)
