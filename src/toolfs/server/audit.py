"""The audit trail of ``toolfs serve --audit PATH_OR_URL [--audit-reads]``.

Every change (and, with ``--audit-reads``, every read) is one JSON line::

    {"time": "2026-12-07T01:02:03.456789Z", "event": "written", "principal": "alice",
     "iss": "https://idp.example.com/", "sub": "alice", "client_id": "agent-7",
     "context": "3f2a9c1e0b4d", "tool": "edit", "operation": "edit",
     "path": "teams/alice/src/app.py", "version_before": "etag:\\"9b2c...\\"",
     "version_after": "etag:\\"71fe...\\""}

``event`` is ``written`` (a change committed), ``denied`` (a change refused: ``reason`` is
the error code only, ``stale``, ``not_observed`` or ``denied``), ``read`` (a file read)
or ``searched`` (a ``glob``, ``grep`` or ``ls`` that answered: the directory it looked
in, never its pattern); ``path`` is relative to the server's root (the principal's root,
then the path in it). A line never
holds file content, a diff, a token or a credential: it is built from the policy's
``fs/*`` events (:mod:`toolfs.policy.events`), field by field.

Sinks (:func:`open_audit`):

* a local path: lines appended to the file and flushed one by one (``O_APPEND``: several
  processes may share it);
* an fsspec URL on an object store (``s3://bucket/audit/``): objects cannot be appended
  to, so lines are batched and each batch written as a new object
  ``<prefix>/<YYYY-MM-DD>/<time>-<writer>-<seq>.jsonl`` with a conditional create (never
  replacing another replica's object), every ``flush_seconds`` (default 5) or
  ``batch_lines`` lines, and at shutdown. Rotation is by day prefix: expire old days with
  a bucket lifecycle rule.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from toolfs.policy.events import FsEvent

__all__ = ["AuditSink", "AuditSubscriber", "FileSink", "Identity", "ObjectStoreSink",
           "calling_tool", "open_audit"]

logger = logging.getLogger(__name__)

_EVENTS = {"fs/written": "written", "fs/denied": "denied", "fs/read": "read"}
_tool = threading.local()


@contextlib.contextmanager
def calling_tool(name: str) -> Iterator[None]:
    """Name the tool whose events this thread emits meanwhile (the policy calls its
    subscribers on the thread that runs the tool)."""
    previous = getattr(_tool, "name", None)
    _tool.name = name
    try:
        yield
    finally:
        _tool.name = previous


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class AuditSink(Protocol):
    """Where audit lines go."""

    def write(self, line: str) -> None:
        """Take one JSON line (without its newline)."""

    def close(self) -> None:
        """Write what is held and release the sink."""


class FileSink:
    """Lines appended to a local file, each flushed as it is written."""

    def __init__(self, path: str) -> None:
        self.path = path
        # O_APPEND: each line lands at the end even with other writers (other replicas
        # on the same host), as one write() of one line.
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        self._lock = threading.Lock()

    def write(self, line: str) -> None:
        data = (line + "\n").encode()
        with self._lock:
            os.write(self._fd, data)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


class ObjectStoreSink:
    """Lines batched into new objects under ``url`` (see the module docstring)."""

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None, *,
                 flush_seconds: float = 5.0, batch_lines: int = 1000,
                 fs: Any = None) -> None:
        from fsspec.core import url_to_fs

        from toolfs.backends import store_for

        self.url = url
        # ``fs``: a filesystem already made, ``url`` then being its own path.
        fs, prefix = (fs, url) if fs is not None else url_to_fs(url, **(storage_options or {}))
        self.prefix = prefix.rstrip("/")
        self._store = store_for(fs)
        self.flush_seconds = flush_seconds
        self.batch_lines = batch_lines
        self.max_held = 100 * batch_lines
        """Lines held while the store refuses writes, at most (the oldest go first)."""
        self.writer = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self._lines: list[str] = []
        self._seq = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self.objects_written = 0
        self._thread = threading.Thread(target=self._run, name="toolfs-audit", daemon=True)
        self._thread.start()

    def write(self, line: str) -> None:
        with self._lock:
            self._lines.append(line)
            full = len(self._lines) >= self.batch_lines
        if full:
            self._wake.set()

    def flush(self) -> None:
        """Write the lines held as one new object now."""
        with self._lock:
            lines, self._lines = self._lines, []
        if lines:
            self._put("".join(f"{line}\n" for line in lines).encode())

    def _put(self, data: bytes) -> None:
        from toolfs.backends.base import Create
        from toolfs.errors import FsError

        day = datetime.datetime.now(datetime.UTC)
        for _ in range(5):
            self._seq += 1
            name = (f"{self.prefix}/{day:%Y-%m-%d}/{day:%Y%m%dT%H%M%S.%fZ}-{self.writer}-"
                    f"{self._seq:06d}.jsonl")
            try:
                self._store.put(name, data, Create())
            except Exception as err:
                if isinstance(err, FsError) and err.code == "stale":
                    continue  # the name is taken: never overwrite, take the next
                logger.warning("audit: cannot write %s: %s", name,
                               err.message if isinstance(err, FsError) else err)
                with self._lock:  # keep the lines for the next try, within a bound
                    self._lines[:0] = data.decode().splitlines()
                    excess = len(self._lines) - self.max_held
                    if excess > 0:
                        del self._lines[:excess]
                        logger.error("audit: the store refuses writes; %d oldest lines "
                                     "dropped (at most %d held)", excess, self.max_held)
                return
            self.objects_written += 1
            return

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(self.flush_seconds)
            self._wake.clear()
            try:
                self.flush()
            except Exception:  # the audit thread must not die
                logger.exception("audit: flush failed")

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        self._thread.join(timeout=30)
        self.flush()


def open_audit(target: str, storage_options: dict[str, Any] | None = None,
               **options: Any) -> AuditSink:
    """A :class:`FileSink` for a local path (or ``file://`` URL), else an
    :class:`ObjectStoreSink` for the fsspec URL."""
    if "://" not in target or target.startswith("file://"):
        return FileSink(target.removeprefix("file://"))
    return ObjectStoreSink(target, storage_options, **options)


class Identity:
    """Who a context acts for, as audit lines name it (never the token)."""

    __slots__ = ("client_id", "iss", "principal", "root", "sub")

    def __init__(self, principal: str | None, *, iss: str | None = None,
                 sub: str | None = None, client_id: str | None = None,
                 root: str = "") -> None:
        self.principal = principal
        self.iss = iss
        self.sub = sub
        self.client_id = client_id
        self.root = root.strip("/")


class AuditSubscriber:
    """An ``fs/*`` subscriber of one execution context writing audit lines to a sink."""

    wants_diff = False
    """A line never holds a diff: the policy need not compute one for this subscriber."""

    def __init__(self, sink: AuditSink, identity: Identity, *, reads: bool = False,
                 clock: Callable[[], str] = _now) -> None:
        self.sink = sink
        self.identity = identity
        self.reads = reads
        self._clock = clock

    def __call__(self, event: FsEvent) -> None:
        kind = _EVENTS.get(event.type)
        if kind is None or (kind == "read" and not self.reads):
            return
        try:
            self.sink.write(self.line(event, kind))
        except Exception as exc:
            # A change that landed is not undone because the trail failed; said loudly.
            logger.error("audit: cannot record %s of %s: %s", kind, event.path, exc)

    def searched(self, tool: str, path: str, context_id: str) -> None:
        """Record a discovery call (``glob``, ``grep``, ``ls``) that looked in ``path``
        (relative to the room); only with ``reads``. Its pattern is never written: it
        may quote what the agent looked for."""
        if not self.reads:
            return
        who = self.identity
        rel = path.strip("/")
        shown = "/".join(p for p in (who.root, rel) if p and p != ".")
        record = {"time": self._clock(), "event": "searched", "principal": who.principal,
                  "iss": who.iss, "sub": who.sub, "client_id": who.client_id,
                  "context": context_id, "tool": tool, "operation": tool, "path": shown,
                  "version_before": None, "version_after": None}
        try:
            self.sink.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
        except Exception as exc:
            logger.error("audit: cannot record %s of %s: %s", tool, shown, exc)

    def line(self, event: FsEvent, kind: str) -> str:
        """The JSON line of ``event``: named fields only, never content or a diff."""
        who = self.identity
        path = f"{who.root}/{event.path}" if who.root else event.path
        record: dict[str, Any] = {
            "time": self._clock(), "event": kind, "principal": who.principal,
            "iss": who.iss, "sub": who.sub, "client_id": who.client_id,
            "context": event.context_id, "tool": getattr(_tool, "name", None),
            "operation": event.operation, "path": path,
            "version_before": str(event.version_before) if event.version_before else None,
            "version_after": str(event.version_after) if event.version_after else None,
        }
        if kind == "denied" and event.reason:
            # The code only: a message may quote what the file holds.
            record["reason"] = event.reason.split(":", 1)[0]
        return json.dumps(record, ensure_ascii=False, separators=(",", ":"))
