"""The Dask executor: a sweep's evaluations as tasks on Dask distributed workers.

- The cluster: `ExecutorSpec.address` None starts a `LocalCluster` of `workers` processes of one
  thread each, every socket on 127.0.0.1 (the dashboard too: Dask's default ':8787' would bind
  every interface, reference/sweep.md 1.1); otherwise the client connects to the running
  scheduler the user named (with their TLS options).
- Shipping: a LocalCluster's workers are forked from the client (where `fork` exists, as the
  local pool's are): they inherit the evaluation (each workload's quantized graph, prepared once
  in the client) and everything the client warmed, and nothing is pickled.  A running
  scheduler's workers get it pickled once, in a worker plugin: the scheduler sends a plugin once
  to every worker and to each worker that joins later (a restarted one), and the worker unpickles
  it on its first task; its tasks then share it (with its program cache and ranker, as a forked
  local worker does).  (`scatter(broadcast=True)` made some workers fetch and unpickle it twice.)
- A forked worker replaces Dask's offload thread pool, whose thread the fork lost, and forgets
  the client's `Client` it inherited (`_after_fork`).
- A LocalCluster's own periodic work is slowed down (see `LOCAL_CLUSTER`): its workers share
  the cores with the scheduler, the nannies and the client, and the evaluations are CPU-bound.
- Tasks: a task evaluates a batch of points; the batch grows with the measured seconds per point
  until a task takes about `task_s` (Dask costs ~2 ms a task, a point 1 ms to seconds).
- Faults: a task whose worker dies is re-run elsewhere by Dask, up to the scheduler's
  `allowed-failures` (this LocalCluster: `crash_tries - 1`); a batch that still fails is split
  and its points re-run one per task, so one point that kills its worker every time is recorded
  'crash' with its reason, and the others are evaluated.  A point past `timeout_s` has its worker
  killed by a watchdog in the task (Dask has no task time limit) and is recorded 'timeout'.  A
  lost connection to the scheduler raises ExecutorError; the store keeps every finished point.
- The client (the engine) alone writes the store: tasks return plain `Done` records.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import math
import multiprocessing
import os
import pickle
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import CancelledError, ThreadPoolExecutor
from typing import Any

import cloudpickle
from distributed import WorkerPlugin

from codesign.sweep.executor.base import Done, Evaluation
from codesign.sweep.executor.spec import ExecutorError, ExecutorSpec, check_workers
from codesign.sweep.space import Point

TIMEOUT_TOPIC = "codesign-sweep-timeout"
CRASH_TRIES = 2  # as the local executor: a point whose worker dies is tried once more
# A LocalCluster's settings beside its allowed failures.  Measured with 2 idle workers: the
# cluster's processes took 12.5% of a core with Dask's defaults, 2% with these; a busy worker's
# threads beside the task's took 7-8% of its CPU with the defaults, 1.3-1.5% with these (README,
# "Sweeps on Dask").
LOCAL_CLUSTER: dict[str, Any] = {
    # one task per 1-thread worker: a worker's death makes no queued task suspect
    "distributed.scheduler.worker-saturation": 1.0,
    # nothing to steal with one queued task per thread; stealing's bookkeeping runs every second
    "distributed.scheduler.work-stealing": False,
    # the statistical profiler samples every thread's stack every 10 ms: pure cost here
    "distributed.worker.profile.enabled": False,
    # every server's event loop tick (a stall detector, default 20 ms), its psutil sampling (500 ms)
    # and a worker's and nanny's memory check (100 ms) take the GIL from the evaluation's thread
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.admin.system-monitor.disk": False,
    "distributed.worker.memory.monitor-interval": "1s",
    # Dask's MALLOC_TRIM_THRESHOLD_=65536 returns memory to the OS at every free
    "distributed.nanny.pre-spawn-environ": {"OMP_NUM_THREADS": 1, "MKL_NUM_THREADS": 1,
                                            "OPENBLAS_NUM_THREADS": 1},
}
# The evaluations of this process's sweeps by plugin name: a LocalCluster's workers, forked from
# this process, find theirs here instead of unpickling it.
_INHERITED: dict[str, Evaluation] = {}


def can_fork() -> bool:
    """Whether a LocalCluster's workers can be forked from the client (as the local pool's)."""
    return "fork" in multiprocessing.get_all_start_methods() and sys.platform.startswith("linux")


def _after_fork() -> None:
    """In a child forked from this process (a LocalCluster's worker), what the fork left broken:
    - Dask's one-thread pool that (de)serializes messages over 10 MiB lost its thread, if the
      client had started it, and would never run what it is given (the worker hung on its first
      large message): a fresh pool starts its own thread when first used;
    - the client's `Client`, inherited by a worker forked after it (one the nanny restarts), is
      this process's default client, whose event loop's thread is gone: a task's `get_client()`
      hung on it; without it, the worker makes its own."""
    import distributed.client
    import distributed.utils

    distributed.utils._offload_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="Dask-Offload")
    distributed.client._global_clients.clear()


os.register_at_fork(after_in_child=_after_fork)


class _Forking:
    """Dask's `distributed.worker.multiprocessing-method` 'fork' in this process while any of its
    forking LocalClusters is open: a nanny reads the setting at each start of its worker, so a
    `dask.config.set` block around the cluster's start alone would leave a restarted worker
    spawned, without the evaluation."""

    def __init__(self) -> None:
        self.open = 0
        self.setting: Any = None

    def enter(self) -> None:
        import dask

        if self.open == 0:
            self.setting = dask.config.set({"distributed.worker.multiprocessing-method": "fork"})
        self.open += 1

    def exit(self) -> None:
        self.open -= 1
        if self.open == 0 and self.setting is not None:
            self.setting.__exit__(None, None, None)  # the setting before the first enter
            self.setting = None


_FORKING = _Forking()


class ShippedEvaluation(WorkerPlugin):
    """A sweep's evaluation, pickled once in the client, unpickled once per worker (first use);
    or, with no bytes, the one a forked worker inherited under `name`."""

    idempotent = True  # registered again under the same name: the worker keeps its copy

    def __init__(self, blob: bytes, name: str = "") -> None:
        self.blob, self.name = blob, name
        self.loaded: Evaluation | None = None
        self.lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"blob": self.blob, "name": self.name}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["blob"], state.get("name", ""))  # type: ignore[misc]

    def evaluation(self) -> Evaluation:
        with self.lock:
            if self.loaded is None and not self.blob:
                self.loaded = _INHERITED.get(self.name)
                if self.loaded is None:
                    raise ExecutorError(f"this Dask worker (pid {os.getpid()}) was not forked from the "
                                        f"client of sweep {self.name}, and nothing was shipped to it")
            if self.loaded is None:
                self.loaded = pickle.loads(self.blob)  # the client's own evaluation, never a store's
                self.blob = b""  # its bytes are not needed twice in the worker's memory
                # it lives as long as the worker: out of the collector's way, as a forked
                # local worker's inherited copy is (its objects are old in the parent)
                gc.collect()
                gc.freeze()
            return self.loaded


def _evaluate_batch(plugin: str, points: list[Point], timeout_s: float) -> list[Done]:
    """The task: evaluate `points` in order with this worker's copy of the evaluation."""
    from distributed import get_worker

    worker = get_worker()
    evaluation = worker.plugins[plugin].evaluation()  # type: ignore[attr-defined]
    return [_with_watchdog(evaluation, point, timeout_s, worker, plugin) for point in points]


def _with_watchdog(evaluation: Evaluation, point: Point, timeout_s: float, worker: Any, sweep: str) -> Done:
    timer = threading.Timer(timeout_s, _expire, args=(worker, f"{sweep} {point.id}"))
    timer.daemon = True
    timer.start()
    try:
        return evaluation(point)
    finally:
        timer.cancel()


def _expire(worker: Any, message: str) -> None:
    """A point ran past its time: tell the scheduler which ('SWEEP POINT'), then end this worker
    (its nanny starts a fresh one); a thread cannot be stopped otherwise."""
    with contextlib.suppress(Exception):
        worker.loop.add_callback(worker.log_event, TIMEOUT_TOPIC, message)
        time.sleep(0.5)  # the event leaves in the worker's next batched message
    os._exit(70)


class DaskExecutor:
    """Runs a sweep's evaluations on a Dask cluster (see the module doc)."""

    def __init__(self, evaluation: Evaluation, spec: ExecutorSpec, *, workers: int = 2,
                 timeout_s: float = 600.0, crash_tries: int = CRASH_TRIES, task_s: float = 0.5,
                 points_per_task: int | None = None, connect_s: float = 10.0) -> None:
        check_workers(spec, workers)
        self.spec, self.timeout_s, self.task_s = spec, timeout_s, task_s
        self.points_per_task = points_per_task
        self.point_s: float | None = None  # mean seconds per point so far
        self.cluster: Any = None
        self.plugin = f"codesign-sweep-{uuid.uuid4().hex[:12]}"
        # a LocalCluster's workers fork from here: they inherit the evaluation, none is shipped
        self.inherited = spec.address is None and can_fork()
        if self.inherited:
            _INHERITED[self.plugin] = evaluation
            _FORKING.enter()
        start = time.monotonic()
        try:
            self.client = self._connect(workers, crash_tries, connect_s)
        except BaseException:
            self._forget()
            raise
        try:
            self.tries = int(self.client.run_on_scheduler(_allowed_failures_of)) + 1
            self.connect_s = time.monotonic() - start  # a LocalCluster's start included
            blob = b"" if self.inherited else cloudpickle.dumps(evaluation)
            self.blob_bytes = len(blob)
            self.client.register_plugin(ShippedEvaluation(blob, self.plugin), name=self.plugin)
            self.ship_s = time.monotonic() - start - self.connect_s  # to every worker, not yet unpickled
            self.slots = max(sum(self.client.nthreads().values()), 1)
        except BaseException:
            self.close()
            raise
        self.tasks = 0

    def _connect(self, workers: int, crash_tries: int, connect_s: float) -> Any:
        import dask
        from distributed import Client, LocalCluster, Security

        if self.spec.address is None:
            settings = {**LOCAL_CLUSTER, "distributed.scheduler.allowed-failures": crash_tries - 1}
            with dask.config.set(settings):
                self.cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                            host="127.0.0.1", dashboard_address="127.0.0.1:0",
                                            silence_logs=logging.ERROR)
            return Client(self.cluster)
        security = Security(**self.spec.security) if self.spec.security is not None else None
        try:
            client = Client(self.spec.url, timeout=f"{connect_s}s", security=security)
        except OSError as exc:
            raise ExecutorError(f"cannot connect to the Dask scheduler at {self.spec.url} ({exc})") from None
        try:
            client.wait_for_workers(1, timeout=connect_s * 6)
        except (TimeoutError, OSError):
            client.close()
            raise ExecutorError(f"the Dask scheduler at {self.spec.url} has no worker after "
                                f"{connect_s * 6:g} s") from None
        return client

    # -- running ---------------------------------------------------------------------------------
    def run(self, points: Sequence[Point]) -> Iterator[tuple[int, Done]]:
        from distributed import as_completed

        futures: dict[Any, list[int]] = {}
        for chunk in self._chunks(len(points)):
            futures[self._submit(points, chunk)] = chunk
        queue = as_completed(list(futures))
        try:
            for future in queue:
                chunk = futures.pop(future)
                for index, done in self._outcome(future, chunk, points):
                    if done is None:  # split: its points go again, one per task
                        single = self._submit(points, [index])
                        futures[single] = [index]
                        queue.add(single)
                        continue
                    self._observe(done)
                    yield index, done
        finally:
            if futures:  # the caller stopped early, or the scheduler went away
                with contextlib.suppress(Exception):
                    self.client.cancel(list(futures))

    def _submit(self, points: Sequence[Point], chunk: list[int]) -> Any:
        self.tasks += 1
        return self.client.submit(_evaluate_batch, self.plugin, [points[i] for i in chunk], self.timeout_s,
                                  pure=False)

    def _outcome(self, future: Any, chunk: list[int], points: Sequence[Point]
                 ) -> Iterator[tuple[int, Done | None]]:
        """Each point's Done from a finished task (None: re-run it alone)."""
        from distributed import KilledWorker

        try:
            dones = future.result()
        except KilledWorker:
            timed_out = self._timed_out()
            for index in chunk:
                if points[index].id in timed_out:
                    yield index, Done("timeout", reason=f"no result within {self.timeout_s:g} s; its Dask "
                                      "worker was killed", wall_s=self.timeout_s, attempts=self.tries)
                elif len(chunk) > 1:
                    yield index, None
                else:
                    yield index, Done("crash", reason=f"its Dask worker died on each of {self.tries} tries "
                                      "(KilledWorker)", attempts=self.tries)
            return
        except Exception as exc:
            # a lost scheduler: its futures are cancelled or their comm closed (an OSError); an
            # evaluation's own exceptions never get here (Evaluation catches them)
            if future.status == "cancelled" or isinstance(exc, CancelledError | OSError):
                where, why = self.spec.describe(), type(exc).__name__
                raise ExecutorError(f"lost the Dask scheduler at {where} ({why}); the store keeps every "
                                    "finished point: rerun with --resume") from None
            for index in chunk:
                yield index, Done("error", reason=f"the Dask task failed: {type(exc).__name__}: {exc}")
            return
        yield from zip(chunk, dones, strict=True)

    def _timed_out(self) -> set[str]:
        """This sweep's points whose watchdog fired (logged to the scheduler before the worker ended)."""
        with contextlib.suppress(Exception):
            messages = [str(msg).split(" ", 1) for _, msg in self.client.get_events(TIMEOUT_TOPIC)]
            return {m[1] for m in messages if len(m) == 2 and m[0] == self.plugin}
        return set()

    def _observe(self, done: Done) -> None:
        if done.wall_s is not None and done.status == "ok":
            self.point_s = done.wall_s if self.point_s is None else 0.8 * self.point_s + 0.2 * done.wall_s

    def _chunks(self, count: int) -> list[list[int]]:
        """Indices in tasks of `points_per_task` (by default: one per task until a point's
        seconds are known, then enough for `task_s`, keeping every slot busy)."""
        size = self.points_per_task or 1
        if self.points_per_task is None and self.point_s is not None:
            enough = math.ceil(self.task_s / max(self.point_s, 1e-6))
            size = max(1, min(enough, math.ceil(count / self.slots)))
        return [list(range(i, min(i + size, count))) for i in range(0, count, size)]

    # -- closing ---------------------------------------------------------------------------------
    def _forget(self) -> None:
        """This sweep's inherited evaluation, and its hold on forking, let go (once)."""
        if _INHERITED.pop(self.plugin, None) is not None:
            _FORKING.exit()

    def close(self) -> None:
        if self.cluster is None and hasattr(self, "client"):  # a running cluster outlives the sweep
            with contextlib.suppress(Exception):
                self.client.unregister_worker_plugin(self.plugin)
        with contextlib.suppress(Exception):
            self.client.close(timeout=10)
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.close(timeout=10)
            self.cluster = None
        self._forget()

    def __enter__(self) -> DaskExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# Run on the scheduler, which need not have this package: a lambda travels by value.
_allowed_failures_of = lambda dask_scheduler: dask_scheduler.allowed_failures


__all__ = ["CRASH_TRIES", "LOCAL_CLUSTER", "DaskExecutor", "can_fork"]
