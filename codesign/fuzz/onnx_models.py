"""The ONNX-model fuzzer: mutated models (codesign.fuzz.onnx_mutate) through import,
quantization and compile for the accelerator, each case bounded in time and memory.

The promise checked: a model either compiles or fails with a WorkbenchError whose message is
one line. Anything else (another exception type, a message over several lines, a case that
runs past `case_seconds`, an allocation past `memory_bytes`, a model that reads external data
from outside its own directory and compiles) is a `Finding`, with the case's seed, base and
mutation: `case_bytes` rebuilds the exact file, and `check_file` replays it.

Cases run in a forked child under RLIMIT_AS; the parent kills a child whose case runs too long
and starts another for the remaining cases.
"""

from __future__ import annotations

import functools
import resource
import tempfile
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np
import onnx

from codesign.fuzz.engine import forked_outcomes
from codesign.fuzz.onnx_mutate import MUTATIONS, mutate, tiny_conv, tiny_matmul, tiny_ops
from codesign.run.inputs import sample_inputs
from compiler.driver import QuantOptions, compile_graph
from compiler.frontend import import_onnx
from compiler.target import AcceleratorTarget
from hw.config import PRESETS
from hw.errors import WorkbenchError

SMALL_BASES = ("tiny_conv", "tiny_matmul", "tiny_ops", "mlp")
LARGE_BASES = ("tiny_conv", "tiny_matmul", "tiny_ops", "mlp", "digits", "resnet18")
CASE_SECONDS = 20.0
MEMORY_BYTES = 3 << 30  # address space a case may add to the child's
_TINY: dict[str, Callable[[np.random.Generator], onnx.ModelProto]] = {
    "tiny_conv": tiny_conv, "tiny_matmul": tiny_matmul, "tiny_ops": tiny_ops}


@dataclass(frozen=True)
class Case:
    """One fuzz case: mutation `kind` applied to `base`, every choice drawn from `seed`."""

    seed: int
    base: str
    kind: str

    @property
    def name(self) -> str:
        return f"{self.base}-{self.kind}-{self.seed}"


@dataclass(frozen=True)
class Finding:
    """A broken promise: `problem` is one line (the exception type and message, "hang" or
    "out of memory")."""

    case: Case
    problem: str

    def to_json(self) -> dict[str, object]:
        return {"case": asdict(self.case), "problem": self.problem}


@dataclass(frozen=True)
class FuzzReport:
    cases: int
    compiled: int  # cases that compiled
    refused: int  # cases refused with a one-line WorkbenchError
    findings: tuple[Finding, ...]

    def to_json(self) -> dict[str, object]:
        return {"cases": self.cases, "compiled": self.compiled, "refused": self.refused,
                "findings": [f.to_json() for f in self.findings]}


@functools.cache
def base_model(name: str) -> onnx.ModelProto:
    """A base model: one written here (tiny_*) or a zoo model (seed 0)."""
    if name in _TINY:
        return _TINY[name](np.random.default_rng(0))
    from codesign import zoo

    return zoo.build(name)


def cases(seeds: Iterable[int], bases: Sequence[str] = SMALL_BASES) -> list[Case]:
    """One case per seed, its base and mutation kind drawn from the seed."""
    kinds = sorted(MUTATIONS)
    out = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        out.append(Case(seed, bases[int(rng.integers(len(bases)))], kinds[int(rng.integers(len(kinds)))]))
    return out


def case_bytes(case: Case) -> bytes:
    """The file `case` hands the workbench."""
    return mutate(base_model(case.base), case.kind, np.random.default_rng([case.seed, 1]))


def check_file(path: Path) -> str:
    """Import, quantize and compile the ONNX file at `path` for the vta accelerator, as
    `codesign compile` does (two random calibration inputs, fast rounding): "compiled", or
    "refused: <message>" for a one-line WorkbenchError. Any other exception propagates; a
    WorkbenchError over several lines, or a model that reads external data from outside its
    directory and compiles, raises AssertionError."""
    try:
        graph = import_onnx(str(path))
        calibration = sample_inputs(graph, None, 2, 0)
        quant = QuantOptions(calibration_count=2, rounding="nearest", bias_correction=False)
        compile_graph(graph, AcceleratorTarget(PRESETS["vta"]), calibration, quant=quant, where=str(path))
    except WorkbenchError as e:
        message = str(e)
        if "\n" in message or not message.strip():
            raise AssertionError(f"{type(e).__name__} message is not one line: {message!r}") from None
        return f"refused: {message}"
    if _escapes(path):
        raise AssertionError("external data outside the model's directory was read")
    return "compiled"


def _escapes(path: Path) -> bool:
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:
        return False
    for t in model.graph.initializer:
        for entry in t.external_data:
            if entry.key == "location" and (entry.value.startswith("/") or ".." in entry.value):
                return True
    return False


def run_case(case: Case | bytes, directory: Path) -> str:
    """check_file on the case's file (or on `case`, a file's bytes) written into `directory`."""
    path = directory / (f"{case.name}.onnx" if isinstance(case, Case) else "model.onnx")
    path.write_bytes(case_bytes(case) if isinstance(case, Case) else case)
    try:
        return check_file(path)
    finally:
        path.unlink()


def _child(conn: Connection, todo: list[Case | bytes], memory_bytes: int) -> None:
    limit = _address_space() + memory_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    with tempfile.TemporaryDirectory(prefix="fuzz-onnx-") as tmp:
        (Path(tmp) / "m").mkdir()
        (Path(tmp) / "weights.bin").write_bytes(bytes(range(256)) * 16)  # bait for "../weights.bin"
        (Path(tmp) / "m" / "weights.bin").write_bytes(bytes(range(256)) * 16)  # legal, maybe too short
        for case in todo:
            try:
                result = run_case(case, Path(tmp) / "m")
            except MemoryError:
                result = "finding: out of memory (an unbounded allocation)"
            except BaseException as e:  # every other exception is the finding
                where = traceback.extract_tb(e.__traceback__)[-1]
                first = str(e).splitlines()[0] if str(e) else ""
                at = f"{Path(where.filename).name}:{where.lineno}"
                result = f"finding: {type(e).__name__}: {first} (at {at})"
            conn.send(result)


def _address_space() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def fuzz(todo: Sequence[Case], *, case_seconds: float = CASE_SECONDS,
         memory_bytes: int = MEMORY_BYTES) -> FuzzReport:
    """Every case of `todo` run in a forked child bounded by `memory_bytes` of added address
    space; a case past `case_seconds` is a hang and the child is replaced."""
    return _report(todo, outcomes(todo, case_seconds=case_seconds, memory_bytes=memory_bytes))


def outcomes(todo: Sequence[Case | bytes], *, case_seconds: float = CASE_SECONDS,
             memory_bytes: int = MEMORY_BYTES) -> list[str]:
    """Each case's outcome: "compiled", "refused: <message>" or "finding: <problem>"."""
    for case in todo:  # build the bases here, so each child inherits them built
        if isinstance(case, Case):
            base_model(case.base)
    return forked_outcomes(_child, (), todo, case_seconds, memory_bytes)


def minimize(data: bytes, problem: str, *, case_seconds: float = CASE_SECONDS,
             memory_bytes: int = MEMORY_BYTES) -> bytes:
    """A smaller file with the same problem (exception type and place): nodes bypassed (their
    readers read the node's first input instead), then initializers dropped, one at a time
    while the problem stays. Raw bytes that do not parse are returned as they are."""
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception:
        return data
    want = _signature(problem)
    for field, shrink in (("node", _bypass), ("initializer", _drop_initializer)):
        i = 0
        while i < len(getattr(model.graph, field)):
            trial = shrink(model, i)
            (result,) = outcomes([trial.SerializeToString()], case_seconds=case_seconds,
                                 memory_bytes=memory_bytes)
            if _signature(result.removeprefix("finding: ")) == want:
                model = trial
            else:
                i += 1
    return model.SerializeToString()


def _bypass(model: onnx.ModelProto, i: int) -> onnx.ModelProto:
    trial = onnx.ModelProto()
    trial.CopyFrom(model)
    node = trial.graph.node[i]
    source = node.input[0] if node.input else ""
    renames = {o: source for o in node.output if o}
    del trial.graph.node[i]
    for other in trial.graph.node:
        other.input[:] = [renames.get(x, x) for x in other.input]
    for out in trial.graph.output:
        out.name = renames.get(out.name, out.name)
    return trial


def _drop_initializer(model: onnx.ModelProto, i: int) -> onnx.ModelProto:
    trial = onnx.ModelProto()
    trial.CopyFrom(model)
    del trial.graph.initializer[i]
    return trial


def _signature(problem: str) -> tuple[str, str]:
    """What makes two findings the same: the exception type and where it was raised."""
    return problem.split(":")[0], problem.rsplit(" (at ", 1)[-1]


def _report(todo: Sequence[Case], results: list[str]) -> FuzzReport:
    findings = tuple(Finding(c, r.removeprefix("finding: ")) for c, r in zip(todo, results, strict=True)
                     if r.startswith("finding: "))
    return FuzzReport(len(todo), sum(r == "compiled" for r in results),
                      sum(r.startswith("refused: ") for r in results), findings)
