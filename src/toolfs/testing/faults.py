"""A fault-injecting HTTP reverse proxy for network-fault tests.

:class:`FaultProxy` listens on 127.0.0.1 (a free port), forwards every request to one
upstream server (say the moto server of :class:`~toolfs.testing.emulators.S3Emulator`)
and, when a rule of its plan matches, injects a fault instead of a clean round trip::

    with S3Emulator() as s3, FaultProxy(s3.endpoint_url) as proxy:
        fs = s3fs.S3FileSystem(**fast_failing_s3fs_options(
            s3.s3fs_storage_options(), proxy.endpoint_url))
        proxy.plan("reset_after_forward", method="PUT")   # once, the next PUT
        ...                                               # the PUT lands, its response is lost
        assert proxy.injected() == {"reset_after_forward": 1}

Faults (``*_before_forward``: the upstream never sees the request; ``*_after_forward``:
it handled it, the client never learns how):

``reset_before_forward`` / ``reset_after_forward``
    close the client connection with a TCP RST.
``500_before_forward`` / ``500_after_forward``
    answer ``500 InternalError`` (an S3-style XML body).
``delay``
    wait ``delay`` seconds, then forward and relay. Longer than the client's read
    timeout, it is a timeout whose request still lands, *late* (after the retry).
``delay_after_forward``
    forward, wait ``delay`` seconds, then relay: a timeout after the request landed.
``truncate_after_forward``
    forward, relay the status, the headers and half of the body, then reset.
``freeze`` / ``freeze_after_forward``
    accept the request and never answer (a frozen server); after forwarding, the
    upstream applied it. The connection is held until the proxy stops (at most its
    socket ``timeout``).
``stall_body``
    forward, relay the status, the headers and half of the body, then hold the
    connection without a byte more (until the proxy stops, at most ``timeout``).
``trickle``
    forward, relay the status and the headers, then the body one byte every ``delay``
    seconds (until done or the proxy stops).

Besides faults, a proxy can misbehave about conditional requests the way some
S3-compatible gateways do (``conditions=``, for S3-style upstreams such as moto):

``"honour"`` (default)
    forward ``If-Match`` / ``If-None-Match`` as sent.
``"strip"``
    drop them: every conditional write lands unconditionally.
``"strip_if_match"``
    drop ``If-Match`` only: creates are guarded, updates and deletes are not.
``"check_then_write"``
    evaluate them itself on writes (``PUT``, ``DELETE``) -- a ``HEAD`` of the key,
    ``412`` when the condition fails -- then, ``check_delay`` seconds later, forward the
    write without them. Alone, a request gets the right answer; two that cross both
    pass the check, and both land.

Rules are tried in order; the first that matches the request (method, path substring,
predicate), still has ``times`` left and wins its ``probability`` roll (seeded) applies.
Each connection carries one request (responses say ``Connection: close``), bodies are
buffered (fine for test-sized objects), and every socket operation has a timeout, so
handler threads always end; leaving the context stops the server and joins them.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import random
import socket
import struct
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Self, get_args

__all__ = [
    "CONDITION_HANDLING",
    "FAULTS",
    "STALLS",
    "ConditionHandling",
    "Fault",
    "FaultProxy",
    "Injection",
    "ProxiedRequest",
    "Rule",
    "Stall",
    "fast_failing_s3fs_options",
]

Fault = Literal[
    "reset_before_forward",
    "reset_after_forward",
    "500_before_forward",
    "500_after_forward",
    "delay",
    "delay_after_forward",
    "truncate_after_forward",
]
FAULTS: tuple[Fault, ...] = get_args(Fault)
"""The faults that end a request (each answers soon, one way or another)."""

Stall = Literal["freeze", "freeze_after_forward", "stall_body", "trickle"]
STALLS: tuple[Stall, ...] = get_args(Stall)
"""The faults that keep a request waiting (for deadline tests)."""
_ALL: tuple[str, ...] = FAULTS + STALLS

ConditionHandling = Literal["honour", "strip", "strip_if_match", "check_then_write"]
CONDITION_HANDLING: tuple[ConditionHandling, ...] = get_args(ConditionHandling)
_CONDITIONAL = ("if-match", "if-none-match")

_HOST = "127.0.0.1"
_HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
    "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "expect",
})
_ERROR_412 = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>PreconditionFailed</Code>'
    b"<Message>At least one of the pre-conditions you specified did not hold</Message>"
    b"<RequestId>toolfs-fault-proxy</RequestId></Error>"
)
_ERROR_500 = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code>'
    b"<Message>We encountered an internal error. Please try again.</Message>"
    b"<RequestId>toolfs-fault-proxy</RequestId></Error>"
)


@dataclass(frozen=True)
class ProxiedRequest:
    """A request as a rule's predicate sees it (header names lower-cased)."""

    method: str
    path: str
    query: str
    headers: Mapping[str, str]


@dataclass
class Rule:
    """When to inject which fault.

    Attributes:
        fault: what to do (see the module docstring).
        method: only requests with this method (``None``: any).
        path: only requests whose URL path contains this string.
        times: how many more times it may fire (``None``: without limit).
        probability: chance to fire on a matching request (rolled on the proxy's RNG).
        delay: seconds, for ``delay`` and ``delay_after_forward``.
        match: an extra predicate on the request.
    """

    fault: Fault | Stall
    method: str | None = None
    path: str | None = None
    times: int | None = 1
    probability: float = 1.0
    delay: float = 1.0
    match: Callable[[ProxiedRequest], bool] | None = None

    def __post_init__(self) -> None:
        if self.fault not in _ALL:
            raise ValueError(f"unknown fault {self.fault!r}; one of {', '.join(_ALL)}")
        if self.method is not None:
            self.method = self.method.upper()

    def matches(self, request: ProxiedRequest) -> bool:
        """Whether this rule concerns ``request`` (ignoring ``times`` and ``probability``)."""
        return ((self.method is None or self.method == request.method)
                and (self.path is None or self.path in request.path)
                and (self.match is None or self.match(request)))


@dataclass(frozen=True)
class Injection:
    """One injected fault; ``upstream_status`` is ``None`` when it was never forwarded."""

    method: str
    path: str
    fault: Fault | Stall
    upstream_status: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


class FaultProxy:
    """A threaded reverse proxy on 127.0.0.1 that injects faults by plan."""

    def __init__(self, upstream_url: str, *, rules: list[Rule] | None = None,
                 seed: int | None = 0, timeout: float = 10.0,
                 conditions: ConditionHandling = "honour",
                 check_delay: float = 0.2) -> None:
        """Prepare a proxy; it listens from :meth:`start` (or ``with``) on.

        Args:
            upstream_url: ``http://host:port`` of the server to front.
            rules: the initial plan (see :meth:`plan`).
            seed: seed of the RNG behind ``probability``.
            timeout: seconds for every socket operation, both sides.
            conditions: what to do with conditional headers (module docstring).
            check_delay: seconds between the check and the write, for
                ``"check_then_write"``: the window in which crossing writes both pass.
        """
        if conditions not in CONDITION_HANDLING:
            raise ValueError(f"unknown conditions handling {conditions!r}; one of "
                             f"{', '.join(CONDITION_HANDLING)}")
        self.conditions: ConditionHandling = conditions
        self.check_delay = check_delay
        split = urllib.parse.urlsplit(upstream_url)
        if split.scheme != "http" or not split.hostname or not split.port:
            raise ValueError(f"upstream must be http://host:port, not {upstream_url!r}")
        self.upstream = (split.hostname, split.port)
        self.timeout = timeout
        self.rules: list[Rule] = list(rules or [])
        self.injections: list[Injection] = []
        self.requests = 0
        """Requests received (faulted or not)."""
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._active: set[threading.Thread] = set()
        self._idle = threading.Condition(self._lock)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        """Set by :meth:`stop`: frozen and stalled connections let go."""

    # -- plan --------------------------------------------------------------------

    def plan(self, fault: Fault | Stall, *, method: str | None = None, path: str | None = None,
             times: int | None = 1, probability: float = 1.0, delay: float = 1.0,
             match: Callable[[ProxiedRequest], bool] | None = None) -> Rule:
        """Append a rule to the plan and return it (see :class:`Rule`)."""
        rule = Rule(fault, method=method, path=path, times=times, probability=probability,
                    delay=delay, match=match)
        with self._lock:
            self.rules.append(rule)
        return rule

    def add(self, *rules: Rule) -> None:
        """Append ready-made rules to the plan."""
        with self._lock:
            self.rules.extend(rules)

    def clear(self) -> None:
        """Drop every rule (the counts are kept; see :meth:`reset_counts`)."""
        with self._lock:
            self.rules.clear()

    def reset_counts(self) -> None:
        """Forget the injections and the request count."""
        with self._lock:
            self.injections.clear()
            self.requests = 0

    def injected(self) -> dict[str, int]:
        """Faults injected so far, ``{fault: count}``."""
        with self._lock:
            return dict(Counter(i.fault for i in self.injections))

    def _choose(self, request: ProxiedRequest) -> Rule | None:
        with self._lock:
            self.requests += 1
            for rule in self.rules:
                if rule.times is not None and rule.times <= 0:
                    continue
                if not rule.matches(request):
                    continue
                if rule.probability < 1.0 and self._rng.random() >= rule.probability:
                    continue
                if rule.times is not None:
                    rule.times -= 1
                return rule
        return None

    def _record(self, injection: Injection) -> None:
        with self._lock:
            self.injections.append(injection)

    # -- lifecycle ---------------------------------------------------------------

    @property
    def endpoint_url(self) -> str:
        """``http://127.0.0.1:PORT`` of the proxy."""
        if self._server is None:
            raise RuntimeError("FaultProxy is not running; call start() first")
        return f"http://{_HOST}:{self._server.server_port}"

    def start(self) -> Self:
        """Listen on a free port and serve in a daemon thread; no-op if running."""
        if self._server is None:
            self._stopping.clear()
            self._server = _Server(self)
            # A short poll interval: stop() waits for the loop to notice the shutdown.
            self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                            name="toolfs-fault-proxy", daemon=True)
            self._thread.start()
        return self

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no request is in flight (a delayed one may land after its client
        gave up); False if ``timeout`` (default: the socket timeout) passed first."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        with self._idle:
            while self._active:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def stop(self) -> None:
        """Stop listening and wait (bounded) for handlers in flight. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout)
        self.wait_idle(2 * self.timeout + max((r.delay for r in self.rules), default=0))

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _enter_handler(self) -> None:
        with self._lock:
            self._active.add(threading.current_thread())

    def _leave_handler(self) -> None:
        with self._idle:
            self._active.discard(threading.current_thread())
            self._idle.notify_all()


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True  # never block interpreter exit; stop() joins them, bounded

    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy
        super().__init__((_HOST, 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up is not news; stay quiet instead of printing a traceback."""


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # answers "Expect: 100-continue" itself
    server: _Server

    def setup(self) -> None:
        self.request.settimeout(self.server.proxy.timeout)  # the client side's timeout
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:
        """Silence BaseHTTPRequestHandler's per-request stderr line."""

    def handle(self) -> None:
        proxy = self.server.proxy
        proxy._enter_handler()
        try:
            self.close_connection = True
            self.handle_one_request()
        finally:
            proxy._leave_handler()

    def do_GET(self) -> None:
        """Forward the request, or inject the planned fault."""
        proxy = self.server.proxy
        body = self._read_body()
        split = urllib.parse.urlsplit(self.path)
        request = ProxiedRequest(
            method=self.command, path=urllib.parse.unquote(split.path), query=split.query,
            headers={k.lower(): v for k, v in self.headers.items()})
        rule = proxy._choose(request)
        fault = rule.fault if rule is not None else None

        def record(status: int | None) -> None:
            if fault is not None:
                proxy._record(Injection(request.method, request.path, fault, status,
                                        dict(request.headers)))

        if fault == "reset_before_forward":
            record(None)
            self._reset()
            return
        if fault == "500_before_forward":
            record(None)
            self._send(500, [("Content-Type", "application/xml")], _ERROR_500)
            return
        if fault == "freeze":
            record(None)
            self._hold()
            return
        if fault == "delay" and rule is not None:
            time.sleep(rule.delay)
        drop: frozenset[str] = frozenset()
        if proxy.conditions == "strip_if_match":
            drop = frozenset({"if-match"})
        elif proxy.conditions != "honour" and any(h in request.headers for h in _CONDITIONAL):
            drop = frozenset(_CONDITIONAL)
            if proxy.conditions == "check_then_write" and self.command in ("PUT", "DELETE"):
                try:
                    refused = self._condition_fails(request)
                except (OSError, http.client.HTTPException) as exc:
                    self._send(502, [("Content-Type", "text/plain")],
                               f"fault proxy: {exc}".encode())
                    return
                if refused:
                    self._send(412, [("Content-Type", "application/xml")], _ERROR_412)
                    return
                time.sleep(proxy.check_delay)
        try:
            status, reason, headers, payload = self._forward(body, drop=drop)
        except (OSError, http.client.HTTPException) as exc:
            record(None)
            self._send(502, [("Content-Type", "text/plain")], f"fault proxy: {exc}".encode())
            return
        record(status)
        if fault == "reset_after_forward":
            self._reset()
        elif fault == "500_after_forward":
            self._send(500, [("Content-Type", "application/xml")], _ERROR_500)
        elif fault == "truncate_after_forward":
            self._send(status, headers, payload, reason=reason, truncate=True)
        elif fault == "freeze_after_forward":
            self._hold()
        elif fault == "stall_body":
            self._send(status, headers, payload, reason=reason, stall=True)
        elif fault == "trickle" and rule is not None:
            self._send(status, headers, payload, reason=reason, trickle=rule.delay)
        else:
            if fault == "delay_after_forward" and rule is not None:
                time.sleep(rule.delay)
            self._send(status, headers, payload, reason=reason)

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET

    def _read_body(self) -> bytes:
        if "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))
        parts: list[bytes] = []
        while size := int(self.rfile.readline(65537).split(b";", 1)[0].strip() or b"0", 16):
            parts.append(self.rfile.read(size))
            self.rfile.readline()  # the CRLF after the chunk
        while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
            pass  # trailers
        return b"".join(parts)

    def _condition_fails(self, request: ProxiedRequest) -> bool:
        """Evaluate the request's S3-style condition with a ``HEAD`` of its key."""
        status, _, headers, _ = self._forward(
            b"", method="HEAD", path=urllib.parse.urlsplit(self.path).path,
            drop=frozenset({*_CONDITIONAL, "content-md5", "content-type"}))
        etag = next((v for k, v in headers if k.lower() == "etag"), None)
        exists = status == 200
        if request.headers.get("if-none-match", "").strip() == "*" and exists:
            return True
        wanted = request.headers.get("if-match")
        return wanted is not None and (not exists or wanted.strip() != (etag or "").strip())

    def _forward(self, body: bytes, *, method: str | None = None, path: str | None = None,
                 drop: frozenset[str] = frozenset()
                 ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        host, port = self.server.proxy.upstream
        upstream = http.client.HTTPConnection(host, port, timeout=self.server.proxy.timeout)
        method = method or self.command
        try:
            upstream.putrequest(method, path or self.path, skip_host=True,
                                skip_accept_encoding=True)
            for name, value in self.headers.items():
                key = name.lower()
                if key not in _HOP_BY_HOP and key != "content-length" and key not in drop:
                    upstream.putheader(name, value)
            if method not in ("GET", "HEAD") or body:
                upstream.putheader("Content-Length", str(len(body)))
            upstream.endheaders(body)
            response = upstream.getresponse()
            payload = response.read()
            return response.status, response.reason, response.getheaders(), payload
        finally:
            upstream.close()

    def _hold(self) -> None:
        """Say nothing more until the proxy stops (at most its socket timeout), then
        close the connection."""
        proxy = self.server.proxy
        proxy._stopping.wait(proxy.timeout)
        self._reset()

    def _send(self, status: int, headers: list[tuple[str, str]], payload: bytes, *,
              reason: str | None = None, truncate: bool = False, stall: bool = False,
              trickle: float | None = None) -> None:
        with contextlib.suppress(OSError):
            self.send_response_only(status, reason)
            head = self.command == "HEAD"
            for name, value in headers:
                key = name.lower()
                if key in _HOP_BY_HOP or (key == "content-length" and not head):
                    continue
                self.send_header(name, value)
            if not head:
                self.send_header("Content-Length", str(len(payload)))
            self.send_header("Connection", "close")
            self.end_headers()
            if head:
                return
            if truncate or stall:
                self.wfile.write(payload[: len(payload) // 2])
                self.wfile.flush()
                if stall:
                    self._hold()
                self._reset()
                return
            if trickle is not None:
                self.wfile.flush()
                stopping = self.server.proxy._stopping
                for i in range(len(payload)):
                    if stopping.wait(trickle):
                        self._reset()
                        return
                    self.wfile.write(payload[i:i + 1])
                    self.wfile.flush()
                return
            self.wfile.write(payload)

    def _reset(self) -> None:
        """Close the client connection with a TCP RST (SO_LINGER 0), not a FIN."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
        with contextlib.suppress(OSError):
            self.rfile.close()  # makefile() holds a reference that defers the close
            self.connection.close()


def fast_failing_s3fs_options(options: Mapping[str, Any], endpoint_url: str, *,
                              timeout: float = 0.5, max_attempts: int = 2) -> dict[str, Any]:
    """``options`` (e.g. ``S3Emulator.s3fs_storage_options()``) aimed at ``endpoint_url``,
    with short botocore timeouts and few retries, so a fault costs a test little time.

    botocore's ``standard`` retry mode retries connection errors, timeouts and 5xx;
    ``max_attempts`` counts the first attempt. s3fs's own retry count (for its
    ``_call_s3``, which toolfs's adapter does not use) is the class attribute
    ``S3FileSystem.retries``, not a constructor argument: set it on the instance.
    """
    config = dict(options.get("config_kwargs") or {})
    config.update(connect_timeout=timeout, read_timeout=timeout,
                  retries={"max_attempts": max_attempts, "mode": "standard"})
    return {**options, "endpoint_url": endpoint_url, "config_kwargs": config,
            "skip_instance_cache": True}
