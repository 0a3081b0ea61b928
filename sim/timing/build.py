"""The timing model's shared library (model.h and the .cpp files beside it), compiled once and
cached on disk.

The same cache as the Verilator builds (`$CODESIGN_CACHE`, default ~/.cache/codesign), keyed
by a hash of the sources, the flags and the compiler's version; concurrent builders serialize on
a lock file and the finished library appears with one atomic rename (`hw.cache.CacheEntry`).
The model has no config-specific code, so one build serves every config.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from hw.cache import CacheEntry, cache_root
from hw.verilog import ToolchainError

SOURCE_DIR = Path(__file__).parent
LIBRARY_NAME = "libtiming.so"
FLAGS = ["-O2", "-std=c++17", "-shared", "-fPIC", "-fno-exceptions"]


class TimingBuildError(ToolchainError):
    """No C++ compiler, or it failed on the model's sources."""


def sources() -> list[Path]:
    """The model's C++ sources and headers (in SOURCE_DIR), in a stable order."""
    return sorted([*SOURCE_DIR.glob("*.cpp"), *SOURCE_DIR.glob("*.h")])


@functools.cache
def compiler() -> tuple[str, str]:
    """(path, version line) of the C++ compiler: $CXX, else c++ or g++ on PATH."""
    for name in (os.environ.get("CXX"), "c++", "g++"):
        path = shutil.which(name) if name else None
        if path:
            result = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
            return path, (result.stdout.splitlines() or [""])[0]
    raise TimingBuildError(
        "no C++ compiler found ($CXX, c++ or g++) to build the timing model; install one with "
        "`apt-get install -y g++`"
    )


def library() -> Path:
    """Path of the compiled model, building it on the first call for this source and compiler."""
    path, version = compiler()
    texts = [f"{p.name}\n{p.read_text()}" for p in sources()]
    digest = hashlib.sha256("\0".join((*texts, " ".join(FLAGS), version)).encode())
    entry = CacheEntry(cache_root() / "timing" / digest.hexdigest()[:16], LIBRARY_NAME)
    return entry.get_or_build(lambda tmp: _build(path, tmp))


def _build(cxx: str, tmp: Path) -> None:
    """Compile the library into the entry's temporary directory `tmp`."""
    units = [str(p) for p in sources() if p.suffix == ".cpp"]
    command = [cxx, *FLAGS, "-o", str(tmp / LIBRARY_NAME), *units]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-25:])
        raise TimingBuildError(
            f"building the timing model failed with exit status {result.returncode}:\n{tail}"
        )
