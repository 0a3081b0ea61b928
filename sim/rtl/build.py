"""Verilator builds of `accel` + the C++ harness, cached on disk by config and design.

The key is the config fingerprint plus a hash of everything that goes into the shared library
(the Verilog text, harness.cpp, the flags and the Verilator version), so a second run of the
same config loads the cached library, in this process or another one.  Concurrent builders of
one key (pytest-xdist workers) serialize on a lock file; the finished directory appears with
one atomic rename (`hw.cache.CacheEntry`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from hw.cache import CacheEntry, cache_root
from hw.config import AcceleratorConfig
from hw.verilog import DesignFactory, ToolchainError, verilog_for
from sim.rtl.ports import check_ports

HARNESS = Path(__file__).with_name("harness.cpp")
LIBRARY_NAME = "libaccel.so"
# -Wno-WIDTH / -Wno-CASEINCOMPLETE: Amaranth's Verilog trips both, and Verilator 5.006 does not
# know the finer WIDTHEXPAND names.  All-O3 measured fastest (toolchain.md section 4).
VERILATOR_FLAGS = [
    "--cc", "--exe", "--build", "--prefix", "Vaccel", "--top-module", "accel",
    "-O3", "--x-assign", "fast", "--x-initial", "unique",
    "-Wno-fatal", "-Wno-WIDTH", "-Wno-CASEINCOMPLETE",
    "-MAKEFLAGS", "OPT_FAST=-O3", "-MAKEFLAGS", "OPT_SLOW=-O3", "-MAKEFLAGS", "OPT_GLOBAL=-O3",
    "-LDFLAGS", "-shared",
]
INSTALL_HINT = "install it with `apt-get install -y verilator` (Debian's 5.006 is tested)"


class BuildError(ToolchainError):
    """Verilator is missing, or it (or the C++ compiler) failed on the design."""


@functools.cache
def verilator_version() -> str:
    path = shutil.which("verilator")
    if path is None:
        raise BuildError(f"verilator not found on PATH; {INSTALL_HINT}")
    result = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
    return result.stdout.strip() or result.stderr.strip()


def library_for(cfg: AcceleratorConfig, design: DesignFactory | None = None) -> Path:
    """Path of the harness library for `cfg`, building it on the first call for this key."""
    verilator_version()  # fail early, before elaborating, when Verilator is missing
    text = verilog_for(cfg, design).read_text()
    entry = CacheEntry(cache_root() / "rtl" / _key(cfg, text), LIBRARY_NAME)
    if not entry.is_complete():
        check_ports(text, cfg)  # before the lock and the build: a mismatch fails in a moment
    return entry.get_or_build(lambda tmp: _build(cfg, text, tmp))


def build_info(library: Path) -> dict[str, object]:
    """What the build of `library` recorded: seconds, verilator version, flags."""
    return json.loads((library.parent / "build.json").read_text())  # type: ignore[no-any-return]


def _flags(cfg: AcceleratorConfig) -> list[str]:
    return [*VERILATOR_FLAGS, "-CFLAGS", f"-fPIC -O3 -DBUS_BYTES={cfg.bus_bytes}"]


def _key(cfg: AcceleratorConfig, text: str) -> str:
    digest = hashlib.sha256()
    for part in (text, HARNESS.read_text(), " ".join(_flags(cfg)), verilator_version()):
        digest.update(part.encode() + b"\0")
    return f"{cfg.fingerprint()}-{digest.hexdigest()[:12]}"


def _build(cfg: AcceleratorConfig, text: str, tmp: Path) -> None:
    """Build the library and its build.json into the entry's temporary directory `tmp`."""
    start = time.perf_counter()
    (tmp / "accel.v").write_text(text)
    shutil.copy(HARNESS, tmp / "harness.cpp")
    command = ["verilator", *_flags(cfg), "-j", str(os.cpu_count() or 2),
               "-Mdir", "obj", "-o", LIBRARY_NAME, "accel.v", "harness.cpp"]
    _run(command, tmp, cfg)
    shutil.move(tmp / "obj" / LIBRARY_NAME, tmp / LIBRARY_NAME)
    shutil.rmtree(tmp / "obj")
    info = {"seconds": round(time.perf_counter() - start, 2), "config": cfg.name,
            "fingerprint": cfg.fingerprint(), "verilator": verilator_version(),
            "command": command}
    (tmp / "build.json").write_text(json.dumps(info, indent=2) + "\n")


def _run(command: list[str], cwd: Path, cfg: AcceleratorConfig) -> None:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    (cwd / "build.log").write_text(result.stdout + result.stderr)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-25:])
        raise BuildError(
            f"Verilator build of config {cfg.name} ({cfg.fingerprint()}) failed with exit "
            f"status {result.returncode}:\n{tail}"
        )
