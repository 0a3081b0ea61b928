"""The fuzzed file kinds, by name, and the corpus of files that once broke the promise."""

from __future__ import annotations

import json
from pathlib import Path

from codesign.fuzz import cmodels, configs, npz_inputs, sweeps, tuning_logs
from codesign.fuzz.engine import FuzzReport, Kind, case_bytes, minimize

KINDS: dict[str, Kind] = {k.name: k for k in (
    configs.KIND, npz_inputs.KIND, tuning_logs.TRIALS, tuning_logs.CPU_LOG, tuning_logs.CACHE, sweeps.SPACES,
    sweeps.STORES, sweeps.REPORTS, cmodels.KIND)}
CORPUS = Path(__file__).parent / "corpus"
EXPECTED: dict[str, dict[str, str]] = json.loads((CORPUS / "expected.json").read_text())


def unexpected(kind: Kind, report: FuzzReport, out: Path) -> list[str]:
    """One line per finding, naming its minimized file in `out` (to add to the corpus once fixed)."""
    lines = []
    for f in report.findings:
        small = minimize(kind, case_bytes(kind, f.case), f.problem)
        (out / f"{f.case.name}{kind.suffix}").write_bytes(small)
        lines.append(f"{f.case.name}: {f.problem} -- minimized to {out / f.case.name}{kind.suffix} "
                     f"({len(small)} bytes); original: case_bytes(KINDS[{kind.name!r}], {f.case!r})")
    return lines
