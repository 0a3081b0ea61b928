"""`Program`: the artifact that runs on the accelerator, and `ProgramBuilder` to write one.

A Program holds the encoded instruction stream, the micro-op table and a DRAM layout of named
regions (offset, shape, dtype, role), plus the fingerprint of the config it was built for.  It is
immutable and saves to one `.npz` file.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hw import isa
from hw.config import BURST_BOUNDARY_BYTES, AcceleratorConfig
from hw.errors import WorkbenchError
from hw.npz import read_npz

FORMAT_VERSION = 1
MAX_DRAM_BYTES = 1 << 32  # what a 32-bit DRAM address reaches
ROLES = ("input", "output", "constant", "scratch", "insns", "uops")


class ProgramError(WorkbenchError):
    """A Program is malformed, or used with the wrong config or wrong data."""


@dataclass(frozen=True)
class Region:
    """A named byte range of DRAM holding one array."""

    name: str
    offset: int
    shape: tuple[int, ...]
    dtype: str
    role: str

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "offset": self.offset, "shape": list(self.shape),
                "dtype": self.dtype, "role": self.role}

    def view(self, dram: np.ndarray) -> np.ndarray:
        """The region's array inside `dram` (a uint8 DRAM image), not a copy."""
        return dram[self.offset : self.offset + self.nbytes].view(np.dtype(self.dtype)).reshape(self.shape)

    def write(self, dram: np.ndarray, data: np.ndarray) -> None:
        """`data` stored in the region of `dram`; its size and dtype must be the region's."""
        array = np.asarray(data)
        if array.size * array.itemsize != self.nbytes or array.dtype != np.dtype(self.dtype):
            raise ProgramError(f"region {self.name!r} holds {self.shape} {self.dtype}, not "
                               f"{array.shape} {array.dtype}")
        dram[self.offset : self.offset + self.nbytes] = np.ascontiguousarray(array).view(np.uint8).reshape(-1)


@dataclass(frozen=True, eq=False)
class Program:
    fingerprint: str
    insns: np.ndarray  # (N, 2) uint64
    regions: tuple[Region, ...]
    constants: Mapping[str, np.ndarray] = field(default_factory=dict)
    dram_bytes: int = 0
    config_name: str = ""

    def __post_init__(self) -> None:
        self.insns.setflags(write=False)
        for array in self.constants.values():
            array.setflags(write=False)

    def region(self, name: str) -> Region:
        for r in self.regions:
            if r.name == name:
                return r
        raise ProgramError(f"program has no region {name!r}; it has {self._names()}")

    def _names(self) -> str:
        return ", ".join(r.name for r in self.regions)

    def regions_with_role(self, role: str) -> list[Region]:
        return [r for r in self.regions if r.role == role]

    @property
    def insn_region(self) -> Region:
        return self.regions_with_role("insns")[0]

    def decoded(self, cfg: AcceleratorConfig) -> list[isa.Insn]:
        return isa.decode(self.insns, cfg)

    def check_config(self, cfg: AcceleratorConfig) -> None:
        if cfg.fingerprint() != self.fingerprint:
            raise ProgramError(
                f"program was built for config {self.config_name or '?'} (fingerprint "
                f"{self.fingerprint}), not for {cfg.name} (fingerprint {cfg.fingerprint()})"
            )

    # -- DRAM images ---------------------------------------------------------------------------
    def initial_dram(self, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        """The DRAM image before a run: instructions, micro-ops, constants and `inputs`."""
        self._check_inputs(inputs)
        dram = np.zeros(self.dram_bytes, dtype=np.uint8)
        self.write_dram(dram, inputs)
        return dram

    def write_dram(self, dram: np.ndarray, inputs: Mapping[str, np.ndarray]) -> None:
        """The instructions, micro-ops and constants, and those input regions that `inputs`
        names, written into `dram` at the regions' offsets; the other bytes stay as they are."""
        for r in self.regions:
            data = self.constants.get(r.name)
            if r.role == "insns":
                data = self.insns
            elif r.role == "input":
                data = inputs.get(r.name, data)
            if data is not None:
                r.write(dram, data)

    def _check_inputs(self, inputs: Mapping[str, np.ndarray]) -> None:
        expected = {r.name: r for r in self.regions_with_role("input")}
        missing = sorted(set(expected) - set(inputs))
        unknown = sorted(set(inputs) - set(expected))
        if missing or unknown:
            raise ProgramError(
                f"inputs do not match the program: missing {missing or 'none'}, "
                f"unknown {unknown or 'none'} (expected {sorted(expected)})"
            )
        for name, r in expected.items():
            array = np.asarray(inputs[name])
            if array.shape != r.shape:
                raise ProgramError(f"input {name!r} has shape {array.shape}, expected {r.shape}")
            if array.dtype != np.dtype(r.dtype):
                raise ProgramError(f"input {name!r} has dtype {array.dtype}, expected {r.dtype}")

    def read_outputs(self, dram: np.ndarray) -> dict[str, np.ndarray]:
        return {r.name: self.read_region(dram, r.name) for r in self.regions_with_role("output")}

    def read_region(self, dram: np.ndarray, name: str) -> np.ndarray:
        return self.region(name).view(dram).copy()

    # -- persistence ---------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        meta = {
            "format_version": FORMAT_VERSION, "fingerprint": self.fingerprint,
            "config_name": self.config_name, "dram_bytes": self.dram_bytes,
            "regions": [r.to_json() for r in self.regions],
        }
        arrays = {f"const__{k}": v for k, v in self.constants.items()}
        with open(path, "wb") as fh:
            np.savez(fh, meta=np.array(json.dumps(meta)), insns=self.insns, **arrays)  # type: ignore[arg-type]

    @classmethod
    def load(cls, path: str | Path) -> Program:
        """The Program saved at `path`; ProgramError for anything that is not one (no pickles,
        sizes bounded: hw.npz), or whose metadata does not describe its arrays."""
        data = read_npz(path, error=ProgramError, what="a program file")
        try:
            meta = json.loads(str(data.pop("meta")))
            insns = np.array(data.pop("insns"), dtype=np.uint64)
        except (KeyError, ValueError, TypeError) as exc:
            raise ProgramError(f"{path}: not a program file ({exc})") from None
        if not isinstance(meta, dict) or meta.get("format_version") != FORMAT_VERSION:
            version = meta.get("format_version") if isinstance(meta, dict) else None
            raise ProgramError(
                f"{path}: program format version {version}, "
                f"this workbench reads version {FORMAT_VERSION}"
            )
        constants = {k.removeprefix("const__"): v for k, v in data.items() if k.startswith("const__")}
        try:
            program = cls(str(meta["fingerprint"]), insns, _regions(meta["regions"]), constants,
                          _dram_bytes(meta["dram_bytes"]), str(meta.get("config_name", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise ProgramError(f"{path}: malformed program metadata ({type(exc).__name__}: {exc})") from None
        _check_layout(program, path)
        return program


_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64")


def _regions(raw: Any) -> tuple[Region, ...]:
    regions = []
    for r in raw:
        shape = tuple(int(s) for s in r["shape"])
        if r["dtype"] not in _DTYPES or r["role"] not in ROLES or min(shape, default=0) < 0 or \
                int(r["offset"]) < 0:
            raise ValueError(f"region {r.get('name')!r} has dtype {r['dtype']!r}, role "
                             f"{r['role']!r}, offset {r['offset']}, shape {list(shape)}")
        regions.append(Region(str(r["name"]), int(r["offset"]), shape, r["dtype"], r["role"]))
    return tuple(regions)


def _dram_bytes(raw: Any) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= MAX_DRAM_BYTES:
        raise ValueError(f"dram_bytes {raw!r} is not an int in [0, {MAX_DRAM_BYTES}] (a 32-bit "
                         "DRAM address reaches 4 GiB)")
    return raw


def _check_layout(program: Program, path: str | Path) -> None:
    """Regions inside the DRAM image, one instruction region holding the (N, 2) words, each
    constant of its region's shape and dtype."""
    for r in program.regions:
        if r.offset + r.nbytes > program.dram_bytes:
            raise ProgramError(f"{path}: region {r.name!r} (bytes {r.offset}..{r.offset + r.nbytes - 1}) "
                               f"is outside the {program.dram_bytes}-byte DRAM image")
        data = program.constants.get(r.name)
        if data is not None and (data.shape != r.shape or data.dtype != np.dtype(r.dtype)):
            raise ProgramError(f"{path}: constant {r.name!r} is {data.dtype}{list(data.shape)}, its "
                               f"region {r.dtype}{list(r.shape)}")
    insns = program.regions_with_role("insns")
    if len(insns) != 1 or program.insns.ndim != 2 or program.insns.shape[1:] != (2,) or \
            insns[0].shape != program.insns.shape:
        raise ProgramError(f"{path}: the instructions ({list(program.insns.shape)}) do not match one "
                           "instruction region of shape [N, 2]")


# -- building -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class UopSpan:
    """A run of micro-ops in the program's micro-op table (DRAM), in uop elements."""

    begin: int
    count: int


@dataclass(frozen=True)
class _PendingUopLoad:
    span: UopSpan
    sram_base: int
    flags: dict[str, bool]


# where every region starts (see ProgramBuilder); the arena places regions on the same pages
REGION_ALIGN_BYTES = BURST_BOUNDARY_BYTES


class ProgramBuilder:
    """Write instruction streams by hand: loads, stores, GEMM/ALU, token push/pop, FINISH.

    Data regions are laid out as they are declared; the micro-op table and the instruction
    stream follow them, placed at `build()`.  Every region starts on a 4 KiB page
    (`REGION_ALIGN_BYTES`), a multiple of every element size, so any memory type can address it,
    and at the same offset within its page wherever the runtime's arena moves it: bursts, which
    end at page boundaries, are then the same in a step's own image and in the whole model's, so
    a layer measured alone takes exactly the cycles it takes in the model.
    """

    def __init__(self, cfg: AcceleratorConfig) -> None:
        self.cfg = cfg
        self._regions: list[Region] = []
        self._constants: dict[str, np.ndarray] = {}
        self._uops: list[isa.Uop] = []
        self._items: list[isa.Insn | _PendingUopLoad] = []
        self._align = REGION_ALIGN_BYTES
        self._next = 0

    # -- regions ------------------------------------------------------------------------------
    def _alloc(self, name: str, shape: tuple[int, ...], dtype: Any, role: str) -> Region:
        if role not in ROLES:
            raise ProgramError(f"region {name!r}: role must be one of {ROLES}, not {role!r}")
        if any(r.name == name for r in self._regions):
            raise ProgramError(f"region {name!r} is declared twice")
        offset = -(-self._next // self._align) * self._align
        region = Region(name, offset, tuple(int(s) for s in shape), np.dtype(dtype).name, role)
        self._regions.append(region)
        self._next = offset + region.nbytes
        return region

    def region(self, name: str, shape: tuple[int, ...], dtype: Any, role: str) -> Region:
        """Declare an input, output or scratch region."""
        return self._alloc(name, shape, dtype, role)

    def constant(self, name: str, data: np.ndarray) -> Region:
        data = np.ascontiguousarray(data)
        region = self._alloc(name, data.shape, data.dtype, "constant")
        self._constants[name] = data
        return region

    def dram_base(self, region: Region, memory_type: isa.MemType, elem_offset: int = 0) -> int:
        """DRAM address of `region` (plus `elem_offset`) in elements of `memory_type`."""
        return region.offset // self.cfg.elem_bytes(memory_type) + elem_offset

    # -- micro-ops ----------------------------------------------------------------------------
    def uops(self, uops: list[isa.Uop]) -> UopSpan:
        span = UopSpan(len(self._uops), len(uops))
        self._uops.extend(uops)
        return span

    @property
    def uop_count(self) -> int:
        return len(self._uops)

    def load_uops(self, span: UopSpan, sram_base: int = 0, **flags: Any) -> None:
        self._items.append(_PendingUopLoad(span, sram_base, flags))

    # -- instructions -------------------------------------------------------------------------
    def emit(self, insn: isa.Insn) -> None:
        self._items.append(insn)

    def load(self, memory_type: isa.MemType, region: Region, sram_base: int, *,
             y_size: int, x_size: int, x_stride: int | None = None, elem_offset: int = 0,
             pads: tuple[int, int, int, int] = (0, 0, 0, 0), **flags: Any) -> None:
        """2-D strided load of `region` into `memory_type`'s SRAM; pads = (y0, y1, x0, x1)."""
        y0, y1, x0, x1 = pads
        self.emit(isa.Load(
            memory_type=memory_type, sram_base=sram_base,
            dram_base=self.dram_base(region, memory_type, elem_offset),
            y_size=y_size, x_size=x_size, x_stride=x_size if x_stride is None else x_stride,
            y_pad_0=y0, y_pad_1=y1, x_pad_0=x0, x_pad_1=x1, **flags,
        ))

    def store(self, region: Region, sram_base: int, *, y_size: int, x_size: int,
              x_stride: int | None = None, elem_offset: int = 0, **flags: Any) -> None:
        self.emit(isa.Store(
            sram_base=sram_base, dram_base=self.dram_base(region, isa.MemType.OUT, elem_offset),
            y_size=y_size, x_size=x_size, x_stride=x_size if x_stride is None else x_stride,
            **flags,
        ))

    def gemm(self, **fields: Any) -> None:
        self.emit(isa.Gemm(**fields))

    def alu(self, **fields: Any) -> None:
        self.emit(isa.Alu(**fields))

    def nop(self, module: isa.Module, **flags: Any) -> None:
        """A no-op on `module` that only pops/pushes tokens (VTA's sync instructions)."""
        if module == isa.Module.STORE:
            self.emit(isa.Store(x_size=0, y_size=0, x_stride=0, **flags))
        else:
            memory_type = isa.MemType.INP if module == isa.Module.LOAD else isa.MemType.UOP
            self.emit(isa.Load(memory_type=memory_type, x_size=0, y_size=0, x_stride=0, **flags))

    def finish(self, **flags: Any) -> None:
        self.emit(isa.Finish(**flags))

    def copy_for(self, cfg: AcceleratorConfig) -> ProgramBuilder:
        """A copy of what was written so far, to build for `cfg`: a config whose element sizes
        equal this one's (DRAM addresses are in elements), differing in the scratchpad depths
        or the memory system, so only the encoding of the instructions differs."""
        if any(cfg.elem_bytes(m) != self.cfg.elem_bytes(m) for m in isa.MemType):
            raise ProgramError(f"a program written for {self.cfg.name} cannot be built for {cfg.name}: "
                               "their element sizes differ")
        copy = ProgramBuilder(cfg)
        copy._regions, copy._constants = list(self._regions), dict(self._constants)
        copy._uops, copy._items, copy._next = list(self._uops), list(self._items), self._next
        return copy

    # -- result ---------------------------------------------------------------------------------
    def build(self, *, check_tokens: bool = True) -> Program:
        uop_region = None
        if self._uops:
            uop_words = isa.encode_uops(self._uops, self.cfg)
            uop_region = self._alloc("__uops", uop_words.shape, uop_words.dtype, "uops")
            self._constants["__uops"] = uop_words
        insns = [self._resolve(item, uop_region) for item in self._items]
        if check_tokens:
            verify_tokens(insns, (1 << self.cfg.token_counter_bits) - 1)
        words = isa.encode(insns, self.cfg)
        self._alloc("__insns", words.shape, np.uint64, "insns")
        dram_bytes = -(-self._next // 4096) * 4096
        program = Program(self.cfg.fingerprint(), words, tuple(self._regions),
                          dict(self._constants), dram_bytes, self.cfg.name)
        if check_tokens:
            _TOKENS_VERIFIED[program] = (1 << self.cfg.token_counter_bits) - 1
        return program

    def _resolve(self, item: isa.Insn | _PendingUopLoad, uop_region: Region | None) -> isa.Insn:
        if not isinstance(item, _PendingUopLoad):
            return item
        assert uop_region is not None
        return isa.Load(
            memory_type=isa.MemType.UOP, sram_base=item.sram_base,
            dram_base=self.dram_base(uop_region, isa.MemType.UOP, item.span.begin),
            y_size=1, x_size=item.span.count, x_stride=item.span.count, **item.flags,
        )


# Programs this process built with their tokens verified, and the counter capacity they were
# verified for: a simulator's pre-flight check (sim/validate.py) need not verify them again.  A
# Program read from a file, or made any other way, is not in it.
_TOKENS_VERIFIED: weakref.WeakKeyDictionary[Program, int] = weakref.WeakKeyDictionary()


def tokens_verified(program: Program, capacity: int) -> bool:
    """Whether `program` was built here with `verify_tokens` passed for this counter capacity."""
    return _TOKENS_VERIFIED.get(program) == capacity


def verify_tokens(insns: list[isa.Insn], capacity: int | None = None) -> None:
    """Static token checks; raises ProgramError.

    Every token pushed is popped; the stream ends with FINISH; the dependencies (program order
    within a module, the k-th push of a queue before its k-th pop, and, with the counters'
    `capacity`, the k-th pop before the (k + capacity)-th push, which needs room) have no cycle,
    which would be a certain deadlock; and every load and store instruction is ordered before
    FINISH, which could otherwise retire while they still run.
    """
    if not insns or not isinstance(insns[-1], isa.Finish):
        raise ProgramError("program does not end with FINISH")
    signatures = []
    by_id: dict[int, Signature] = {}  # instruction objects repeat in long programs
    for index, insn in enumerate(insns):
        signature = by_id.get(id(insn))
        if signature is None:
            try:
                signature = by_id[id(insn)] = token_signature(insn)
            except isa.EncodingError as exc:
                raise ProgramError(f"instruction {index}: {exc}") from None
        signatures.append(signature)
    verify_signatures(signatures, capacity, lambda i: isa.format_insn(insns[i]))


def verify_signatures(signatures: list[Signature], capacity: int | None,
                      describe: Callable[[int], str]) -> None:
    """`verify_tokens` after its first two checks (FINISH last, legal token flags), on the
    instructions' `token_signature`s; `describe(index)` formats an instruction for a message
    (callers that hold the encoded words need not decode every instruction)."""
    pushers: list[list[int]] = [[] for _ in range(len(isa.Queue))]
    poppers: list[list[int]] = [[] for _ in range(len(isa.Queue))]
    for index, (_, pops, pushes) in enumerate(signatures):
        for q in pops:
            poppers[q].append(index)
        for q in pushes:
            pushers[q].append(index)
    for q in isa.Queue:
        if len(pushers[q]) != len(poppers[q]):
            raise ProgramError(
                f"token imbalance on queue {_queue_name(q)}: {len(pushers[q])} pushed, "
                f"{len(poppers[q])} popped"
            )
    _check_order(describe, signatures, pushers, poppers, capacity)


Signature = tuple[isa.Module, list[isa.Queue], list[isa.Queue]]
_SIGNATURES: dict[tuple[Any, ...], Signature] = {}


def token_signature(insn: isa.Insn) -> Signature:
    """(module, queues popped, queues pushed) of `insn`, which depend only on its class, memory
    type and flags: cached by those (a program may hold 10^5 instructions).  Illegal flags raise
    EncodingError (`isa.token_queues`)."""
    key = (type(insn), getattr(insn, "memory_type", None), insn.pop_prev, insn.pop_next,
           insn.push_prev, insn.push_next)
    found = _SIGNATURES.get(key)
    if found is None:
        pops, pushes = isa.token_queues(insn)
        found = _SIGNATURES[key] = (isa.module_of(insn), pops, pushes)
    return found


def _check_order(describe: Callable[[int], str], signatures: list[Signature],
                 pushers: list[list[int]], poppers: list[list[int]], capacity: int | None) -> None:
    """The happens-before graph: program order within a module, the k-th push of a queue
    before its k-th pop and, with `capacity`, the k-th pop before the (k + capacity)-th push.
    Each queue has one pushing and one popping module, so the graph is three chains and the
    cycle check is the token counters run forward (a node runs once everything before it has);
    the nodes that never run are those a cycle blocks, whatever the order of the run."""
    chains: list[list[int]] = [[] for _ in range(len(isa.Module))]
    for index, (module, _, _) in enumerate(signatures):
        chains[module].append(index)
    stuck = _blocked(signatures, chains, capacity)
    if stuck:
        names = ", ".join(f"#{i} {describe(i)}" for i in stuck[:3])
        room = "" if capacity is None else f", counting the token counters' room of {capacity}"
        raise ProgramError(f"token dependencies form a cycle (a certain deadlock{room}) through {names}")
    for module in (isa.Module.LOAD, isa.Module.STORE):
        if chains[module] and not _reaches_compute(chains[module][-1], signatures, pushers, poppers,
                                                   capacity):
            i = chains[module][-1]
            raise ProgramError(
                f"instruction #{i} {describe(i)} is not ordered before FINISH by "
                "dependency tokens: FINISH could retire while it still runs"
            )


def _blocked(signatures: list[Signature], chains: list[list[int]], capacity: int | None) -> list[int]:
    """The instructions that never run when each module runs its chain in order, a pop waiting
    for its push and a push for room in the counter (sorted)."""
    room = len(signatures) + 1 if capacity is None else capacity
    pushed, popped = [0] * len(isa.Queue), [0] * len(isa.Queue)
    done = [0] * len(chains)
    moved = True
    while moved:
        moved = False
        for m, chain in enumerate(chains):
            i = done[m]
            while i < len(chain) and _runs(signatures[chain[i]], pushed, popped, room):
                i += 1
            moved = moved or i > done[m]
            done[m] = i
    return sorted(n for m, chain in enumerate(chains) for n in chain[done[m]:])


def _runs(signature: Signature, pushed: list[int], popped: list[int], room: int) -> bool:
    """Whether an instruction can run on these counts (then it has: the counts move)."""
    _, pops, pushes = signature
    for q in pops:  # (loops, not any(): this runs per instruction of every program checked)
        if pushed[q] <= popped[q]:
            return False
    for q in pushes:
        if pushed[q] - popped[q] >= room:
            return False
    for q in pops:
        popped[q] += 1
    for q in pushes:
        pushed[q] += 1
    return True


def _reaches_compute(node: int, signatures: list[Signature], pushers: list[list[int]],
                     poppers: list[list[int]], capacity: int | None) -> bool:
    """Whether the last instruction of the load or store module has a happens-before edge to
    the compute module, whose chain ends at FINISH (those modules' only edges go there)."""
    _, pops, pushes = signatures[node]
    if pushes:  # balanced queues: its push has a pop
        return True
    return capacity is not None and any(
        poppers[q].index(node) + capacity < len(pushers[q]) for q in pops)


def _queue_name(q: isa.Queue) -> str:
    return q.name.lower().replace("_to_", "->")
