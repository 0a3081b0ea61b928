"""The local executor: the sweep's evaluations in forked processes of this machine
(`codesign.exec.pool.Pool`: a time limit per point; a worker that crashes or hangs is replaced
and only its point fails).  Workers fork from the client, so they inherit the prepared workloads
(each workload quantized once per sweep) without shipping them."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

from codesign.exec.pool import Pool
from codesign.sweep.executor.base import Done, Evaluation, failed
from codesign.sweep.space import Point


class LocalExecutor:
    """`workers` forked processes (0: in this process, with no time limit)."""

    def __init__(self, evaluation: Evaluation, *, workers: int | None = None,
                 timeout_s: float = 600.0) -> None:
        workers = (os.cpu_count() or 1) if workers is None else workers
        self.pool: Pool[Done] = Pool(evaluation, workers=workers, timeout_s=timeout_s, fail=failed)
        self.slots, self.timeout_s = max(workers, 1), timeout_s

    def run(self, points: Sequence[Point]) -> Iterator[tuple[int, Done]]:
        return self.pool.run(points)

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["LocalExecutor"]
