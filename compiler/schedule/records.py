"""Schedule primitives as frozen records: the how of an operator, as data.

A schedule is an ordered list of these records.  They name stages and axes by string, so a
schedule prints, saves to JSON, loads and replays to the identical Program.  Axis names made by a
record are derived from its fields (`y` split -> `y.o`, `y.i`), never from a counter.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Union

from compiler.errors import ScheduleError

SCOPES = ("global", "inp", "wgt", "acc", "shared", "local")  # shared, local: the GPU's
PRAGMAS = ("dma_copy", "alu")
THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z")


@dataclass(frozen=True)
class Split:
    """Split `axis` of `stage` into `axis.o` (outer) and `axis.i` (inner, extent `factor`)."""

    stage: str
    axis: str
    factor: int
    kind: ClassVar[str] = "split"

    @property
    def outer(self) -> str:
        return f"{self.axis}.o"

    @property
    def inner(self) -> str:
        return f"{self.axis}.i"


@dataclass(frozen=True)
class Reorder:
    """Put the named leaf axes of `stage` in this relative order (others keep their places)."""

    stage: str
    axes: tuple[str, ...]
    kind: ClassVar[str] = "reorder"


@dataclass(frozen=True)
class Fuse:
    """Fuse two adjacent leaf axes (outer, inner) into `outer*inner`."""

    stage: str
    outer: str
    inner: str
    kind: ClassVar[str] = "fuse"

    @property
    def fused(self) -> str:
        return f"{self.outer}*{self.inner}"


@dataclass(frozen=True)
class ComputeAt:
    """Compute `stage` inside loop `axis` of stage `parent`, for the region that loop needs."""

    stage: str
    parent: str
    axis: str
    kind: ClassVar[str] = "compute_at"


@dataclass(frozen=True)
class ComputeInline:
    """Substitute `stage`'s body into every reader: it is never stored."""

    stage: str
    kind: ClassVar[str] = "compute_inline"


@dataclass(frozen=True)
class CacheRead:
    """Read `tensor` through a copy in `scope`, for the `readers` stages: stage `tensor.scope`."""

    tensor: str
    scope: str
    readers: tuple[str, ...]
    kind: ClassVar[str] = "cache_read"

    @property
    def name(self) -> str:
        return f"{self.tensor}.{self.scope}"


@dataclass(frozen=True)
class CacheWrite:
    """Compute `stage` into `scope` (stage `stage.scope`); `stage` becomes a copy of it."""

    stage: str
    scope: str
    kind: ClassVar[str] = "cache_write"

    @property
    def name(self) -> str:
        return f"{self.stage}.{self.scope}"


@dataclass(frozen=True)
class SetScope:
    """Store `stage` in `scope` instead of DRAM."""

    stage: str
    scope: str
    kind: ClassVar[str] = "set_scope"


@dataclass(frozen=True)
class Tensorize:
    """Replace the loops from `axis` inward by the target's intrinsic `intrinsic`."""

    stage: str
    axis: str
    intrinsic: str = "gemm"
    kind: ClassVar[str] = "tensorize"


@dataclass(frozen=True)
class VirtualThread:
    """Split `axis` into `count` virtual threads (`axis.vt`, outer) and `axis.vi`.

    Every scratchpad buffer allocated inside the thread loop is replicated per thread and the
    threads' tasks are interleaved, so one thread's loads overlap another's compute.
    """

    stage: str
    axis: str
    count: int
    kind: ClassVar[str] = "virtual_thread"

    @property
    def outer(self) -> str:
        return f"{self.axis}.vt"

    @property
    def inner(self) -> str:
        return f"{self.axis}.vi"


@dataclass(frozen=True)
class Pragma:
    """Mark the loops of `stage` from `axis` inward: `dma_copy` (one DMA) or `alu` (ALU kernel)."""

    stage: str
    axis: str
    pragma: str
    kind: ClassVar[str] = "pragma"


@dataclass(frozen=True)
class Vectorize:
    """Host only: vectorize loop `axis` of `stage`, which must be the stage's innermost loop.

    The code generator marks the loop for LLVM's loop vectoriser, which then may also reorder a
    float reduction along it (so sums differ from the serial order by rounding).
    """

    stage: str
    axis: str
    kind: ClassVar[str] = "vectorize"


@dataclass(frozen=True)
class Bind:
    """GPU only: run loop `axis` of `stage` across `thread` (blockIdx.x/y/z or threadIdx.x/y/z)."""

    stage: str
    axis: str
    thread: str
    kind: ClassVar[str] = "bind"


@dataclass(frozen=True)
class Unroll:
    """GPU only: unroll loop `axis` of `stage` completely (register tiles index with constants)."""

    stage: str
    axis: str
    kind: ClassVar[str] = "unroll"


Record = Union[Split, Reorder, Fuse, ComputeAt, ComputeInline, CacheRead, CacheWrite, SetScope,
               Tensorize, VirtualThread, Pragma, Vectorize, Bind, Unroll]
RECORD_TYPES: dict[str, type] = {
    cls.kind: cls
    for cls in (Split, Reorder, Fuse, ComputeAt, ComputeInline, CacheRead, CacheWrite, SetScope,
                Tensorize, VirtualThread, Pragma, Vectorize, Bind, Unroll)
}
HOST_RECORDS = ("vectorize",)  # records only the host lowering takes
GPU_RECORDS = ("bind", "unroll")  # records only the GPU lowering takes


def describe(record: Record) -> str:
    """One line: `split(res, y, factor=7)`."""
    values = dataclasses.asdict(record)
    first = values.pop("stage", None) or values.pop("tensor")
    args = [str(first)] + [f"{k}={_text(v)}" for k, v in values.items()]
    return f"{record.kind}({', '.join(args)})"


def _text(value: Any) -> str:
    if isinstance(value, tuple | list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def to_json(record: Record) -> dict[str, Any]:
    data: dict[str, Any] = {"kind": record.kind}
    for key, value in dataclasses.asdict(record).items():
        data[key] = list(value) if isinstance(value, tuple) else value
    return data


def from_json(data: Any, where: str = "schedule") -> Record:
    if not isinstance(data, dict) or "kind" not in data:
        raise ScheduleError(f"{where}: a record must be an object with a 'kind', not {data!r}")
    cls = RECORD_TYPES.get(data["kind"])
    if cls is None:
        raise ScheduleError(f"{where}: unknown record kind {data['kind']!r}; known: "
                            f"{', '.join(RECORD_TYPES)}")
    names = {f.name: f for f in dataclasses.fields(cls)}
    fields = {k: v for k, v in data.items() if k != "kind"}
    unknown = sorted(set(fields) - set(names))
    missing = sorted(n for n, f in names.items() if n not in fields
                     and f.default is dataclasses.MISSING)
    if unknown or missing:
        raise ScheduleError(f"{where}: {data['kind']} record has unknown fields {unknown or 'none'}"
                            f", missing {missing or 'none'}")
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
    return cls(**fields)  # type: ignore[no-any-return]
