"""The tuning log: one JSON object per trial, one per line, appended as trials finish.

A line holds the workload, the config (name, fingerprint, measurement key and parameters), the
backend, the search method and trial number, the knobs and schedule records, and the outcome:
status ('ok', 'schedule_error', 'error', 'timeout', 'crash'), the reason of a failure, cycles,
Stats, compile and run time.  A run resumes from its log: the points already there count as
trials and train the model.  A last line cut short by a killed run is skipped.
"""

from __future__ import annotations

import json
import math
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
    try:
        lines = Path(path).read_bytes().decode().splitlines()
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not a tuning log (not UTF-8 text: {exc.reason} at byte {exc.start})") \
            from None
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
        wrong = _wrong_field(data)
        if wrong:
            raise InputError(f"{path} line {n}: {wrong}")
        out.append(TrialRecord.from_json(data))
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


# field -> (rule, what it must be); a field that is absent or null is not checked
_FIELDS: dict[str, tuple[Any, str]] = {
    "workload_key": (lambda v: isinstance(v, str), "a string"),
    "status": (lambda v: isinstance(v, str), "a string"),
    "knobs": (lambda v: isinstance(v, dict) and all(isinstance(k, str) and _is_int(x)
                                                    for k, x in v.items()),
              "an object of integer knobs"),
    "cycles": (lambda v: _is_int(v) and v >= 0, "a non-negative integer"),
    "compile_s": (_is_number, "a finite number"), "run_s": (_is_number, "a finite number"),
    "time": (_is_number, "a finite number"),
    "stats": (lambda v: isinstance(v, dict), "an object"),
}


def _wrong_field(data: dict[str, Any]) -> str | None:
    """What is wrong with the first malformed field of a record, if any (a NaN read from the
    log would rank first among cycles; a string would fail the comparison)."""
    for name, (ok, what) in _FIELDS.items():
        value = data.get(name)
        if value is not None and not ok(value):
            return f"field {name} is {value!r}, not {what}"
    return None


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
