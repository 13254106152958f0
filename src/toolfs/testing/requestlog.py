"""The request log: each request a client sent an emulator, as the server saw it.

:class:`RecordedRequest` is one entry (method, path, query, status, headers without
credentials); :class:`_RequestLog` is the thread-safe list an emulator keeps, in the moto
child (:mod:`toolfs.testing.moto`) or in the counting proxy (:mod:`toolfs.testing.proxy`).
A test reads it through the emulator's ``requests()`` / ``request_count()`` to assert how
many round trips an operation really costs.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Requests that carry this header are emulator housekeeping (bucket creation
# by the helpers), not traffic of the code under test, so they are not logged.
_CONTROL_HEADER = "X-Toolfs-Control"
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
