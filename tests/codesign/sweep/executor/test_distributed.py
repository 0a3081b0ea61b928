"""The Dask executor on clusters these tests start on 127.0.0.1 and stop (no process is left)."""

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from codesign.sweep.engine import run_sweep
from codesign.sweep.executor import Evaluation, ExecutorError, ExecutorSpec
from codesign.sweep.executor import distributed as distributed_module
from codesign.sweep.executor.distributed import DaskExecutor, ShippedEvaluation
from codesign.sweep.store import SweepStore

from ..conftest import fake_evaluate
from ..test_engine import faulty

distributed = pytest.importorskip("distributed")
psutil = pytest.importorskip("psutil")


class Noted:
    """A fake evaluation that notes each process that unpickles it (`shipped`) and, per point,
    the process and the Dask task that evaluated it (`evaluated`); `delay_s` per point."""

    def __init__(self, folder, delay_s=0.0):
        self.folder, self.delay_s = Path(folder), delay_s

    def __setstate__(self, state):
        self.__dict__.update(state)
        with open(self.folder / "shipped.txt", "a") as f:
            f.write(f"{os.getpid()}\n")

    def __call__(self, point):
        time.sleep(self.delay_s)
        task = distributed.get_worker().get_current_task() if self.in_worker() else "client"
        with open(self.folder / "evaluated.txt", "a") as f:
            f.write(f"{os.getpid()} {task} {point.id}\n")
        return fake_evaluate(point)

    @staticmethod
    def in_worker():
        try:
            distributed.get_worker()
        except ValueError:
            return False
        return True

    def shipped(self):
        path = self.folder / "shipped.txt"
        return path.read_text().split() if path.exists() else []

    def evaluated(self):
        path = self.folder / "evaluated.txt"
        return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def leftovers():
    """This process's children, less multiprocessing's resource tracker (it lives as long as we do)."""
    children = psutil.Process().children(recursive=True)
    return [(c.pid, c.cmdline()) for c in children if "resource_tracker" not in " ".join(c.cmdline())]


def rows(path):
    """A store's points as comparable data (not the order they finished in or their seconds)."""
    with SweepStore.read(path) as store:
        return {r.id: (r.status, r.config, r.metrics, r.reason, r.attempts) for r in store.points()}


def seqs(path):
    with SweepStore.read(path) as store:
        return sorted(r.seq for r in store.points())


@pytest.fixture(scope="module")
def cluster():
    """Three 1-thread worker processes with nannies on loopback; a task may kill 2 workers."""
    import dask

    settings = {"distributed.scheduler.allowed-failures": 1, "distributed.scheduler.worker-saturation": 1.0}
    with dask.config.set(settings):
        local = distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=True, host="127.0.0.1",
                                         dashboard_address="127.0.0.1:0", silence_logs=50)
    client = distributed.Client(local)
    try:
        yield local, client
    finally:
        client.close(timeout=10)
        local.close(timeout=10)
        assert not leftovers(), "a cluster process outlived the cluster"


def address(local):
    return local.scheduler_address.removeprefix("tcp://")


def test_local_and_dask_sweeps_give_identical_stores_the_workers_inheriting_the_evaluation(tmp_path,
                                                                                             tiny_space):
    noted = Noted(tmp_path)
    local = run_sweep(tiny_space, tmp_path / "local.db", noted, strategy="random", seed=7, budget=7,
                      workers=2)
    assert noted.shipped() == []  # forked workers inherit it
    (tmp_path / "evaluated.txt").unlink()
    dask = run_sweep(tiny_space, tmp_path / "dask.db", noted, strategy="random", seed=7, budget=7, workers=2,
                     executor="dask")
    assert local.by_status == dask.by_status and dask.by_status["ok"] == 7
    assert rows(tmp_path / "local.db") == rows(tmp_path / "dask.db")
    assert sorted(p.id for p in local.front) == sorted(p.id for p in dask.front)
    evaluated = noted.evaluated()
    pids = {pid for pid, _, _ in evaluated}
    assert len(evaluated) == 7 and len(pids) == 2 and os.getpid() not in {int(p) for p in pids}
    assert noted.shipped() == [], "the LocalCluster's workers fork from the client: nothing is unpickled"
    assert not leftovers(), "the LocalCluster outlived the sweep"
    assert not distributed_module._INHERITED, "the sweep's evaluation outlived its executor"


def test_a_worker_neither_forked_from_the_client_nor_shipped_the_evaluation_says_so():
    plugin = ShippedEvaluation(b"", "codesign-sweep-nothere")
    with pytest.raises(ExecutorError, match=r"^this Dask worker \(pid \d+\) was not forked from the client "
                       r"of sweep codesign-sweep-nothere, and nothing was shipped to it$"):
        plugin.evaluation()


def test_points_are_batched_into_tasks_once_their_seconds_are_known(tmp_path, tiny_space, cluster):
    local, _ = cluster
    noted = Noted(tmp_path)
    points = list(tiny_space)
    with DaskExecutor(Evaluation(noted), ExecutorSpec("dask", address(local)), timeout_s=30) as executor:
        assert executor.slots == 3 and executor.tries == 2
        first = dict(executor.run(points))
        assert executor.tasks == len(points)  # one point per task while a point's seconds are unknown
        second = dict(executor.run(points))
        assert executor.tasks == len(points) + 3  # then a third of them per task: every worker busy
    assert {i: d.result for i, d in first.items()} == {i: d.result for i, d in second.items()}
    assert all(d.status == "ok" and d.result.point_id == points[i].id for i, d in second.items())
    tasks = [task for _, task, _ in noted.evaluated()[len(points):]]
    assert len(set(tasks)) == 3 and all(tasks.count(t) == len(points) // 3 for t in tasks)
    assert len(noted.shipped()) == 3


def test_a_worker_killed_mid_sweep_loses_and_repeats_no_point(tmp_path, tiny_space, cluster):
    local, client = cluster
    noted = Noted(tmp_path, delay_s=0.5)
    victim = next(iter(client.run(os.getpid).values()))
    killed = threading.Event()

    def kill_when_started():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done = noted.evaluated()
            if len(done) >= 3 and any(int(pid) == victim for pid, _, _ in done):
                os.kill(victim, signal.SIGKILL)  # mid-way through its next point
                killed.set()
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_when_started, daemon=True)
    killer.start()
    summary = run_sweep(tiny_space, tmp_path / "s.db", noted, strategy="random", seed=2, workers=3,
                        executor=f"dask://{address(local)}")
    killer.join(timeout=5)
    assert killed.is_set() and not psutil.pid_exists(victim)
    assert summary.by_status == {"ok": 9, "infeasible": 9, "error": 0, "timeout": 0, "crash": 0}
    assert seqs(tmp_path / "s.db") == list(range(18)), "a point was stored twice (a row replaced)"
    stored = rows(tmp_path / "s.db")
    assert all(r[4] == 1 for r in stored.values())
    evaluated = [point for _, _, point in noted.evaluated()]
    assert set(evaluated) == {i for i, r in stored.items() if r[0] == "ok"}
    assert len(evaluated) <= 9 + 1  # only the point the victim was running ran again
    client.wait_for_workers(3, timeout=30)  # the nanny replaced it


def crashing(point):
    """test_engine's faults less the hang: segfaults on block_in 8 x block_out 8, raises on 4 x 16."""
    if (point.config.block_in, point.config.block_out) == (16, 16):
        return fake_evaluate(point)
    return faulty(point)


def faults(path):
    with SweepStore.read(path) as store:
        return {(r.config["block_in"], r.config["block_out"]): r for r in store.points()
                if r.status not in ("ok", "infeasible")}


def test_a_point_that_segfaults_every_time_is_recorded_and_the_cluster_survives(tmp_path, tiny_space,
                                                                                 cluster):
    local, client = cluster
    start = time.monotonic()
    summary = run_sweep(tiny_space, tmp_path / "s.db", crashing, strategy="grid", workers=3, timeout_s=30,
                        executor=f"dask://{address(local)}")
    assert time.monotonic() - start < 60
    assert summary.by_status == {"ok": 7, "infeasible": 9, "error": 1, "timeout": 0, "crash": 1}
    bad = faults(tmp_path / "s.db")
    assert bad[(8, 8)].status == "crash" and bad[(8, 8)].attempts == 2  # allowed-failures 1: 2 tries
    assert bad[(8, 8)].reason == "its Dask worker died on each of 2 tries (KilledWorker)"
    assert bad[(4, 16)].status == "error" and bad[(4, 16)].attempts == 1
    assert bad[(4, 16)].reason.startswith("RuntimeError: the compiler gave up")
    assert seqs(tmp_path / "s.db") == list(range(18))
    client.wait_for_workers(3, timeout=30)
    assert client.submit(sum, [1, 2], pure=False).result(timeout=30) == 3


def test_a_local_cluster_forks_a_fresh_worker_for_the_one_a_segfault_killed(tmp_path, tiny_space):
    import dask

    # the nanny forks the replacement from the client mid-sweep: it inherits the evaluation too
    summary = run_sweep(tiny_space, tmp_path / "s.db", crashing, strategy="grid", workers=2, timeout_s=30,
                        executor="dask")
    assert summary.by_status == {"ok": 7, "infeasible": 9, "error": 1, "timeout": 0, "crash": 1}
    bad = faults(tmp_path / "s.db")
    assert bad[(8, 8)].reason == "its Dask worker died on each of 2 tries (KilledWorker)"
    assert bad[(4, 16)].reason.startswith("RuntimeError: the compiler gave up")
    assert not distributed_module._INHERITED and distributed_module._FORKING.open == 0
    assert dask.config.get("distributed.worker.multiprocessing-method") == "spawn"  # Dask's, back


@pytest.mark.filterwarnings("ignore:Sending large graph")
def test_a_forked_worker_takes_a_large_message_after_the_clients_offload_thread_started():
    # Dask (de)serializes messages over 10 MiB on its one offload thread: started in the client
    # before the fork, a forked worker would wait forever for it
    distributed.utils._offload_executor.submit(lambda: None).result()
    with DaskExecutor(Evaluation(fake_evaluate), ExecutorSpec("dask"), workers=1) as executor:
        assert executor.inherited
        big = b"x" * (30 * 2**20)
        assert executor.client.submit(len, big, pure=False).result(timeout=30) == len(big)


def workers_seen():
    """A task asking the scheduler, through the worker's client, how many workers it has."""
    return len(distributed.get_client().scheduler_info()["workers"])


def pids(client):
    """The workers' process ids ([] while the scheduler still counts a dead one)."""
    try:
        return list(client.run(os.getpid).values())
    except OSError:  # CommClosedError: a worker just killed
        return []


def test_a_worker_forked_after_the_client_started_makes_its_own_client():
    with DaskExecutor(Evaluation(fake_evaluate), ExecutorSpec("dask"), workers=1) as executor:
        client = executor.client
        [first] = client.run(os.getpid).values()
        os.kill(first, signal.SIGKILL)  # the nanny forks a new one from this process, Client and all
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and pids(client) in ([], [first]):
            time.sleep(0.1)
        assert len(pids(client)) == 1 and pids(client) != [first]
        assert client.submit(workers_seen, pure=False).result(timeout=30) == 1


@pytest.mark.slow
def test_a_segfault_a_hang_and_an_exception_are_recorded_as_by_the_local_pool(tmp_path, tiny_space, cluster):
    local, client = cluster
    summary = run_sweep(tiny_space, tmp_path / "s.db", faulty, strategy="grid", workers=3, timeout_s=2,
                        executor=f"dask://{address(local)}")
    assert summary.by_status == {"ok": 6, "infeasible": 9, "error": 1, "timeout": 1, "crash": 1}
    bad = faults(tmp_path / "s.db")
    assert bad[(8, 8)].status == "crash" and bad[(8, 8)].attempts == 2
    assert bad[(16, 16)].status == "timeout" and bad[(16, 16)].wall_s == 2 and bad[(16, 16)].attempts == 2
    assert bad[(16, 16)].reason == "no result within 2 s; its Dask worker was killed"
    assert bad[(4, 16)].status == "error"
    client.wait_for_workers(3, timeout=30)


def test_dask_needs_a_worker(tmp_path, tiny_space):
    with pytest.raises(ExecutorError, match=r"^--executor dask needs --workers 1 or more, not 0$"):
        run_sweep(tiny_space, tmp_path / "s.db", fake_evaluate, strategy="grid", workers=0, executor="dask")



def full_rows(path):
    """Every stored point with its whole result (layers and chosen schedules), seconds aside."""
    with SweepStore.read(path) as store:
        return {r.id: (r.status, r.metrics, [w.to_json() for w in r.result.workloads] if r.result else None)
                for r in store.points()}


class Traced:
    """An evaluation that notes the process that evaluated each point (in `folder`/NAME.txt)."""

    def __init__(self, evaluate, path):
        self.evaluate, self.path = evaluate, Path(path)

    def __call__(self, point):
        result = self.evaluate(point)
        with open(self.path, "a") as f:
            f.write(f"{os.getpid()} {point.id}\n")
        return result

    def processes(self):
        return {line.split()[0] for line in self.path.read_text().splitlines()}


def same_sweep_on_each(tmp_path, space, runs, **options):
    """The stores of one sweep run under each (name, executor, workers) of `runs`, each with its
    own real evaluation (prepared and calibrated anew), and the processes that evaluated them."""
    from codesign.sweep import pipeline

    stores, processes = {}, {}
    for name, executor, workers in runs:
        traced = Traced(pipeline.make_evaluate(space), tmp_path / f"{name}.txt")
        run_sweep(space, tmp_path / f"{name}.db", traced, executor=executor, workers=workers, **options)
        stores[name], processes[name] = full_rows(tmp_path / f"{name}.db"), traced.processes()
    return stores, processes


TWO_WAYS = [("local", "local", 2), ("dask", "dask", 2)]


def test_the_real_evaluation_gives_identical_stores_on_two_workers_and_on_one(tmp_path, tiny_space):
    # Each point's schedule ranker starts from the evaluation's calibrated prior and learns from
    # that point's runs only, so which worker evaluates a point, after which others, is moot.
    stores, processes = same_sweep_on_each(tmp_path, tiny_space, [*TWO_WAYS, ("one", "local", 1)],
                                           strategy="grid")
    assert len(stores["local"]) == 18 and sum(r[0] == "ok" for r in stores["local"].values()) == 9
    assert stores["local"] == stores["dask"] == stores["one"]
    assert len(processes["local"]) == len(processes["dask"]) == 2 and len(processes["one"]) == 1


@pytest.mark.slow
def test_the_small_space_on_resnet18_gives_identical_stores_on_two_workers(tmp_path):
    from codesign.sweep.space import load_space, resolve_space_path

    stores, processes = same_sweep_on_each(tmp_path, load_space(resolve_space_path("small")), TWO_WAYS,
                                           strategy="random", seed=0, budget=6)
    assert len(stores["local"]) == 6 and stores["local"] == stores["dask"]
    assert len(processes["local"]) == len(processes["dask"]) == 2
