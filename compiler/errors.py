"""Errors of the compiler, raised at the boundary with a message naming what is wrong and where."""

from __future__ import annotations

from hw.errors import WorkbenchError


class TensorExprError(WorkbenchError):
    """A tensor expression is malformed: wrong index count, mismatched dtypes, bad shapes."""


class ScheduleError(WorkbenchError):
    """A schedule record cannot be applied, or the schedule cannot run on the target.

    The message names the record (or the stage) and the reason; schedule search catches only
    this error.
    """


class ModelImportError(WorkbenchError):
    """A model file cannot be imported: unreadable, malformed, truncated, an unsupported operator or
    opset, or a shape that cannot be made static. The message is one line naming what and where."""


class GraphError(WorkbenchError):
    """A graph breaks an invariant of the graph IR (order, definitions, shapes, dtypes, attributes).

    The message names the node (or value) and the problem.
    """


class IRError(RuntimeError):
    """The loop IR breaks an invariant after lowering or after a pass (compiler.tir.verify).

    The message names the stage and the offending statement.  A pass produced it, so it is a
    compiler bug, not bad input: it is not a ScheduleError, so schedule search does not take it
    for an infeasible point and the command line shows its traceback.
    """


class GpuUnavailableError(WorkbenchError):
    """A GPU is needed and none can be used: cuda-bindings is not installed, no driver loads, or
    the device does not exist.  The message says which, so a command fails in one line and a
    test skips with the reason."""
