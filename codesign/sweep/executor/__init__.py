"""Where a sweep's points are evaluated: `open_executor(spec, evaluation, ...)` gives the local
process pool (`local.py`) or a Dask cluster (`distributed.py`) behind one interface
(`base.Executor`: `run(points)` yields (index, Done) as points finish; `slots`; `close()`).
`spec.py` reads `--executor` and `--security`; `scaling.py` models throughput against workers.
"""

from __future__ import annotations

from codesign.sweep.executor.base import Done, Evaluate, Evaluation, Executor, failed
from codesign.sweep.executor.spec import (
    ExecutorError,
    ExecutorSpec,
    check_reachable,
    check_workers,
    parse_executor,
)


def open_executor(spec: ExecutorSpec | str, evaluation: Evaluation, *, workers: int | None = None,
                  timeout_s: float = 600.0) -> Executor:
    """The executor `spec` names ('local' by default), running `evaluation`; close it after use.
    `workers`: local processes, or the LocalCluster's worker processes (default the core count);
    a running scheduler's cluster has the workers it has."""
    if isinstance(spec, str):
        spec = parse_executor(spec)
    if spec.kind == "local":
        from codesign.sweep.executor.local import LocalExecutor

        return LocalExecutor(evaluation, workers=workers, timeout_s=timeout_s)
    import os

    from codesign.sweep.executor.distributed import DaskExecutor  # dask imports only when used

    return DaskExecutor(evaluation, spec, workers=(os.cpu_count() or 1) if workers is None else workers,
                        timeout_s=timeout_s)


__all__ = ["Done", "Evaluate", "Evaluation", "Executor", "ExecutorError", "ExecutorSpec", "check_reachable",
           "check_workers", "failed", "open_executor", "parse_executor"]
