"""`AcceleratorConfig`: the single source of truth for sizes and widths.

Every other layer (ISA field widths, simulators' buffers, RTL elaboration, area) derives what it
needs from one frozen, validated `AcceleratorConfig`, through the properties below.  Variants are
made with `dataclasses.replace` on a preset from `PRESETS`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hw import isa
from hw.errors import WorkbenchError

# AXI forbids a burst to cross a 4 KiB address boundary (AMBA AXI, A3.4.1): every DMA cuts its
# bursts there, and the DRAM models of the simulators check it.
BURST_BOUNDARY_BYTES = 4096


class ConfigError(WorkbenchError):
    """An `AcceleratorConfig` value breaks a rule; the message names field, value and rule."""


# Parameters that only shape the simulation (DRAM model) or the reporting (clock) are not part of
# the hardware: they are left out of the fingerprint so one Program runs under any memory model.
_SIM_ONLY = {"sim_only": True}
_COSMETIC = {"cosmetic": True}


@dataclass(frozen=True)
class AcceleratorConfig:
    """Parameters of one accelerator instance (ARCHITECTURE.md, section 3)."""

    name: str = field(default="custom", metadata=_COSMETIC)
    # GEMM core: batch x block_in x block_out int MACs per cycle.
    batch: int = 1
    block_in: int = 16
    block_out: int = 16
    inp_bits: int = 8
    wgt_bits: int = 8
    acc_bits: int = 32
    # Scratchpads, in bytes (the out buffer is derived from acc).
    uop_bytes: int = 32 * 1024
    inp_bytes: int = 32 * 1024
    wgt_bytes: int = 256 * 1024
    acc_bytes: int = 128 * 1024
    # Queues.
    cmd_queue_depth: int = 512
    token_counter_bits: int = 8
    # Memory system.
    bus_bits: int = 64
    max_burst_beats: int = 16
    mem_inflight: int = 8
    # DRAM model used by the simulators (not hardware).
    dram_latency_cycles: int = field(default=64, metadata=_SIM_ONLY)
    dram_bytes_per_cycle: int = field(default=8, metadata=_SIM_ONLY)
    clock_mhz: float = field(default=100.0, metadata=_SIM_ONLY)

    def __post_init__(self) -> None:
        _validate(self)

    # -- GEMM core -------------------------------------------------------------------------
    @functools.cached_property
    def out_bits(self) -> int:
        """The out buffer (and STORE) holds the low `inp_bits` of each accumulator."""
        return self.inp_bits

    @functools.cached_property
    def macs_per_cycle(self) -> int:
        return self.batch * self.block_in * self.block_out

    # -- one element (tile) of each buffer ---------------------------------------------------
    @functools.cached_property
    def inp_elem_bits(self) -> int:
        return self.batch * self.block_in * self.inp_bits

    @functools.cached_property
    def wgt_elem_bits(self) -> int:
        return self.block_out * self.block_in * self.wgt_bits

    @functools.cached_property
    def acc_elem_bits(self) -> int:
        return self.batch * self.block_out * self.acc_bits

    @functools.cached_property
    def out_elem_bits(self) -> int:
        return self.batch * self.block_out * self.out_bits

    @functools.cached_property
    def uop_elem_bits(self) -> int:
        """32 bits as in VTA; 64 when the three index fields need more than 32."""
        return 32 if self.uop_fields_bits <= 32 else 64

    @functools.cached_property
    def uop_fields_bits(self) -> int:
        return self.acc_index_bits + self.uop_src_bits + self.wgt_index_bits

    @functools.cached_property
    def inp_elem_bytes(self) -> int:
        return self.inp_elem_bits // 8

    @functools.cached_property
    def wgt_elem_bytes(self) -> int:
        return self.wgt_elem_bits // 8

    @functools.cached_property
    def acc_elem_bytes(self) -> int:
        return self.acc_elem_bits // 8

    @functools.cached_property
    def out_elem_bytes(self) -> int:
        return self.out_elem_bits // 8

    @functools.cached_property
    def uop_elem_bytes(self) -> int:
        return self.uop_elem_bits // 8

    @functools.cached_property
    def acc_8bit_elem_bytes(self) -> int:
        """A LOAD ACC_8BIT element: one acc tile of `inp_bits` lanes (each sign-extended into
        acc), so it is as large as an out element."""
        return self.batch * self.block_out * self.inp_bits // 8

    # -- depths and index widths ------------------------------------------------------------
    @functools.cached_property
    def inp_depth(self) -> int:
        return self.inp_bytes // self.inp_elem_bytes

    @functools.cached_property
    def wgt_depth(self) -> int:
        return self.wgt_bytes // self.wgt_elem_bytes

    @functools.cached_property
    def acc_depth(self) -> int:
        return self.acc_bytes // self.acc_elem_bytes

    @functools.cached_property
    def out_depth(self) -> int:
        return self.acc_depth

    @functools.cached_property
    def acc_8bit_depth(self) -> int:
        """LOAD ACC_8BIT writes the acc buffer."""
        return self.acc_depth

    @functools.cached_property
    def out_bytes(self) -> int:
        return self.out_depth * self.out_elem_bytes

    @functools.cached_property
    def uop_depth(self) -> int:
        return self.uop_bytes // self.uop_elem_bytes

    @functools.cached_property
    def inp_index_bits(self) -> int:
        return _log2(self.inp_depth)

    @functools.cached_property
    def wgt_index_bits(self) -> int:
        return _log2(self.wgt_depth)

    @functools.cached_property
    def acc_index_bits(self) -> int:
        return _log2(self.acc_depth)

    @functools.cached_property
    def uop_index_bits(self) -> int:
        return _log2(self.uop_depth)

    @functools.cached_property
    def uop_src_bits(self) -> int:
        """A micro-op's src indexes inp (GEMM) or acc (ALU)."""
        return max(self.acc_index_bits, self.inp_index_bits)

    # -- memory system ------------------------------------------------------------------------
    @functools.cached_property
    def bus_bytes(self) -> int:
        return self.bus_bits // 8

    @functools.cached_property
    def burst_boundary_words(self) -> int:
        """Bus words between two `BURST_BOUNDARY_BYTES` boundaries: no burst crosses one."""
        return BURST_BOUNDARY_BYTES // self.bus_bytes

    def elem_bytes(self, memory_type: isa.MemType) -> int:
        """Bytes of one element of `memory_type`; DRAM addresses are in these units."""
        return self._elem_bytes_by_type[memory_type]

    def depth(self, memory_type: isa.MemType) -> int:
        """Number of elements the SRAM of `memory_type` holds."""
        return self._depth_by_type[memory_type]

    @functools.cached_property
    def _elem_bytes_by_type(self) -> dict[isa.MemType, int]:
        return {m: getattr(self, f"{m.name.lower()}_elem_bytes") for m in isa.MemType}

    @functools.cached_property
    def _depth_by_type(self) -> dict[isa.MemType, int]:
        return {m: getattr(self, f"{m.name.lower()}_depth") for m in isa.MemType}

    @functools.cached_property
    def max_elem_bytes(self) -> int:
        return max(self.elem_bytes(m) for m in isa.MemType)

    # -- identity and persistence -----------------------------------------------------------
    def hardware_params(self) -> dict[str, Any]:
        """The parameters that define the hardware (and so the ISA and the RTL)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if not f.metadata}

    def fingerprint(self) -> str:
        """A stable hash of the hardware parameters, used as a cache key everywhere.

        The name, clock and DRAM model are excluded: they do not change the hardware, so a
        Program compiled for a config runs under any memory model.
        """
        return self._fingerprint

    @functools.cached_property
    def _fingerprint(self) -> str:  # a config is frozen: hashed once (simulators ask per run)
        canonical = json.dumps(self.hardware_params(), sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def derived(self) -> dict[str, Any]:
        """Every derived value, by name."""
        return {name: getattr(self, name) for name in _DERIVED}

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, where: str = "config") -> AcceleratorConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names - set(_READ_BACK))
        if unknown:
            raise ConfigError(f"{where}: unknown parameter(s) {', '.join(unknown)}")
        try:
            cfg = cls(**{k: v for k, v in data.items() if k in names})
        except TypeError as exc:  # a value of the wrong kind: for a file, bad input like any other
            raise ConfigError(f"{where}: {exc}") from None
        _check_derived(cfg, {k: v for k, v in data.items() if k not in names}, where)
        return cfg

    @classmethod
    def load(cls, path: str | Path) -> AcceleratorConfig:
        try:
            data = json.loads(Path(path).read_bytes())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: not valid JSON ({exc})") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a JSON object of parameters")
        return cls.from_dict(data, where=str(path))

    def with_params(self, **changes: Any) -> AcceleratorConfig:
        return dataclasses.replace(self, **changes)


_DERIVED = (
    "out_bits", "macs_per_cycle",
    "inp_elem_bytes", "wgt_elem_bytes", "acc_elem_bytes", "out_elem_bytes", "uop_elem_bytes",
    "acc_8bit_elem_bytes",
    "inp_depth", "wgt_depth", "acc_depth", "out_depth", "uop_depth", "out_bytes",
    "inp_index_bits", "wgt_index_bits", "acc_index_bits", "uop_index_bits",
    "uop_elem_bits", "bus_bytes",
)
_READ_BACK = (*_DERIVED, "fingerprint")   # what `codesign config show --json` adds to the parameters


def _check_derived(cfg: AcceleratorConfig, given: dict[str, Any], where: str) -> None:
    """Derived values in a file (as `codesign config show --json` prints them) must agree with the
    parameters; they are read back only to be checked, never to override."""
    for name, value in given.items():
        actual = cfg.fingerprint() if name == "fingerprint" else getattr(cfg, name)
        if value != actual:
            raise ConfigError(f"{where}: derived value {name}={value!r} disagrees with the parameters, "
                              f"which give {actual!r}; remove it or fix the parameters")


def _log2(value: int) -> int:
    return value.bit_length() - 1


def _is_pow2(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def _check_types(cfg: AcceleratorConfig) -> None:
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if f.name == "name":
            ok = isinstance(value, str)
        elif f.name == "clock_mhz":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            ok = isinstance(value, int) and not isinstance(value, bool)
        if not ok:
            raise TypeError(f"{f.name} must be {f.type}, not {type(value).__name__} {value!r}")


_POW2_FIELDS = ("batch", "block_in", "block_out", "uop_bytes", "inp_bytes", "wgt_bytes",
                "acc_bytes", "cmd_queue_depth", "bus_bits", "max_burst_beats")
_RANGES = {
    "inp_bits": (8, 16), "wgt_bits": (8, 16), "acc_bits": (16, 32),
    "bus_bits": (64, 512), "max_burst_beats": (1, 256), "mem_inflight": (1, 64),
    "token_counter_bits": (2, 16), "cmd_queue_depth": (2, 4096),
    "dram_latency_cycles": (1, 100_000), "dram_bytes_per_cycle": (1, 4096),
}


def _validate(cfg: AcceleratorConfig) -> None:
    _check_types(cfg)
    for name in _POW2_FIELDS:
        value = getattr(cfg, name)
        if not _is_pow2(value):
            raise ConfigError(f"{name} must be a power of two, not {value}")
    for name, (low, high) in _RANGES.items():
        value = getattr(cfg, name)
        if not low <= value <= high:
            raise ConfigError(f"{name} must be in [{low}, {high}], not {value}")
    for name in ("inp_bits", "wgt_bits", "acc_bits"):
        if getattr(cfg, name) not in (8, 16, 32):
            raise ConfigError(f"{name} must be 8, 16 or 32, not {getattr(cfg, name)}")
    if cfg.acc_bits < cfg.inp_bits + cfg.wgt_bits:
        raise ConfigError(
            f"acc_bits must be at least inp_bits + wgt_bits = {cfg.inp_bits + cfg.wgt_bits} "
            f"so one product fits, not {cfg.acc_bits}"
        )
    if not math.isfinite(cfg.clock_mhz):
        raise ConfigError(f"clock_mhz must be finite, not {cfg.clock_mhz}")
    if not cfg.clock_mhz > 0:
        raise ConfigError(f"clock_mhz must be positive, not {cfg.clock_mhz}")
    _validate_buffers(cfg)
    isa.check_layouts(cfg)


def _validate_buffers(cfg: AcceleratorConfig) -> None:
    for kind in ("inp", "wgt", "acc"):
        size, elem = getattr(cfg, f"{kind}_bytes"), getattr(cfg, f"{kind}_elem_bytes")
        if size < elem:
            raise ConfigError(
                f"{kind}_bytes={size} is too small to hold one {kind} tile of {elem} bytes"
            )
    if cfg.uop_fields_bits > 64:
        raise ConfigError(
            f"micro-op fields need {cfg.uop_fields_bits} bits (dst {cfg.acc_index_bits} + src "
            f"{cfg.uop_src_bits} + wgt {cfg.wgt_index_bits}), more than the 64-bit maximum"
        )
    if cfg.uop_bytes < cfg.uop_elem_bytes:
        raise ConfigError(
            f"uop_bytes={cfg.uop_bytes} is too small to hold one {cfg.uop_elem_bytes}-byte micro-op"
        )
    for kind in ("uop", "inp", "wgt", "acc"):
        depth = getattr(cfg, f"{kind}_depth")
        if depth > 1 << isa.SRAM_BASE_BITS:
            raise ConfigError(
                f"{kind}_bytes={getattr(cfg, f'{kind}_bytes')} gives {depth} elements, more than "
                f"the {isa.SRAM_BASE_BITS}-bit sram_base field of LOAD/STORE can address"
            )


PRESETS: dict[str, AcceleratorConfig] = {
    # The published VTA default (1x16x16, i8/w8/a32, 32/32/256/128 KiB) on a Zynq-class memory.
    "vta": AcceleratorConfig(name="vta"),
    # Small and fast for tests: 1x4x4 with 256-deep buffers and a short DRAM latency.
    "tiny": AcceleratorConfig(
        name="tiny", batch=1, block_in=4, block_out=4,
        uop_bytes=1024, inp_bytes=1024, wgt_bytes=4096, acc_bytes=4096,
        cmd_queue_depth=16, bus_bits=64, max_burst_beats=8, mem_inflight=4,
        dram_latency_cycles=8, dram_bytes_per_cycle=8,
    ),
    # Non-square core on a 128-bit bus: batch 2, block_in 8, block_out 16.
    "rect": AcceleratorConfig(
        name="rect", batch=2, block_in=8, block_out=16,
        uop_bytes=4096, inp_bytes=8192, wgt_bytes=32768, acc_bytes=32768,
        cmd_queue_depth=64, bus_bits=128, max_burst_beats=16, mem_inflight=8,
        dram_latency_cycles=32, dram_bytes_per_cycle=16,
    ),
}


def preset(name: str) -> AcceleratorConfig:
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(
            f"unknown preset {name!r}; known presets: {', '.join(sorted(PRESETS))}"
        ) from None


def parse_override(text: str) -> tuple[str, Any]:
    """Parse one `key=value` override as given on the command line."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise ConfigError(f"override {text!r} must have the form key=value")
    names = {f.name: f for f in dataclasses.fields(AcceleratorConfig)}
    if key not in names:
        raise ConfigError(f"override {text!r}: unknown parameter {key!r}")
    if key == "name":
        return key, raw
    try:
        return key, float(raw) if key == "clock_mhz" else int(raw, 0)
    except ValueError:
        raise ConfigError(f"override {text!r}: {key} needs a number, not {raw!r}") from None


def resolve(spec: str | None, overrides: list[str] | None = None) -> AcceleratorConfig:
    """A config from a preset name or a JSON file path, with `key=value` overrides."""
    spec = spec or "vta"
    if spec in PRESETS:
        cfg = PRESETS[spec]
    elif Path(spec).is_file():
        cfg = AcceleratorConfig.load(spec)
    else:
        raise ConfigError(
            f"{spec!r} is neither a preset ({', '.join(sorted(PRESETS))}) nor a config file"
        )
    changes = dict(parse_override(item) for item in overrides or [])
    return dataclasses.replace(cfg, **changes) if changes else cfg
