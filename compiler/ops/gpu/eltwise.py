"""Element-wise float32 operators on the GPU, one thread per element (or per `vector` lanes).

- `Eltwise("add" | "sub" | "mul" | "div", shape, b_shape)`: numpy's broadcast of two operands;
- `Eltwise("relu" | "clip" | "gelu" | "sigmoid" | "hardswish" | "tanh", shape)`: one operand
  (`lo`, `hi` are clip's bounds; gelu is the erf form; tanh is 1 - 2 / (exp(2x) + 1), since
  LLVM's tanh is a libm call the GPU does not have);
- `Transpose(shape, perm)`: numpy's transpose, one thread per output element.
The schedule fuses the output's axes and splits them into blocks of `threads`; with `vector`
4 the last axis' lanes are one 128-bit store.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.ops.cpu.eltwise import _index, broadcast_shape
from compiler.ops.cpu.norm import gelu_expr
from compiler.ops.gpu.base import GpuOp, Knobs, flat_launch, flat_threads
from compiler.ops.gpu.matmul import clip
from compiler.schedule.schedule import Schedule
from compiler.target.gpu import GpuTarget
from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, placeholder

BINARY = ("add", "sub", "mul", "div")
UNARY = ("relu", "clip", "gelu", "sigmoid", "hardswish", "tanh")
_NP_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


@dataclass(frozen=True)
class Eltwise(GpuOp):
    kind: str
    shape: tuple[int, ...]
    b_shape: tuple[int, ...] = ()
    lo: float = -math.inf
    hi: float = math.inf
    op: ClassVar[str] = "eltwise"

    def __post_init__(self) -> None:
        if self.kind not in BINARY + UNARY:
            raise ValueError(f"{self.op}: unknown operation {self.kind!r}; known: "
                             f"{', '.join(BINARY + UNARY)}")
        if (self.kind in BINARY) != bool(self.b_shape):
            raise ValueError(f"{self.op}: {self.kind} takes {2 if self.kind in BINARY else 1} operands")

    @property
    def out_shape(self) -> tuple[int, ...]:
        return broadcast_shape(self.op, self.shape, self.b_shape) if self.b_shape else self.shape

    def tensors(self) -> dict[str, Tensor]:
        a = placeholder(self.shape, "float32", "a")
        ins = {"a": a}
        if self.kind in BINARY:
            ins["b"] = placeholder(self.b_shape, "float32", "b")
        return {**ins, "out": compute(self.out_shape, lambda *i: self._value(ins, i), "out")}

    def _value(self, ins: dict[str, Tensor], i: tuple[E.Expr, ...]) -> E.Expr:
        x = ins["a"][_index(self.shape, i)]
        if self.kind in BINARY:
            y = ins["b"][_index(self.b_shape, i)]
            return {"add": x + y, "sub": x - y, "mul": x * y, "div": x / y}[self.kind]
        if self.kind == "relu":
            return clip(x, 0.0, math.inf)
        if self.kind == "clip":
            return clip(x, self.lo, self.hi)
        if self.kind == "gelu":
            return gelu_expr(x)
        if self.kind == "sigmoid":
            return 1.0 / (1.0 + E.exp(-x))
        if self.kind == "tanh":
            return 1.0 - 2.0 / (E.exp(x * 2.0) + 1.0)
        return x * clip(x * (1.0 / 6.0) + 0.5, 0.0, 1.0)  # hardswish

    def reference(self, a: np.ndarray, *rest: np.ndarray) -> np.ndarray:  # type: ignore[override]
        x = a.astype(np.float64)
        if self.kind in BINARY:
            out = _NP_BINARY[self.kind](x, rest[0].astype(np.float64))
        elif self.kind in ("relu", "clip"):
            lo, hi = (0.0, math.inf) if self.kind == "relu" else (self.lo, self.hi)
            out = np.clip(x, lo, hi)
        elif self.kind == "gelu":
            out = 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))
        elif self.kind == "sigmoid":
            out = 1.0 / (1.0 + np.exp(-x))
        elif self.kind == "tanh":
            out = np.tanh(x)
        else:
            out = x * np.clip(x / 6.0 + 0.5, 0.0, 1.0)
        return np.asarray(out, dtype=np.float32)

    def space(self, target: GpuTarget) -> list[Knobs]:
        total = math.prod(self.out_shape)
        vec = [4] if self.out_shape[-1] % 4 == 0 else []
        points = [Knobs(threads=t, vector=v) for v in vec for t in flat_threads(total, v)
                  if (total // v) % t == 0]
        return points + [Knobs(threads=t) for t in flat_threads(total)]

    def schedule(self, ts: dict[str, Tensor], target: GpuTarget, knobs: Knobs) -> Schedule:
        s = Schedule(ts["out"])
        flat_launch(s, "out", knobs.threads, knobs.vector)
        return s


@dataclass(frozen=True)
class Transpose(GpuOp):
    shape: tuple[int, ...]
    perm: tuple[int, ...]
    op: ClassVar[str] = "transpose"

    def __post_init__(self) -> None:
        if sorted(self.perm) != list(range(len(self.shape))):
            raise ValueError(f"{self.op}: perm {self.perm} is not a permutation of {len(self.shape)} axes")

    def tensors(self) -> dict[str, Tensor]:
        a = placeholder(self.shape, "float32", "a")
        out_shape = tuple(self.shape[p] for p in self.perm)

        def value(*i: E.Expr) -> E.Expr:
            index: list[E.Expr] = [E.const(0)] * len(self.shape)
            for k, p in enumerate(self.perm):
                index[p] = i[k]
            return a[tuple(index)]

        return {"a": a, "out": compute(out_shape, value, "out")}

    def reference(self, a: np.ndarray) -> np.ndarray:  # type: ignore[override]
        return np.ascontiguousarray(np.transpose(a, self.perm))

    def space(self, target: GpuTarget) -> list[Knobs]:
        return [Knobs(threads=t) for t in flat_threads(math.prod(self.shape))]

    def schedule(self, ts: dict[str, Tensor], target: GpuTarget, knobs: Knobs) -> Schedule:
        s = Schedule(ts["out"])
        flat_launch(s, "out", knobs.threads)
        return s
