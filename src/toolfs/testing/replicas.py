"""``toolfs serve`` replicas behind a real load balancer, for tests and benchmarks.

* :class:`ServeProcess`: one ``toolfs serve URL --transport http --port 0 ...`` child
  process (this tree's toolfs), its endpoint read from the line it prints when ready;
* :class:`HAProxy`: Debian's ``haproxy`` in front of several endpoints, round-robin per
  request (or sticky by a header), with health checks and retries of requests that never
  reached a replica, and a ``x-toolfs-replica`` response header naming the replica that
  answered;
* :class:`Replicas`: both together (N serve processes sharing a ``--ledger``, one
  balancer), as a context manager.

Every process started here is stopped by :meth:`stop` or at interpreter exit; nothing
else is touched. ``haproxy`` missing is an error that says how to install it, never a
skip: the replica tests are the proof that replicas work.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from toolfs.testing.process import _HOST, _free_port, _http

free_port = _free_port
"""A free loopback port now (another process may take it before it is bound)."""

__all__ = ["HAPROXY_INSTALL", "REPLICA_HEADER", "HAProxy", "Replicas", "ServeProcess",
           "find_haproxy", "free_port", "haproxy_config", "s3_serve_options"]

REPLICA_HEADER = "x-toolfs-replica"
"""The response header the balancer adds: the name of the replica that answered."""
HAPROXY_INSTALL = "apt-get update && apt-get install -y haproxy"
_READY = re.compile(r"over MCP at (http://\S+/mcp)")

_LIVE: set[subprocess.Popen[bytes]] = set()
_LIVE_LOCK = threading.Lock()


def _stop_live() -> None:
    with _LIVE_LOCK:
        live = list(_LIVE)
    for process in live:
        _stop(process)


atexit.register(_stop_live)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop ``process`` (one of ours): SIGTERM, then SIGKILL after 5 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    with _LIVE_LOCK:
        _LIVE.discard(process)


def _spawn(argv: Sequence[str], log: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        process = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT, env=dict(env))
    with _LIVE_LOCK:
        _LIVE.add(process)
    return process


def _tail(path: Path, limit: int = 3000) -> str:
    try:
        return path.read_bytes()[-limit:].decode("utf-8", "replace")
    except OSError:
        return ""


class _ChildProcess:
    """A child process with a temporary directory of its own: ``start`` (in the
    subclass) makes both, :meth:`stop` ends the process and removes the directory."""

    _dir: Path | None
    process: subprocess.Popen[bytes] | None

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        """Stop the process and remove its files; idempotent."""
        if self.process is not None:
            _stop(self.process)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class ServeProcess(_ChildProcess):
    """One ``toolfs serve`` HTTP process of this tree's toolfs.

    Args:
        url: what to serve (``s3://bucket/prefix``...).
        token: the bearer token (passed in ``TOOLFS_TOKEN``, never on the command line).
        args: further ``toolfs serve`` arguments (``--ledger URL``, ``-o KEY=VALUE``...).
        name: shown in errors and in the balancer's replica header.
    """

    def __init__(self, url: str, *, token: str, args: Sequence[str] = (),
                 name: str = "toolfs", startup_timeout: float = 60.0) -> None:
        self.name = name
        self._argv = [sys.executable, "-m", "toolfs", "serve", url, "--transport", "http",
                      "--port", "0", *args]
        self._token = token
        self._startup_timeout = startup_timeout
        self._dir: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        """The endpoint, ``http://127.0.0.1:PORT/mcp``, once started."""

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/", 1)[0])

    def start(self) -> Self:
        """Start the process and wait for its ready line."""
        self._dir = Path(tempfile.mkdtemp(prefix=f"toolfs-{self.name}-"))
        log = self._dir / "serve.log"
        src = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "TOOLFS_TOKEN": self._token,
               "PYTHONPATH": os.pathsep.join(
                   p for p in (src, os.environ.get("PYTHONPATH")) if p)}
        self.process = _spawn(self._argv, log, env)
        deadline = time.monotonic() + self._startup_timeout
        while True:
            found = _READY.search(_tail(log, 100_000))
            if found:
                self.url = found.group(1)
                return self
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n"
                                   f"{_tail(log)}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"{self.name} did not start in {self._startup_timeout}s:\n"
                                   f"{_tail(log)}")
            time.sleep(0.05)

    def log(self) -> str:
        """The end of the process's output (stderr: its ready line, warnings, errors)."""
        return _tail(self._dir / "serve.log") if self._dir else ""

    def kill(self) -> None:
        """Kill the process outright (SIGKILL), as a crashed machine would stop."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()



def find_haproxy() -> str:
    """The ``haproxy`` binary; ``RuntimeError`` saying how to install it if absent."""
    found = shutil.which("haproxy") or next(
        (p for p in ("/usr/sbin/haproxy", "/usr/local/sbin/haproxy") if os.path.exists(p)),
        None)
    if found is None:
        raise RuntimeError("haproxy is not installed; the replica tests need a real load "
                           f"balancer: {HAPROXY_INSTALL} (.ci/run does)")
    return found


def haproxy_config(port: int, servers: Mapping[str, int], *, check_ms: int = 200,
                   balance: str = "roundrobin") -> str:
    """A config balancing ``127.0.0.1:port`` over ``servers`` (name: port), round-robin
    per request (or ``balance``, e.g. ``hdr(toolfs-context)``: sticky by context, on a
    consistent hash so that a replica's going away moves only its contexts). A replica
    that stops answering is taken out by its health check (a TCP connect every
    ``check_ms``); a request that could not be sent to a replica is sent to another
    (``retry-on conn-failure`` with ``redispatch``). A request that reached a replica is
    never sent again: it may have changed a file."""
    lines = [
        "global", "    maxconn 512",
        "defaults", "    mode http", "    timeout connect 2s", "    timeout client 120s",
        "    timeout server 120s", "    retries 3", "    option redispatch 1",
        "    retry-on conn-failure",
        "frontend toolfs", f"    bind {_HOST}:{port}", "    default_backend replicas",
        "backend replicas", f"    balance {balance}",
        *(["    hash-type consistent"] if balance != "roundrobin" else []),
        f"    http-response set-header {REPLICA_HEADER} %s",
    ]
    lines += [f"    server {name} {_HOST}:{p} check inter {check_ms}ms fall 1 rise 2"
              for name, p in servers.items()]
    return "\n".join(lines) + "\n"


class HAProxy(_ChildProcess):
    """Debian's ``haproxy`` balancing over ``servers`` (name: port) on ``port`` (default:
    a free one; give one to know the public URL before the replicas start, e.g. for
    ``--resource``)."""

    def __init__(self, servers: Mapping[str, int], *, port: int = 0, check_ms: int = 200,
                 balance: str = "roundrobin", startup_timeout: float = 20.0) -> None:
        self.servers = dict(servers)
        self.balance = balance
        self._check_ms = check_ms
        self._startup_timeout = startup_timeout
        self._dir: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._given_port = port
        self.port = port

    @property
    def url(self) -> str:
        """The balanced MCP endpoint."""
        return f"http://{_HOST}:{self.port}/mcp"

    def start(self) -> Self:
        binary = find_haproxy()
        self._dir = Path(tempfile.mkdtemp(prefix="toolfs-haproxy-"))
        config = self._dir / "haproxy.cfg"
        log = self._dir / "haproxy.log"
        # A free port may be taken meanwhile: try another (a given one: once).
        for _attempt in range(1 if self._given_port else 5):
            self.port = self._given_port or _free_port()
            config.write_text(haproxy_config(self.port, self.servers, check_ms=self._check_ms,
                                             balance=self.balance))
            check = subprocess.run([binary, "-c", "-q", "-f", str(config)],
                                   capture_output=True, text=True)
            if check.returncode != 0:
                raise RuntimeError(f"haproxy refused its config: {check.stderr}")
            self.process = _spawn([binary, "-db", "-f", str(config)], log, os.environ)
            deadline = time.monotonic() + self._startup_timeout
            while self.process.poll() is None and time.monotonic() < deadline:
                with contextlib.suppress(OSError):
                    status, _ = _http("GET", self.url, timeout=2)
                    if status:
                        return self
                time.sleep(0.05)
            _stop(self.process)
        raise RuntimeError(f"haproxy did not start:\n{_tail(log)}")



class Replicas:
    """``count`` ``toolfs serve`` processes of ``url`` with ``args`` (e.g. a shared
    ``--ledger``), behind one :class:`HAProxy`; started in parallel."""

    def __init__(self, url: str, *, token: str, count: int = 3, args: Sequence[str] = (),
                 port: int = 0, check_ms: int = 200, balance: str = "roundrobin") -> None:
        self.serves = [ServeProcess(url, token=token, args=args, name=f"replica{i + 1}")
                       for i in range(count)]
        self.balancer: HAProxy | None = None
        self._port = port
        self._check_ms = check_ms
        self._balance = balance

    @property
    def url(self) -> str:
        """The balanced endpoint."""
        if self.balancer is None:
            raise RuntimeError("the replicas are not started")
        return self.balancer.url

    def start(self) -> Self:
        find_haproxy()  # before starting anything
        errors: list[BaseException] = []

        def start(serve: ServeProcess) -> None:
            try:
                serve.start()
            except BaseException as exc:  # reported below, after every start ended
                errors.append(exc)

        threads = [threading.Thread(target=start, args=(s,)) for s in self.serves]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            self.stop()
            raise errors[0]
        self.balancer = HAProxy({s.name: s.port for s in self.serves}, port=self._port,
                                check_ms=self._check_ms, balance=self._balance).start()
        return self

    def stop(self) -> None:
        if self.balancer is not None:
            self.balancer.stop()
        for serve in self.serves:
            serve.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def s3_serve_options(storage_options: Mapping[str, Any]) -> list[str]:
    """``-o KEY=VALUE`` arguments for ``toolfs serve`` from s3fs storage options (JSON
    values for the nested ones, as the CLI decodes them)."""
    import json

    out: list[str] = []
    for key, value in storage_options.items():
        text = value if isinstance(value, str) else json.dumps(value)
        out += ["-o", f"{key}={text}"]
    return out
