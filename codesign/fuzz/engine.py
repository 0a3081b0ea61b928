"""The fuzzer shared by every file kind a user hands the workbench (configs, `.cmodel` files,
tuning logs, input `.npz` files, sweep spaces and stores): seeded cases, each run in a forked
child bounded in time and address space, findings minimized.

A kind (`Kind`) names its valid base files, its mutations (structure-aware ones and raw bytes)
and its check: the reader the command line uses, run on the mutated file, which returns
"accepted" (the file was read and what came of it is right) or "refused: <message>" (a one-line
WorkbenchError), and raises anything else.  Anything else is a `Finding`: a foreign exception,
a message over several lines, a case past `case_seconds` (a hang), an allocation past
`memory_bytes`, a child that died (a native crash), or code that a data file executed (the
child's marker file exists after the case).
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import functools
import io
import json
import multiprocessing
import os
import resource
import shutil
import tempfile
import traceback
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from hw.errors import WorkbenchError

CASE_SECONDS = 20.0
MEMORY_BYTES = 2 << 30  # address space a case may add to the child's
MARKER_ENV = "CODESIGN_FUZZ_MARKER"  # a payload that runs creates the file this names

Mutation = Callable[[bytes, np.random.Generator], bytes]
Check = Callable[[Path], str]


@dataclass(frozen=True)
class Kind:
    """One kind of input file: valid `bases` (name -> builder of the file's bytes), `mutations`
    (name -> a function of the base's bytes and a seeded generator), the `check` of one file,
    and the file's `suffix`."""

    name: str
    suffix: str
    bases: Mapping[str, Callable[[], bytes]]
    mutations: Mapping[str, Mutation]
    check: Check


@dataclass(frozen=True)
class Case:
    """One case: mutation `mutation` of `base`, every choice drawn from `seed`."""

    kind: str
    seed: int
    base: str
    mutation: str

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.base}-{self.mutation}-{self.seed}"


@dataclass(frozen=True)
class Finding:
    """A broken promise; `problem` is one line."""

    case: Case
    problem: str

    def to_json(self) -> dict[str, object]:
        return {"case": asdict(self.case), "problem": self.problem}


@dataclass(frozen=True)
class FuzzReport:
    kind: str
    cases: int
    accepted: int  # files read, with a right result
    refused: int  # files refused with a one-line WorkbenchError
    findings: tuple[Finding, ...]

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "cases": self.cases, "accepted": self.accepted, "refused": self.refused,
                "findings": [f.to_json() for f in self.findings]}


_BASE_CACHE: dict[tuple[str, str], bytes] = {}


def base_bytes(kind: Kind, base: str) -> bytes:
    """A base file of `kind`, built once per process."""
    key = (kind.name, base)
    if key not in _BASE_CACHE:
        _BASE_CACHE[key] = kind.bases[base]()
    return _BASE_CACHE[key]


def cases(kind: Kind, seeds: Iterable[int]) -> list[Case]:
    """One case per seed, its base and mutation drawn from the seed."""
    bases, mutations = sorted(kind.bases), sorted(kind.mutations)
    out = []
    for seed in seeds:
        rng = np.random.default_rng([seed, 0])
        out.append(Case(kind.name, seed, bases[int(rng.integers(len(bases)))],
                        mutations[int(rng.integers(len(mutations)))]))
    return out


def case_bytes(kind: Kind, case: Case) -> bytes:
    """The file `case` hands the workbench."""
    return kind.mutations[case.mutation](base_bytes(kind, case.base), np.random.default_rng([case.seed, 1]))


def one_line(exc: WorkbenchError) -> str:
    """ "refused: <message>" for a WorkbenchError whose message is one non-empty line;
    AssertionError otherwise."""
    message = str(exc)
    if "\n" in message or not message.strip():
        raise AssertionError(f"{type(exc).__name__} message is not one line: {message!r}")
    return f"refused: {message}"


def run_case(kind: Kind, case: Case | bytes, directory: Path) -> str:
    """kind.check on the case's file (or on `case`, a file's bytes) written into `directory`;
    a WorkbenchError the check lets through is a refusal too."""
    name = case.name if isinstance(case, Case) else "input"
    path = directory / f"{name}{kind.suffix}"
    path.write_bytes(case_bytes(kind, case) if isinstance(case, Case) else case)
    try:
        return kind.check(path)
    except WorkbenchError as exc:
        return one_line(exc)
    finally:
        for leftover in directory.iterdir():  # the file, and what a reader left beside it (-wal, a report)
            if leftover.is_dir():
                shutil.rmtree(leftover)
            else:
                leftover.unlink()


def _child(conn: Connection, kind: Kind, todo: list[Case | bytes], memory_bytes: int) -> None:
    faulthandler.disable()  # a native crash is reported by the parent, not dumped here
    limit = _address_space() + memory_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    with tempfile.TemporaryDirectory(prefix=f"fuzz-{kind.name}-") as tmp:
        work, marker = Path(tmp) / "in", Path(tmp) / "executed"
        work.mkdir()
        os.environ[MARKER_ENV] = str(marker)
        for case in todo:
            try:
                result = run_case(kind, case, work)
            except MemoryError:
                result = "finding: out of memory (an unbounded allocation)"
            except BaseException as e:  # every other exception is the finding
                result = f"finding: {_describe(e)}"
            if marker.exists():
                marker.unlink()
                result = "finding: code execution (a data file ran code)"
            conn.send(result)


def _describe(e: BaseException) -> str:
    where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    first = str(e).splitlines()[0] if str(e) else ""
    at = f"{Path(where.filename).name}:{where.lineno}" if where else "?"
    return f"{type(e).__name__}: {first[:200]} (at {at})"


def _address_space() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def fuzz(kind: Kind, todo: Sequence[Case], *, case_seconds: float = CASE_SECONDS,
         memory_bytes: int = MEMORY_BYTES) -> FuzzReport:
    """Every case of `todo` run in a forked child bounded by `memory_bytes` of added address
    space; a case past `case_seconds` is a hang and the child is replaced."""
    results = outcomes(kind, todo, case_seconds=case_seconds, memory_bytes=memory_bytes)
    findings = tuple(Finding(c, r.removeprefix("finding: ")) for c, r in zip(todo, results, strict=True)
                     if r.startswith("finding: "))
    return FuzzReport(kind.name, len(todo), sum(r == "accepted" for r in results),
                      sum(r.startswith("refused: ") for r in results), findings)


def outcomes(kind: Kind, todo: Sequence[Case | bytes], *, case_seconds: float = CASE_SECONDS,
             memory_bytes: int = MEMORY_BYTES) -> list[str]:
    """Each case's outcome: "accepted", "refused: <message>" or "finding: <problem>"."""
    for case in todo:  # build the bases here, so each child inherits them built
        if isinstance(case, Case):
            base_bytes(kind, case.base)
    return forked_outcomes(_child, (kind,), todo, case_seconds, memory_bytes)


def forked_outcomes(child: Callable[..., None], head: tuple[Any, ...], todo: Sequence[Any],
                    case_seconds: float, memory_bytes: int) -> list[str]:
    """Run `child(send, *head, cases, memory_bytes)` in a forked process that sends one outcome per
    case; a case with no outcome within `case_seconds` is a hang, a closed pipe a native crash,
    and either way the child is replaced for the cases after it."""
    results: list[str] = []
    context = multiprocessing.get_context("fork")
    while len(results) < len(todo):
        rest = list(todo[len(results):])
        receive, send = context.Pipe(duplex=False)
        process = context.Process(target=child, args=(send, *head, rest, memory_bytes), daemon=True)
        process.start()
        send.close()
        for _ in rest:
            try:
                if not receive.poll(case_seconds):
                    results.append("finding: hang (no result within the time limit)")
                    break
                results.append(receive.recv())
            except EOFError:  # a native crash: an abort, a segfault
                process.join(5)
                results.append(f"finding: the process died (exit status {process.exitcode})")
                break
        process.kill()
        process.join()
        receive.close()
    return results


def minimize(kind: Kind, data: bytes, problem: str, *, case_seconds: float = CASE_SECONDS,
             memory_bytes: int = MEMORY_BYTES, trials: int = 64) -> bytes:
    """A smaller file with the same problem (exception type and place): chunks of lines (of
    bytes, for a binary file) removed, halves first, while the problem stays; at most `trials`
    runs."""
    want = signature(problem)
    text = _is_text(data)
    parts = data.splitlines(keepends=True) if text else [data[i:i + 64] for i in range(0, len(data), 64)]
    chunk = max(len(parts) // 2, 1)
    while chunk >= 1 and trials > 0:
        i = 0
        while i < len(parts) and trials > 0:
            trial = parts[:i] + parts[i + chunk:]
            trials -= 1
            (result,) = outcomes(kind, [b"".join(trial)], case_seconds=case_seconds,
                                 memory_bytes=memory_bytes)
            if result.startswith("finding: ") and signature(result.removeprefix("finding: ")) == want:
                parts = trial
            else:
                i += chunk
        chunk //= 2
    return b"".join(parts)


def _is_text(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def signature(problem: str) -> tuple[str, str]:
    """What makes two findings the same: the exception type and where it was raised."""
    return problem.split(":")[0], problem.rsplit(" (at ", 1)[-1]


def run_cli(argv: Sequence[str]) -> tuple[str, str]:
    """The `codesign` command line run in this process on `argv` (as `codesign.cli.main.main`,
    its parser built once): ("accepted", its stdout) for exit status 0, ("refused: <message>",
    "") for exit status 2 with one error line (warnings aside); AssertionError for another
    status or a refusal that is not one line, and any exception the command lets through
    propagates (a traceback)."""
    from codesign.cli.main import _one_line, _run

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        args = _parser().parse_args(list(argv))
        warnings.showwarning = _one_line(args.command, warnings.showwarning)
        code = _run(args)
    if code == 0:
        return "accepted", out.getvalue()
    lines = [x for x in err.getvalue().splitlines() if ": warning: " not in x]
    if code != 2 or len(lines) != 1 or ": error: " not in lines[0]:
        raise AssertionError(f"exit status {code}, stderr {err.getvalue()[:300]!r}")
    return "refused: " + lines[0].split(": error: ", 1)[1], ""


@functools.cache
def _parser() -> argparse.ArgumentParser:
    from codesign.cli.main import build_parser

    return build_parser()


def strict_json(text: str) -> object:
    """`text` parsed as JSON; AssertionError for NaN or Infinity, which JSON does not have."""
    def refuse(token: str) -> object:
        raise AssertionError(f"the output is not JSON: it holds {token}")
    return json.loads(text, parse_constant=refuse)
