"""The tuning log: one JSON object per trial, one per line, appended as trials finish.

A line holds the workload, the config (name, fingerprint, measurement key and parameters), the
backend, the search method and trial number, the knobs and schedule records, and the outcome:
status ('ok', 'schedule_error', 'error', 'timeout', 'crash'), the reason of a failure, cycles,
Stats, compile and run time.  A run resumes from its log: the points already there count as
trials and train the model.  A last line cut short by a killed run is skipped.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from codesign.tune.records import LoggedConfig, Measurement, TrialRecord
from compiler.tune.workload import Workload, config_key
from hw.config import AcceleratorConfig
from hw.errors import InputError

VERSION = 1
REQUIRED = ("workload_key", "config", "knobs", "status")  # what a line needs to be read as a trial


def record(workload: Workload, cfg: AcceleratorConfig, backend: str, knobs: dict[str, int],
           result: Measurement, *, method: str, trial: int, cached: bool) -> TrialRecord:
    """The log record of one trial measured now (its `time`)."""
    return TrialRecord(
        version=VERSION, time=time.time(), workload=workload.to_json(), workload_key=workload.key,
        config=LoggedConfig(name=cfg.name, fingerprint=cfg.fingerprint(), key=config_key(cfg.to_dict()),
                            params=cfg.to_dict()),
        backend=backend, method=method, trial=trial, knobs=knobs, measurement=result, cached=cached,
    )


def append(path: str | Path, records: list[TrialRecord]) -> None:
    """Append one JSON line per record (nothing, not even the file, for none)."""
    if not records:
        return
    with open(path, "a") as fh:
        fh.write("".join(json.dumps(r.to_json()) + "\n" for r in records))
        fh.flush()


def read(path: str | Path) -> list[TrialRecord]:
    """Every record of the log at `path`; OSError when it cannot be read, ValueError naming the
    line when a line (other than a cut-short last one) is not a trial record."""
    lines = Path(path).read_text().splitlines()
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            if n == len(lines):  # a run killed while writing
                break
            raise InputError(f"{path} line {n}: not JSON") from None
        if not _is_record(data):
            raise InputError(f"{path} line {n}: not a tuning record "
                             "(needs workload_key, config, knobs, status)")
        out.append(TrialRecord.from_json(data))
    return out


def _is_record(data: Any) -> bool:
    # The config must be an object too: matching() reads its key.
    return isinstance(data, dict) and set(REQUIRED) <= set(data) and isinstance(data["config"], dict)


def matching(records: list[TrialRecord], workload: Workload, cfg: AcceleratorConfig,
             backend: str | None = None) -> list[TrialRecord]:
    """The records of `workload` on `cfg` (same measurement key), optionally of one backend."""
    key = config_key(cfg.to_dict())
    return [r for r in records if r.workload_key == workload.key and r.config.key == key
            and (backend is None or r.backend == backend)]


def best(records: list[TrialRecord], workload: Workload, cfg: AcceleratorConfig) -> TrialRecord | None:
    """The fastest successful record of `workload` on `cfg` (any backend), or None."""
    ok = [r for r in matching(records, workload, cfg) if r.status == "ok" and r.cycles]
    return min(ok, key=lambda r: r.cycles or 0) if ok else None
