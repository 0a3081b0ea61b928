"""`inject_dma`: copy nests marked `pragma dma_copy` become 2-D DMA statements.

DRAM -> inp/wgt/acc is a LOAD (an int8 source into acc is the sign-extending 8-bit acc load);
acc -> DRAM output is a STORE (truncating to out_bits).  The two innermost loops must be one
scratchpad element (its lanes); the other loops, dropping extent 1 and merging dimensions that
are contiguous in both DRAM and SRAM, must form at most two dimensions: rows (y) with a DRAM
stride, and contiguous elements (x).  A zero-padding select on the source (if_then_else with a
range condition) becomes per-tile pads on y and x, decided at emission.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.errors import ScheduleError
from compiler.target.accel import AcceleratorTarget
from compiler.te import expr as E
from compiler.te.affine import Affine, affine
from compiler.te.tensor import Tensor
from compiler.tir import stmt as S
from compiler.tir.visit import flat_index, perfect_nest, post_order
from hw import isa


def inject_dma(body: S.Stmt, target: AcceleratorTarget) -> S.Stmt:
    def visit(node: S.Stmt) -> S.Stmt:
        if isinstance(node, S.Attr) and node.key == "pragma" and node.value == "dma_copy":
            return _copy(node, target)
        return node

    return post_order(body, visit)


@dataclass
class _Dim:
    var: E.Var
    extent: int
    dram: int
    sram: int
    pad: tuple[int, int, int] | None = None  # (source dim, low, high) when padded


def _copy(node: S.Attr, target: AcceleratorTarget) -> S.Stmt:
    where = f"dma_copy of stage {node.stage}"
    loops, store = perfect_nest(node.body)
    if not isinstance(store, S.Store):
        raise ScheduleError(f"{where}: the loops from the pragma inward must hold only the copy "
                            "(move the pragma inside the attached stages)")
    value, cond = _unwrap(store.value, where)
    if not isinstance(value, E.Load):
        raise ScheduleError(f"{where}: the value {store.value} is not a copy of a tensor")
    dst, src = store.tensor, value.tensor
    if isinstance(dst, S.Buffer) and not isinstance(src, S.Buffer):
        load, sram_t, sram_idx, dram_t, dram_idx = True, dst, store.indices, src, value.indices
        mem = _load_type(dst, src, target, where)
    elif isinstance(src, S.Buffer) and not isinstance(dst, S.Buffer):
        load, sram_t, sram_idx, dram_t, dram_idx = False, src, value.indices, dst, store.indices
        mem = isa.MemType.OUT
        if src.scope != "acc" or dst.dtype != target.out_dtype:
            raise ScheduleError(f"{where}: a store copies an acc buffer into a {target.out_dtype} "
                                f"tensor, not {src.scope} into {dst.dtype}")
        if cond is not None:
            raise ScheduleError(f"{where}: a store cannot pad")
    else:
        raise ScheduleError(f"{where}: a DMA copies between DRAM and a scratchpad, not from "
                            f"{src.name} to {dst.name}")
    return _pattern(node.stage, where, loops, load, mem, sram_t, sram_idx, dram_t, dram_idx, cond,
                    target)


def _unwrap(value: E.Expr, where: str) -> tuple[E.Expr, E.Expr | None]:
    cond = None
    if isinstance(value, E.Cast):
        value = value.value
    if isinstance(value, E.Select):
        if not (isinstance(value.other, E.Const) and value.other.value == 0):
            raise ScheduleError(f"{where}: padding must be zeros, not {value.other}")
        cond, value = value.cond, value.then
    if isinstance(value, E.Cast):
        value = value.value
    return value, cond


def _load_type(dst: S.Buffer, src: Tensor, target: AcceleratorTarget, where: str) -> isa.MemType:
    scope = target.scope(dst.scope)
    if dst.scope == "acc":
        mem = target.acc_load_type(src.dtype)
        if mem is None:
            raise ScheduleError(f"{where}: no LOAD brings a {src.dtype} tensor into acc")
        return mem
    if src.dtype != scope.dtype:
        raise ScheduleError(f"{where}: scope {dst.scope} holds {scope.dtype}, not {src.dtype}")
    return scope.memory_type


def _pattern(stage: str, where: str, loops: list[tuple[E.Var, int]], load: bool, mem: isa.MemType,
             sram_t: S.Buffer, sram_idx: tuple[E.Expr, ...], dram_t: Tensor,
             dram_idx: tuple[E.Expr, ...], cond: E.Expr | None,
             target: AcceleratorTarget) -> S.Stmt:
    if len(loops) < 2:
        raise ScheduleError(f"{where}: the pragma must enclose the element's two lane loops")
    lanes = [v for v, _ in loops[-2:]]
    for name, idx in (("scratchpad", sram_idx), ("DRAM", dram_idx)):
        if list(idx[-2:]) != lanes or any(lanes[0] in E.free_vars(i) or lanes[1] in E.free_vars(i)
                                          for i in idx[:-2]):
            raise ScheduleError(f"{where}: the two innermost loops must run over the element's "
                                f"lanes in the {name} tensor, which is indexed "
                                f"[{', '.join(map(str, idx))}]")
    if dram_t.shape[-2:] != sram_t.shape[-2:]:
        raise ScheduleError(f"{where}: {dram_t.name}'s elements {dram_t.shape[-2:]} differ from the "
                            f"scratchpad's {sram_t.shape[-2:]}")
    dram, sram = flat_index(dram_t, dram_idx, where), flat_index(sram_t, sram_idx, where)
    inner_vars = {v for v, _ in loops[:-2]}
    pads = _pads(cond, dram_idx, where, dram_t, inner_vars) if cond is not None else {}
    dims = []
    for var, extent in loops[:-2]:
        pad = next(((d, lo, hi) for d, (v, lo, hi) in pads.items() if v == var), None)
        if extent > 1 or pad is not None:
            dims.append(_Dim(var, extent, dram.coeff(var), sram.coeff(var), pad))
    padded_vars = {v for v, _, _ in pads.values()}
    if padded_vars - {d.var for d in dims}:
        raise ScheduleError(f"{where}: padding is only supported on loops inside the pragma")
    dims = _merge(dims)
    if dims and (dims[-1].dram != 1 or dims[-1].sram != 1):  # rows of one element each
        dims.append(_Dim(E.Var("_"), 1, 1, 1))
    if len(dims) > target.dma_max_dims:
        shown = ", ".join(f"{d.var}<{d.extent} (dram stride {d.dram}, sram stride {d.sram})" for d in dims)
        raise ScheduleError(f"{where}: the copy needs {len(dims)} dimensions ({shown}), more than the "
                            f"DMA's {target.dma_max_dims}; put the pragma on an inner axis")
    strip = {v for v, _ in loops}
    return _dma(stage, where, load, mem, sram_t, dram_t, dram, sram, dims, dram_idx, strip)


def _merge(dims: list[_Dim]) -> list[_Dim]:
    out: list[_Dim] = []
    for d in dims:
        if out:
            o = out[-1]
            if (o.pad is None and d.pad is None and o.dram == d.dram * d.extent
                    and o.sram == d.sram * d.extent):
                out[-1] = _Dim(d.var, o.extent * d.extent, d.dram, d.sram)
                continue
        out.append(d)
    return out


def _dma(stage: str, where: str, load: bool, mem: isa.MemType, sram_t: S.Buffer, dram_t: Tensor,
         dram: Affine, sram: Affine, dims: list[_Dim], dram_idx: tuple[E.Expr, ...],
         strip: set[E.Var]) -> S.Stmt:
    """The Dma statement; addresses are taken with every loop inside the pragma at 0."""
    dims = [_Dim(E.Var("_"), 1, 0, 1)] * (2 - len(dims)) + dims
    y, x = dims
    if x.extent > 1 and (x.dram != 1 or x.sram != 1):
        raise ScheduleError(f"{where}: the innermost copied dimension ({x.var}) must be contiguous in "
                            f"DRAM and in the scratchpad (strides {x.dram} and {x.sram})")
    if y.extent > 1 and y.sram != x.extent:
        raise ScheduleError(f"{where}: the scratchpad rows are {y.sram} elements apart, the DMA "
                            f"writes them {x.extent} apart")
    if y.extent > 1 and y.dram < 0:
        raise ScheduleError(f"{where}: rows of the copy go backwards in DRAM (stride {y.dram})")
    pads: list[S.DmaPad | None] = []
    for d in (y, x):
        if d.pad is None:
            pads.append(None)
            continue
        dim, lo, hi = d.pad
        start = affine(dram_idx[dim])
        assert start is not None
        pads.append(S.DmaPad(start.without(strip), lo, hi))
    queue = "store" if not load else ("load" if mem in (isa.MemType.INP, isa.MemType.WGT) else "compute")
    return S.Dma(queue, load, mem, dram_t.name, dram.without(strip), sram.without(strip),
                 y.extent, x.extent, y.dram if y.extent > 1 else x.extent, pads[0], pads[1], stage)


def _pads(cond: E.Expr, idx: tuple[E.Expr, ...], where: str, src: Tensor,
          loop_vars: set[E.Var]) -> dict[int, tuple[E.Var, int, int]]:
    """Per padded source dimension: (the loop driving it, valid low, valid high) of the index."""
    bounds: dict[int, list[int]] = {}
    forms = [affine(i) for i in idx]
    for term in _conjuncts(cond, where):
        op, a, b = term.op, affine(term.a), affine(term.b)
        if a is None or b is None:
            raise ScheduleError(f"{where}: padding condition {term} is not affine")
        diff = a + b.scale(-1)  # op compares diff with 0
        dim = next((d for d, f in enumerate(forms) if f is not None and f.coeffs and
                    dict(f.coeffs) == dict(diff.coeffs)), None)
        if dim is None:
            raise ScheduleError(f"{where}: padding condition {term} does not bound one source index")
        f = forms[dim]
        assert f is not None
        k = f.const - diff.const  # index op' k  <=>  diff op 0
        lo_hi = bounds.setdefault(dim, [-(1 << 60), 1 << 60])
        if op in (">=", ">"):
            lo_hi[0] = max(lo_hi[0], k + (op == ">"))
        elif op in ("<", "<="):
            lo_hi[1] = min(lo_hi[1], k + (op == "<="))
        else:
            raise ScheduleError(f"{where}: padding condition {term} must compare with < <= > >=")
    out = {}
    for dim, (lo, hi) in bounds.items():
        if lo < 0 or hi > src.shape[dim]:
            raise ScheduleError(f"{where}: the padding condition lets dimension {dim} of {src.name} "
                                f"be read at [{lo}, {hi}), outside its extent {src.shape[dim]}")
        f = forms[dim]
        assert f is not None
        drivers = [v for v in f.coeffs if v in loop_vars]
        if len(drivers) != 1 or f.coeffs[drivers[0]] != 1:
            raise ScheduleError(f"{where}: padded index {idx[dim]} must step by 1 along one loop "
                                "inside the pragma")
        out[dim] = (drivers[0], lo, hi)
    return out


def _conjuncts(cond: E.Expr, where: str) -> list[E.Bin]:
    if isinstance(cond, E.Bin) and cond.op == "and":
        return _conjuncts(cond.a, where) + _conjuncts(cond.b, where)
    if isinstance(cond, E.Bin) and cond.op in E.COMPARE:
        return [cond]
    raise ScheduleError(f"{where}: padding condition {cond} must be comparisons joined by and")
