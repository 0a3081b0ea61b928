"""Signatures shared between blocks: the AXI-like memory channels, SRAM ports, token ports.

Every member is flat (no nested interfaces) so that the top level can expose them by name.
"""

from __future__ import annotations

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

ADDR_BITS = 32
LEN_BITS = 8


def read_bus(bus_bits: int) -> wiring.Signature:
    """A read master: AR requests (byte address, beats - 1), R beats in request order."""
    return wiring.Signature({
        "ar_valid": Out(1), "ar_ready": In(1), "ar_addr": Out(ADDR_BITS), "ar_len": Out(LEN_BITS),
        "r_valid": In(1), "r_ready": Out(1), "r_data": In(bus_bits), "r_last": In(1),
    })


def write_bus(bus_bits: int) -> wiring.Signature:
    """A write master: AW requests, then the W beats of each burst in AW order (no B channel)."""
    return wiring.Signature({
        "aw_valid": Out(1), "aw_ready": In(1), "aw_addr": Out(ADDR_BITS), "aw_len": Out(LEN_BITS),
        "w_valid": Out(1), "w_ready": In(1), "w_data": Out(bus_bits),
        "w_strb": Out(bus_bits // 8), "w_last": Out(1),
    })


def sram_write(addr_bits: int, data_bits: int) -> wiring.Signature:
    """An SRAM write port, driven by the writer: `en` writes `data` at `addr` at the clock edge."""
    return wiring.Signature({"en": Out(1), "addr": Out(addr_bits), "data": Out(data_bits)})


def sram_read(addr_bits: int, data_bits: int) -> wiring.Signature:
    """A synchronous SRAM read port, driven by the reader: `data` is mem[addr] one cycle later."""
    return wiring.Signature({"addr": Out(addr_bits), "data": In(data_bits)})


def token_pop() -> wiring.Signature:
    """Consumer side of a dependency-token counter: `avail` while count > 0; `pop` decrements."""
    return wiring.Signature({"avail": In(1), "pop": Out(1)})


def token_push() -> wiring.Signature:
    """Producer side of a dependency-token counter: `room` while not full; `push` increments."""
    return wiring.Signature({"room": In(1), "push": Out(1)})
