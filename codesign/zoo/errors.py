"""The zoo's one error type."""

from __future__ import annotations

from hw.errors import WorkbenchError


class ZooError(WorkbenchError):
    """A model name, opset, option or sample count that the zoo does not have."""
