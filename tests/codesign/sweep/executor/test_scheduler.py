"""The README's three commands: `dask scheduler` and two `dask worker` processes on 127.0.0.1 serve
`codesign sweep --executor dask://127.0.0.1:PORT`; everything is stopped after, no process left."""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from codesign.cli import main
from codesign.sweep import pipeline
from codesign.sweep.store import SweepStore

from ..conftest import TINY_SPACE, fake_evaluate

psutil = pytest.importorskip("psutil")
ROOT = Path(__file__).resolve().parents[4]
DASK = str(Path(sys.executable).parent / "dask")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(argv, log):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    with open(log, "w") as out:
        return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def stop(process):
    """End a command's whole process group (a worker's nanny and its worker): TERM, then KILL."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and group_alive(process.pid):
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_for_port(port, processes, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert all(p.poll() is None for p in processes), "the scheduler exited"
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.1)
    raise AssertionError(f"the scheduler did not listen on {port} within {timeout_s} s")


def listening(processes):
    """The addresses the commands' processes (and their children) listen on."""
    found = set()
    for p in processes:
        for proc in [psutil.Process(p.pid), *psutil.Process(p.pid).children(recursive=True)]:
            for conn in proc.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    found.add(conn.laddr.ip)
    return found


def test_a_scheduler_and_two_workers_started_by_hand_serve_a_sweep(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(pipeline, "make_evaluate", lambda space: fake_evaluate)
    (tmp_path / "tiny.toml").write_text(TINY_SPACE)
    port = free_port()
    processes = [start([DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                        "--dashboard-address", "127.0.0.1:0"], tmp_path / "scheduler.log")]
    try:
        for i in range(2):
            processes.append(start([DASK, "worker", f"tcp://127.0.0.1:{port}", "--host", "127.0.0.1",
                                    "--nthreads", "1", "--dashboard-address", "127.0.0.1:0"],
                                   tmp_path / f"worker{i}.log"))
        wait_for_port(port, processes[:1])
        code = main(["sweep", str(tmp_path / "tiny.toml"), "--store", str(tmp_path / "s.db"), "--strategy",
                     "grid", "--executor", f"dask://127.0.0.1:{port}", "--json"])
        out = json.loads(capsys.readouterr().out)
        assert code == 0 and out["ok"] == 9 and out["infeasible"] == 9
        with SweepStore.read(tmp_path / "s.db") as store:
            assert sorted(r.seq for r in store.points()) == list(range(18))
        assert listening(processes) == {"127.0.0.1"}, "something listens beyond loopback"
    finally:
        for process in reversed(processes):
            stop(process)
    assert not any(group_alive(p.pid) for p in processes), "a dask process outlived the test"


@pytest.mark.slow
def test_a_lost_scheduler_stops_the_sweep_and_resume_finishes_it(tmp_path, tiny_space):
    from codesign.sweep.engine import run_sweep
    from codesign.sweep.executor import ExecutorError

    from .test_distributed import Noted, rows

    port = free_port()
    scheduler = start([DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                       "--dashboard-address", "127.0.0.1:0"], tmp_path / "scheduler.log")
    processes = [scheduler]
    noted = Noted(tmp_path, delay_s=0.5)
    try:
        processes.append(start([DASK, "worker", f"tcp://127.0.0.1:{port}", "--host", "127.0.0.1",
                                "--nthreads", "1", "--dashboard-address", "127.0.0.1:0"],
                               tmp_path / "worker.log"))
        wait_for_port(port, processes[:1])

        def kill_scheduler():
            deadline = time.monotonic() + 60
            while len(noted.evaluated()) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            os.killpg(scheduler.pid, signal.SIGKILL)

        killer = threading.Thread(target=kill_scheduler, daemon=True)
        killer.start()
        lost = (rf"^lost the Dask scheduler at dask://127.0.0.1:{port} "
                r"\((\w*CancelledError|CommClosedError)\); the store keeps every finished point: "
                r"rerun with --resume$")
        with pytest.raises(ExecutorError, match=lost):
            run_sweep(tiny_space, tmp_path / "s.db", noted, strategy="random", seed=4, workers=1,
                      executor=f"dask://127.0.0.1:{port}")
        killer.join(timeout=10)
    finally:
        for process in reversed(processes):
            stop(process)
    kept = {i for i, r in rows(tmp_path / "s.db").items() if r[0] == "ok"}
    assert 1 <= len(kept) < 9 and all(r[0] in ("ok", "infeasible") for r in rows(tmp_path / "s.db").values())
    done = len(noted.evaluated())
    summary = run_sweep(tiny_space, tmp_path / "s.db", noted, strategy="random", seed=4, workers=2,
                        resume=True)
    assert summary.by_status["ok"] == 9 and summary.evaluated_now == 9 - len(kept)
    again = [point for _, _, point in noted.evaluated()[done:]]
    assert not set(again) & kept, "a point stored before the loss was evaluated again"
    assert not any(group_alive(p.pid) for p in processes)


def make_certificates(folder):
    """A throwaway CA and one certificate for 127.0.0.1 that it signed (server and client use),
    with the openssl command line: (ca.pem, node.pem holding the certificate and its key)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl command to make the test's certificates")

    def run(*argv):
        subprocess.run([openssl, *argv], cwd=folder, check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
        "-subj", "/CN=codesign test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "node.key", "-out", "node.csr",
        "-subj", "/CN=127.0.0.1")
    (folder / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
                                    "extendedKeyUsage=serverAuth,clientAuth\n")
    run("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "node.crt", "-days", "1", "-extfile", "ext.cnf")
    (folder / "node.pem").write_text((folder / "node.crt").read_text() + (folder / "node.key").read_text())
    return folder / "ca.pem", folder / "node.pem"


def test_a_tls_scheduler_serves_a_sweep_given_the_security_file(capsys, monkeypatch, tmp_path):
    """The README's commands with Dask's --tls-* options; `codesign sweep --security` passes the
    TOML's options to the client, which then speaks tls:// to the scheduler; plain TCP is refused."""
    monkeypatch.setattr(pipeline, "make_evaluate", lambda space: fake_evaluate)
    (tmp_path / "tiny.toml").write_text(TINY_SPACE)
    ca, node = make_certificates(tmp_path)
    (tmp_path / "tls.toml").write_text('tls_ca_file = "ca.pem"\ntls_client_cert = "node.pem"\n'
                                       "require_encryption = true\n")
    tls = ["--tls-ca-file", str(ca), "--tls-cert", str(node), "--tls-key", str(node)]
    port = free_port()
    processes = [start([DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--protocol", "tls",
                        *tls, "--dashboard-address", "127.0.0.1:0"], tmp_path / "scheduler.log")]
    try:
        processes.append(start([DASK, "worker", f"tls://127.0.0.1:{port}", "--host", "127.0.0.1",
                                "--nthreads", "1", *tls, "--dashboard-address", "127.0.0.1:0"],
                               tmp_path / "worker.log"))
        wait_for_port(port, processes[:1])
        argv = ["sweep", str(tmp_path / "tiny.toml"), "--strategy", "grid", "--executor",
                f"dask://127.0.0.1:{port}", "--json"]
        code = main([*argv, "--store", str(tmp_path / "s.db"), "--security", str(tmp_path / "tls.toml")])
        out = json.loads(capsys.readouterr().out)
        assert code == 0 and out["ok"] == 9 and out["infeasible"] == 9
        assert listening(processes) == {"127.0.0.1"}, "something listens beyond loopback"
        from codesign.sweep.executor import Evaluation, ExecutorError, parse_executor
        from codesign.sweep.executor.distributed import DaskExecutor

        plain = parse_executor(f"dask://127.0.0.1:{port}")
        refused = rf"^cannot connect to the Dask scheduler at tcp://127.0.0.1:{port} "
        with pytest.raises(ExecutorError, match=refused):
            DaskExecutor(Evaluation(fake_evaluate), plain, connect_s=3.0)
    finally:
        for process in reversed(processes):
            stop(process)
    assert not any(group_alive(p.pid) for p in processes), "a dask process outlived the test"
