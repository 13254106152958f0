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
import datetime
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from toolfs.errors import FsError, fs_error
from toolfs.versions import FileVersion


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

    def list_files(self, prefix: str) -> Iterator[Entry]:
        """Every file at any depth below the directory ``prefix`` (flat, in no particular
        order), fresh from the backend (never a listing cache). One paginated listing on
        object stores. This default uses ``fs.find``."""
        self._forget_listings(prefix)
        try:
            found = self.fs.find(prefix, detail=True, withdirs=False)
        except FileNotFoundError:
            return
        for name, info in found.items():
            if info.get("type", "file") == "file":
                yield Entry(path=self.fs._strip_protocol(name), kind="file",
                            size=_int_or_none(info.get("size")), mtime=mtime_of(info))

    def list_dir(self, path: str) -> Iterator[Entry]:
        """The immediate children of the directory ``path`` (files and directories), fresh
        from the backend; one delimiter listing (paginated) on object stores. This default
        uses ``fs.ls``; a missing directory is ``not_found``, a file ``not_a_file``."""
        self._forget_listings(path)
        try:
            entries = self.fs.ls(path, detail=True)
        except FileNotFoundError as exc:
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
        raised; stopping the iteration early cancels what is still in flight."""
        for path in paths:
            try:
                yield path, self.get(path, length=length)
            except FsError as err:
                yield path, err

    def _forget_listings(self, path: str) -> None:
        invalidate = getattr(self.fs, "invalidate_cache", None)
        if invalidate is not None:
            invalidate(path)

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

    @abstractmethod
    async def get_async(
        self, path: str, *, start: int = 0, length: int | None = None,
        if_version: FileVersion | None = None,
    ) -> Blob: ...

    @abstractmethod
    async def put_async(self, path: str, data: bytes, mode: PutMode) -> FileVersion: ...

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

        return sync(self.fs.loop, lambda: coro)


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) else None


def mtime_of(info: dict[str, Any]) -> float | None:
    """A modification time from an fsspec ``info`` dict, whatever the backend calls it
    (``mtime``, ``LastModified``, ``updated``, ``created``), as epoch seconds."""
    for key in ("mtime", "LastModified", "last_modified", "updated", "created"):
        value = info.get(key)
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, datetime.datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=datetime.UTC)
            return value.timestamp()
        if isinstance(value, str):
            try:
                parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                continue
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=datetime.UTC)
            return parsed.timestamp()
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
        if FileVersion.of_bytes(current) != mode.expected:
            raise fs_error("stale", f"{path} changed", path=path)
