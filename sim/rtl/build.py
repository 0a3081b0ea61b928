"""Verilator builds of `accel` + the C++ harness, cached on disk by config and design.

The key is the config fingerprint plus a hash of everything that goes into the shared library
(the Verilog text, harness.cpp, the flags and the Verilator version), so a second run of the
same config loads the cached library, in this process or another one.  Concurrent builders of
one key (pytest-xdist workers) serialize on a lock file; the finished directory appears with
one atomic rename.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from hw.config import AcceleratorConfig
from hw.verilog import DesignFactory, ToolchainError, cache_root, verilog_for
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
    directory = cache_root() / "rtl" / _key(cfg, text)
    library = directory / LIBRARY_NAME
    if library.exists():
        return library
    check_ports(text, cfg)
    with _locked(directory.with_name(f".{directory.name}.lock")):
        if not library.exists():
            _build(cfg, text, directory)
    return library


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


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _build(cfg: AcceleratorConfig, text: str, directory: Path) -> None:
    start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".build-{directory.name}-"))
    try:
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
        os.rename(tmp, directory)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(command: list[str], cwd: Path, cfg: AcceleratorConfig) -> None:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    (cwd / "build.log").write_text(result.stdout + result.stderr)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-25:])
        raise BuildError(
            f"Verilator build of config {cfg.name} ({cfg.fingerprint()}) failed with exit "
            f"status {result.returncode}:\n{tail}"
        )
