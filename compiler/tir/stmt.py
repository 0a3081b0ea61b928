"""The loop IR: statements produced by lowering and rewritten by the accelerator passes.

Lowering produces `For`, `Seq`, `Store` and `Attr` (pragma and tensorize marks).  The passes
replace marked nests by `Dma` (2-D strided copies with zero padding), `Uop` (one GEMM or ALU
micro-op) and then `Kernel` (micro-ops with up to two folded affine loops: one instruction), and
add `Sync` (dependency-token push or pop).  `emit` walks the final IR with concrete loop values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from compiler.te.affine import Affine
from compiler.te.expr import Expr, Var
from compiler.te.tensor import Tensor
from hw import isa


@dataclass(frozen=True, eq=False)
class Buffer(Tensor):
    """A tensor held in a scratchpad: element `i` of it lives at SRAM index `base + i`.

    `shape` is the full shape with the two lane dimensions last; `base` may contain virtual
    thread variables (one copy of the buffer per thread).
    """

    scope: str = "acc"
    base: Affine = field(default_factory=Affine)

    @property
    def elems(self) -> int:
        n = 1
        for s in self.shape[:-2]:
            n *= s
        return n

    def __repr__(self) -> str:
        return f"Buffer({self.name!r}, {self.scope}, {self.shape}, base={self.base})"


@dataclass(frozen=True)
class For:
    var: Var
    extent: int
    body: Stmt
    kind: str = "serial"  # or "vthread"


@dataclass(frozen=True)
class Seq:
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True)
class Store:
    """buffer[indices] = value (a buffer or a DRAM tensor)."""

    tensor: Tensor
    indices: tuple[Expr, ...]
    value: Expr


@dataclass(frozen=True)
class Attr:
    """A mark on a nest: ("pragma", "dma_copy"|"alu") or ("tensorize", intrinsic)."""

    key: str
    value: str
    stage: str
    body: Stmt


@dataclass(frozen=True)
class DmaPad:
    """Zero padding of one DMA dimension: the source index at the dimension's first element,
    and the valid source range [low, high)."""

    start: Affine
    low: int
    high: int


@dataclass(frozen=True)
class Dma:
    """One 2-D DMA: rows of `x_size` elements, `y_size` rows `y_stride` DRAM elements apart.

    Addresses are Affine in the loop variables around the statement, in elements of
    `memory_type`; `pads` (y, x) give the zero padding, decided per concrete tile by `emit`.
    """

    queue: str
    load: bool
    memory_type: isa.MemType
    tensor: str  # the DRAM tensor
    dram: Affine
    sram: Affine
    y_size: int
    x_size: int
    y_stride: int
    pad_y: DmaPad | None = None
    pad_x: DmaPad | None = None
    stage: str = ""


@dataclass(frozen=True)
class Uop:
    """One micro-op with Affine indices: GEMM (reset or accumulate) or ALU."""

    kind: str  # "gemm" | "alu"
    dst: Affine
    src: Affine = field(default_factory=Affine)
    wgt: Affine = field(default_factory=Affine)
    reset: bool = False
    alu_op: isa.AluOp = isa.AluOp.ADD
    use_imm: bool = False
    imm: int = 0
    stage: str = ""


@dataclass(frozen=True)
class Kernel:
    """One GEMM/ALU instruction: `folded` loops (outer, inner) in the instruction, `explicit`
    loops unrolled into the micro-op kernel."""

    uop: Uop
    folded: tuple[tuple[Var, int], ...]
    explicit: tuple[tuple[Var, int], ...]


@dataclass(frozen=True)
class Sync:
    """A dependency token: `push` by queue `src` to `dst`, or `pop` of it by `dst`."""

    action: str  # "push" | "pop"
    src: str
    dst: str
    chain: bool = False  # part of a hoisted loop-carried chain (see passes.insert_tokens)


Stmt = Union[For, Seq, Store, Attr, Dma, Uop, Kernel, Sync]


def seq(*stmts: Stmt) -> Stmt:
    """A flat sequence; nested sequences are spliced in, a single statement is itself."""
    flat: list[Stmt] = []
    for s in stmts:
        flat.extend(s.stmts if isinstance(s, Seq) else [s])
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def queue_of(stmt: Stmt) -> str | None:
    if isinstance(stmt, Dma):
        return stmt.queue
    if isinstance(stmt, Kernel | Uop):
        return "compute"
    return None
