"""ONNX's backend test suite (`onnx.backend.test`) through `WorkbenchBackend`: which cases we
claim, the reviewed exclusions (each with its reason), and the per-operator results that the
README's supported-operator table shows.

A case is excluded for exactly one of two reasons, both reported as the skip's message:
- it uses an operator the workbench does not claim (not in `compiler.frontend.SUPPORTED`);
- it matches an entry of `EXCLUDED` (a dtype, a training-mode output, a form we do not support).
Every other case must pass, within the suite's own tolerances.

    python -m compiler.runtime.conformance            # the README table, with the counts
    python -m compiler.runtime.conformance --json     # per-operator counts as JSON
"""

from __future__ import annotations

import argparse
import json
import os
import re
import unittest
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache

import onnx
import onnx.backend.test.runner as onnx_runner
from onnx.backend.test import BackendTest
from onnx.backend.test.loader import load_model_tests

from compiler.frontend import SUPPORTED

# The suite's groups: generated node cases, then whole models. "real" models (AlexNet, ResNet-50...)
# get their expected outputs from onnx's slow Python reference evaluator on the first run.
KINDS = ("node", "simple", "pytorch-converted", "pytorch-operator", "real")
CATEGORY = {"node": "Node", "simple": "Simple", "pytorch-converted": "PyTorchConverted",
            "pytorch-operator": "PyTorchOperator", "real": "Real"}


@dataclass(frozen=True)
class Exclusion:
    pattern: str  # a regular expression searched in the case's name
    reason: str


_LOW_PRECISION = "FLOAT8|E4M3|E5M2|E8M0|INT4|INT2|FLOAT4|BFLOAT16|int4|int2|e4m3|e5m2|float4e2m1"

EXCLUDED: tuple[Exclusion, ...] = (
    Exclusion(rf"({_LOW_PRECISION})", "element type (float8, float4, int4, int2, bfloat16) not supported"),
    Exclusion(r"^test_identity_(sequence|opt)$", "sequence and optional types are not tensors"),
    Exclusion(r"dropout.*mask|^test_training_dropout",
              "training-mode Dropout (random masks, the mask output): inference only"),
    Exclusion(r"^test_batchnorm_.*training_mode$", "training-mode BatchNormalization: inference only"),
    Exclusion(r"^test_maxpool_with_argmax", "reads MaxPool's Indices output: only the values"),
    Exclusion(r"^test_maxpool_2d_uint8$", "uint8 MaxPool: pooling is float (int8 only after quantization)"),
    Exclusion(r"^test_reduce_max_bool_inputs$", "ReduceMax of bool: reductions are numeric"),
    Exclusion(r"^test_resize_.*(cubic|antialias)|^test_resize_tf_crop_and_resize",
              "Resize: cubic, antialias and tf_crop_and_resize are not supported (nearest and linear are)"),
    Exclusion(r"_string", "string tensors"),
    Exclusion(r"_blocked", "blocked quantization (block_size) not supported"),
    Exclusion(r"^test_reduce_max_empty_set", "ReduceMax over a zero-size axis (its -inf identity)"),
)


@dataclass(frozen=True)
class Case:
    kind: str
    name: str  # the suite's name, without the device suffix
    ops: tuple[str, ...]  # every (domain-qualified unless ai.onnx) op type of its model
    subject: str  # the operator the case is about (for the per-operator counts)

    @property
    def exclusion(self) -> str | None:
        """Why the case is not run, None if it must pass."""
        unclaimed = [op for op in self.ops if op not in SUPPORTED]
        if unclaimed:
            return f"operator{'s' * (len(unclaimed) > 1)} {', '.join(unclaimed)} not in the supported table"
        for e in EXCLUDED:
            if re.search(e.pattern, self.name):
                return e.reason
        return None


@cache
def node_tests() -> dict[str, object]:
    """The suite's node cases by name (generating them takes onnx 10 s of CPU: once per process)."""
    return {tc.name: tc for tc in load_model_tests(kind="node")}


@cache
def cases(kinds: tuple[str, ...] = KINDS) -> tuple[Case, ...]:
    """Every case of `kinds`, its model's operators read from its file."""
    out = []
    for kind in kinds:
        for tc in load_model_tests(kind=kind):
            model = _model(tc)
            ops = tuple(sorted({n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
                                for n in model.graph.node}))
            out.append(Case(kind, tc.name, ops, subject(tc.name, ops)))
    return tuple(out)


def _model(tc: object) -> onnx.ModelProto:
    model = getattr(tc, "model", None)
    if model is not None:
        return model
    model_dir, url = getattr(tc, "model_dir", None), getattr(tc, "url", "") or ""
    if model_dir is not None:
        path = os.path.join(model_dir, "model.onnx")
    else:  # the light real models ship inside the onnx package
        path = os.path.join(os.path.dirname(onnx_runner.__file__), *[".."] * 4, url)
    return onnx.load(path, load_external_data=False)


_ALIASES = {"batchnorm": "BatchNormalization", "instancenorm": "InstanceNormalization",
            "lessequal": "LessOrEqual", "greaterequal": "GreaterOrEqual",
            "globalaveragepool": "GlobalAveragePool", "globalmaxpool": "GlobalMaxPool"}


@cache
def _op_keys() -> tuple[tuple[str, str], ...]:
    names = {s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain == ""}
    keys = {n.lower(): n for n in names} | _ALIASES
    return tuple(sorted(keys.items(), key=lambda kv: -len(kv[0])))


def subject(name: str, ops: Sequence[str]) -> str:
    """The operator a node case tests: the longest op name its name starts with (underscores
    ignored), else its model's first op."""
    key = name.removeprefix("test_").replace("_", "").lower()
    for prefix, op in _op_keys():
        if key.startswith(prefix):
            return op
    return ops[0] if ops else ""


# -- running the suite ----------------------------------------------------------------------------


def backend_test(kinds: Iterable[str] = KINDS, module: str | None = None,
                 native: bool = False) -> dict[str, type]:
    """The suite's unittest classes over `WorkbenchBackend` (`NativeBackend` with `native`, the
    classes' names prefixed with Native), each excluded case skipped with its reason, each group
    not in `kinds` left out."""
    from compiler.runtime.onnx_backend import NativeBackend, WorkbenchBackend

    by_name = {c.name: c for c in cases()}
    wanted = {CATEGORY[k] for k in kinds}
    classes = {}
    backend = NativeBackend if native else WorkbenchBackend
    for cls_name, cls in BackendTest(backend, module).test_cases.items():
        if cls_name.removeprefix("OnnxBackend").removesuffix("ModelTest") not in wanted:
            continue
        for attr in [a for a in vars(cls) if a.startswith("test_")]:
            case = by_name.get(attr.removesuffix("_cpu").removesuffix("_cuda"))
            if attr.endswith("_cuda"):
                delattr(cls, attr)
            elif case is not None and case.exclusion is not None:
                setattr(cls, attr, unittest.skip(case.exclusion)(getattr(cls, attr)))
        if native:
            cls.__name__ = cls.__qualname__ = cls_name = f"Native{cls_name}"
        classes[cls_name] = cls
    return classes


@dataclass(frozen=True)
class OpCounts:
    """One operator's node cases: how many passed, failed (named) and were excluded."""

    passed: int = 0
    failed: int = 0
    excluded: int = 0
    failures: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"passed": self.passed, "failed": self.failed, "excluded": self.excluded,
                "failures": list(self.failures)}


@dataclass(frozen=True)
class SuiteReport:
    onnx_version: str
    ops: Mapping[str, OpCounts]  # by subject operator, node cases only
    models: Mapping[str, Mapping[str, int]]  # by kind: passed, failed, excluded

    def total(self, what: str) -> int:
        return sum(getattr(c, what) for c in self.ops.values())

    def to_json(self) -> dict[str, object]:
        return {"onnx": self.onnx_version,
                "node": {"passed": self.total("passed"), "failed": self.total("failed"),
                         "excluded": self.total("excluded")},
                "models": {k: dict(v) for k, v in self.models.items()},
                "ops": {op: c.to_json() for op, c in sorted(self.ops.items())}}


def run_suite(kinds: Sequence[str] = KINDS) -> SuiteReport:
    """Run the suite's `kinds` and count the results (what the README table shows)."""
    suite = unittest.TestSuite()
    for cls in backend_test(kinds).values():
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(cls))
    result = unittest.TestResult()
    suite.run(result)
    failed = {_case_name(t) for t, _ in result.failures + result.errors}
    skipped = {_case_name(t) for t, _ in result.skipped}
    statuses: dict[str, Counter[str]] = {}
    failures: dict[str, list[str]] = {}
    models: dict[str, Counter[str]] = {}
    for case in cases():
        if case.kind not in kinds:
            continue
        status = "failed" if case.name in failed else "excluded" if case.name in skipped else "passed"
        if case.kind == "node":
            statuses.setdefault(case.subject, Counter())[status] += 1
            if status == "failed":
                failures.setdefault(case.subject, []).append(case.name)
        else:
            models.setdefault(case.kind, Counter())[status] += 1
    ops = {op: OpCounts(c["passed"], c["failed"], c["excluded"], tuple(failures.get(op, ())))
           for op, c in statuses.items()}
    return SuiteReport(onnx.__version__, ops, {k: dict(v) for k, v in models.items()})


def _case_name(test: unittest.TestCase) -> str:
    return test.id().rsplit(".", 1)[-1].removesuffix("_cpu")


def supported_table(report: SuiteReport) -> str:
    """The README's supported-operator table, with each operator's node cases: passed / run
    (excluded), and the suite's totals."""
    from compiler.frontend.registry import SUPPORTED as TABLE

    rows = ["| ONNX operator | graph IR | ONNX suite: passed / run (excluded) | notes |", "|---|---|---|---|"]
    for op in sorted(TABLE.values(), key=lambda o: o.op_type):
        c = report.ops.get(op.op_type, OpCounts())
        run = c.passed + c.failed
        cell = f"{c.passed} / {run}" + (f" ({c.excluded})" if c.excluded else "")
        cell = cell if run or c.excluded else "-"
        rows.append(f"| {op.op_type} | {op.becomes} | {cell} | {op.note} |")
    totals = (f"ONNX {report.onnx_version} backend suite through `WorkbenchBackend`: "
              f"{report.total('passed')} node cases pass, {report.total('failed')} fail, "
              f"{report.total('excluded')} excluded ({_unclaimed()} use an operator not in this table, "
              f"the rest by `EXCLUDED`'s {len(EXCLUDED)} reviewed patterns); model cases: "
              + ", ".join(f"{k} {v.get('passed', 0)} pass / {v.get('failed', 0)} fail / "
                          f"{v.get('excluded', 0)} excluded" for k, v in sorted(report.models.items())))
    return "\n".join(rows) + "\n\n" + totals


def _unclaimed() -> int:
    return sum(1 for c in cases() if c.kind == "node" and any(op not in SUPPORTED for op in c.ops))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="per-operator counts as JSON")
    args = parser.parse_args(argv)
    report = run_suite()
    print(json.dumps(report.to_json(), indent=1) if args.json else supported_table(report))


if __name__ == "__main__":
    main()
