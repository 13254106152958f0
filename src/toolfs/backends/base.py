"""The conditional-store interface: one small adapter per backend.

An adapter does two things, each atomically and each in as few backend round trips as
the backend allows:

* :meth:`Store.get` reads bytes together with the version of exactly those bytes
  (optionally a byte range, optionally only if the file is still at a given version);
* :meth:`Store.put` stores bytes on a condition, :class:`Create` (must not exist),
  :class:`Overwrite` (unconditional) or :class:`Update` (must still be at a version),
  and returns the new version.

Adapters raise :class:`~toolfs.errors.FsError` (``not_found``, ``not_a_file``,
``stale``, ``backend_error``) and nothing else. Paths are the wrapped filesystem's own
paths (already confined by the policy layer).

Async-native backends (S3, GCS) subclass :class:`AsyncStore` and implement the
coroutines; the sync methods run them on fsspec's I/O loop. Blocking backends (memory,
local) implement the sync methods; the coroutines run them in a worker thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime
import itertools
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from toolfs import deadline
from toolfs.errors import FsError, fs_error
from toolfs.versions import DIGEST_KINDS, FileVersion


@dataclass(frozen=True)
class Create:
    """Store only if the file does not exist."""


@dataclass(frozen=True)
class Overwrite:
    """Store unconditionally."""


@dataclass(frozen=True)
class Update:
    """Store only if the file is still at ``expected``."""

    expected: FileVersion
    known: bytes | None = field(default=None, compare=False, repr=False)
    """The bytes of ``expected``, when the caller holds them (an edit computed from
    them): a store whose versions are content digests may then compare the current
    bytes with these instead of hashing them -- the same answer, since ``expected`` is
    the digest of exactly these bytes, for a memcmp instead of a digest."""


PutMode = Create | Overwrite | Update


@dataclass(frozen=True)
class Entry:
    """One entry of a listing, as the listing itself described it (no request per entry)."""

    path: str
    """The wrapped filesystem's own path (``bucket/key``, ``/dir/file``)."""
    kind: Literal["file", "dir"]
    size: int | None = None
    mtime: float | None = None
    """Modification time, seconds since the epoch; ``None`` where the backend has none."""
    version: FileVersion | None = None
    """The version, where the listing carries one (S3 ETag, GCS generation)."""
    target: str | None = None
    """For a symlink the store lists (local: one resolving inside the root), the path
    it reaches, which is where its bytes are read from; ``path`` stays the link's."""


@dataclass(frozen=True)
class Capabilities:
    """What a backend truly guarantees; tests and docs key on these flags."""

    atomic: bool
    """``put`` checks its condition and stores in one indivisible step."""
    cross_process: bool
    """The guarantee holds between processes (and machines), not only threads."""
    digest_versions: bool
    """Versions are content digests: rewriting identical bytes keeps the version."""
    symlinks: bool = False
    """Paths may traverse symlinks, which the policy resolves and confines."""
    cheap_listing: bool = False
    """Listing a directory costs no round trip ("did you mean" hints are offered)."""
    trailing_dot_names: bool = True
    """A path segment may end in ``.`` (``notes.``). Where the service would silently drop
    the dot (Azure Blob), such names are refused as ``invalid_arguments`` instead."""
    removes_empty_dirs: bool = False
    """``remove_empty_dirs`` removes directories (local disk, memory); elsewhere it removes
    nothing: object stores have no directories, and a wrapped filesystem of unknown kind
    is not walked."""


@dataclass(frozen=True)
class Blob:
    """Bytes read from a file, with the version of the whole file they belong to."""

    data: bytes
    version: FileVersion
    size: int
    """Size of the whole file (``len(data)`` may be smaller for a range)."""
    start: int = 0

    @property
    def complete(self) -> bool:
        """True when ``data`` is the whole file."""
        return self.start == 0 and len(self.data) == self.size


class Store(ABC):
    """A conditional store over one fsspec filesystem."""

    capabilities: ClassVar[Capabilities]
    name: ClassVar[str]
    folds_case: bool = False
    """Names differing only in case reach the same file (set per instance where the
    filesystem says so, e.g. a case-insensitive local volume); deny rules then fold case."""
    checks_root: ClassVar[bool] = False
    """Each ``get``, ``put`` and ``delete`` walks from ``root`` and refuses
    (``outside_root``) when the root's path no longer leads to the directory resolved
    when the store was made (a parent swapped for a symlink): the policy then leaves
    that check to the store for the calls that reach files only through it."""
    lists_in_order: bool = False
    """``list_files`` yields files in the order of their paths (object stores list keys
    in UTF-8 byte order): ``grep`` then searches them as they are listed and stops the
    listing once its result is full, instead of listing the whole prefix first. A grep
    that meets another order (SeaweedFS lists directory by directory: ``a/x`` before
    ``a.py``) lists again the slow way, never answers out of order, and turns this off
    for the store."""
    conditions_by_service: ClassVar[bool] = False
    """The conditions of ``put`` and ``delete`` are the service's to honour (conditional
    requests), not checked by this adapter itself: the policy verifies once per process
    and bucket that the service honours them (:mod:`toolfs.backends.conditions`)."""

    def __init__(self, fs: Any, *, root: str | None = None,
                 size_cap: int = 10 * 1024 * 1024) -> None:
        self.fs = fs
        self.root = root
        """The confinement root; adapters that walk paths (local) start from it."""
        self.size_cap = size_cap
        """The whole-file cap the policy enforces; adapters may tune reads to it."""

    def check_root(self) -> None:
        """Raise ``not_found`` (naming it) if the root cannot hold files (a missing bucket
        or directory) or ``not_a_file`` if it is a file. Called once by servers at start,
        not on every call; object-store adapters probe the bucket."""
        root = self.root or ""
        if root and self.fs.isfile(root):
            raise fs_error("not_a_file", f"the workspace root {root} is a file", path=root)

    def ancestors(self, path: str) -> list[str]:
        """The directories above ``path`` that lie strictly inside the root, outermost
        first (``root/a``, ``root/a/b`` for ``root/a/b/c.txt``)."""
        root = (self.root or "").rstrip("/")
        rel = path[len(root) + 1:] if root and path.startswith(root + "/") else path
        parts = rel.split("/")[:-1]
        base = root
        out: list[str] = []
        for part in parts:
            base = f"{base}/{part}" if base else part
            out.append(base)
        return out

    # -- listing --------------------------------------------------------------------

    def list_files(self, prefix: str, *, sizes: bool = True) -> Iterator[Entry]:
        """Every file at any depth below the directory ``prefix`` (flat, in no particular
        order), fresh from the backend (never a listing cache). One paginated listing on
        object stores. ``sizes=False`` says the caller needs no size or mtime, so a store
        that would spend a request or a system call per file on them (local: a stat)
        may yield ``None`` instead. This default uses ``fs.find``."""
        self._forget_listings(prefix)
        own = self.fs._strip_protocol(prefix).rstrip("/")
        try:
            found = self.fs.find(prefix, detail=True, withdirs=False)
        except (FileNotFoundError, NotADirectoryError):
            return
        for name, info in found.items():
            path = self.fs._strip_protocol(name)
            # fsspec answers find(file) with the file itself: only what lies below counts
            if own and not path.startswith(own + "/"):
                continue
            if info.get("type", "file") == "file":
                yield Entry(path=path, kind="file",
                            size=_int_or_none(info.get("size")), mtime=mtime_of(info))

    def list_dir(self, path: str) -> Iterator[Entry]:
        """The immediate children of the directory ``path`` (files and directories), fresh
        from the backend; one delimiter listing (paginated) on object stores. This default
        uses ``fs.ls``; a missing directory is ``not_found``, a file ``not_a_file``."""
        self._forget_listings(path)
        try:
            entries = self.fs.ls(path, detail=True)
        except FileNotFoundError as exc:
            if self.is_root(path):  # an empty root (object stores, memory) lists empty
                return
            raise fs_error("not_found", f"{path} does not exist", path=path) from exc
        except NotADirectoryError as exc:
            raise fs_error("not_a_file", f"{path} is a file, not a directory",
                           path=path) from exc
        own = self.fs._strip_protocol(path).rstrip("/")
        for info in entries:
            name = self.fs._strip_protocol(info["name"]).rstrip("/")
            if name == own:  # fsspec answers ls(file) with the file itself
                if info.get("type") != "directory":
                    raise fs_error("not_a_file", f"{path} is a file, not a directory",
                                   path=path)
                continue
            kind: Literal["file", "dir"] = "dir" if info.get("type") == "directory" else "file"
            yield Entry(path=name, kind=kind,
                        size=_int_or_none(info.get("size")) if kind == "file" else None,
                        mtime=mtime_of(info))

    def get_many(self, paths: Iterable[str], *, max_in_flight: int = 16,
                 length: int | None = None) -> Iterator[tuple[str, Blob | FsError]]:
        """``get(path, length=length)`` for each path, yielded **in input order**, with up
        to ``max_in_flight`` requests outstanding where the backend is remote (this
        default fetches one at a time). A failure is yielded as its ``FsError``, not
        raised; stopping the iteration early cancels what is still in flight. The paths
        come from a listing, so object stores answer a missing one ``not_found`` without
        the extra requests a read spends explaining a 404."""
        for path in paths:
            try:
                yield path, self.get(path, length=length)
            except FsError as err:
                yield path, err

    def remove_empty_dirs(self, path: str, keep: Callable[[str], bool], *,
                          limit: int = 10_000) -> list[str]:
        """Remove the empty directories at and below the directory ``path`` (strictly
        inside the root), deepest first, and return the paths removed. A directory for
        which ``keep(its path)`` is true is left alone with everything below it, never
        listed; a directory that is not empty stays; at most ``limit`` directories are
        looked at (best effort: what is left over stays). Stores with symlinks never walk
        through one and remove nothing outside the root, even when a directory is swapped
        for a link meanwhile. This default removes nothing: object stores have no
        directories, and a wrapped filesystem of unknown kind is not walked."""
        return []

    def check_path(self, path: str) -> None:
        """Raise ``invalid_arguments`` if the wrapped client would not address ``path`` by
        its literal name (see :func:`check_literal`): for the policy's calls that reach
        the filesystem directly (``info``, ``exists``, ``ls``, ...). The store's own
        operations check their paths themselves. This default: every path is literal."""
        return

    def is_root(self, path: str) -> bool:
        """Whether ``path`` names the workspace root (or the filesystem's own root)."""
        own: str = self.fs._strip_protocol(path).rstrip("/")
        root: str = self.fs._strip_protocol(self.root).rstrip("/") if self.root else ""
        return own == root

    def _forget_listings(self, path: str) -> None:
        """Drop fsspec's cached listings of ``path``, its parents and everything below
        it, on this filesystem and on any it wraps (``DirFileSystem``), so that the
        defaults above list afresh."""
        forget_listings(self.fs, path)

    @abstractmethod
    def get(
        self, path: str, *, start: int = 0, length: int | None = None,
        if_version: FileVersion | None = None,
    ) -> Blob:
        """Read ``length`` bytes from ``start`` (all to the end when ``None``).

        With ``if_version``, raise ``stale`` unless the file is still at that version
        (every block of a windowed read is pinned this way, so a view is never torn).
        From ``start=0``, an adapter that had to read the whole file anyway (to digest
        it) may return all of it; ``Blob.complete`` says so.
        """

    @abstractmethod
    def put(self, path: str, data: bytes, mode: PutMode) -> FileVersion:
        """Store ``data`` if ``mode`` holds, else raise ``stale``; return the new version."""

    @abstractmethod
    def delete(self, path: str, mode: Update | Overwrite) -> None:
        """Remove the file if ``mode`` holds, else raise ``stale``."""

    async def get_async(
        self, path: str, *, start: int = 0, length: int | None = None,
        if_version: FileVersion | None = None,
    ) -> Blob:
        """Coroutine form of :meth:`get`."""
        return await asyncio.to_thread(
            lambda: self.get(path, start=start, length=length, if_version=if_version))

    async def put_async(self, path: str, data: bytes, mode: PutMode) -> FileVersion:
        """Coroutine form of :meth:`put`."""
        return await asyncio.to_thread(self.put, path, data, mode)

    async def delete_async(self, path: str, mode: Update | Overwrite) -> None:
        """Coroutine form of :meth:`delete`."""
        await asyncio.to_thread(self.delete, path, mode)


class AsyncStore(Store):
    """A store whose core is async; the sync API runs it on fsspec's I/O loop."""

    conditions_by_service: ClassVar[bool] = True  # a remote service: S3, GCS, Azure

    @abstractmethod
    async def get_async(
        self, path: str, *, start: int = 0, length: int | None = None,
        if_version: FileVersion | None = None,
    ) -> Blob: ...

    @abstractmethod
    async def put_async(self, path: str, data: bytes, mode: PutMode) -> FileVersion: ...

    async def _get_listed(self, path: str, length: int | None) -> Blob:
        """``get_async`` for :meth:`get_many`, whose paths come from a listing: an adapter
        may skip explaining a 404 (directory or parent checks cost requests)."""
        return await self.get_async(path, length=length)

    @abstractmethod
    async def delete_async(self, path: str, mode: Update | Overwrite) -> None: ...

    def get(
        self, path: str, *, start: int = 0, length: int | None = None,
        if_version: FileVersion | None = None,
    ) -> Blob:
        blob: Blob = self._sync(self.get_async(path, start=start, length=length,
                                               if_version=if_version))
        return blob

    def put(self, path: str, data: bytes, mode: PutMode) -> FileVersion:
        version: FileVersion = self._sync(self.put_async(path, data, mode))
        return version

    def delete(self, path: str, mode: Update | Overwrite) -> None:
        self._sync(self.delete_async(path, mode))

    def _sync(self, coro: Any) -> Any:
        from fsspec.asyn import sync

        # The caller's deadline goes along: a task on fsspec's loop has the loop's context.
        return sync(self.fs.loop, lambda: deadline.carried(coro))

    def get_many(self, paths: Iterable[str], *, max_in_flight: int = 16,
                 length: int | None = None) -> Iterator[tuple[str, Blob | FsError]]:
        """A sliding window of up to ``max_in_flight`` ``get_async`` calls on fsspec's
        loop, yielded in input order. The window is refilled only when the caller asks
        for the next result, so at most ``max_in_flight`` blobs are held (in flight or
        done and waiting their turn). Closing the iterator early cancels what is in
        flight, waits for those calls to unwind, and never starts another."""
        loop = self.fs.loop
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # no loop running in this thread: the usual case
            running = None
        if running is loop:
            raise NotImplementedError("get_many would block fsspec's own loop; "
                                      "await get_async there instead")
        window = max(1, max_in_flight)
        started: set[asyncio.Task[Any]] = set()  # touched on the loop thread only

        async def one(path: str) -> Blob | FsError:
            task = asyncio.current_task()
            if task is not None:
                started.add(task)
            try:
                return await self._get_listed(path, length)
            except FsError as err:
                return err
            finally:
                if task is not None:
                    started.discard(task)

        pending: deque[tuple[str, concurrent.futures.Future[Blob | FsError]]] = deque()
        source = iter(paths)
        try:
            while True:
                for path in source:
                    pending.append((path, asyncio.run_coroutine_threadsafe(
                        deadline.carried(one(path)), loop)))
                    if len(pending) >= window:
                        break
                if not pending:
                    return
                path, future = pending.popleft()
                yield path, future.result()
        finally:
            if pending:
                for _, future in pending:
                    future.cancel()
                pending.clear()

                async def unwind() -> None:
                    # Cancellation requests were queued on the loop before this runs;
                    # wait for the calls that had started to finish unwinding.
                    await asyncio.sleep(0)
                    if started:
                        await asyncio.gather(*started, return_exceptions=True)

                with contextlib.suppress(Exception):  # a loop already gone: nothing runs
                    asyncio.run_coroutine_threadsafe(unwind(), loop).result(timeout=30)


def forget_listings(fs: Any, path: str) -> None:
    """Drop fsspec's cached listings of ``path``, its parents and its subtree on ``fs``
    and on the filesystem it wraps, if any (``DirFileSystem``)."""
    invalidate = getattr(fs, "invalidate_cache", None)
    if invalidate is None:
        return
    invalidate(path)
    own = fs._strip_protocol(path).rstrip("/")
    # The parents too, whatever the client's invalidate_cache drops: adlfs drops only
    # the path itself, and its cached listing of the parent would answer info and
    # exists for a file written since as missing, without a request.
    parents = set(itertools.accumulate(own.split("/")[:-1], lambda a, b: f"{a}/{b}"))
    cache = getattr(fs, "dircache", None)
    if cache is not None:
        with contextlib.suppress(Exception):  # a cache that cannot be walked: path only
            for key in [k for k in list(cache) if isinstance(k, str)]:
                name = key.rstrip("/")
                if not own or name == own or name.startswith(own + "/") or name in parents:
                    cache.pop(key, None)
    inner, join = getattr(fs, "fs", None), getattr(fs, "_join", None)
    if inner is not None and inner is not fs and callable(join):
        forget_listings(inner, join(path))


def check_literal(path: str, split: tuple[str, str, Any], *, client: str) -> None:
    """Raise ``invalid_arguments`` unless ``split`` -- ``(bucket, key, version)`` as the
    client's own path parser (``split_path``) read ``path`` -- names exactly ``path``:
    that bucket, that key, no version.

    Object-store clients read parts of a path as something other than a name (s3fs
    cuts a key at ``?versionId=``, a version-aware gcsfs at ``#<n>`` and
    ``?generation=<n>``, adlfs at ``?versionid=``), so ``.env?versionId=x`` would reach
    ``.env`` past a deny rule on ``.env``, and ``?versionId=`` alone the root's own key.
    Checking the round trip, not a list of known markers, refuses whatever rule a
    client has now or adds later, before any request is sent."""
    bucket, key, version = split
    own = path.split("://", 1)[1] if "://" in path else path
    own = own.lstrip("/")
    rebuilt = f"{bucket}/{key}" if key else bucket
    if version is None and (own == rebuilt or (not key and own.rstrip("/") == bucket)):
        return
    same = 0
    for a, b in zip(own, rebuilt, strict=False):
        if a != b:
            break
        same += 1
    part = own[same:] or own
    raise fs_error(
        "invalid_arguments",
        f"{path}: '{part}' is not allowed in a path here: {client} would read it as "
        "something other than part of the name (such as a version selector), so the "
        "path would not name the file it spells; rename without it", path=path,
        details={"part": part})


def epoch_of(value: Any) -> float | None:
    """Epoch seconds of a ``datetime`` (naive: UTC) or an RFC 3339 string."""
    if isinstance(value, str):
        try:
            value = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    if isinstance(value, datetime.datetime):
        stamp: datetime.datetime = value
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=datetime.UTC)
        return stamp.timestamp()
    if isinstance(value, int | float):
        return float(value)
    return None


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) else None


def mtime_of(info: dict[str, Any]) -> float | None:
    """A modification time from an fsspec ``info`` dict, whatever the backend calls it
    (``mtime``, ``LastModified``, ``updated``, ``created``), as epoch seconds."""
    for key in ("mtime", "modified", "LastModified", "last_modified", "updated", "created"):
        value = info.get(key)
        if isinstance(value, bool):
            continue
        epoch = epoch_of(value)
        if epoch is not None:
            return epoch
    return None


def clamp_range(size: int, start: int, length: int | None) -> tuple[int, int]:
    """``(start, end)`` of a byte range clamped to a file of ``size`` bytes."""
    start = max(0, min(start, size))
    end = size if length is None else max(start, min(size, start + length))
    return start, end


def check_condition(path: str, current: bytes | None, mode: PutMode) -> None:
    """Raise ``stale`` unless ``mode`` holds for a file whose bytes are ``current``
    (``None``: absent), comparing content digests."""
    if isinstance(mode, Create) and current is not None:
        raise fs_error("stale", f"{path} was created by someone else", path=path)
    if isinstance(mode, Update):
        if current is None:
            raise fs_error("stale", f"{path} was deleted", path=path)
        if not is_at(current, mode):
            raise fs_error("stale", f"{path} changed", path=path)


def is_at(current: bytes, mode: Update) -> bool:
    """Whether ``current`` (a file's whole bytes) is at ``mode.expected``, a content-digest
    version: compared with ``mode.known`` when the caller holds those bytes, else hashed
    with the algorithm the expected version names (so a version made by another process
    is checked the way it was made)."""
    if mode.known is not None and mode.expected.kind in DIGEST_KINDS:
        return current == mode.known
    return mode.expected.matches(current)
