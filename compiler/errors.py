"""Errors of the compiler, raised at the boundary with a message naming what is wrong and where."""

from __future__ import annotations


class TensorExprError(ValueError):
    """A tensor expression is malformed: wrong index count, mismatched dtypes, bad shapes."""


class ScheduleError(ValueError):
    """A schedule record cannot be applied, or the schedule cannot run on the target.

    The message names the record (or the stage) and the reason; schedule search catches only
    this error.
    """
