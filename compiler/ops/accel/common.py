"""What the operators share: the fused epilogue, its TE and numpy forms, and knob helpers."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from compiler.errors import ScheduleError
from compiler.schedule.schedule import Schedule
from compiler.te import expr as E
from compiler.te.tensor import compute
from hw import isa
from hw.errors import InputError

IMM_MAX = (1 << (isa.ALU_IMM_BITS - 1)) - 1  # the largest ALU immediate
# A precise epilogue's stages, in order, and its per-channel inputs besides the bias.
PRECISE_STAGES = ("clamped", "low", "high", "epi")
PRECISE_VECTORS = ("clamp_lo", "clamp_hi", "mult_lo", "mult_hi")


@dataclass(frozen=True)
class Epilogue:
    """acc -> int8: (+ bias) (* multiplier) (+ rounding) (>> shift) (clip), then truncation.

    Every step is one ALU instruction per tile; integer semantics wrap at 32 bits as the
    accumulator does.  The multiplier is one immediate for the whole tensor (`multiplier`, 16
    bits) or a per-output-channel vector (`channel_multiplier`, 32 bits, an input `mult` loaded
    into acc like the bias): per-channel weight scales need the second.

    `scaled_bias`: the bias is added after the multiplier, so the caller passes
    bias * multiplier + rounding (wrapped to 32 bits) and the rounding step disappears: one ALU
    instruction fewer per output.  Because 32-bit wrapping is arithmetic modulo 2**32,
    acc * m + (b * m + r) is the same int32 as (acc + b) * m + r, so a requantization gives the
    same result either way.

    `residual`: a third operand, an int8 tensor shaped like the output (a residual connection),
    times this multiplier, added after the multiplier and the bias and before the rounding; the
    operator loads it into acc and scales it there.  A multiplier beyond the 16-bit immediate is
    a vector input `rmult` (every element that multiplier).

    `split` k > 0: the precise requantization of the quantized-graph contract (see
    compiler.graph.opdefs.qops), t = clamp(acc + bias, clamp_lo, clamp_hi), then t * m with m =
    mult_hi * 2**k + mult_lo in 32-bit steps, y = (t * mult_hi + ((t * mult_lo) >> k) +
    2**(shift - k - 1)) >> (shift - k) (equal to (t * m + 2**(shift - 1)) >> shift when no step
    wraps).  It takes four ALU stages over acc (`PRECISE_STAGES`): `clamped` in place over the
    accumulator (ADD, MAX, MIN), `low` and `high` each a copy of it (cleared, added) scaled in
    its own tile, and `epi` in place over `high` (ADD low, ADD rounding, SHR, and the clip if
    any); so three accumulator tiles live at once.  Needs `bias`, `channel_multiplier` and
    `round`; takes no immediate multiplier, scaled bias or residual.
    """

    bias: bool = True
    multiplier: int | None = None
    shift: int = 8
    round: bool = False
    clip: tuple[int, int] | None = (0, 127)
    channel_multiplier: bool = False
    scaled_bias: bool = False
    residual: int | None = None
    split: int = 0

    def __post_init__(self) -> None:
        self._check_split()
        if self.multiplier is not None and self.channel_multiplier:
            raise InputError("epilogue takes one multiplier: an immediate or a per-channel vector, not both")
        if self.scaled_bias and not (self.bias and self.scaled):
            raise InputError("epilogue scaled_bias needs a bias and a multiplier")
        if self.scaled_bias and self.round:
            raise InputError("epilogue scaled_bias carries the rounding in the bias: round must be off")
        if not 0 <= self.shift <= 31:
            raise InputError(f"epilogue shift must be in [0, 31], not {self.shift}")
        if self.clip is not None and self.clip[0] > self.clip[1]:
            raise InputError(f"epilogue clip {self.clip}: low is above high")

    def _check_split(self) -> None:
        if self.split < 0:
            raise InputError(f"epilogue split must be >= 0, not {self.split}")
        if not self.split:
            return
        if not (self.bias and self.channel_multiplier and self.round) or self.scaled_bias \
                or self.residual is not None or self.multiplier is not None:
            raise InputError("epilogue split (precise requantization) needs bias, channel_multiplier and "
                             "round, and takes no scaled_bias, residual or immediate multiplier")
        if self.split >= self.shift:
            raise InputError(f"epilogue split {self.split} must be below the shift {self.shift}")

    @property
    def scaled(self) -> bool:
        """Whether a multiplier (immediate or per channel) applies."""
        return self.multiplier is not None or self.channel_multiplier

    @property
    def alu_ops(self) -> int:
        """ALU instructions per output element (the copies of a precise epilogue included)."""
        if self.split:  # clamped 3, low 2 + 2, high 2 + 1, epi 3 (+ clip)
            return 13 + 2 * int(self.clip is not None)
        return (int(self.bias) + int(self.multiplier is not None) + int(self.channel_multiplier)
                + int(self.round and self.shift > 0) + int(self.shift > 0)
                + 2 * int(self.clip is not None) + self.residual_ops)

    @property
    def residual_ops(self) -> int:
        """ALU instructions the residual costs: its multiply (unless by 1) and its add."""
        return 0 if self.residual is None else 1 + int(self.residual != 1)

    @property
    def residual_vector(self) -> bool:
        """Whether the residual's multiplier is beyond the ALU's immediate (an input `rmult`)."""
        return self.residual is not None and abs(self.residual) > IMM_MAX

    @property
    def stages(self) -> tuple[str, ...]:
        """The operator's ALU stages over acc, in order: `PRECISE_STAGES`, `epi`, or none."""
        if self.split:
            return PRECISE_STAGES
        return ("epi",) if self.alu_ops else ()

    @property
    def acc_tiles(self) -> int:
        """Accumulator tiles the epilogue keeps at once: 3 for a precise one (t, low, high), else 1."""
        return 3 if self.split else 1

    @property
    def rounding(self) -> int:
        """The rounding constant: 2**(shift - 1), or 2**(shift - split - 1) for a precise epilogue."""
        return 1 << (self.shift - self.split - 1) if self.round and self.shift > 0 else 0

    @property
    def round_vector(self) -> bool:
        """Whether the rounding constant is beyond the ALU's 16-bit immediate, so it is added as
        a vector operand (an input `round`, every element that constant)."""
        return self.rounding > IMM_MAX

    @property
    def vectors(self) -> tuple[str, ...]:
        """The per-output-channel int32 inputs, in the order they are applied."""
        if self.split:
            return ("bias", *PRECISE_VECTORS, *("round",) * self.round_vector)
        return (("bias",) * self.bias + ("mult",) * self.channel_multiplier + ("round",) * self.round_vector
                + ("rmult",) * self.residual_vector)

    def vector_values(self, name: str, channels: int, rng: np.random.Generator | None = None) -> np.ndarray:
        """Values of vector input `name`: the rounding constant, or seeded test values."""
        if name == "round":
            return np.full(channels, self.rounding, np.int64)
        if name == "rmult":
            return np.full(channels, self.residual, np.int64)
        assert rng is not None, f"{name} needs values from the caller or an rng"
        low, high = {"bias": (-(1 << 16), 1 << 16), "mult": (-(1 << 10), 1 << 10),
                     "clamp_lo": (-(1 << 17), 1 << 10), "clamp_hi": (-(1 << 10), 1 << 17),
                     "mult_lo": (0, 1 << self.split), "mult_hi": (0, 1 << 10)}[name]
        return rng.integers(low, high, channels)

    def scaled_residual(self, res: E.Expr, vectors: Mapping[str, E.Expr], acc_dtype: str) -> E.Expr:
        """One element of the residual times its multiplier (its own ALU stage, in acc)."""
        assert self.residual is not None, "this epilogue has no residual"
        x = E.cast(acc_dtype, res)
        if self.residual == 1:
            return x
        return x * (vectors["rmult"] if self.residual_vector else self.residual)

    def precise_expr(self, stage: str, loads: Mapping[str, E.Expr], vectors: Mapping[str, E.Expr]) -> E.Expr:
        """One element of precise stage `stage` (see `PRECISE_STAGES`); `loads` holds this
        element of the accumulator (`acc`) and of the stages before it."""
        if stage == "clamped":
            x = loads["acc"] + vectors["bias"]
            return E.minimum(E.maximum(x, vectors["clamp_lo"]), vectors["clamp_hi"])
        if stage == "low":
            return (loads["clamped"] * vectors["mult_lo"]) >> self.split
        if stage == "high":
            return loads["clamped"] * vectors["mult_hi"]
        assert stage == "epi", f"no precise stage {stage}"
        x = (loads["high"] + loads["low"]) + (vectors["round"] if self.round_vector else self.rounding)
        x = x >> (self.shift - self.split)
        return x if self.clip is None else E.minimum(E.maximum(x, self.clip[0]), self.clip[1])

    def expr(self, acc: E.Expr, vectors: Mapping[str, E.Expr], residual: E.Expr | None = None) -> E.Expr:
        """The epilogue applied to one accumulator value, in the TE language; `vectors` holds
        this channel's element of each name in `self.vectors`, `residual` the scaled residual
        (`scaled_residual`) when the epilogue has one."""
        x = acc
        if self.bias and not self.scaled_bias:
            x = x + vectors["bias"]
        if self.multiplier is not None:
            x = x * self.multiplier
        if self.channel_multiplier:
            x = x * vectors["mult"]
        if self.scaled_bias:
            x = x + vectors["bias"]
        if self.residual is not None:
            assert residual is not None, "this epilogue adds a residual"
            x = x + residual
        if self.round and self.shift > 0:
            x = x + (vectors["round"] if self.round_vector else 1 << (self.shift - 1))
        if self.shift:
            x = x >> self.shift
        if self.clip is not None:
            x = E.minimum(E.maximum(x, self.clip[0]), self.clip[1])
        return x

    def apply(self, acc: np.ndarray, vectors: Mapping[str, np.ndarray],
              residual: np.ndarray | None = None) -> np.ndarray:
        """The numpy reference of `expr` on int32 accumulators (wrapping like the hardware);
        `vectors` broadcast against `acc`, `residual` (int8) has its shape."""
        x = acc.astype(np.int64)
        wrap = wrap32
        if self.split:
            return self._apply_precise(x, vectors)
        if self.bias and not self.scaled_bias:
            x = wrap(x + vectors["bias"])
        if self.multiplier is not None:
            x = wrap(x * self.multiplier)
        if self.channel_multiplier:
            x = wrap(x * vectors["mult"].astype(np.int64))
        if self.scaled_bias:
            x = wrap(x + vectors["bias"])
        if self.residual is not None:
            assert residual is not None, "this epilogue adds a residual"
            x = wrap(x + wrap(residual.astype(np.int64) * self.residual))
        if self.round and self.shift > 0:
            x = wrap(x + (1 << (self.shift - 1)))
        if self.shift:
            x = x >> self.shift
        if self.clip is not None:
            x = np.clip(x, *self.clip)
        return x.astype(np.int32).astype(np.int8)

    def _apply_precise(self, acc: np.ndarray, vectors: Mapping[str, np.ndarray]) -> np.ndarray:
        """`apply` of a precise epilogue: each ALU step of `PRECISE_STAGES`, wrapping at 32 bits."""
        v = {name: np.asarray(vectors[name], np.int64) for name in ("bias", *PRECISE_VECTORS)}
        t = np.clip(wrap32(acc + v["bias"]), v["clamp_lo"], v["clamp_hi"])
        low = wrap32(t * v["mult_lo"]) >> self.split
        high = wrap32(t * v["mult_hi"])
        x = wrap32(wrap32(high + low) + self.rounding) >> (self.shift - self.split)
        if self.clip is not None:
            x = np.clip(x, *self.clip)
        return x.astype(np.int32).astype(np.int8)

    def split_mult(self, mult: np.ndarray) -> dict[str, np.ndarray]:
        """A precise epilogue's `mult_hi` and `mult_lo` inputs for multipliers `mult` (> 0)."""
        m = np.asarray(mult, np.int64)
        return {"mult_hi": m >> self.split, "mult_lo": m & ((1 << self.split) - 1)}

    def scale_bias(self, bias: np.ndarray, mult: np.ndarray | int) -> np.ndarray:
        """The `scaled_bias` input for an unscaled bias: bias * mult + 2**(shift - 1), wrapped to
        32 bits (the rounding constant only where the epilogue shifts)."""
        rounding = (1 << (self.shift - 1)) if self.shift else 0
        return wrap32(np.asarray(bias, np.int64) * np.asarray(mult, np.int64) + rounding)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def precise_tensors(ep: Epilogue, shape: tuple[int, ...], acc: Any, vec: Mapping[str, Any],
                    channel: Callable[[tuple[Any, ...]], tuple[Any, ...]]) -> Any:
    """The TE stages of a precise epilogue over accumulator tensor `acc`; `channel` maps an
    output index to the index of the per-channel vectors `vec`.  Returns the `epi` tensor."""
    done: dict[str, Any] = {"acc": acc}

    def body(stage: str, ready: dict[str, Any]) -> Callable[..., E.Expr]:
        return lambda *i: ep.precise_expr(stage, {name: t[i] for name, t in ready.items()},
                                          {v: vec[v][channel(i)] for v in vec})

    for stage in PRECISE_STAGES:
        done[stage] = compute(shape, body(stage, dict(done)), stage)
    return done["epi"]


# the stage of a precise epilogue that reads each of its vectors
PRECISE_READERS = {"bias": "clamped", "clamp_lo": "clamped", "clamp_hi": "clamped", "mult_lo": "low",
                   "mult_hi": "high", "round": "epi"}


def stage_epilogue(s: Schedule, ep: Epilogue, readers: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Put the epilogue's ALU stages in acc and its per-channel vectors there, each loaded once
    for the stage that reads it (`readers`, beside a precise epilogue's own; default `epi`).
    Returns the stages, for the operator to place and mark `alu`."""
    readers = {**(PRECISE_READERS if ep.split else {}), **(readers or {})}
    for stage in ep.stages:
        s.set_scope(stage, "acc")
    for v in ep.vectors:
        load_vector(s, v, readers.get(v, "epi"))
    return ep.stages


def load_vector(s: Schedule, name: str, reader: str) -> None:
    """Per-channel int32 input `name` into acc for stage `reader`, loaded once (a DMA at the root,
    beside every tile)."""
    s.cache_read(name, "acc", [reader])
    s.pragma(f"{name}.acc", "i0", "dma_copy")


def load_into_acc(s: Schedule, name: str, reader: str, at: tuple[str, str], scaled: str | None = None,
                  ) -> None:
    """Schedule int8 input `name` into acc for stage `reader` (sign-extended by the 8-bit
    accumulator load), one tile per iteration of loop `at` = (stage, axis); `scaled`, if given,
    is the ALU stage that multiplies the loaded tile in place before `reader` uses it."""
    cached = s.cache_read(name, "acc", [scaled or reader])
    s.compute_at(cached, *at)
    s.pragma(cached, "i2", "dma_copy")
    if scaled:
        s.set_scope(scaled, "acc")
        s.compute_at(scaled, *at)
        s.pragma(scaled, "n", "alu")


def random_vectors(ep: Epilogue, rng: np.random.Generator, channels: int) -> dict[str, np.ndarray]:
    """Seeded per-channel epilogue inputs: biases of realistic size, multipliers of both signs
    (and the rounding constant, when it is a vector)."""
    return {name: ep.vector_values(name, channels, rng) for name in ep.vectors}


def wrap32(x: np.ndarray) -> np.ndarray:
    return ((x + (1 << 31)) & ((1 << 32) - 1)) - (1 << 31)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def check_knobs(knobs: Any, space: dict[str, list[int]], op: str) -> None:
    for name, values in space.items():
        value = getattr(knobs, name)
        if value not in values:
            raise ScheduleError(f"{op} knob {name}={value} is not one of {values}")


def grid(knobs: Callable[..., Any], space: dict[str, list[int]]) -> list[Any]:
    """Every point of a knob space, in the order of `itertools.product` over its values."""
    return [knobs(*values) for values in itertools.product(*space.values())]


def knob_grid(space: dict[str, list[int]]) -> dict[str, np.ndarray]:
    """Each knob's value at every point of `space`, in `grid`'s order (itertools.product's)."""
    axes = np.meshgrid(*[np.asarray(v, np.int64) for v in space.values()], indexing="ij")
    return {name: axis.ravel() for name, axis in zip(space, axes, strict=True)}


def tile_table(values: list[int], ok: Callable[[int], bool], of: np.ndarray) -> np.ndarray:
    """`ok(v)` for each entry of `of` (whose entries are among `values`), computed once per value."""
    table = np.array([ok(v) for v in values], dtype=bool)
    return table[np.searchsorted(np.asarray(values), of)]  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Tiling:
    """What one schedule point does, as counts (scalars for one point, or arrays over the knob
    grid): the one source of both the analytic cycle estimate (`tiling_cycles`) and the counters
    the timing model would report for it (`tiling_events`)."""

    tiles: Any  # output tiles (one ALU epilogue and one store each)
    steps: Any  # tiles x reduction steps (one load phase and one GEMM each)
    acc: Any  # accumulator elements per tile
    gemm: Any  # GEMM micro-ops per step
    inp_bytes: Any  # input bytes loaded per step
    wgt_bytes: Any  # weight bytes loaded per step
    dmas: Any  # load instructions per step
    alu_ops: int  # epilogue ALU micro-ops per accumulator element


def tiling_cycles(t: Tiling, cfg: Any, threads: Any) -> np.ndarray:
    """The estimate's cycles: loads are one DMA latency per instruction plus bytes over the bus;
    the compute module runs GEMM and the ALU epilogue; threads overlap the two (`overlapped`)."""
    bandwidth = min(cfg.bus_bytes, cfg.dram_bytes_per_cycle)
    load = t.steps * ((t.inp_bytes + t.wgt_bytes) / bandwidth + t.dmas * cfg.dram_latency_cycles)
    compute = t.steps * (t.gemm + 10) + t.tiles * t.acc * (t.alu_ops + 1)
    return overlapped(compute, load, t.steps, threads)


def tiling_events(t: Tiling, cfg: Any) -> dict[str, Any]:
    """The counters of `sim.backend.Stats` the timing model counts exactly from a point's tiling:
    GEMM and ALU micro-ops, input/weight load and output store bytes, instructions per module."""
    return {"gemm_uops": t.steps * t.gemm, "alu_uops": t.tiles * t.acc * t.alu_ops,
            "inp_load_bytes": t.steps * t.inp_bytes, "wgt_load_bytes": t.steps * t.wgt_bytes,
            "out_store_bytes": t.tiles * t.acc * cfg.out_elem_bytes, "load_insns": t.steps * t.dmas,
            "compute_insns": t.steps + t.tiles, "store_insns": t.tiles}


def overlapped(compute: Any, load: Any, steps: Any, threads: Any) -> np.ndarray:
    """The estimates' cycles of compute and loads: in series with one thread, else overlapped
    (scalars or arrays alike)."""
    c = np.asarray(compute, dtype=np.float64)
    one = c + load
    many = np.maximum(c, load) + 0.5 * np.minimum(c, load) + load / steps * threads
    return np.where(np.asarray(threads) == 1, one, many)


def best_point(knobs: Callable[..., Any], grid_values: dict[str, np.ndarray], costs: np.ndarray,
               threads: np.ndarray, vthreads: int | None) -> Any:
    """`default_point` from every point's cost at once (`grid_values` as `knob_grid` gives them,
    `costs` NaN where a point does not fit): the knobs record of the cheapest point."""
    allowed = threads == vthreads if vthreads is not None else threads <= 2
    scored = np.where(allowed & ~np.isnan(costs), costs, np.inf)
    if not np.isfinite(scored).any():
        raise ScheduleError("no schedule point fits this accelerator's scratchpads")
    i = int(np.argmin(scored))
    return knobs(**{name: int(values[i]) for name, values in grid_values.items()})


def default_point(points: list[Any], cost: Callable[[Any], float | None], vthreads: int | None) -> Any:
    """The cheapest point under `cost` with `vthreads` threads; with None, at most two (more
    threads split the scratchpads into smaller tiles, which the estimates do not reward)."""
    pts = [p for p in points if p.threads == vthreads or (vthreads is None and p.threads <= 2)]
    scored = [(c, i) for i, p in enumerate(pts) if (c := cost(p)) is not None]
    if not scored:
        raise ScheduleError("no schedule point fits this accelerator's scratchpads")
    return pts[min(scored)[1]]
