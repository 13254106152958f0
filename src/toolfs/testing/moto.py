"""The S3 emulator: a moto server, single-threaded, in a child process.

:class:`S3Emulator` starts it and reads its request log; :func:`new_s3fs_filesystem` makes
an ``s3fs`` filesystem for it (or any S3 endpoint) sharing one aiobotocore session. The
child's side (:func:`_run_moto_child`, run as ``python -m toolfs.testing.emulators _moto``)
serves moto behind a WSGI middleware that records each request and serves the log.

The top level imports only the standard library; moto is imported in the child.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolfs.testing.process import (
    _HOST,
    _Emulator,
    _exit_when_parent_dies,
    _http,
    _log_tail,
    _spawn_python_child,
)
from toolfs.testing.requestlog import (
    _CONTROL_HEADER,
    RecordedRequest,
    _filter_headers,
    _RequestLog,
)

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

    from fsspec import AbstractFileSystem

_CONTROL_ENVIRON_KEY = "HTTP_" + _CONTROL_HEADER.upper().replace("-", "_")
_REQUESTS_PATH = "/_toolfs/requests"
_CLEAR_PATH = "/_toolfs/requests/clear"
_DUMMY_AWS_KEY = "testing"
_DUMMY_AWS_SECRET = "testing"
_AWS_REGION = "us-east-1"


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
