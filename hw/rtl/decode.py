"""Amaranth struct layouts of the instruction and micro-op formats, built from `hw.isa.layouts`.

The bit positions come from the one ISA definition (`Layout.with_padding()`); nothing here
hand-writes an offset.
"""

from __future__ import annotations

from amaranth import Shape, signed, unsigned
from amaranth.lib import data

from hw import isa
from hw.config import AcceleratorConfig


def struct(layout: isa.Layout) -> data.StructLayout:
    """A StructLayout covering every bit of `layout`, signed fields (ALU imm) as signed."""
    fields: dict[str, Shape] = {}
    for name, width in layout.with_padding():
        is_signed = not name.startswith("_pad") and layout[name].signed
        fields[name] = signed(width) if is_signed else unsigned(width)
    return data.StructLayout(fields)


def insn_struct(cfg: AcceleratorConfig, key: str) -> data.StructLayout:
    """The layout of instruction format `key` ('mem', 'gemm', 'alu') of `cfg`."""
    return struct(isa.layouts(cfg)[key])


def uop_struct(cfg: AcceleratorConfig) -> data.StructLayout:
    return struct(isa.layouts(cfg)["uop"])


def log2(value: int) -> int:
    """log2 of a power of two (every size in AcceleratorConfig is one)."""
    assert value > 0 and value & (value - 1) == 0, value
    return value.bit_length() - 1


def lanes(value: object, count: int, bits: int) -> list:
    """`count` slices of `bits` bits of an Amaranth value, lane 0 at the lowest bits."""
    return [value[i * bits : (i + 1) * bits] for i in range(count)]  # type: ignore[index]
