"""An emulator's server in a child process: what every emulator of this package shares.

:class:`_Emulator` is the lifecycle (start, stop, context manager, ``endpoint_url``) and the
request-log API each emulator implements; the helpers here start the server as a child
Python process (:func:`_spawn_python_child`), supervise a foreign binary from such a
child (:func:`_run_supervisor`), and make sure no server outlives the test process that
started it (atexit, and the child watching its stdin). Every module of
:mod:`toolfs.testing` that runs a server builds on this one.

This module's top level imports only the standard library: the child processes import
it (through ``python -m toolfs.testing.emulators``) before any server starts.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Self

from toolfs.testing.requestlog import RecordedRequest

_HOST = "127.0.0.1"
_HTTP_TIMEOUT = 30.0
# The command line the children run (its main() dispatches "_moto" and "_supervise").
_CHILD_MODULE = "toolfs.testing.emulators"

_LIVE: set[_Emulator] = set()
_LIVE_LOCK = threading.Lock()


def _stop_all_live() -> None:
    with _LIVE_LOCK:
        live = list(_LIVE)
    for emulator in live:
        with contextlib.suppress(Exception):
            emulator.stop()


# A test run that forgets stop(), or dies on an exception, must not leave
# servers behind; children also watch their stdin for the case where this
# process is killed outright and atexit never runs.
atexit.register(_stop_all_live)


def _no_proxy_opener() -> urllib.request.OpenerDirector:
    # HTTP_PROXY in the environment would otherwise route 127.0.0.1 traffic
    # through a proxy that cannot reach it.
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


_OPENER = _no_proxy_opener()


def _http(
    method: str,
    url: str,
    *,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = _HTTP_TIMEOUT,
) -> tuple[int, bytes]:
    """Send one request, return (status, body) without raising on 4xx/5xx."""
    request = urllib.request.Request(url, data=body, method=method, headers=dict(headers or {}))
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as error:
        return int(error.code), bytes(error.read())


def _free_port() -> int:
    # Only for fake-gcs-server, which cannot report a port it picked itself;
    # the small race with other processes is covered by retrying the start.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((_HOST, 0))
        return int(sock.getsockname()[1])


def _log_tail(path: Path, limit: int = 4000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-limit:].decode("utf-8", errors="replace")


def _spawn_python_child(args: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """Run ``python -m toolfs.testing.emulators *args`` in a child Python process, with
    this package from the same tree as this process."""
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    with log_path.open("ab") as log:
        # -P keeps the working directory off sys.path, so nothing there can shadow
        # this package, the standard library or third-party modules in the child.
        return subprocess.Popen(
            [sys.executable, "-P", "-m", _CHILD_MODULE, *args],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            # Ctrl-C in a terminal goes to the whole process group; the parent
            # must be the one to stop the child, so that it can clean up.
            start_new_session=True,
        )


def _terminate(process: subprocess.Popen[bytes] | None) -> None:
    if process is None:
        return
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class _Emulator:
    """Lifecycle and request-log API shared by the two emulators."""

    _kind = "emulator"

    def __init__(self, *, startup_timeout: float) -> None:
        self._startup_timeout = startup_timeout
        self._workdir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._endpoint: str | None = None

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> Self:
        """Start the server and wait until it answers; no-op if running."""
        if self._endpoint is not None:
            return self
        self._workdir = Path(tempfile.mkdtemp(prefix=f"toolfs-{self._kind}-"))
        try:
            self._endpoint = self._launch(self._workdir)
        except BaseException:
            self.stop()
            raise
        with _LIVE_LOCK:
            _LIVE.add(self)
        return self

    def stop(self) -> None:
        """Stop the server and remove its temporary files. Idempotent."""
        self._endpoint = None
        try:
            self._shutdown()
        finally:
            _terminate(self._process)
            self._process = None
            if self._workdir is not None:
                shutil.rmtree(self._workdir, ignore_errors=True)
                self._workdir = None
            with _LIVE_LOCK:
                _LIVE.discard(self)

    @property
    def running(self) -> bool:
        """Whether the server was started and its process is still alive."""
        return (
            self._endpoint is not None
            and self._process is not None
            and self._process.poll() is None
        )

    @property
    def endpoint_url(self) -> str:
        """Base URL of the server, e.g. ``http://127.0.0.1:43125``."""
        if self._endpoint is None:
            raise RuntimeError(f"{type(self).__name__} is not running; call start() first")
        return self._endpoint

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- request log -------------------------------------------------------

    def requests(self) -> list[RecordedRequest]:
        """Requests received since start or the last reset/clear, in order."""
        raise NotImplementedError

    def clear_requests(self) -> None:
        """Forget the recorded requests, keeping the stored data."""
        raise NotImplementedError

    def reset(self) -> None:
        """Delete every bucket and object and clear the request log."""
        raise NotImplementedError

    def request_count(self, method: str | None = None) -> int:
        """Number of recorded requests, optionally only those of ``method``."""
        records = self.requests()
        if method is None:
            return len(records)
        wanted = method.upper()
        return sum(1 for record in records if record.method == wanted)

    # -- hooks -------------------------------------------------------------

    def _launch(self, workdir: Path) -> str:
        """Start the server; return its endpoint URL."""
        raise NotImplementedError

    def _shutdown(self) -> None:
        """Release in-process resources; the child process is handled by stop()."""

    def _check_alive(self, log_path: Path) -> None:
        if self._process is not None and self._process.poll() is not None:
            raise RuntimeError(
                f"{type(self).__name__} server exited with code {self._process.returncode}:\n"
                f"{_log_tail(log_path)}"
            )


def _exit_when_parent_dies() -> None:
    """Exit this child as soon as its stdin (a pipe from the parent) closes.

    This covers a parent that is killed without running atexit handlers.
    """

    def watch() -> None:
        with contextlib.suppress(Exception):
            while sys.stdin.buffer.read(4096):
                pass
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _run_supervisor(command: list[str], *, kill: bool = False) -> int:
    """Child entry point: run ``command`` until this process is told to stop.

    A foreign binary cannot watch our stdin, so this small Python parent does
    it (for fake-gcs-server, Azurite, SeaweedFS) and stops the server when the
    test process goes away: with SIGTERM, or with SIGKILL when ``kill`` (a
    server that does not exit on SIGTERM, and whose store is about to be removed).
    """
    process = subprocess.Popen(command)

    def stop(*_: object) -> None:
        with contextlib.suppress(OSError):
            if kill:
                process.kill()
            else:
                process.terminate()

    signal.signal(signal.SIGTERM, stop)

    def watch() -> None:
        with contextlib.suppress(Exception):
            while sys.stdin.buffer.read(4096):
                pass
        stop()

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
    try:
        return process.wait()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
