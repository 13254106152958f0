"""The counting reverse proxy, for emulators whose server keeps no request log.

fake-gcs-server, Azurite and SeaweedFS only write free-text access logs (if any), so their
clients go through :class:`_ProxyServer`, a small threaded proxy in the test process that
records each request (:mod:`toolfs.testing.requestlog`) before it relays the answer;
:class:`_ProxiedEmulator` is the emulator base class that runs one in front of its server.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from toolfs.testing.process import _HOST, _HTTP_TIMEOUT, _Emulator
from toolfs.testing.requestlog import RecordedRequest, _filter_headers, _RequestLog

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
