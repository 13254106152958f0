"""The deadline of one tool call: every request, retry and back-off in it ends by then.

:class:`~toolfs.Workspace` opens a :func:`scope` of its ``timeout`` around each tool
call; the object-store core (:mod:`toolfs.backends.objectstore`) bounds each operation
by what is left of it and gives each request connect/read timeouts below it. The
deadline is a context variable: it follows the call into worker threads that the call
itself runs on, and :func:`carried` takes it onto fsspec's event loop.

A call that runs out of time answers ``backend_error`` saying what is unknown: a read
changed nothing; a write or delete whose request was sent may still complete (the
store applies it whole or not at all), so the answer says to read the file before
retrying, and the policy forgets what it had observed of that file.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import time
from collections.abc import Coroutine, Iterator
from typing import Any, Literal, TypeVar

from toolfs.errors import FsError, fs_error

T = TypeVar("T")

DEFAULT_TIMEOUT = 30.0
"""Seconds a tool call may take, by default (``Workspace(timeout=...)``)."""
CONNECT_TIMEOUT = 5.0
"""Upper bound of one request's connect timeout (lower when less time is left); the
same as s3fs's own default for S3."""
READ_TIMEOUT = 15.0
"""Upper bound of one request's read timeout: the longest silence between bytes."""

_at: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar(
    "toolfs_deadline", default=None)
"""``(monotonic instant, the timeout it came from)`` of the current call, if any."""


def check_timeout(value: Any) -> float | None:
    """``value`` as a timeout in seconds (a positive finite number, or ``None``)."""
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or value <= 0):
        raise fs_error("invalid_arguments",
                       f"timeout must be a positive number of seconds or None, not {value!r}")
    return float(value)


@contextlib.contextmanager
def scope(seconds: float | None, *, since: float | None = None) -> Iterator[None]:
    """Within this block, calls end by ``seconds`` from ``since`` (a ``time.monotonic()``
    instant, default now; ``None`` seconds: no deadline of its own). A scope inside
    another keeps the earlier of the two instants."""
    if seconds is None:
        yield
        return
    at = (time.monotonic() if since is None else since) + seconds
    outer = _at.get()
    token = _at.set((at, seconds) if outer is None or at < outer[0] else outer)
    try:
        yield
    finally:
        _at.reset(token)


@contextlib.contextmanager
def grace(seconds: float) -> Iterator[None]:
    """Within this block, calls end by ``seconds`` from now, *whatever* deadline the
    caller had (even one already past): for the clean-up a failed call must still do,
    such as rolling back the files an all-or-nothing commit wrote before it failed."""
    token = _at.set((time.monotonic() + seconds, seconds))
    try:
        yield
    finally:
        _at.reset(token)


def remaining() -> float | None:
    """Seconds left of the current deadline (may be negative); ``None``: no deadline."""
    current = _at.get()
    return None if current is None else current[0] - time.monotonic()


def request_timeouts() -> tuple[float, float] | None:
    """``(connect, read)`` seconds for one request: :data:`CONNECT_TIMEOUT` and
    :data:`READ_TIMEOUT`, or what is left of the deadline when that is less; ``None``
    without a deadline."""
    left = remaining()
    if left is None:
        return None
    left = max(left, 0.01)
    return min(CONNECT_TIMEOUT, left), min(READ_TIMEOUT, left)


async def _within(coro: Coroutine[Any, Any, T], current: tuple[float, float] | None) -> T:
    _at.set(current)  # this task's own context: the caller's deadline, on the loop
    return await coro


def carried(coro: Coroutine[Any, Any, T]) -> Coroutine[Any, Any, T]:
    """``coro`` wrapped to run under the calling thread's deadline on another thread's
    event loop (a task there starts from that loop's context, not the caller's)."""
    return _within(coro, _at.get())


def exceeded(verb: Literal["read", "write", "delete", "list"], path: str, *,
             may_have_changed: bool) -> FsError:
    """``backend_error`` for an operation the deadline ended, saying what is unknown."""
    current = _at.get()
    seconds = current[1] if current is not None else 0.0
    doing = {"read": "reading", "write": "writing", "delete": "deleting",
             "list": "listing"}[verb]
    if may_have_changed:
        after = "the change may still complete; read the file before retrying"
    else:
        after = "nothing was changed"
    return fs_error("backend_error",
                    f"{path}: the storage did not finish {doing} within the {seconds:g}-"
                    f"second timeout; {after}", path=path,
                    details={"deadline": seconds, "outcome": "unknown" if may_have_changed
                             else "unchanged"})
