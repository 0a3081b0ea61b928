"""codesign/run/inputs.py: inputs are checked before any work: shape, dtype, finite values."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.run.inputs import check_inputs
from compiler.graph.ir import Graph, Value
from hw.errors import InputError


def _graph() -> Graph:
    g = Graph("g")
    g.values["x"] = Value("x", (2, 3), "float32", None)
    g.inputs = ["x"]
    return g


@pytest.mark.parametrize("bad, count, index", [(np.nan, 1, (0, 1)), (np.inf, 1, (0, 1)),
                                               (-np.inf, 1, (0, 1))])
def test_non_finite_inputs_are_refused(bad, count, index):
    x = np.zeros((2, 3), np.float32)
    x[index] = bad
    with pytest.raises(InputError, match=rf"^input 'x' holds {count} NaN or infinite value\(s\), the "
                                         rf"first at index \(0, 1\); inputs must be finite$"):
        check_inputs(_graph(), {"x": x})
    check_inputs(_graph(), {"x": np.zeros((2, 3), np.float32)})
