"""Verilog of the accelerator (`hw.rtl.top.Accelerator`, module `accel`), cached on disk.

The cache key is the config fingerprint plus a digest of the design's source files, so editing
the RTL invalidates the cached Verilog (and the Verilator builds keyed on it) while re-running
an unchanged design costs one hash of a few files.  The cache lives in `verilog/` under
`hw.cache.cache_root()` (`$CODESIGN_CACHE`, or `~/.cache/codesign` when that is unset).
"""

from __future__ import annotations

import hashlib
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hw.cache import cache_root, read_checked, write_checked
from hw.config import AcceleratorConfig

MODULE_NAME = "accel"


class ToolchainError(RuntimeError):
    """An external tool (Yosys, Verilator, the C++ compiler) is missing or failed."""

DesignFactory = Callable[[AcceleratorConfig], Any]


def default_design() -> DesignFactory:
    from hw.rtl.top import Accelerator

    return Accelerator  # type: ignore[no-any-return]


def design_digest(design: DesignFactory) -> str:
    """A hash of the source files `design` is built from (the whole package for hw.rtl) and of
    this module, which post-processes the Verilog."""
    import amaranth

    source = Path(inspect.getfile(design))
    module = getattr(design, "__module__", "")
    files = sorted(source.parent.rglob("*.py")) if module.startswith("hw.rtl") else [source]
    digest = hashlib.sha256(f"amaranth {amaranth.__version__}\n".encode())
    for path in [Path(__file__), *files]:  # this generator's post-processing, then the design
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def cache_key(cfg: AcceleratorConfig, design: DesignFactory | None = None) -> str:
    """`<fingerprint>-<design digest>`: one directory per hardware and design revision."""
    return f"{cfg.fingerprint()}-{design_digest(design or default_design())}"


# One all-zero memory word, as Amaranth emits for every SRAM word inside `initial begin`.
_ZERO_WORD = re.compile(r"\s*\\?[\w$.]+ *\[\d+\] = \d+'[hbd]0+;")


def generate(cfg: AcceleratorConfig, design: DesignFactory | None = None) -> str:
    """Elaborate `design(cfg)` and return its Verilog text (no cache).

    Amaranth writes a zero initial value for every word of every SRAM (about 17,000 lines on
    `vta`), which Verilator compiles into one huge function: the build took 7.5 minutes.  Those
    lines are dropped: memories start at zero anyway (Verilator's `--x-initial unique` with the
    default `+verilator+rand+reset+0`; FPGA block RAMs power up cleared).
    """
    from amaranth.back import verilog

    top = (design or default_design())(cfg)
    text: str = verilog.convert(top, name=MODULE_NAME, emit_src=False)
    return strip_zero_memory_init(text)


def strip_zero_memory_init(text: str) -> str:
    """Drop all-zero word assignments from `initial begin ... end` blocks, nothing else."""
    out, in_initial = [], False
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped == "initial begin":
            in_initial = True
        elif in_initial and stripped == "end":
            in_initial = False
        elif in_initial and _ZERO_WORD.fullmatch(line.rstrip("\n")):
            continue
        out.append(line)
    return "".join(out)


def verilog_for(cfg: AcceleratorConfig, design: DesignFactory | None = None) -> Path:
    """Path of `accel.v` for `cfg`, generating it on the first call for this config."""
    design = design or default_design()
    directory = cache_root() / "verilog" / cache_key(cfg, design)
    path = directory / f"{MODULE_NAME}.v"
    if read_checked(path) is None:  # missing, damaged, or another config's
        text = generate(cfg, design)
        write_checked(path, text)
    return path
