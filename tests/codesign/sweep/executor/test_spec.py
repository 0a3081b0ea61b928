import socket

import pytest

from codesign.sweep.executor.spec import (
    SECURITY_KEYS,
    ExecutorError,
    ExecutorSpec,
    check_reachable,
    check_workers,
    parse_executor,
    read_security,
)
from hw.errors import WorkbenchError


def test_the_three_forms():
    assert parse_executor("local") == ExecutorSpec("local")
    assert parse_executor("dask") == ExecutorSpec("dask")
    spec = parse_executor("dask://127.0.0.1:8786")
    assert (spec.kind, spec.address, spec.url, spec.describe()) == (
        "dask", "127.0.0.1:8786", "tcp://127.0.0.1:8786", "dask://127.0.0.1:8786")
    assert parse_executor("dask://[::1]:1").address == "[::1]:1"


@pytest.mark.parametrize(("text", "message"), [
    ("ray", r"--executor must be local, dask or dask://HOST:PORT, not 'ray'"),
    ("tcp://127.0.0.1:8786", r"--executor must be local, dask or dask://HOST:PORT, not 'tcp://127.0.0.1:8786'"),
    ("dask://127.0.0.1", r"--executor 'dask://127.0.0.1': expected dask://HOST:PORT with a port 1-65535"),
    ("dask://:8786", r"--executor 'dask://:8786': expected dask://HOST:PORT with a port 1-65535"),
    ("dask://host:0", r"--executor 'dask://host:0': expected dask://HOST:PORT with a port 1-65535"),
    ("dask://host:65536", r"--executor 'dask://host:65536': expected dask://HOST:PORT with a port 1-65535"),
    ("dask://host:http", r"--executor 'dask://host:http': expected dask://HOST:PORT with a port 1-65535"),
])
def test_bad_executor_strings(text, message):
    with pytest.raises(ExecutorError, match=f"^{message}$"):
        parse_executor(text)
    assert issubclass(ExecutorError, WorkbenchError)


@pytest.mark.parametrize("kind", ["local", "dask"])
def test_security_applies_to_a_named_scheduler_only(tmp_path, kind):
    (tmp_path / "s.toml").write_text("require_encryption = true\n")
    message = f"^--security applies to --executor dask://HOST:PORT, not to '{kind}'$"
    with pytest.raises(ExecutorError, match=message):
        parse_executor(kind, tmp_path / "s.toml")


def test_a_security_file_gives_tls_options_with_paths_beside_it(tmp_path):
    (tmp_path / "ca.pem").write_text("x")
    (tmp_path / "client.pem").write_text("x")
    (tmp_path / "s.toml").write_text('tls_ca_file = "ca.pem"\ntls_client_cert = "client.pem"\n'
                                     'require_encryption = true\ntls_min_version = "TLSv1.3"\n')
    spec = parse_executor("dask://10.0.0.5:8786", tmp_path / "s.toml")
    assert spec.url == "tls://10.0.0.5:8786"
    ca, client = str(tmp_path / "ca.pem"), str(tmp_path / "client.pem")
    assert spec.security == {"tls_ca_file": ca, "tls_client_cert": client, "tls_client_key": client,
                             "require_encryption": True, "tls_min_version": "TLSv1.3"}


@pytest.mark.parametrize(("text", "message"), [
    (None, "no such file"),
    ("tls_ca_file = ", r"not a TOML file \(Invalid value \(at end of document\)\)"),
    ('ca = "x"', "unknown key 'ca' \\(known: " + ", ".join(SECURITY_KEYS) + "\\)"),
    ('require_encryption = "yes"', "require_encryption must be true or false"),
    ("tls_ciphers = 3", "tls_ciphers must be a string"),
    ('tls_ca_file = "missing.pem"', "tls_ca_file {dir}/missing.pem: no such file"),
])
def test_bad_security_files(tmp_path, text, message):
    path = tmp_path / "s.toml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ExecutorError, match=f"^--security {path}: {message.format(dir=tmp_path)}$"):
        read_security(path)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_scheduler_fails_fast():
    port = free_port()
    with pytest.raises(ExecutorError, match=rf"^cannot reach the Dask scheduler at tcp://127.0.0.1:{port} "
                                            r"\(Connection refused\)$"):
        check_reachable(parse_executor(f"dask://127.0.0.1:{port}"), timeout_s=2)
    check_reachable(parse_executor("dask"))  # a LocalCluster needs no check


def test_a_local_cluster_needs_a_worker():
    with pytest.raises(ExecutorError, match=r"^--executor dask needs --workers 1 or more, not 0$"):
        check_workers(parse_executor("dask"), 0)
    check_workers(parse_executor("dask://127.0.0.1:8786"), 0)  # a running cluster has its own
    check_workers(parse_executor("local"), 0)
