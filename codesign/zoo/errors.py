"""The zoo's one error type."""

from __future__ import annotations


class ZooError(ValueError):
    """A model name, opset, option or sample count that the zoo does not have."""
