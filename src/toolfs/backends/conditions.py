"""Conditions verified, not assumed: a probe of the conditional writes a store relies on.

toolfs's guarantees (no lost update, exactly one ``created``) rest on the service
honouring the conditions of :meth:`Store.put` and :meth:`Store.delete`. Stores whose
conditions are checked by toolfs itself (memory: a lock; local disk: ``flock`` and
compare-and-replace; the generic fallback: check-then-write, declared not atomic) need no
proof. Stores whose conditions are the service's to honour (S3, GCS, Azure: every
:class:`~toolfs.backends.base.AsyncStore`, ``Store.conditions_by_service``) are probed
once per process and (store kind, endpoint, bucket) before the first write there.

Field reports show S3-compatible services and gateways that accept ``If-Match`` /
``If-None-Match`` and ignore them, always (proxies that strip headers) or only under
concurrency (a check, then an unconditional write). The probe, on one scratch object
under the root (a reserved name, see :func:`is_reserved_name`), in the store's own
``put`` and ``delete`` calls -- the exact requests a tool call sends:

1. two create-if-absent puts of the new object, sent at once: exactly one may succeed
   (an ignored ``If-None-Match``, or one checked and then written unconditionally, lets
   both through when they cross; a race narrower than the two requests' arrival skew can
   still slip by, so this step proves "not ignored", not "atomic");
2. an update on the version just made: must succeed (the conditions work at all);
3. an update on the first, now wrong, version: must fail ``stale``;
4. a delete on that wrong version: must fail ``stale``;
5. a delete on the current version: must succeed;
6. an update of the now deleted object: must fail ``stale`` (a service where
   ``If-Match`` on a missing key succeeds would bring a deleted file back).

Whatever step fails, the scratch object is removed (unconditionally) before the verdict
is given. A store that failed is refused for writes with ``unsupported``; reads work.
``PolicyFileSystem(trust_conditions=True)`` (``Workspace(..., trust_conditions=True)``,
``toolfs serve --trust-conditions``) skips the probe for a user who accepts the risk.
A probe that cannot finish (the service fails, access is denied) gives no verdict: its
error is the write's answer, and the next write probes again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import os
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolfs.backends.base import AsyncStore, Create, Overwrite, PutMode, Store, Update
from toolfs.errors import FsError, fs_error
from toolfs.versions import FileVersion

TRUST_OPTION = "trust_conditions"
"""The workspace option that skips the probe (and its refusal)."""

RESERVED_MARK = ".toolfs-tmp-"
"""A path segment that starts with ``.`` and holds this names one of toolfs's own
temporary objects (local disk's temp files, the probe's scratch object): refused for
writing and never listed, on every store, so no user file can be one."""

PROBE_PREFIX = f".toolfs-probe{RESERVED_MARK}"
"""The scratch object's name: this, then 24 random hex characters."""


def is_reserved_name(name: str) -> bool:
    """Whether the path segment ``name`` has the form of toolfs's own temporary objects
    (``.NAME.toolfs-tmp-*``: local disk's temp files, the condition probe's object)."""
    return name.startswith(".") and RESERVED_MARK in name


def has_reserved_part(path: str) -> bool:
    """Whether any segment of the ``/``-separated ``path`` is a reserved name."""
    return RESERVED_MARK in path and any(is_reserved_name(p) for p in path.split("/"))


@dataclass(frozen=True)
class Verdict:
    """What the probe found for one (store kind, endpoint, bucket)."""

    honoured: bool
    ignored: str = ""
    """Which condition was ignored, in words (empty when honoured)."""
    where: str = ""
    """The bucket or container probed."""


_verdicts: dict[tuple[str, str, str], Verdict] = {}
_locks: dict[tuple[str, str, str], threading.Lock] = {}
_guard = threading.Lock()


def _reset_after_fork() -> None:
    # A lock held by another thread at fork time would never be released in the child;
    # the verdicts stay true (the same services).
    global _guard
    _guard = threading.Lock()
    _locks.clear()


os.register_at_fork(after_in_child=_reset_after_fork)


def endpoint_of(fs: Any) -> str:
    """The service ``fs`` talks to, as a cache key: its endpoint URL (s3fs, gcsfs),
    account URL or name (adlfs), else a digest of its constructor options."""
    for value in (getattr(fs, "endpoint_url", None),
                  (getattr(fs, "client_kwargs", None) or {}).get("endpoint_url"),
                  getattr(fs, "_endpoint", None), getattr(fs, "account_url", None),
                  getattr(fs, "account_name", None)):
        if isinstance(value, str) and value:
            return value
    options = getattr(fs, "storage_options", None) or {}
    # A digest, not the options: they may hold credentials.
    digest = hashlib.sha256(repr(sorted(options.items(), key=str)).encode()).hexdigest()
    return f"{type(fs).__module__}.{type(fs).__qualname__}:{digest[:16]}"


def scratch_dir(store: Store, path: str | None) -> str | None:
    """Where the probe's object goes: the root when it names a bucket, else the bucket
    of ``path``; ``None`` when neither does."""
    root = (store.root or "").strip("/")
    if root:
        return root
    if path:
        bucket = path.strip("/").split("/", 1)[0]
        return bucket or None
    return None


def verify(store: Store, path: str | None = None) -> None:
    """Raise ``unsupported`` if the service behind ``store`` ignores the conditions
    toolfs relies on (probing once per process and bucket; a no-op for stores whose
    conditions toolfs checks itself). ``path``: the file about to be written (its
    bucket is probed when the root names none). A probe that fails (``backend_error``,
    ``denied``, ...) raises that error and leaves no verdict."""
    if not store.conditions_by_service:
        return
    where = scratch_dir(store, path)
    if where is None:
        return
    key = (store.name, endpoint_of(store.fs), where.split("/", 1)[0])
    verdict = _verdicts.get(key)
    if verdict is None:
        with _guard:
            lock = _locks.setdefault(key, threading.Lock())
        with lock:  # one probe per key at a time; the others wait for its verdict
            verdict = _verdicts.get(key)
            if verdict is None:
                ignored = _probe_explained(store, where)
                verdict = Verdict(honoured=ignored is None, ignored=ignored or "",
                                  where=key[2])
                _verdicts[key] = verdict
    if not verdict.honoured:
        raise refusal(verdict)


def refusal(verdict: Verdict) -> FsError:
    """The ``unsupported`` error that refuses a write on a store that failed the probe."""
    return fs_error(
        "unsupported",
        "this store ignores conditional writes; toolfs cannot prevent lost updates on it "
        f"(checked on {verdict.where}: {verdict.ignored}). Writes are refused; reads "
        f"work. To write anyway, accepting that concurrent changes may be lost, open the "
        f"workspace with {TRUST_OPTION}=True (toolfs serve --trust-conditions)",
        details={"condition_ignored": verdict.ignored, "option": TRUST_OPTION})


def forget_verdicts() -> None:
    """Drop every cached verdict (tests; a service fixed while the process runs)."""
    with _guard:
        _verdicts.clear()


def _probe_explained(store: Store, where: str) -> str | None:
    """:func:`probe`, an error that stopped it said as such: never ``stale`` (the
    probe's own refusal is not the caller's file having changed), never naming the
    scratch object as if it were the caller's file."""
    name = f"{where.rstrip('/')}/{PROBE_PREFIX}{secrets.token_hex(12)}"
    try:
        return probe(store, name)
    except FsError as err:
        if err.code == "missing_bucket":
            raise  # the bucket itself is missing: that is the answer, not the probe
        code = "backend_error" if err.code == "stale" else err.code
        message = err.message.replace(name, "the scratch object")
        out = fs_error(code, "checking that the store honours conditional writes (with a "
                       f"scratch object in {where}) failed: {message}",
                       details={**err.details, "condition_probe": True})
        out.__cause__ = err
        raise out from err


def probe(store: Store, name: str) -> str | None:
    """Run the probe (see the module docstring) on the new scratch object ``name`` (a
    reserved name, see :data:`PROBE_PREFIX`); ``None`` if every condition held, else
    which one was ignored. Raises the store's error if a step fails otherwise (the
    object is still removed)."""
    tag = name.rsplit("-", 1)[-1]

    def body(step: str) -> bytes:
        return f"toolfs condition probe {tag}: {step}\n".encode()

    present = True  # whether the object may be there (removed at the end if so)
    try:
        outcomes = _at_once(store, [(name, body("create a"), Create()),
                                    (name, body("create b"), Create())])
        won = [o for o in outcomes if isinstance(o, FileVersion)]
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not _is_stale(outcome):
                raise outcome
        if len(won) != 1:
            if not won:
                present = False
                raise fs_error("backend_error", f"{name}: both creates of a new object "
                               "were refused; the conditions could not be checked",
                               path=name)
            return ("two create-if-absent requests for one new object, sent at once, "
                    "both succeeded")
        first = won[0]
        second = store.put(name, body("update"), Update(first))
        if _succeeds(lambda: store.put(name, body("lost update"), Update(first))):
            return "an update on a version that was no longer current succeeded"
        if _succeeds(lambda: store.delete(name, Update(first))):
            present = False
            return "a delete on a version that was no longer current succeeded"
        store.delete(name, Update(second))
        present = False
        if _succeeds(lambda: store.put(name, body("resurrect"), Update(second))):
            present = True
            return "an update of a deleted object succeeded"
        return None
    finally:
        if present:
            with contextlib.suppress(Exception):  # best effort; the name is never listed
                store.delete(name, Overwrite())


def _is_stale(exc: BaseException) -> bool:
    return isinstance(exc, FsError) and exc.code == "stale"


def _succeeds(step: Callable[[], Any]) -> bool:
    """Whether ``step`` (a write that must be refused) went through; ``stale`` is the
    refusal expected, any other error is raised."""
    try:
        step()
    except FsError as err:
        if err.code == "stale":
            return False
        raise
    return True


def _at_once(store: Store, puts: list[tuple[str, bytes, PutMode]]
             ) -> list[FileVersion | BaseException]:
    """The ``puts`` sent concurrently; each outcome, a version or the exception."""
    if isinstance(store, AsyncStore):
        async def all_of() -> list[Any]:
            return await asyncio.gather(*(store.put_async(p, d, m) for p, d, m in puts),
                                        return_exceptions=True)

        outcomes: list[Any] = store._sync(all_of())
        return outcomes
    barrier = threading.Barrier(len(puts))

    def one(p: str, d: bytes, m: PutMode) -> FileVersion:
        barrier.wait(timeout=30)
        return store.put(p, d, m)

    with concurrent.futures.ThreadPoolExecutor(len(puts)) as pool:
        futures = [pool.submit(one, p, d, m) for p, d, m in puts]
        results: list[FileVersion | BaseException] = []
        for future in futures:
            exc = future.exception()
            results.append(exc if exc is not None else future.result())
        return results
