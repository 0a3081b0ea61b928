"""Features of one schedule point for the learned cost model, read from its lowered loop IR.

AutoTVM's lesson: a model over knob values learns one layer; a model over what the schedule
*does* (loop extents, bytes moved per scope, micro-ops, instructions per queue, token edges,
footprints) transfers across layers and configs.  Every feature here is such a quantity, computed
from the final loop IR (after the passes, before emission: no Program is built, so a point costs
one lowering, a few milliseconds) and the target's sizes.  Conv2d and dense get the same names.

Counts and sizes enter as log2(1 + x); ratios and fractions as they are.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from compiler.build import run_passes
from compiler.lower.lower import LoweredFunc, lower
from compiler.schedule.schedule import Schedule
from compiler.target.accel import AcceleratorTarget
from compiler.tir import stmt as S
from compiler.tir.visit import Container, children, walk_loops
from hw import isa
from hw.config import AcceleratorConfig

# The DMA kinds by queue and memory type, and the token queues, with stable names.
_DMAS = (("load", isa.MemType.INP), ("load", isa.MemType.WGT), ("compute", isa.MemType.ACC),
         ("compute", isa.MemType.ACC_8BIT), ("compute", isa.MemType.UOP),
         ("store", isa.MemType.OUT))
_QUEUES = ("load->compute", "compute->load", "compute->store", "store->compute")
_OUTER_LOOPS = 6  # extents of the outermost loops on the path to the GEMM, outermost first


@dataclass
class Lowered:
    """A point lowered through the accelerator passes, not emitted."""

    func: LoweredFunc
    before_threads: S.Stmt  # after insert_tokens: virtual-thread loops still present
    body: S.Stmt  # the final IR, as emission walks it


def lower_point(sched: Schedule, target: AcceleratorTarget, name: str = "main") -> Lowered:
    """`compiler.build.build` without the emission (raises ScheduleError as it does)."""
    func = lower(sched, target, name)
    ir = run_passes(func, target)
    return Lowered(func, ir["insert_tokens"], ir["inject_virtual_threads"])


@dataclass
class _Tally:
    """Sums over the leaves of the final IR, each weighted by its enclosing trip count."""

    dma_insns: dict[str, float] = field(default_factory=dict)
    dma_elems: dict[str, float] = field(default_factory=dict)
    dma_rows: dict[str, float] = field(default_factory=dict)
    dma_depth: dict[str, int] = field(default_factory=dict)  # deepest loop level of each kind
    tensor_elems: dict[str, float] = field(default_factory=dict)  # DRAM tensor -> elements moved
    gemm_insns: float = 0.0
    gemm_uops: float = 0.0
    reset_uops: float = 0.0
    alu_insns: float = 0.0
    alu_uops: float = 0.0
    kernel_uops: int = 0  # micro-ops of distinct kernel statements (micro-op memory)
    tokens: dict[str, float] = field(default_factory=dict)
    loops: int = 0
    max_depth: int = 0
    gemm_path: tuple[int, ...] = ()  # loop extents above the first accumulating GEMM


def _walk(body: S.Stmt, t: _Tally) -> None:
    for node, loops in walk_loops(body):
        path = tuple(lp.extent for lp in loops)
        trips = math.prod(path, start=1.0)  # the enclosing trip count, outermost loop first
        if isinstance(node, S.For):
            t.loops += 1
            t.max_depth = max(t.max_depth, len(path) + 1)
        elif isinstance(node, S.Dma):
            _dma(node, trips, len(path), t)
        elif isinstance(node, S.Kernel):
            _kernel(node, trips, path, t)
        elif isinstance(node, S.Sync) and node.action == "push":
            key = f"{node.src}->{node.dst}"
            t.tokens[key] = t.tokens.get(key, 0.0) + trips


def _dma(d: S.Dma, trips: float, depth: int, t: _Tally) -> None:
    name = d.memory_type.name.lower()
    elems = d.y_size * d.x_size
    t.dma_insns[name] = t.dma_insns.get(name, 0.0) + trips
    t.dma_elems[name] = t.dma_elems.get(name, 0.0) + trips * elems
    t.dma_rows[name] = t.dma_rows.get(name, 0.0) + trips * d.y_size
    t.dma_depth[name] = max(t.dma_depth.get(name, 0), depth)
    t.tensor_elems[d.tensor] = t.tensor_elems.get(d.tensor, 0.0) + trips * elems


def _kernel(k: S.Kernel, trips: float, path: tuple[int, ...], t: _Tally) -> None:
    explicit = math.prod(n for _, n in k.explicit)
    uops = explicit * math.prod(n for _, n in k.folded)
    t.kernel_uops += explicit
    if k.uop.kind == "gemm":
        t.gemm_insns += trips
        if k.uop.reset:
            t.reset_uops += trips * uops
        else:
            t.gemm_uops += trips * uops
            if not t.gemm_path:
                t.gemm_path = path
    else:
        t.alu_insns += trips
        t.alu_uops += trips * uops


def _threads(node: S.Stmt) -> int:
    """The product of the virtual-thread loop extents (1 without threads)."""
    inner = max((_threads(s) for s in children(node)), default=1)
    return inner * node.extent if isinstance(node, S.For) and node.kind == "vthread" else inner


def _footprints(func: LoweredFunc, threads: int) -> dict[str, int]:
    """Scratchpad elements in use per scope: the end of its last buffer (copies per thread)."""
    used: dict[str, int] = {}
    for buf in func.buffers.values():
        end = buf.base.const + buf.elems * (threads if buf.base.coeffs else 1)
        used[buf.scope] = max(used.get(buf.scope, 0), end)
    return used


def _log(x: float) -> float:
    return math.log2(1.0 + max(x, 0.0))


def features(low: Lowered, target: AcceleratorTarget) -> dict[str, float]:
    """The named features of a lowered point (same names and order for every operator)."""
    t = _Tally()
    _walk(low.body, t)
    cfg = target.cfg
    threads = _threads(low.before_threads)
    out: dict[str, float] = {}
    out.update(_instruction_features(t))
    out.update(_dma_features(t, low.func, target))
    out.update(_compute_features(t))
    out.update(_loop_features(t, threads))
    out.update(_footprint_features(low.func, threads, target))
    out.update(_balance_features(t, cfg))
    return out


def _instruction_features(t: _Tally) -> dict[str, float]:
    load = sum(v for k, v in t.dma_insns.items() if k in ("inp", "wgt"))
    compute = t.gemm_insns + t.alu_insns + sum(v for k, v in t.dma_insns.items()
                                               if k in ("acc", "acc_8bit", "uop"))
    store = t.dma_insns.get("out", 0.0)
    out = {"insns_load": _log(load), "insns_compute": _log(compute), "insns_store": _log(store),
           "insns_total": _log(load + compute + store)}
    for q in _QUEUES:
        out[f"tokens_{q.replace('->', '_to_')}"] = _log(t.tokens.get(q, 0.0))
    pushes = sum(t.tokens.values())
    out["tokens_per_insn"] = pushes / max(load + compute + store, 1.0)
    return out


def _dma_features(t: _Tally, func: LoweredFunc, target: AcceleratorTarget) -> dict[str, float]:
    cfg = target.cfg
    out: dict[str, float] = {}
    for _, mem in _DMAS:
        name = mem.name.lower()
        insns, elems = t.dma_insns.get(name, 0.0), t.dma_elems.get(name, 0.0)
        elem_bytes = cfg.elem_bytes(mem)
        out[f"{name}_dma_insns"] = _log(insns)
        out[f"{name}_bytes"] = _log(elems * elem_bytes)
        out[f"{name}_bytes_per_dma"] = _log(elems * elem_bytes / insns) if insns else 0.0
        rows = t.dma_rows.get(name, 0.0)
        out[f"{name}_row_bytes"] = _log(elems * elem_bytes / rows) if rows else 0.0
        out[f"{name}_dma_depth"] = float(t.dma_depth.get(name, 0))
    sizes = {x.name: math.prod(x.shape[:-2]) for x in func.inputs + func.outputs}
    reuse = [t.tensor_elems.get(n, 0.0) / sizes[n] for n in sizes if n in t.tensor_elems]
    out["reload_max"] = _log(max(reuse, default=0.0))
    out["reload_mean"] = _log(float(np.mean(reuse)) if reuse else 0.0)
    return out


def _compute_features(t: _Tally) -> dict[str, float]:
    gemm = max(t.gemm_insns, 1.0)
    return {
        "gemm_insns": _log(t.gemm_insns), "gemm_uops": _log(t.gemm_uops),
        "reset_uops": _log(t.reset_uops), "alu_insns": _log(t.alu_insns),
        "alu_uops": _log(t.alu_uops), "uops_per_gemm": _log((t.gemm_uops + t.reset_uops) / gemm),
        "uops_per_alu": _log(t.alu_uops / t.alu_insns) if t.alu_insns else 0.0,
        "kernel_uops": _log(t.kernel_uops),
    }


def _loop_features(t: _Tally, threads: int) -> dict[str, float]:
    path = list(t.gemm_path[:_OUTER_LOOPS]) + [1] * (_OUTER_LOOPS - len(t.gemm_path[:_OUTER_LOOPS]))
    out = {"loops": float(t.loops), "loop_depth": float(t.max_depth), "gemm_depth": float(len(t.gemm_path)),
           "virtual_threads": float(threads), "gemm_trips": _log(math.prod(t.gemm_path))}
    for i, extent in enumerate(path):
        out[f"loop{i}_extent"] = _log(extent)
    return out


def _footprint_features(func: LoweredFunc, threads: int, target: AcceleratorTarget) -> dict[str, float]:
    used = _footprints(func, threads)
    out: dict[str, float] = {}
    for scope in ("inp", "wgt", "acc"):
        depth = target.scope(scope).depth
        out[f"{scope}_footprint"] = _log(used.get(scope, 0))
        out[f"{scope}_fill"] = used.get(scope, 0) / depth
    return out


def _balance_features(t: _Tally, c: AcceleratorConfig) -> dict[str, float]:
    """Rough per-module busy times in cycles from the config's bus and DRAM model: the model
    learns how they combine, which is where layers and configs differ."""
    bandwidth = min(c.bus_bytes, c.dram_bytes_per_cycle)
    latency = c.dram_latency_cycles
    load_bytes = sum(t.dma_elems.get(m.name.lower(), 0.0) * c.elem_bytes(m)
                     for m in (isa.MemType.INP, isa.MemType.WGT))
    load_dmas = t.dma_insns.get("inp", 0.0) + t.dma_insns.get("wgt", 0.0)
    load_cycles = load_bytes / bandwidth + load_dmas * latency
    compute_cycles = t.gemm_uops + t.reset_uops + t.alu_uops
    store_bytes = t.dma_elems.get("out", 0.0) * c.elem_bytes(isa.MemType.OUT)
    store_cycles = store_bytes / bandwidth + t.dma_insns.get("out", 0.0) * latency
    busiest = max(load_cycles, compute_cycles, store_cycles, 1.0)
    return {
        "load_cycles": _log(load_cycles), "compute_cycles": _log(compute_cycles),
        "store_cycles": _log(store_cycles), "bound_cycles": _log(busiest),
        "load_over_compute": _log(load_cycles / max(compute_cycles, 1.0)),
        "compute_share": compute_cycles / busiest,
        "intensity": _log(t.gemm_uops / max(load_bytes, 1.0) * 1024),
        "serial_cycles": _log(load_cycles + compute_cycles + store_cycles),
    }


def static_insns(low: Lowered) -> int:
    """Instructions the point will emit, counted on the IR: DMAs and kernels (token-only NOPs
    and the micro-op load aside), each times its enclosing trip count."""
    return sum(trips for trips, _ in _leaves(low.body) if not isinstance(_, S.Sync))


def _leaves(body: S.Stmt) -> Iterator[tuple[int, S.Stmt]]:
    """Each leaf statement with its enclosing trip count."""
    for node, loops in walk_loops(body):
        if not isinstance(node, Container):
            yield math.prod(lp.extent for lp in loops), node


def names() -> list[str]:
    """The feature names, in the order `features` returns them (for a fixed-width matrix)."""
    return list(_NAMES)


def vector(f: dict[str, float]) -> np.ndarray:
    return np.array([f[n] for n in _NAMES], dtype=np.float64)


_NAMES = (
    "insns_load", "insns_compute", "insns_store", "insns_total",
    *(f"tokens_{q.replace('->', '_to_')}" for q in _QUEUES), "tokens_per_insn",
    *(f"{m.name.lower()}_{k}" for _, m in _DMAS
      for k in ("dma_insns", "bytes", "bytes_per_dma", "row_bytes", "dma_depth")),
    "reload_max", "reload_mean",
    "gemm_insns", "gemm_uops", "reset_uops", "alu_insns", "alu_uops", "uops_per_gemm", "uops_per_alu",
    "kernel_uops",
    "loops", "loop_depth", "gemm_depth", "virtual_threads", "gemm_trips",
    *(f"loop{i}_extent" for i in range(_OUTER_LOOPS)),
    *(f"{s}_{k}" for s in ("inp", "wgt", "acc") for k in ("footprint", "fill")),
    "load_cycles", "compute_cycles", "store_cycles", "bound_cycles", "load_over_compute",
    "compute_share", "intensity", "serial_cycles",
)
