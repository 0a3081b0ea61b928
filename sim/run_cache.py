"""fsim's recorded runs kept on disk, so a later process replays a Program from its first input.

fsim records the deterministic run of a validated Program as its data steps, compiled, and
replays them on every input (`sim.fsim`).  Recording and compiling cost several replays; a
model's Programs are the same in every `codesign run` of it, so the record is kept in
`$CODESIGN_CACHE/fsim/`, one sealed file per Program (`hw.cache.SealedFolder`), keyed by
everything the record depends on: the simulator's own code (the sources of `sim/` and the ISA,
numpy's and Python's versions), the config, the DRAM's size, the instruction words, the regions
and the micro-op table the Program brings.  The key covers all that `sim.validate` reads, so a
record also stands for the checks it passed (for the limits it names).  The micro-op table a
record assumes is checked against the DRAM on every replay, as for a record made in-process.

A file is a pickle, trusted as the kernel objects beside it are (a folder of the user's own);
one that is damaged, or written for another key, reads as missing and the Program is recorded
again.  The library keeps no files unless asked (`RECORDS.use(path)`, or CODESIGN_FSIM_CACHE);
`codesign run` uses the default folder unless that variable is "off".
"""

from __future__ import annotations

import functools
import hashlib
import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np

from hw import isa
from hw.cache import SealedFolder
from hw.config import AcceleratorConfig
from hw.program import Program

CACHE_ENV = "CODESIGN_FSIM_CACHE"
RECORDS = SealedFolder("fsim", CACHE_ENV, b"codesign-fsim-record\0", ".pkl")
_COUNTS = {"loaded": 0, "saved": 0}


@functools.cache
def code_version() -> str:
    """A digest of the code a record's steps run: every module of `sim/` (not its subpackages),
    the ISA, the config and the Program format, with numpy's and Python's versions."""
    here = Path(__file__).parent
    digest = hashlib.sha256(f"python {sys.version} numpy {np.__version__}".encode())
    hw = Path(isa.__file__).parent
    for path in [*sorted(here.glob("*.py")), hw / "isa.py", hw / "config.py", hw / "program.py"]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def record_key(program: Program, cfg: AcceleratorConfig) -> str:
    """What a recorded run of `program` on `cfg` depends on, and what `sim.validate` reads of
    it (its regions and micro-op table too), hashed: a record stands for the checks it passed."""
    head = f"{code_version()} {cfg.fingerprint()} {program.dram_bytes} {program.regions!r}\n"
    digest = hashlib.sha256(head.encode())
    digest.update(np.ascontiguousarray(program.insns).tobytes())
    for table in program.regions_with_role("uops"):
        words = program.constants.get(table.name)
        digest.update(b"none" if words is None else np.ascontiguousarray(words).tobytes())
    return digest.hexdigest()


def load_record(program: Program, cfg: AcceleratorConfig) -> Any | None:
    """The record `save_record` kept for `program` on `cfg`, or None."""
    key = record_key(program, cfg)
    data = RECORDS.read(key)
    if data is None:
        return None
    try:
        record = pickle.loads(data)
    except Exception:  # sealed but unreadable here (a class renamed since): record again
        return None
    _COUNTS["loaded"] += 1
    return record


def records_kept() -> bool:
    """Whether a folder is in use (`save_record` keeps what it is given)."""
    return RECORDS.directory() is not None


def save_record(program: Program, cfg: AcceleratorConfig, record: Any) -> None:
    """Keep `record` (picklable) for `program` on `cfg`, where a folder is in use."""
    if not records_kept():
        return
    RECORDS.write(record_key(program, cfg), pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL))
    _COUNTS["saved"] += 1


def counts() -> dict[str, int]:
    """Records loaded from and saved to disk by this process so far."""
    return dict(_COUNTS)
