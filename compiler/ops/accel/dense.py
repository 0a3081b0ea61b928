"""Packed int8 dense (matmul) with a fused epilogue: TE definition, schedule space, default.

Layouts: data (M/b, K/ci, b, ci); weight (N/co, K/ci, co, ci); bias (N/co, b, co) int32; output
(M/b, N/co, b, co) int8.  `pack_*` pads K and N to whole blocks with zeros.
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
    precise_tensors,
    random_vectors,
    stage_epilogue,
    tiling_cycles,
    tiling_events,
)
from compiler.schedule.schedule import Schedule
from compiler.target.accel import AcceleratorTarget
from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, placeholder, reduce_axis, sum
from hw.errors import InputError


@dataclass(frozen=True)
class DenseSpec:
    m: int
    k: int
    n: int
    epilogue: Epilogue = field(default_factory=Epilogue)

    def __post_init__(self) -> None:
        for name in ("m", "k", "n"):
            if getattr(self, name) < 1:
                raise InputError(f"dense {name} must be positive, not {getattr(self, name)}")

    @property
    def macs(self) -> int:
        return self.m * self.k * self.n

    def name(self) -> str:
        return f"dense_{self.m}x{self.k}x{self.n}"


@dataclass(frozen=True)
class DenseKnobs:
    tile_m: int = 1
    tile_k: int = 1
    tile_n: int = 1
    n_threads: int = 1
    m_threads: int = 1

    @property
    def threads(self) -> int:
        return self.n_threads * self.m_threads

    def to_json(self) -> dict[str, int]:
        return asdict(self)


class Dense:
    op = "dense"

    def __init__(self, spec: DenseSpec, target: AcceleratorTarget) -> None:
        self.spec, self.target = spec, target
        if spec.m % target.batch:
            raise ScheduleError(f"dense m={spec.m} is not a multiple of the core's batch {target.batch}")
        self.mb = spec.m // target.batch
        self.kb = -(-spec.k // target.block_in)
        self.nb = -(-spec.n // target.block_out)

    def tensors(self) -> dict[str, Tensor]:
        t, ep = self.target, self.spec.epilogue
        acc = t.acc_dtype
        data = placeholder((self.mb, self.kb, t.batch, t.block_in), t.inp_dtype, "data")
        weight = placeholder((self.nb, self.kb, t.block_out, t.block_in), t.wgt_dtype, "weight")
        ko, ki = reduce_axis(self.kb, "ko"), reduce_axis(t.block_in, "ki")
        shape = (self.mb, self.nb, t.batch, t.block_out)
        gemm = compute(shape, lambda m, n, bi, oi: sum(
            E.cast(acc, data[m, ko, bi, ki]) * E.cast(acc, weight[n, ko, oi, ki]), [ko, ki]), "gemm")
        out: dict[str, Tensor] = {"data": data, "weight": weight}
        result = gemm
        if ep.alu_ops:
            vec = {v: placeholder((self.nb, t.batch, t.block_out), acc, v) for v in ep.vectors}
            out.update(vec)
            if ep.split:
                result = precise_tensors(ep, shape, gemm, vec, lambda i: (i[1], i[2], i[3]))
            else:
                result = compute(shape, lambda m, n, bi, oi: ep.expr(
                    gemm[m, n, bi, oi], {v: vec[v][n, bi, oi] for v in vec}), "epi")
        out["out"] = compute(shape, lambda m, n, bi, oi: E.cast(t.out_dtype, result[m, n, bi, oi]), "out")
        return out

    def space(self) -> dict[str, list[int]]:
        return {"tile_m": divisors(self.mb), "tile_k": divisors(self.kb), "tile_n": divisors(self.nb),
                "n_threads": [1, 2, 4], "m_threads": [1, 2, 4]}

    def points(self) -> list[DenseKnobs]:
        return grid(DenseKnobs, self.space())  # type: ignore[no-any-return]

    def footprint(self, k: DenseKnobs) -> dict[str, int]:
        vectors = self.nb * len(self.spec.epilogue.vectors)
        return {"inp": k.threads * k.tile_m * k.tile_k, "wgt": k.threads * k.tile_n * k.tile_k,
                "acc": k.threads * k.tile_m * k.tile_n * self.spec.epilogue.acc_tiles + vectors}

    def fits(self, k: DenseKnobs) -> bool:
        if self.nb % (k.tile_n * k.n_threads) or self.mb % (k.tile_m * k.m_threads):
            return False
        if k.threads > self.target.token_capacity:
            return False
        need = self.footprint(k)
        return all(need[n] <= self.target.scope(n).depth for n in need)

    def tiling(self, m: Any, k: Any, n: Any) -> Tiling:
        """The tile counts and sizes of points with these tiles (scalars or the grid's arrays)."""
        cfg = self.target.cfg
        tiles = (self.mb // m) * (self.nb // n)
        return Tiling(tiles, tiles * (self.kb // k), m * n, m * n * k, m * k * cfg.inp_elem_bytes,
                      n * k * cfg.wgt_elem_bytes, 2, self.spec.epilogue.alu_ops)

    def estimate(self, k: DenseKnobs) -> float | None:
        """Analytic cycles, as Conv2d.estimate: used only to pick the default."""
        if not self.fits(k):
            return None
        return float(tiling_cycles(self.tiling(k.tile_m, k.tile_k, k.tile_n), self.target.cfg, k.threads))

    def events(self, k: DenseKnobs) -> dict[str, int]:
        """The timing model's event counters of point `k` (see Conv2d.events)."""
        t = self.tiling(k.tile_m, k.tile_k, k.tile_n)
        return {name: int(v) for name, v in tiling_events(t, self.target.cfg).items()}

    def estimates(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """`estimate` of every point at once (see Conv2d.estimates)."""
        t, ep = self.target, self.spec.epilogue
        g = knob_grid(self.space())
        m, k, n = g["tile_m"], g["tile_k"], g["tile_n"]
        threads = g["n_threads"] * g["m_threads"]
        fits = ((self.nb % (n * g["n_threads"]) == 0) & (self.mb % (m * g["m_threads"]) == 0)
                & (threads <= t.token_capacity) & (threads * m * k <= t.scope("inp").depth)
                & (threads * n * k <= t.scope("wgt").depth)
                & (threads * m * n * ep.acc_tiles + self.nb * len(ep.vectors) <= t.scope("acc").depth))
        return g, np.where(fits, tiling_cycles(self.tiling(m, k, n), t.cfg, threads), np.nan)

    def default_knobs(self, vthreads: int | None = None) -> DenseKnobs:
        g, costs = self.estimates()
        return best_point(DenseKnobs, g, costs, g["n_threads"] * g["m_threads"], vthreads)  # type: ignore[no-any-return]

    def schedule(self, k: DenseKnobs) -> Schedule:
        check_knobs(k, self.space(), "dense")
        ts = self.tensors()
        s = Schedule(ts["out"])
        ep = self.spec.epilogue
        s.cache_read("data", "inp", ["gemm"])
        s.cache_read("weight", "wgt", ["gemm"])
        s.set_scope("gemm", "acc")
        epi_stages = stage_epilogue(s, ep)
        s.split("out", "m", k.tile_m)
        s.split("out", "n", k.tile_n)
        s.virtual_thread("out", "n.o", k.n_threads)
        s.virtual_thread("out", "m.o", k.m_threads)
        s.reorder("out", "n.o.vt", "m.o.vt", "m.o.vi", "n.o.vi", "m.i", "n.i")
        for stage in ("gemm", *epi_stages):
            s.compute_at(stage, "out", "n.o.vi")
        s.pragma("out", "m.i", "dma_copy")
        for stage in epi_stages:
            s.pragma(stage, "i0" if ep.split else "m", "alu")
        s.split("gemm", "ko", k.tile_k)
        s.reorder("gemm", "ko.o", "m", "n", "ko.i", "bi", "oi", "ki")
        s.tensorize("gemm", "bi")
        for stage in ("data.inp", "weight.wgt"):
            s.compute_at(stage, "gemm", "ko.o")
            s.pragma(stage, "i0", "dma_copy")
        return s

    def random_inputs(self, seed: int) -> dict[str, np.ndarray]:
        s = self.spec
        rng = np.random.default_rng(seed)
        out = {"data": self.pack_data(rng.integers(-128, 128, (s.m, s.k))),
               "weight": self.pack_weight(rng.integers(-128, 128, (s.n, s.k)))}
        for name, vector in random_vectors(s.epilogue, rng, s.n).items():
            out[name] = self.pack_bias(vector)
        return out

    def pack_data(self, x: np.ndarray) -> np.ndarray:
        t = self.target
        x = np.pad(x, ((0, 0), (0, self.kb * t.block_in - x.shape[1])))
        x = x.reshape(self.mb, t.batch, self.kb, t.block_in).transpose(0, 2, 1, 3)
        return np.ascontiguousarray(x).astype(t.inp_dtype)

    def pack_weight(self, w: np.ndarray) -> np.ndarray:
        t = self.target
        w = np.pad(w, ((0, self.nb * t.block_out - w.shape[0]), (0, self.kb * t.block_in - w.shape[1])))
        w = w.reshape(self.nb, t.block_out, self.kb, t.block_in).transpose(0, 2, 1, 3)
        return np.ascontiguousarray(w).astype(t.wgt_dtype)

    def pack_bias(self, b: np.ndarray) -> np.ndarray:
        t = self.target
        b = np.pad(b, (0, self.nb * t.block_out - b.shape[0])).reshape(self.nb, 1, t.block_out)
        return np.ascontiguousarray(np.broadcast_to(b, (self.nb, t.batch, t.block_out))).astype(t.acc_dtype)

    def reference(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        acc = np.einsum("mkbi,nkoi->mbno", inputs["data"].astype(np.int64),
                        inputs["weight"].astype(np.int64))
        vectors = {v: inputs[v][None, :, :, :].transpose(0, 2, 1, 3) for v in self.spec.epilogue.vectors}
        y = self.spec.epilogue.apply(acc, vectors)  # (mb, b, nb, co)
        return np.ascontiguousarray(y.transpose(0, 2, 1, 3))

    def describe(self) -> dict[str, Any]:
        return {"op": self.op, "m": self.spec.m, "k": self.spec.k, "n": self.spec.n,
                "epilogue": self.spec.epilogue.to_json()}
