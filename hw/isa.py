"""The task ISA and micro-ops, with the bit layout defined once, as data.

Instructions are 128 bits, fields packed LSB-first with GCC bitfield rules as VTA's `hw_spec.h`:
a field never straddles bit 64.  Widths of SRAM-index fields derive from the config, so for the
`vta` preset every bit position equals VTA's.  The same `Layout` objects drive the encoder and
decoder here and the Amaranth decoder in the RTL.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, Union

import numpy as np

from hw.errors import WorkbenchError
from hw.memo import Memo

if TYPE_CHECKING:
    from hw.config import AcceleratorConfig

INSN_BITS = 128
WORD_BITS = 64
SRAM_BASE_BITS = 16
DRAM_BASE_BITS = 32
MEM_SIZE_BITS = 16
PAD_BITS = 4
LOOP_ITER_BITS = 14
ALU_IMM_BITS = 16


class EncodingError(WorkbenchError):
    """A value does not fit its instruction field, or a word does not decode."""


class Opcode(IntEnum):
    LOAD = 0
    STORE = 1
    GEMM = 2
    FINISH = 3
    ALU = 4


class MemType(IntEnum):
    UOP = 0
    WGT = 1
    INP = 2
    ACC = 3
    OUT = 4
    ACC_8BIT = 5  # LOAD only: inp_bits lanes sign-extended into acc (VTA's MEM_ID_ACC_8BIT)


class AluOp(IntEnum):
    MIN = 0
    MAX = 1
    ADD = 2
    SHR = 3  # a negative shift amount shifts left
    MUL = 4


class Module(IntEnum):
    """The three execution modules, in pipeline order."""

    LOAD = 0
    COMPUTE = 1
    STORE = 2


class Queue(IntEnum):
    """The four dependency-token queues (VTA's l2g, g2l, g2s, s2g)."""

    LOAD_TO_COMPUTE = 0
    COMPUTE_TO_LOAD = 1
    COMPUTE_TO_STORE = 2
    STORE_TO_COMPUTE = 3

    @property
    def short(self) -> str:
        return ("l2c", "c2l", "c2s", "s2c")[self]


# -- layout as data -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    name: str
    width: int
    offset: int
    signed: bool = False

    @property
    def low(self) -> int:
        return -(1 << (self.width - 1)) if self.signed else 0

    @property
    def high(self) -> int:
        return (1 << (self.width - 1)) - 1 if self.signed else (1 << self.width) - 1


@dataclass(frozen=True)
class Layout:
    """Named bit fields of one instruction format (or of the micro-op word)."""

    name: str
    fields: tuple[Field, ...]
    bits: int

    def __getitem__(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} has no field {name!r}")

    def with_padding(self) -> list[tuple[str, int]]:
        """(name, width) pairs covering every bit, gaps named `_pad<offset>`."""
        out: list[tuple[str, int]] = []
        pos = 0
        for f in self.fields:
            if f.offset > pos:
                out.append((f"_pad{pos}", f.offset - pos))
            out.append((f.name, f.width))
            pos = f.offset + f.width
        if pos < self.bits:
            out.append((f"_pad{pos}", self.bits - pos))
        return out


def pack(name: str, spec: list[tuple[str, int, bool]], *, bits: int, word_bits: int) -> Layout:
    """Lay fields out LSB-first; a field that would straddle a word boundary starts the next word.

    Raises EncodingError when the fields do not fit in `bits`.
    """
    fields = []
    pos = 0
    for fname, width, signed in spec:
        if pos // word_bits != (pos + width - 1) // word_bits:
            pos = (pos // word_bits + 1) * word_bits
        fields.append(Field(fname, width, pos, signed))
        pos += width
    if pos > bits:
        widths = ", ".join(f"{f.name}={f.width}" for f in fields)
        raise EncodingError(
            f"{name} fields need {pos} bits, more than {bits}, as no field may straddle a "
            f"{word_bits}-bit word ({widths})"
        )
    return Layout(name, tuple(fields), bits)


_HEADER = [("opcode", 3, False), ("pop_prev", 1, False), ("pop_next", 1, False),
           ("push_prev", 1, False), ("push_next", 1, False)]


def _mem_spec(cfg: AcceleratorConfig) -> list[tuple[str, int, bool]]:
    return _HEADER + [
        ("memory_type", 3, False), ("sram_base", SRAM_BASE_BITS, False),
        ("dram_base", DRAM_BASE_BITS, False), ("y_size", MEM_SIZE_BITS, False),
        ("x_size", MEM_SIZE_BITS, False), ("x_stride", MEM_SIZE_BITS, False),
        ("y_pad_0", PAD_BITS, False), ("y_pad_1", PAD_BITS, False),
        ("x_pad_0", PAD_BITS, False), ("x_pad_1", PAD_BITS, False),
    ]


def _loop_spec(cfg: AcceleratorConfig) -> list[tuple[str, int, bool]]:
    return _HEADER + [
        ("reset", 1, False), ("uop_bgn", cfg.uop_index_bits, False),
        ("uop_end", cfg.uop_index_bits + 1, False), ("iter_out", LOOP_ITER_BITS, False),
        ("iter_in", LOOP_ITER_BITS, False),
    ]


def _gemm_spec(cfg: AcceleratorConfig) -> list[tuple[str, int, bool]]:
    a, i, w = cfg.acc_index_bits, cfg.inp_index_bits, cfg.wgt_index_bits
    return _loop_spec(cfg) + [
        ("dst_factor_out", a, False), ("dst_factor_in", a, False),
        ("src_factor_out", i, False), ("src_factor_in", i, False),
        ("wgt_factor_out", w, False), ("wgt_factor_in", w, False),
    ]


def _alu_spec(cfg: AcceleratorConfig) -> list[tuple[str, int, bool]]:
    a = cfg.acc_index_bits
    return _loop_spec(cfg) + [
        ("dst_factor_out", a, False), ("dst_factor_in", a, False),
        ("src_factor_out", a, False), ("src_factor_in", a, False),
        ("alu_opcode", 3, False), ("use_imm", 1, False), ("imm", ALU_IMM_BITS, True),
    ]


def _uop_spec(cfg: AcceleratorConfig) -> list[tuple[str, int, bool]]:
    return [("dst", cfg.acc_index_bits, False), ("src", cfg.uop_src_bits, False),
            ("wgt", cfg.wgt_index_bits, False)]


@functools.lru_cache(maxsize=64)
def layouts(cfg: AcceleratorConfig) -> dict[str, Layout]:
    """The four layouts of `cfg`: 'mem' (LOAD/STORE), 'gemm' (GEMM/FINISH), 'alu', 'uop'."""
    return {
        "mem": pack("LOAD/STORE", _mem_spec(cfg), bits=INSN_BITS, word_bits=WORD_BITS),
        "gemm": pack("GEMM", _gemm_spec(cfg), bits=INSN_BITS, word_bits=WORD_BITS),
        "alu": pack("ALU", _alu_spec(cfg), bits=INSN_BITS, word_bits=WORD_BITS),
        "uop": pack("micro-op", _uop_spec(cfg), bits=cfg.uop_elem_bits, word_bits=64),
    }


def check_layouts(cfg: AcceleratorConfig) -> None:
    """Raise ConfigError when an instruction format of `cfg` overflows 128 bits."""
    from hw.config import ConfigError

    try:
        layouts(cfg)
    except EncodingError as exc:
        raise ConfigError(f"ISA field would overflow: {exc}") from None


# -- instructions as records ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Insn:
    pop_prev: bool = False
    pop_next: bool = False
    push_prev: bool = False
    push_next: bool = False

    opcode: ClassVar[Opcode]
    layout_key: ClassVar[str]


@dataclass(frozen=True)
class MemInsn(_Insn):
    memory_type: MemType = MemType.INP
    sram_base: int = 0
    dram_base: int = 0
    y_size: int = 1
    x_size: int = 1
    x_stride: int = 1
    y_pad_0: int = 0
    y_pad_1: int = 0
    x_pad_0: int = 0
    x_pad_1: int = 0

    layout_key: ClassVar[str] = "mem"

    @property
    def row_elems(self) -> int:
        return self.x_pad_0 + self.x_size + self.x_pad_1

    @property
    def sram_elems(self) -> int:
        """Elements written to (LOAD) or read from (STORE) SRAM, padding included."""
        return self.row_elems * (self.y_pad_0 + self.y_size + self.y_pad_1)


@dataclass(frozen=True)
class Load(MemInsn):
    opcode: ClassVar[Opcode] = Opcode.LOAD


@dataclass(frozen=True)
class Store(MemInsn):
    memory_type: MemType = MemType.OUT
    opcode: ClassVar[Opcode] = Opcode.STORE


@dataclass(frozen=True)
class _LoopInsn(_Insn):
    reset: bool = False
    uop_bgn: int = 0
    uop_end: int = 1
    iter_out: int = 1
    iter_in: int = 1
    dst_factor_out: int = 0
    dst_factor_in: int = 0
    src_factor_out: int = 0
    src_factor_in: int = 0

    @property
    def uop_iterations(self) -> int:
        return self.iter_out * self.iter_in * max(self.uop_end - self.uop_bgn, 0)


@dataclass(frozen=True)
class Gemm(_LoopInsn):
    wgt_factor_out: int = 0
    wgt_factor_in: int = 0

    opcode: ClassVar[Opcode] = Opcode.GEMM
    layout_key: ClassVar[str] = "gemm"


@dataclass(frozen=True)
class Alu(_LoopInsn):
    alu_opcode: AluOp = AluOp.ADD
    use_imm: bool = False
    imm: int = 0

    opcode: ClassVar[Opcode] = Opcode.ALU
    layout_key: ClassVar[str] = "alu"


@dataclass(frozen=True)
class Finish(_Insn):
    opcode: ClassVar[Opcode] = Opcode.FINISH
    layout_key: ClassVar[str] = "gemm"


Insn = Union[Load, Store, Gemm, Alu, Finish]
_InsnT = TypeVar("_InsnT", bound=_Insn)


def with_fields(insn: _InsnT, **changes: Any) -> _InsnT:
    """`dataclasses.replace(insn, **changes)` for instructions (which have no `__post_init__`),
    without its per-call field introspection; unknown names raise TypeError as replace does."""
    names = _FIELD_NAMES.get(type(insn))
    if names is None:
        return dataclasses.replace(insn, **changes)
    unknown = set(changes) - names
    if unknown:
        raise TypeError(f"{type(insn).__name__} has no field(s) {', '.join(sorted(unknown))}")
    new = object.__new__(type(insn))
    new.__dict__.update(insn.__dict__)
    new.__dict__.update(changes)
    return new


_BY_OPCODE: dict[int, type] = {c.opcode: c for c in (Load, Store, Gemm, Alu, Finish)}
_FIELD_NAMES: dict[type, frozenset[str]] = {
    c: frozenset(f.name for f in dataclasses.fields(c)) for c in _BY_OPCODE.values()}
_ENUM_FIELDS = {"memory_type": MemType, "alu_opcode": AluOp}
_BOOL_FIELDS = {"pop_prev", "pop_next", "push_prev", "push_next", "reset", "use_imm"}
_Converter = Union[dict[int, IntEnum], type[bool], None]
_CONVERTERS: dict[str, _Converter] = {
    **{name: {int(m): m for m in enum} for name, enum in _ENUM_FIELDS.items()},
    **dict.fromkeys(_BOOL_FIELDS, bool),
}


def module_of(insn: Insn) -> Module:
    """Fetch's routing rule: STORE to store; LOAD INP/WGT to load; everything else (LOAD
    UOP/ACC/ACC_8BIT, GEMM, ALU, FINISH) to compute."""
    cls = type(insn)
    if cls is Gemm or cls is Alu:  # the common case first: this runs per emitted instruction
        return Module.COMPUTE
    if isinstance(insn, Store):
        return Module.STORE
    if isinstance(insn, Load) and insn.memory_type in (MemType.INP, MemType.WGT):
        return Module.LOAD
    return Module.COMPUTE


_POPS = {  # module -> (queue popped by pop_prev, queue popped by pop_next)
    Module.LOAD: (None, Queue.COMPUTE_TO_LOAD),
    Module.COMPUTE: (Queue.LOAD_TO_COMPUTE, Queue.STORE_TO_COMPUTE),
    Module.STORE: (Queue.COMPUTE_TO_STORE, None),
}
_PUSHES = {  # module -> (queue pushed by push_prev, queue pushed by push_next)
    Module.LOAD: (None, Queue.LOAD_TO_COMPUTE),
    Module.COMPUTE: (Queue.COMPUTE_TO_LOAD, Queue.COMPUTE_TO_STORE),
    Module.STORE: (Queue.STORE_TO_COMPUTE, None),
}


def token_queues(insn: Insn) -> tuple[list[Queue], list[Queue]]:
    """(queues popped before, queues pushed after) `insn`; illegal flags raise EncodingError."""
    module = module_of(insn)
    pops: list[Queue] = []
    pushes: list[Queue] = []
    for flag, queue in zip(("pop_prev", "pop_next"), _POPS[module], strict=True):
        _collect(insn, module, flag, queue, pops)
    for flag, queue in zip(("push_prev", "push_next"), _PUSHES[module], strict=True):
        _collect(insn, module, flag, queue, pushes)
    return pops, pushes


def _collect(insn: Insn, module: Module, flag: str, queue: Queue | None, out: list[Queue]) -> None:
    if not getattr(insn, flag):
        return
    if queue is None:
        side = "before" if flag.endswith("prev") else "after"
        raise EncodingError(
            f"{insn.opcode.name} on the {module.name.lower()} module sets {flag}, but no module "
            f"comes {side} {module.name.lower()}"
        )
    out.append(queue)


# -- encoding and decoding -------------------------------------------------------------------------


def _field_values(insn: Insn) -> dict[str, int]:
    values = {f.name: int(getattr(insn, f.name)) for f in dataclasses.fields(insn)}
    values["opcode"] = int(insn.opcode)
    return values


def encode_insn(insn: Insn, cfg: AcceleratorConfig) -> int:
    """The 128-bit integer of `insn`; a value that does not fit raises EncodingError naming it."""
    layout = layouts(cfg)[insn.layout_key]
    values = _field_values(insn)
    word = 0
    for f in layout.fields:
        value = values.get(f.name, 0)
        if not f.low <= value <= f.high:
            raise EncodingError(
                f"{insn.opcode.name} field {f.name}={value} does not fit its {f.width}-bit field "
                f"(allowed {f.low}..{f.high})"
            )
        word |= (value & ((1 << f.width) - 1)) << f.offset
    return word


def decode_insn(word: int, cfg: AcceleratorConfig) -> Insn:
    """The instruction of the 128-bit `word`; an unknown opcode, memory type or ALU opcode, or a
    reserved bit set, raises EncodingError.  To decode many words, call `decoder(cfg)` once."""
    return decoder(cfg)(word)


_DECODED_MAX = 1 << 16  # words a decoder remembers (a model's Programs hold a few thousand)


@functools.lru_cache(maxsize=64)
def decoder(cfg: AcceleratorConfig) -> Callable[[int], Insn]:
    """`decode_insn` for one config: the per-opcode tables are looked up once, not per word (a
    model's first run decodes 10^4 words), and each word is decoded once per process (an
    instruction record is immutable: every caller shares it; a model's Programs repeat words)."""
    tables = {op: (cls, reserved_mask(cfg, op), _decoder(cfg, cls)) for op, cls in _BY_OPCODE.items()}
    decoded: Memo[int, Insn] = Memo(_DECODED_MAX)

    def remembered(word: int) -> Insn:
        insn = decoded.get(word)
        if insn is None:  # (an EncodingError is raised again on every call)
            insn = decoded.keep(word, fresh(word))
        return insn

    def fresh(word: int) -> Insn:
        opcode = word & 0b111
        table = tables.get(opcode)
        if table is None:
            raise EncodingError(f"unknown opcode {opcode} in instruction word {word:#034x}")
        cls, reserved_bits, fields = table
        reserved = word & reserved_bits
        if reserved:
            raise EncodingError(f"{Opcode(opcode).name} sets reserved bits {reserved:#034x} in "
                                f"instruction word {word:#034x}")
        values: dict[str, object] = {}
        for name, offset, mask, sign_bit, convert in fields:
            raw = (word >> offset) & mask
            if sign_bit and raw & sign_bit:
                raw -= sign_bit << 1
            if convert is None:
                values[name] = raw
            elif convert is bool:
                values[name] = raw != 0
            else:
                values[name] = _member(cls, name, raw, word, convert)  # type: ignore[arg-type]
        insn: Insn = object.__new__(cls)  # the fields as `cls(**values)` sets them, but faster
        insn.__dict__.update(values)
        return insn

    return remembered


@functools.lru_cache(maxsize=256)
def reserved_mask(cfg: AcceleratorConfig, opcode: int) -> int:
    """The bits of an instruction word of `opcode` that no field of its class holds: padding
    between fields, the unused tail, and (FINISH) every loop field; they must be 0."""
    cls: Any = _BY_OPCODE[opcode]
    names = {f.name for f in dataclasses.fields(cls)} | {"opcode"}
    held = 0
    for f in layouts(cfg)[cls.layout_key].fields:
        if f.name in names:
            held |= ((1 << f.width) - 1) << f.offset
    return ((1 << INSN_BITS) - 1) & ~held


@functools.lru_cache(maxsize=256)
def _decoder(cfg: AcceleratorConfig, cls: type[_Insn]) -> list[tuple[str, int, int, int, _Converter]]:
    """(name, offset, mask, sign bit or 0, converter) of each field of `cls` (in its order, as
    `cls(**fields)` would set them; every one is in the layout).  The converter is a dict from
    raw value to enum member, `bool`, or None (a plain int)."""
    layout = layouts(cfg)[cls.layout_key]
    return [(f.name, f.offset, (1 << f.width) - 1, (1 << (f.width - 1)) if f.signed else 0,
             _CONVERTERS.get(f.name)) for f in (layout[d.name] for d in dataclasses.fields(cls))]


def _member(cls: type, name: str, raw: int, word: int, members: dict[int, IntEnum]) -> IntEnum:
    member = members.get(raw)
    if member is None:
        raise EncodingError(f"{cls.__name__} has unknown {name} {raw} in instruction word {word:#034x}")
    return member


def encode(insns: list[Insn], cfg: AcceleratorConfig) -> np.ndarray:
    """Instructions as an (N, 2) uint64 array: [low word, high word] each, little-endian.

    The words are those of `encode_insn`, computed per instruction class with numpy (programs
    of 10^5 instructions are common during schedule search); a value out of range falls back to
    `encode_insn` in program order, so the error names the first bad instruction.
    """
    first: dict[int, Insn] = {}  # a program repeats instruction objects: encode each once
    for insn in insns:
        first.setdefault(id(insn), insn)
    distinct = list(first.values())
    out = np.zeros((len(distinct), 2), dtype=np.uint64)
    types = np.array([_CLASS_CODE.get(type(insn), -1) for insn in distinct], dtype=np.int8)
    if (types < 0).any():
        return _encode_scalar(insns, cfg)
    for cls, code in _CLASS_CODE.items():
        rows = np.flatnonzero(types == code)
        if rows.size and not _encode_class(cls, [distinct[i] for i in rows], cfg, out, rows):
            return _encode_scalar(insns, cfg)
    row_of = {key: row for row, key in enumerate(first)}
    return out[np.array([row_of[id(insn)] for insn in insns], dtype=np.int64).reshape(-1)]


_CLASS_CODE: dict[type[_Insn], int] = {Load: 0, Store: 1, Gemm: 2, Alu: 3, Finish: 4}


def _encode_class(cls: type[_Insn], insns: list[Insn], cfg: AcceleratorConfig, out: np.ndarray,
                  rows: np.ndarray) -> bool:
    """Encode `insns` (all of `cls`) into `out[rows]`; False when a value needs `encode_insn`
    (out of its field's range, or not a small integer)."""
    getter, fields = _encoder(cfg, cls)  # type: ignore[arg-type]  # (a class is hashable)
    try:
        values = np.array([getter(insn) for insn in insns], dtype=np.int64)
    except (OverflowError, TypeError, ValueError):
        return False
    values = values.reshape(len(insns), -1)
    words = [np.zeros(len(insns), dtype=np.uint64) for _ in range(INSN_BITS // WORD_BITS)]
    for column, f in fields:
        col = values[:, column] if column >= 0 else np.full(len(insns), int(cls.opcode), np.int64)
        if ((col < f.low) | (col > f.high)).any():
            return False
        word, shift = divmod(f.offset, WORD_BITS)
        words[word] |= (col & ((1 << f.width) - 1)).astype(np.uint64) << np.uint64(shift)
    out[rows, 0], out[rows, 1] = words
    return True


@functools.lru_cache(maxsize=256)
def _encoder(cfg: AcceleratorConfig, cls: type[_Insn]) -> tuple[Any, list[tuple[int, Field]]]:
    """A getter of the layout fields `cls` holds, and (getter column or -1 for the opcode,
    field) for each field that is not constant zero."""
    names = {f.name for f in dataclasses.fields(cls)}
    held = [f for f in layouts(cfg)[cls.layout_key].fields if f.name in names]
    fields = [(-1, layouts(cfg)[cls.layout_key]["opcode"])] + list(enumerate(held))
    return operator.attrgetter(*(f.name for f in held)), fields


def _encode_scalar(insns: list[Insn], cfg: AcceleratorConfig) -> np.ndarray:
    out = np.zeros((len(insns), 2), dtype=np.uint64)
    mask = (1 << WORD_BITS) - 1
    for i, insn in enumerate(insns):
        word = encode_insn(insn, cfg)
        out[i, 0], out[i, 1] = word & mask, word >> WORD_BITS
    return out


def decode(words: np.ndarray, cfg: AcceleratorConfig) -> list[Insn]:
    words = np.asarray(words, dtype=np.uint64).reshape(-1, 2)
    return [decode_insn(int(lo) | (int(hi) << WORD_BITS), cfg) for lo, hi in words]


@dataclass(frozen=True)
class Uop:
    """One micro-op: acc index `dst`, inp (GEMM) or acc (ALU) index `src`, wgt index `wgt`."""

    dst: int
    src: int = 0
    wgt: int = 0


def uop_dtype(cfg: AcceleratorConfig) -> type[np.unsignedinteger]:
    return np.uint32 if cfg.uop_elem_bits == 32 else np.uint64


def encode_uops(uops: list[Uop], cfg: AcceleratorConfig) -> np.ndarray:
    layout = layouts(cfg)["uop"]
    out = np.zeros(len(uops), dtype=np.uint64)
    for f in layout.fields:
        values = np.array([getattr(u, f.name) for u in uops], dtype=np.int64)
        bad = np.flatnonzero((values < f.low) | (values > f.high))
        if bad.size:
            raise EncodingError(
                f"micro-op {int(bad[0])} field {f.name}={int(values[bad[0]])} does not fit its "
                f"{f.width}-bit field (allowed {f.low}..{f.high})"
            )
        out |= values.astype(np.uint64) << np.uint64(f.offset)
    return out.astype(uop_dtype(cfg))


def decode_uops(words: np.ndarray, cfg: AcceleratorConfig) -> dict[str, np.ndarray]:
    """Field arrays ('dst', 'src', 'wgt') of encoded micro-ops, as int64."""
    layout = layouts(cfg)["uop"]
    words = np.asarray(words).astype(np.uint64)
    return {
        f.name: ((words >> np.uint64(f.offset)) & np.uint64((1 << f.width) - 1)).astype(np.int64)
        for f in layout.fields
    }


# -- printing -----------------------------------------------------------------------------------


def format_insn(insn: Insn) -> str:
    """One line, as VTA's DumpInsn: the operation, its operands and its token flags."""
    flags = " ".join(
        name for name in ("pop_prev", "pop_next", "push_prev", "push_next") if getattr(insn, name)
    )
    return f"{_body(insn)}{'  [' + flags + ']' if flags else ''}"


def _body(insn: Insn) -> str:
    if isinstance(insn, MemInsn):
        if insn.x_size == 0:
            return f"NOP-{module_of(insn).name}"
        pads = f"pad=({insn.y_pad_0},{insn.y_pad_1},{insn.x_pad_0},{insn.x_pad_1})"
        return (
            f"{insn.opcode.name} {insn.memory_type.name} sram={insn.sram_base} "
            f"dram={insn.dram_base} y={insn.y_size} x={insn.x_size} stride={insn.x_stride} {pads}"
        )
    if isinstance(insn, Finish):
        return "FINISH"
    loops = (
        f"uops=[{insn.uop_bgn},{insn.uop_end}) out={insn.iter_out}"
        f"(dst+{insn.dst_factor_out},src+{insn.src_factor_out}"
    )
    if isinstance(insn, Gemm):
        loops += f",wgt+{insn.wgt_factor_out}) in={insn.iter_in}(dst+{insn.dst_factor_in},"
        loops += f"src+{insn.src_factor_in},wgt+{insn.wgt_factor_in})"
        return f"GEMM{' reset' if insn.reset else ''} {loops}"
    loops += f") in={insn.iter_in}(dst+{insn.dst_factor_in},src+{insn.src_factor_in})"
    operand = f"imm={insn.imm}" if insn.use_imm else "tensor"
    return f"ALU {insn.alu_opcode.name} {operand} {loops}"
