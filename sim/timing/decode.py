"""Instructions as numpy columns, for the timing model: fields, checks and functional counters.

The columns and the checks that need no tensor data are `sim.columns`' (re-exported here); this
module adds what the timing model reads: the C++ model's rows and fsim's functional counters,
which follow fsim's rules exactly.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from hw import isa
from hw.config import AcceleratorConfig
from sim.backend import SimulationError
from sim.columns import Columns as Columns
from sim.columns import check_encoding as check_encoding
from sim.columns import columns as columns
from sim.columns import problems as problems
from sim.columns import sizes

# Columns of one instruction row of the C++ model (model.h's `Field` enum), in order.
FIELDS = ("module", "kind", "pops", "pushes", "client", "elem_bytes", "dram_base", "y", "x",
          "stride", "yp0", "yp1", "xp0", "xp1", "uops", "gemm_acc")
KIND_NOP, KIND_DMA, KIND_LOOP, KIND_FINISH = range(4)
# Read clients of the memory master (0 is fetch); top.py's order.
CLIENT = {isa.MemType.INP: 1, isa.MemType.WGT: 2, isa.MemType.UOP: 3, isa.MemType.ACC: 4,
          isa.MemType.ACC_8BIT: 4}
_LOAD, _STORE, _GEMM, _FINISH, _ALU = (int(o) for o in (isa.Opcode.LOAD, isa.Opcode.STORE,
                                                        isa.Opcode.GEMM, isa.Opcode.FINISH,
                                                        isa.Opcode.ALU))


@functools.lru_cache(maxsize=64)
def _tables(cfg: AcceleratorConfig) -> dict[str, np.ndarray]:
    """Per memory type (indexed by its number, 0..7): element bytes, read client, SRAM depth."""
    client = np.zeros(8, dtype=np.int64)
    for m in isa.MemType:
        client[m] = CLIENT.get(m, 0)
    return {**sizes(cfg), "client": client}


def rows(c: Columns, cfg: AcceleratorConfig) -> np.ndarray:
    """The (N, len(FIELDS)) int64 rows the C++ model simulates."""
    op, mt, x = c["opcode"], c["memory_type"], c["x_size"]
    is_load, is_store = op == _LOAD, op == _STORE
    to_load = is_load & ((mt == isa.MemType.INP) | (mt == isa.MemType.WGT))
    module = np.where(is_store, 2, np.where(to_load, 0, 1))
    loop = (op == _GEMM) | (op == _ALU)
    uops = _uops(c)
    kind = np.full(c.count, KIND_NOP)
    kind[(is_load | is_store) & (x != 0)] = KIND_DMA
    kind[loop] = KIND_LOOP
    kind[op == _FINISH] = KIND_FINISH
    pops, pushes = _token_masks(c, module)
    t = _tables(cfg)
    elem = np.where(is_load, t["elem"][mt], 0)
    client = np.where(is_load, t["client"][mt], 0)
    elem[is_store] = cfg.out_elem_bytes
    out = np.zeros((c.count, len(FIELDS)), dtype=np.int64)
    cols = {"module": module, "kind": kind, "pops": pops, "pushes": pushes, "client": client,
            "elem_bytes": elem, "dram_base": c["dram_base"], "y": c["y_size"], "x": x,
            "stride": c["x_stride"], "yp0": c["y_pad_0"], "yp1": c["y_pad_1"],
            "xp0": c["x_pad_0"], "xp1": c["x_pad_1"], "uops": np.where(loop, uops, 0),
            "gemm_acc": (op == _GEMM) & (c["reset"] == 0)}
    for i, name in enumerate(FIELDS):
        out[:, i] = cols[name]
    return out


def _uops(c: Columns) -> np.ndarray:
    return c["iter_out"] * c["iter_in"] * np.maximum(c["uop_end"] - c["uop_bgn"], 0)


# module -> ((pop_prev queue, pop_next queue), (push_prev queue, push_next queue)), -1: none
_TOKENS = {0: ((-1, 1), (-1, 0)), 1: ((0, 3), (1, 2)), 2: ((2, -1), (3, -1))}


def _token_masks(c: Columns, module: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pops, pushes = np.zeros(c.count, dtype=np.int64), np.zeros(c.count, dtype=np.int64)
    for m, (pop_q, push_q) in _TOKENS.items():
        sel = module == m
        for flag, q in zip(("pop_prev", "pop_next"), pop_q, strict=True):
            if q >= 0:
                pops |= np.where(sel & (c[flag] != 0), 1 << q, 0)
        for flag, q in zip(("push_prev", "push_next"), push_q, strict=True):
            if q >= 0:
                pushes |= np.where(sel & (c[flag] != 0), 1 << q, 0)
    return pops, pushes


def functional_stats(c: Columns, cfg: AcceleratorConfig) -> dict[str, int]:
    """The counters fsim reports: instructions per module, micro-ops, bytes per buffer kind."""
    op, mt, x = c["opcode"], c["memory_type"], c["x_size"]
    is_load, is_store = op == _LOAD, op == _STORE
    to_load = is_load & ((mt == isa.MemType.INP) | (mt == isa.MemType.WGT))
    uops = _uops(c)
    moved = c["x_size"] * c["y_size"]
    stats = {
        "gemm_uops": int(uops[(op == _GEMM) & (c["reset"] == 0)].sum()),
        "alu_uops": int(uops[op == _ALU].sum()),
        "out_store_bytes": int(moved[is_store & (x != 0)].sum()) * cfg.out_elem_bytes,
        "load_insns": int(to_load.sum()), "store_insns": int(is_store.sum()),
        "compute_insns": int(c.count - to_load.sum() - is_store.sum()),
    }
    loaded = (moved * _tables(cfg)["elem"][mt])[is_load]  # bytes per LOAD
    by_type = np.bincount(mt[is_load], weights=loaded, minlength=8).astype(np.int64)  # exact
    stats["inp_load_bytes"] = int(by_type[isa.MemType.INP])
    stats["wgt_load_bytes"] = int(by_type[isa.MemType.WGT])
    stats["uop_load_bytes"] = int(by_type[isa.MemType.UOP])
    stats["acc_load_bytes"] = int(by_type[isa.MemType.ACC] + by_type[isa.MemType.ACC_8BIT])
    return stats


def check(c: Columns, cfg: AcceleratorConfig, dram_bytes: int,
          describe: Callable[[int], str]) -> None:
    """Raise the SimulationError fsim raises for the first malformed instruction, if any.

    `describe(index)` formats instruction `index` for the message.
    """
    check_encoding(c, cfg)
    found = problems(c, cfg, dram_bytes)
    if found:
        index, text = min(found, key=lambda item: item[0])
        raise SimulationError(f"instruction #{index} ({describe(index)}): {text}")


