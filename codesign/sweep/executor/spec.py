"""Which executor a sweep runs on, from the command line's words, checked before any work starts.

`--executor local` (forked processes here), `dask` (a Dask LocalCluster this sweep starts, bound
to 127.0.0.1 only) or `dask://HOST:PORT` (a running `dask scheduler`; HOST is used as given, so
nothing but loopback is reached unless the user names another address).  `--security FILE` is a
TOML file of Dask's client TLS options (the keyword arguments of `distributed.Security`, files
relative to the TOML's folder): with it the connection is `tls://HOST:PORT`.
"""

from __future__ import annotations

import socket
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hw.errors import InputError

KINDS = ("local", "dask")
# distributed.Security's client-side keywords: the ones a sweep's client passes through
SECURITY_FILES = ("tls_ca_file", "tls_client_cert", "tls_client_key")
SECURITY_TEXTS = ("tls_ciphers", "tls_min_version", "tls_max_version")
SECURITY_KEYS = ("require_encryption", *SECURITY_FILES, *SECURITY_TEXTS)
CONNECT_S = 5.0


class ExecutorError(InputError):
    """A bad --executor or --security, or a scheduler that cannot be reached."""


@dataclass(frozen=True)
class ExecutorSpec:
    """`kind` 'local' or 'dask'; `address` None for a LocalCluster, else 'HOST:PORT' of a
    running scheduler; `security` the TLS options (None: plain TCP)."""

    kind: str = "local"
    address: str | None = None
    security: dict[str, Any] | None = None

    @property
    def url(self) -> str | None:
        """The scheduler's address as Dask writes it (tcp:// or, with TLS options, tls://)."""
        if self.address is None:
            return None
        return f"{'tls' if self.security is not None else 'tcp'}://{self.address}"

    def describe(self) -> str:
        return self.kind if self.address is None else f"dask://{self.address}"


def parse_executor(text: str, security: str | Path | None = None) -> ExecutorSpec:
    """The executor `text` names ('local', 'dask' or 'dask://HOST:PORT'), with the TLS options
    of the `security` file (dask://HOST:PORT only); ExecutorError names what is wrong."""
    if text in KINDS:
        if security is not None:
            raise ExecutorError(f"--security applies to --executor dask://HOST:PORT, not to {text!r}")
        return ExecutorSpec(text)
    if not text.startswith("dask://"):
        raise ExecutorError(f"--executor must be local, dask or dask://HOST:PORT, not {text!r}")
    host, _, port = text.removeprefix("dask://").rpartition(":")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ExecutorError(f"--executor {text!r}: expected dask://HOST:PORT with a port 1-65535")
    options = read_security(security) if security is not None else None
    return ExecutorSpec("dask", f"{host}:{int(port)}", options)


def check_workers(spec: ExecutorSpec, workers: int) -> None:
    """A LocalCluster needs a worker process (a running cluster has its own)."""
    if spec.kind == "dask" and spec.address is None and workers < 1:
        raise ExecutorError(f"--executor dask needs --workers 1 or more, not {workers}")


def read_security(path: str | Path) -> dict[str, Any]:
    """The TLS options of a security TOML file (see the module doc)."""
    path = Path(path)
    if not path.is_file():
        raise ExecutorError(f"--security {path}: no such file")
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ExecutorError(f"--security {path}: not a TOML file ({exc})") from None
    unknown = sorted(set(data) - set(SECURITY_KEYS))
    if unknown:
        raise ExecutorError(f"--security {path}: unknown key {unknown[0]!r} "
                            f"(known: {', '.join(SECURITY_KEYS)})")
    options: dict[str, Any] = {}
    for key, value in data.items():
        if key == "require_encryption":
            if not isinstance(value, bool):
                raise ExecutorError(f"--security {path}: require_encryption must be true or false")
            options[key] = value
            continue
        if not isinstance(value, str):
            raise ExecutorError(f"--security {path}: {key} must be a string")
        if key in SECURITY_FILES:
            value = str(path.parent / value)
            if not Path(value).is_file():
                raise ExecutorError(f"--security {path}: {key} {value}: no such file")
        options[key] = value
    if "tls_client_cert" in options and "tls_client_key" not in options:
        options["tls_client_key"] = options["tls_client_cert"]  # a PEM holding both, as Dask allows
    return options


def check_reachable(spec: ExecutorSpec, timeout_s: float = CONNECT_S) -> None:
    """Fail fast (before the workloads are prepared) when a named scheduler does not answer."""
    if spec.address is None:
        return
    host, _, port = spec.address.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        reason = exc.strerror or exc
        raise ExecutorError(f"cannot reach the Dask scheduler at {spec.url} ({reason})") from None


__all__ = ["KINDS", "SECURITY_KEYS", "ExecutorError", "ExecutorSpec", "check_reachable", "check_workers",
           "parse_executor", "read_security"]
