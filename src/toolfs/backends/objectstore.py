"""The object-store core: what S3, GCS and Azure Blob share, written once.

A store module (``s3.py``, ``gcs.py``, ``azure.py``) is a *dialect*: the requests of
one service, each answering in the small vocabulary below. Everything else lives here:

* **literal paths**: a path the client's own parser would read as something other
  than a name (a version selector) is refused before any request
  (:func:`~toolfs.backends.base.check_literal`);
* **paths as a filesystem**: object stores have no directories, yet a create first
  checks (one listing of ``key/`` and one metadata request per parent below the root,
  in parallel) that the name is not a "directory" and no parent is a file
  (``not_a_file``); a 404 on a read is explained the same way; a missing bucket is
  ``not_found`` naming it;
* **conditional writes and their lost responses**: a write or conditional delete that
  may have been sent twice (a retry, or aiohttp's hidden resend of an idempotent
  request) and is then refused is checked: our own bytes there (by MD5) is success, a
  delete whose object is gone is success, anything else ``stale``; a check that itself
  fails is ``backend_error`` (the outcome is unknown), never ``stale``;
* **retries** of connection failures of a write, counted, so the check above knows;
* **listing pages** fetched one at a time as the caller asks, "directory" markers left
  out, each prefix once;
* **the deadline** (:mod:`toolfs.deadline`): every public operation, with every
  request, retry and back-off in it, ends by the tool call's deadline with
  ``backend_error`` saying what is unknown.

The dialect's vocabulary: :meth:`ObjectStore._read` returns a :class:`Read`,
:meth:`~ObjectStore._head` a :class:`Head` (or ``None``: no object),
:meth:`~ObjectStore._list_page` a :class:`Page`; a refused condition is raised as
:class:`Refused`, a range the object cannot satisfy as :class:`Unsatisfiable`; every
other failure is an :class:`~toolfs.errors.FsError` the dialect words itself.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeVar

from toolfs import deadline
from toolfs.backends.base import (
    AsyncStore,
    Blob,
    Create,
    Entry,
    Overwrite,
    PutMode,
    Update,
    check_literal,
)
from toolfs.errors import FsError, fs_error
from toolfs.versions import FileVersion

T = TypeVar("T")

# Connection-level failures of a write retried by the core (after the client's own).
CONNECTION_RETRIES = 2


@dataclass(frozen=True)
class Head:
    """What one metadata request says of an object."""

    version: FileVersion
    size: int | None
    md5: bytes | None
    """The MD5 of the whole object where the service keeps it (S3's single-part ETag,
    GCS's ``md5Hash``, Azure's ``Content-MD5``): how a write recognises its own bytes."""
    folder: bool = False
    """The object stands for a directory (Azure ``hdi_isfolder`` metadata)."""


@dataclass(frozen=True)
class Read:
    """The answer to one ranged (or whole) read."""

    data: bytes
    version: FileVersion
    total: int | None
    """The whole object's size (from ``Content-Range``); ``None``: ``len(data)``."""
    start: int
    """Where ``data`` begins in the object (0 when the answer is the whole object)."""


@dataclass
class Page:
    """One listing page: files and directories as the service listed them."""

    entries: list[Entry] = field(default_factory=list)
    seen: bool = False
    """Anything at all was listed (directory markers included)."""
    token: str | None = None
    """The continuation token of the next page; ``None``: this was the last."""


class Refused(Exception):
    """The service refused a write's or a conditional delete's condition (409/412, or a
    404 where the object named was expected). The core decides: our own earlier
    attempt, or ``stale``."""

    def __init__(self, status: int | None, *, retried: bool = False,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(status)
        self.status = status
        self.retried = retried
        """The client resent the request (its retry policy said so)."""
        self.details = details or {}


class Unsatisfiable(Exception):
    """416: the range starts past the end (any range of an empty object)."""


Verb = Literal["read", "write", "delete", "list"]


def missing_bucket(word: str, bucket: str, path: str) -> FsError:
    """``missing_bucket``: the bucket (``word``: "bucket", "container") itself does not
    exist. One wording for every tool, the CLI and a server's start, saying what a person
    can do; ``details["bucket"]`` (and ``details[word]``) names it."""
    return fs_error("missing_bucket", f"the {word} {bucket} does not exist (toolfs never "
                    f"creates {word}s: create it, or use a URL in a {word} that exists)",
                    path=path, details={"bucket": bucket, word: bucket})


class ObjectStore(AsyncStore):
    """The shared semantics of object stores; subclasses supply the requests."""

    client: ClassVar[str]
    """The fsspec client's name, for messages (``s3fs``)."""
    bucket_word: ClassVar[str] = "bucket"
    connection_errors: ClassVar[tuple[type[BaseException], ...]] = ()
    """Failures of one write attempt at the connection level, retried by the core."""

    list_page_size: ClassVar[int] = 1000
    """Entries asked for per listing page."""
    lists_in_order: bool = True

    # -- the dialect ------------------------------------------------------------------

    @abstractmethod
    async def _check_bucket(self, bucket: str, path: str) -> None:
        """Raise ``missing_bucket`` (:meth:`_no_bucket`) if the bucket does not exist."""

    @abstractmethod
    async def _head(self, bucket: str, key: str, path: str) -> Head | None:
        """The object's metadata; ``None`` if no object is at ``key``."""

    @abstractmethod
    async def _list_page(self, bucket: str, prefix: str, path: str, *, delimiter: bool,
                         token: str | None, limit: int | None = None) -> Page:
        """One page of the objects under ``prefix`` (with ``delimiter``: one level)."""

    @abstractmethod
    async def _read(self, bucket: str, key: str, path: str, *,
                    window: tuple[int, int | None] | None,
                    if_version: FileVersion | None) -> Read:
        """One read: the bytes ``window`` (first, last inclusive or to the end) or all,
        pinned to ``if_version``; a missing object is ``not_found``."""

    @abstractmethod
    async def _write(self, bucket: str, key: str, data: bytes, mode: PutMode,
                     path: str) -> FileVersion:
        """One conditional write (the client may retry inside); a refused condition
        is :class:`Refused`."""

    @abstractmethod
    async def _remove(self, bucket: str, key: str, mode: Update | Overwrite,
                      path: str) -> None:
        """One delete, conditional on ``mode``; a refusal that a resend could explain
        (the object gone) is :class:`Refused`."""

    async def _may_resend(self, verb: Literal["write", "delete"]) -> bool:
        """Whether the HTTP client may have sent the request twice out of our sight
        (aiohttp resends idempotent requests on a dropped connection unless that is
        turned off: :func:`hidden_resends_off`)."""
        return True

    async def _before_delete(self, bucket: str, key: str, path: str,
                             mode: Update | Overwrite) -> None:
        """A dialect's check before a delete (S3: a conditional HEAD)."""

    async def _clear_for_create(self, bucket: str, key: str, path: str,
                                refused: Refused) -> bool:
        """After a refused create: True if what refused it was no object and is now
        gone, so the same conditional create may be sent once more (SeaweedFS's
        empty folders)."""
        return False

    # -- paths --------------------------------------------------------------------------

    def _parts(self, path: str) -> tuple[str, str]:
        """``(bucket, key)`` of ``path`` (the key may be empty), refused as
        ``invalid_arguments`` unless the client's ``split_path`` spells ``path`` exactly
        (see :func:`~toolfs.backends.base.check_literal`). Every request goes to the
        bucket and key this returns."""
        split = self.fs.split_path(path)
        check_literal(path, split, client=self.client)
        return split[0], split[1]

    def check_path(self, path: str) -> None:
        self._parts(path)

    def _split(self, path: str) -> tuple[str, str]:
        """``(bucket, key)`` of a file."""
        bucket, key = self._parts(path)
        if not key:
            raise fs_error("not_a_file", f"{path} is a {self.bucket_word}", path=path)
        return bucket, key

    def _own(self, path: str) -> str:
        """``bucket/key`` of a path as the policy hands it over."""
        return str(self.fs._strip_protocol(path)) if "://" in path else path.lstrip("/")

    def _no_bucket(self, bucket: str, path: str) -> FsError:
        return missing_bucket(self.bucket_word, bucket, path)

    def check_root(self) -> None:
        path = self.root or ""
        bucket = self._own(path).partition("/")[0]
        self._sync(self._bounded("read", path, lambda: self._check_bucket(bucket, path)))

    async def _conflict(self, bucket: str, key: str, path: str) -> FsError | None:
        """``not_a_file`` if ``key`` is a "directory" (other keys lie under ``key/``) or
        a parent below the root is an object; ``None`` if the name is free to be a file."""
        # The parents' keys are prefixes of the checked key, cut literally: the client's
        # parser must not read a parent ("d?versionId=x" of "d?versionId=x/f") another way.
        parents = [own[len(bucket) + 1:] for own in map(self._own, self.ancestors(path))
                   if own.startswith(bucket + "/") and len(own) > len(bucket) + 1]
        below, *found = await asyncio.gather(
            self._list_page(bucket, key + "/", path, delimiter=False, token=None, limit=1),
            *(self._head(bucket, k, path) for k in parents))
        assert isinstance(below, Page)
        for k, head in zip(parents, found, strict=True):
            if head is not None:
                return fs_error("not_a_file", f"{bucket}/{k} is a file, not a directory, "
                                f"in {path}", path=path, details={"file": f"{bucket}/{k}"})
        if below.seen:
            return fs_error("not_a_file", f"{path} is a directory", path=path)
        return None

    # -- listing ------------------------------------------------------------------------

    def _pages(self, path: str, *, delimiter: bool) -> Iterator[tuple[str, Page]]:
        """``(bucket, page)`` for each page of the listing of the directory ``path``,
        fetched one at a time as the caller asks."""
        bucket, key = self._parts(path)
        key = key.rstrip("/")
        prefix = f"{key}/" if key else ""
        token: str | None = None
        while True:
            page: Page = self._sync(self._bounded("list", path, functools.partial(
                self._list_page, bucket, prefix, path, delimiter=delimiter, token=token)))
            yield bucket, page
            token = page.token
            if not token:
                return

    def list_files(self, prefix: str, *, sizes: bool = True) -> Iterator[Entry]:
        """One listing of ``prefix/`` (paginated), no request per object; "directory
        marker" objects are not files."""
        for _, page in self._pages(prefix, delimiter=False):
            yield from (e for e in page.entries if e.kind == "file")

    def list_dir(self, path: str) -> Iterator[Entry]:
        """One delimiter listing of ``path/`` (paginated): objects are files, prefixes
        directories. Nothing there: ``not_a_file`` if ``path`` is an object (one
        metadata request), else ``not_found`` (the root, or a bucket, lists empty)."""
        own = path.rstrip("/")
        seen = False
        # A prefix may come again on the next page (the page before ended inside it):
        # once each. Pages come in key order, so only the last page's prefixes are kept,
        # not every prefix of a directory that may hold millions.
        before: set[str] = set()
        for _, page in self._pages(path, delimiter=True):
            seen = seen or page.seen
            dirs: set[str] = set()
            for entry in page.entries:
                if entry.kind == "file":
                    yield entry
                elif entry.path != own:  # "d//x" names d
                    if entry.path not in dirs and entry.path not in before:
                        yield entry
                    dirs.add(entry.path)
            before = dirs
        if seen:
            return
        bucket, key = self._parts(path)
        key = key.rstrip("/")
        if not key or self.is_root(path):
            return
        head = self._sync(self._bounded("list", path, lambda: self._head(bucket, key, path)))
        if head is not None:
            raise fs_error("not_a_file", f"{path} is a file, not a directory", path=path)
        raise fs_error("not_found", f"{path} does not exist", path=path)

    # -- reading ------------------------------------------------------------------------

    async def _get_listed(self, path: str, length: int | None) -> Blob:
        return await self.get_async(path, length=length, explain_missing=False)

    async def get_async(
        self, path: str, *, start: int = 0, length: int | None = None,
        if_version: FileVersion | None = None, explain_missing: bool = True,
    ) -> Blob:
        """See :meth:`Store.get`; with ``explain_missing`` a 404 is checked for a
        "directory", a file above it, or a missing bucket (extra requests, on 404 only)."""
        return await self._bounded("read", path, lambda: self._get(
            path, start, length, if_version, explain_missing))

    async def _get(self, path: str, start: int, length: int | None,
                   if_version: FileVersion | None, explain_missing: bool) -> Blob:
        bucket, key = self._split(path)
        window: tuple[int, int | None] | None = None
        if start > 0 or length is not None:
            # A zero-length window still needs the version and size: ask for one byte.
            window = (start, start + max(length or 0, 1) - 1 if length is not None else None)
        try:
            try:
                got = await self._read(bucket, key, path, window=window,
                                       if_version=if_version)
            except Unsatisfiable:
                # An empty object answers 416 to any range (as does a start past the
                # end): one unranged read gets its version and size.
                got = await self._read(bucket, key, path, window=None,
                                       if_version=if_version)
        except FsError as err:
            if err.code == "not_found" and err.details.get("bucket"):
                raise
            if err.code == "not_found" and if_version is not None:
                raise fs_error("stale", f"{path} was deleted", path=path) from err.__cause__
            if err.code == "not_found" and explain_missing:
                conflict = await self._conflict(bucket, key, path)
                if conflict is not None:
                    raise conflict from err.__cause__
            raise
        data = got.data if length is None else got.data[:length]
        size = got.total if got.total is not None else len(got.data)
        return Blob(data=data, version=got.version, size=size, start=got.start)

    # -- writing ------------------------------------------------------------------------

    async def put_async(self, path: str, data: bytes, mode: PutMode) -> FileVersion:
        sent: list[bool] = []
        return await self._bounded("write", path, lambda: self._put(path, data, mode, sent),
                                   sent=sent)

    async def _put(self, path: str, data: bytes, mode: PutMode,
                   sent: list[bool]) -> FileVersion:
        bucket, key = self._split(path)
        if not isinstance(mode, Update):  # an existing file needs no directory check
            conflict = await self._conflict(bucket, key, path)
            if conflict is not None:
                raise conflict
        resent = await self._may_resend("write")
        failures = 0
        cleared = False
        while True:
            try:
                sent.append(True)
                return await self._write(bucket, key, data, mode, path)
            except self.connection_errors as exc:
                failures += 1
                resent = True
                if failures > CONNECTION_RETRIES:
                    raise fs_error("backend_error", f"{path}: {exc}", path=path) from exc
                await asyncio.sleep(0.05 * failures)
            except Refused as refused:
                if resent or refused.retried:
                    # The first attempt may have landed before its response was lost.
                    own = await self._checked(path, self._own_write(bucket, key, data, path))
                    if own is not None:
                        return own
                if isinstance(mode, Create) and not cleared:
                    cleared = await self._checked(
                        path, self._clear_for_create(bucket, key, path, refused))
                    if cleared:
                        continue  # the same conditional create, once more
                what = {Create: "was created by someone else",
                        Update: "changed" if refused.status != 404 else "was deleted"}
                raise fs_error("stale", f"{path} {what.get(type(mode), 'changed')}",
                               path=path, details=refused.details) from refused.__cause__

    async def _own_write(self, bucket: str, key: str, data: bytes,
                         path: str | None = None) -> FileVersion | None:
        """The current version if the object holds exactly ``data`` (by its MD5);
        ``None`` if it holds something else or is gone; raises if the check fails."""
        head = await self._head(bucket, key, path or f"{bucket}/{key}")
        if head is None or head.md5 != hashlib.md5(data, usedforsecurity=False).digest():
            return None
        if head.size is not None and head.size != len(data):
            return None
        return head.version

    async def _checked(self, path: str, check: Awaitable[T]) -> T:
        """A check after a refused request whose first attempt may have landed: if the
        check fails, the outcome is unknown (``backend_error``), never ``stale``."""
        try:
            return await check
        except FsError as err:
            if err.code in ("backend_error", "not_a_file"):
                raise
            raise fs_error("backend_error", f"{path}: the outcome is unknown: checking it "
                           f"failed ({err.message})", path=path) from err
        except Exception as exc:
            raise fs_error("backend_error", f"{path}: the outcome is unknown: checking it "
                           f"failed ({type(exc).__name__})", path=path) from exc

    # -- deleting -----------------------------------------------------------------------

    async def delete_async(self, path: str, mode: Update | Overwrite) -> None:
        sent: list[bool] = []
        await self._bounded("delete", path, lambda: self._delete(path, mode, sent),
                            sent=sent)

    async def _delete(self, path: str, mode: Update | Overwrite, sent: list[bool]) -> None:
        bucket, key = self._split(path)
        await self._before_delete(bucket, key, path, mode)
        resent = await self._may_resend("delete")
        try:
            sent.append(True)
            await self._remove(bucket, key, mode, path)
        except Refused as refused:
            # The first attempt may have deleted the object before its response was lost,
            # and the resend met it gone. The caller saw it at the version it named, so
            # gone now means that version is gone, as asked.
            if (resent or refused.retried) and await self._checked(
                    path, self._head(bucket, key, path)) is None:
                return
            what = "was deleted" if refused.status == 404 else "changed"
            raise fs_error("stale", f"{path} {what}", path=path,
                           details=refused.details) from refused.__cause__

    # -- the deadline -------------------------------------------------------------------

    async def _bounded(self, verb: Verb, path: str, call: Callable[[], Awaitable[T]], *,
                       sent: list[bool] | None = None) -> T:
        """``await call()``, ended by the tool call's deadline (:mod:`toolfs.deadline`)
        with ``backend_error``: cancelling it closes its connections, so nothing of it
        runs on. ``sent`` fills once a change request was started: from then on the
        answer says the change may still complete."""
        left = deadline.remaining()
        if left is None:
            return await call()
        if left <= 0:
            raise deadline.exceeded(verb, path, may_have_changed=False)
        try:
            async with asyncio.timeout(left) as scope:
                return await call()
        except TimeoutError as exc:
            if not scope.expired():
                raise
            raise deadline.exceeded(verb, path, may_have_changed=bool(sent)) from exc

    def request_timeouts(self) -> tuple[float, float] | None:
        """``(connect, read)`` seconds for one request under the current deadline: a
        stalled connection fails the attempt (and may be retried) before the deadline
        ends the call; ``None`` without a deadline (the client's own apply)."""
        return deadline.request_timeouts()


def hidden_resends_off(session: Any) -> bool:
    """Turn off aiohttp's own resend of idempotent requests (GET, PUT, DELETE) on an
    aiohttp ``ClientSession``; True once it is off.

    aiohttp (3.9+, aio-libs/aiohttp#7363) sends such a request a second time, out of
    the client's sight, when a reused connection drops before the response; it has no
    public switch (aio-libs/aiohttp#10790; its own test client sets
    ``_retry_connection``). A write that landed then meets its own 412 with no retry
    counted. With the resend off, the failure reaches the client, whose retry is
    counted. ``False`` (no session yet, or these internals changed): the caller
    assumes a resend."""
    if session is None or not hasattr(session, "_retry_connection"):
        return False
    session._retry_connection = False
    return True
