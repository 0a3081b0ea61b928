"""ONNX's own backend test suite (onnx.backend.test) through WorkbenchBackend: every node case of
a supported operator and every model case that uses only supported operators must pass, within
the suite's tolerances, except `EXCLUDED`'s reviewed patterns (each skip says why)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from compiler.frontend import SUPPORTED
from compiler.runtime.conformance import (
    EXCLUDED,
    Case,
    OpCounts,
    SuiteReport,
    backend_test,
    cases,
    node_tests,
    subject,
    supported_table,
)
from compiler.runtime.onnx_backend import WorkbenchBackend

# The suite itself: its unittest classes collected by pytest (the light "real" models, whose
# expected outputs onnx computes with its slow reference evaluator, only under -m slow).
globals().update(backend_test(("node", "simple", "pytorch-converted", "pytorch-operator"), __name__))
globals().update({name: pytest.mark.slow(cls) for name, cls in backend_test(("real",), __name__).items()})
# ... and the node and small model cases with every node a native host kernel where one covers it
# (compiling the kernels of 700 small models takes minutes)
globals().update({name: pytest.mark.slow(cls) for name, cls in backend_test(
    ("node", "simple", "pytorch-converted", "pytorch-operator"), __name__, native=True).items()})


def test_every_exclusion_pattern_matches_a_claimed_case() -> None:
    """No stale entry: each pattern excludes some case whose operators are all supported."""
    claimed = [c for c in cases() if all(op in SUPPORTED for op in c.ops)]
    for e in EXCLUDED:
        assert any(re.search(e.pattern, c.name) for c in claimed), e.pattern


def test_excluded_cases_do_fail() -> None:
    """An excluded case of supported operators is refused by the backend (an exclusion never
    hides a case that would pass): sampled, one per pattern."""
    by_name = node_tests()
    for e in EXCLUDED:
        case = next(c for c in cases(("node",)) if re.search(e.pattern, c.name)
                    and all(op in SUPPORTED for op in c.ops) and c.name in by_name)
        tc: Any = by_name[case.name]
        with pytest.raises(Exception):  # noqa: B017  (an import error or a wrong output)
            rep = WorkbenchBackend.prepare(tc.model)
            for inputs, refs in tc.data_sets:
                outs = rep.run([_array(i) for i in inputs])
                for out, ref in zip(outs, refs, strict=True):
                    np.testing.assert_allclose(out, _array(ref), rtol=tc.rtol, atol=tc.atol)


def _array(value: Any) -> Any:
    from onnx import numpy_helper

    return numpy_helper.to_array(value) if hasattr(value, "raw_data") else value


def test_exclusion_reasons() -> None:
    case = Case("node", "test_cast_FLOAT_to_FLOAT8E4M3FN", ("Cast",), "Cast")
    assert case.exclusion is not None and "float8" in case.exclusion
    unclaimed = Case("node", "test_foo", ("Foo", "Relu"), "Foo")
    assert unclaimed.exclusion == "operator Foo not in the supported table"
    assert Case("node", "test_relu", ("Relu",), "Relu").exclusion is None


def test_subject_is_the_operator_the_case_names() -> None:
    assert subject("test_reduce_sum_keepdims_random", ("ReduceSum",)) == "ReduceSum"
    assert subject("test_maxpool_2d_pads", ("MaxPool",)) == "MaxPool"
    assert subject("test_max_one_input", ("Max",)) == "Max"
    assert subject("test_batchnorm_epsilon", ("BatchNormalization",)) == "BatchNormalization"
    assert subject("test_softplus_expanded", ("Exp", "Log")) == "Softplus"


def test_supported_table_shows_counts() -> None:
    report = SuiteReport("1.0", {"Relu": OpCounts(passed=3, excluded=1)}, {"simple": {"passed": 2}})
    table = supported_table(report)
    assert "| Relu | Relu | 3 / 3 (1) |" in table
    assert "3 node cases pass, 0 fail, 1 excluded" in table


def test_readme_table_has_every_supported_operator() -> None:
    """The README's table (regenerate it with `python -m compiler.runtime.conformance`) lists
    exactly the supported operators, with the suite's counts."""
    readme = (Path(__file__).parents[3] / "README.md").read_text()
    start = readme.index("| ONNX operator | graph IR | ONNX suite")
    rows = readme[start:].split("\n\n")[0].splitlines()[2:]
    assert [r.split(" | ")[0].lstrip("| ") for r in rows] == sorted(SUPPORTED)
    assert f"by `EXCLUDED`'s {len(EXCLUDED)} reviewed patterns" in readme
