"""Azure Blob backend: ETag-conditional ``Put Blob`` and ETag-pinned ranged ``Get Blob``.

* version: the blob's ETag exactly as the service returns it in a response header
  (quoted), plus its version id where blob versioning is on, always taken from the
  response that carried the bytes or acknowledged the write (never from adlfs's listing
  cache);
* create = ``Put Blob`` with ``If-None-Match: *``; update = ``Put Blob`` with
  ``If-Match: <etag>``; delete = ``Delete Blob`` with ``If-Match``; one request each.
  adlfs's ``pipe_file`` and ``open(..., "wb")`` offer no ``If-Match``, so the requests go
  to the azure-storage-blob async clients that adlfs holds (``fs.service_client``);
* a write larger than one ``Put Blob`` (the client's ``max_single_put_size``) stages its
  blocks (``Put Block``: invisible until committed) and commits them with one
  ``Put Block List`` that carries the same condition; there is no unconditional path;
* a read is one ``Get Blob`` with a range for the first block; its response carries the
  content, the ETag and the total size (``Content-Range``). Further blocks are
  ``If-Match``-pinned, so a view is never torn;
* Azure Blob (without a hierarchical namespace) has no directories, yet toolfs answers as
  a filesystem would: a create first checks (one listing of ``name/`` and one
  ``Get Blob Properties`` per parent below the root, in parallel) that the name is not a
  "directory" and no parent is a file (``not_a_file``); a 404 on a read is explained the
  same way; a missing container is ``not_found`` naming it;
* names with a segment ending in ``.`` are refused (``invalid_arguments``): the service
  drops trailing dots from URL path segments, so ``notes.`` would silently be ``notes``;
* names are cut into container and blob literally and the SDK addresses exactly them,
  but a path adlfs's ``split_path`` would read otherwise (``?versionid=``, a query before
  a fragment) is refused (``invalid_arguments``), so no adlfs call on it reaches another
  blob (``.env?versionid=x`` past a deny rule on ``.env``).

The service answers a create of an existing blob ``409 BlobAlreadyExists`` and a failed
``If-Match`` ``412 ConditionNotMet`` (``412`` or ``404`` when the blob is gone): all are
``stale``. A write retried (by the SDK, or by aiohttp's hidden resend, which is turned
off here as on S3) may meet its own first attempt: the blob's ``Content-MD5`` (set on
every write) then tells our own bytes from someone else's. A conditional delete resent
the same way may meet the blob gone (404 or 412): ``Get Blob Properties`` then says gone
(success) or there (``stale``); a failing check is ``backend_error``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

from azure.core import MatchConditions
from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.storage.blob import ContentSettings

from toolfs.backends.base import (
    AsyncStore,
    Blob,
    Capabilities,
    Create,
    Entry,
    Overwrite,
    PutMode,
    Update,
    check_literal,
    epoch_of,
)
from toolfs.errors import FsError, fs_error
from toolfs.versions import FileVersion

# Connection-level failures (reset, timeout) of a write, retried by us after the SDK's
# own retries, so that we know the write may have landed.
CONNECTION_RETRIES = 2
# Blocks of a block-list write staged at once.
STAGE_IN_FLIGHT = 4
# The service's codes for names it will not store (too long, bad characters, ...).
_BAD_NAME_CODES = frozenset({"InvalidResourceName", "InvalidUri", "OutOfRangeInput"})
# The codes of a condition that did not hold (409 for If-None-Match: * on an existing
# blob, 412 for a failed If-Match). InvalidBlockList: a commit whose staged blocks are
# gone, which happens when another write committed the blob in between (a commit or a
# Put Blob discards every uncommitted block of the blob).
_CONDITION_CODES = frozenset({"ConditionNotMet", "BlobAlreadyExists",
                              "TargetConditionNotMet", "InvalidBlockList"})
# Metadata that marks a blob as a directory: ADLS Gen2 (hierarchical namespace) folders
# seen through the Blob API, and adlfs's own markers.
_FOLDER_MARKS = (("hdi_isfolder", "true"), ("is_directory", "true"))


class AzureBlobStore(AsyncStore):
    """Adapter for :class:`adlfs.AzureBlobFileSystem` (``az://``, ``abfs://``)."""

    name: ClassVar[str] = "azure"
    capabilities: ClassVar[Capabilities] = Capabilities(
        atomic=True, cross_process=True, digest_versions=False, trailing_dot_names=False)

    single_put_limit: int | None = None
    """Largest payload sent as one ``Put Blob``; larger ones go through a conditional
    block-list commit. ``None``: the client's ``max_single_put_size`` (64 MiB by
    default), which the SDK itself would otherwise split unconditionally."""
    block_size: int = 4 * 1024 * 1024
    """Size of each staged block of a block-list write."""

    # -- plumbing -------------------------------------------------------------------

    @property
    def _service(self) -> Any:
        return self.fs.service_client

    def _parts(self, path: str) -> tuple[str, str]:
        """``(container, blob)`` of ``path`` (the blob may be empty), cut literally, not
        by adlfs's ``split_path``, which reads ``?versionid=`` inside a name as a version
        selector and reorders a query and a fragment. The SDK then addresses exactly
        that name; still, a path adlfs would read as another name is refused
        (``invalid_arguments``, see :func:`~toolfs.backends.base.check_literal`), so
        that adlfs's own calls on it (``info``, ``isdir``) cannot reach another file."""
        own = _own(self.fs, path)
        try:
            split = self.fs.split_path(own)
        except ValueError as exc:  # a path its URL parser rejects: not a literal name
            raise fs_error("invalid_arguments", f"{path}: adlfs cannot parse this path",
                           path=path) from exc
        check_literal(own, split, client="adlfs")
        container, _, blob = own.partition("/")
        return container, blob

    def check_path(self, path: str) -> None:
        self._parts(path)

    def _split(self, path: str) -> tuple[str, str]:
        """``(container, blob)`` of a file (see :meth:`_parts`)."""
        container, blob = self._parts(path)
        if not blob:
            raise fs_error("not_a_file", f"{path} is a container", path=path)
        for segment in blob.split("/"):
            if segment.endswith("."):
                raise fs_error(
                    "invalid_arguments",
                    f"{path}: Azure Blob Storage drops trailing dots from names, so "
                    f"'{segment}' would name a different blob; rename it", path=path,
                    details={"segment": segment})
        return container, blob

    def _blob(self, container: str, blob: str) -> Any:
        return self._service.get_blob_client(container, blob)

    def _container(self, container: str) -> Any:
        return self._service.get_container_client(container)

    def _put_limit(self, client: Any) -> int:
        sdk = int(getattr(getattr(client, "_config", None), "max_single_put_size",
                          64 * 1024 * 1024))
        return min(sdk, self.single_put_limit) if self.single_put_limit else sdk

    # -- the container --------------------------------------------------------------

    def check_root(self) -> None:
        self._sync(self._check_container(self.root or ""))

    async def _check_container(self, path: str) -> None:
        container = _own(self.fs, path).partition("/")[0]
        try:
            await self._container(container).get_container_properties()
        except Exception as exc:
            raise _translate(exc, path, container) from exc

    async def _conflict(self, container: str, blob: str, path: str) -> FsError | None:
        """``not_a_file`` if ``blob`` is a "directory" (other blobs lie under
        ``blob/``) or a parent below the root is a blob; ``None`` if the name is free."""
        parents = [_own(self.fs, a).partition("/")[2] for a in self.ancestors(path)]
        parents = [p for p in parents if p]

        async def is_blob(name: str) -> bool:
            try:
                await self._blob(container, name).get_blob_properties()
            except Exception as exc:
                if _status(exc) == 404 and _code(exc) != "ContainerNotFound":
                    return False
                raise
            return True

        async def below() -> bool:
            pages = self._container(container).list_blobs(
                name_starts_with=blob + "/", results_per_page=1).by_page()
            async for page in pages:
                async for _ in page:
                    return True
                return False
            return False

        try:
            listed, *found = await asyncio.gather(below(), *(is_blob(p) for p in parents))
        except Exception as exc:
            raise _translate(exc, path, container) from exc
        for name, hit in zip(parents, found, strict=True):
            if hit:
                return fs_error("not_a_file", f"{container}/{name} is a file, not a "
                                f"directory, in {path}", path=path,
                                details={"file": f"{container}/{name}"})
        if listed:
            return fs_error("not_a_file", f"{path} is a directory", path=path)
        return None

    # -- listing: List Blobs on the client, never adlfs's cached find/ls ---------------

    list_page_size: ClassVar[int] = 1000
    """``maxresults`` of each listing page (5000 is the service's maximum)."""

    async def _list_page(self, container: str, prefix: str, path: str, *,
                         delimiter: bool, token: str | None) -> tuple[list[Any], str | None]:
        cc = self._container(container)
        kw: dict[str, Any] = {"name_starts_with": prefix or None, "include": ["metadata"],
                              "results_per_page": self.list_page_size}
        pager = (cc.walk_blobs(delimiter="/", **kw) if delimiter
                 else cc.list_blobs(**kw)).by_page(continuation_token=token)
        items: list[Any] = []
        try:
            async for page in pager:
                async for item in page:
                    items.append(item)
                break
        except Exception as exc:
            raise _translate(exc, path, container) from exc
        return items, pager.continuation_token or None

    def _pages(self, path: str, *, delimiter: bool) -> Iterator[tuple[str, list[Any]]]:
        """``(container, items)`` for each page of the listing of the directory
        ``path``, fetched one at a time as the caller asks (continuation markers)."""
        container, key = self._parts(path)
        key = key.rstrip("/")
        prefix = f"{key}/" if key else ""
        token: str | None = None
        while True:
            items, token = self._sync(self._list_page(container, prefix, path,
                                                      delimiter=delimiter, token=token))
            yield container, items
            if not token:
                return

    def list_files(self, prefix: str, *, sizes: bool = True) -> Iterator[Entry]:
        """One List Blobs of ``prefix/`` (paginated), no request per blob; directory
        markers (names ending in ``/``, folder metadata) are not files."""
        for container, items in self._pages(prefix, delimiter=False):
            for item in items:
                if not _is_marker(item):
                    yield _entry(container, item)

    def list_dir(self, path: str) -> Iterator[Entry]:
        """One List Blobs of ``path/`` with ``delimiter=/`` (paginated): blobs are
        files, prefixes directories. Nothing there: ``not_a_file`` if ``path`` is a
        blob (one Get Blob Properties), else ``not_found`` (the root, or a container,
        lists empty)."""
        own = path.rstrip("/")
        seen = False
        dirs: set[str] = set()
        for container, items in self._pages(path, delimiter=True):
            for item in items:
                seen = True
                if _is_prefix(item):
                    name = f"{container}/{item.name.rstrip('/')}"
                    if name != own and name not in dirs:
                        dirs.add(name)
                        yield Entry(path=name, kind="dir")
                elif _is_marker(item):
                    # An HNS folder also lists as a prefix when it has children; an
                    # empty one is a directory all the same.
                    name = f"{container}/{item.name.rstrip('/')}"
                    if name != own and name not in dirs and not item.name.endswith("/"):
                        dirs.add(name)
                        yield Entry(path=name, kind="dir")
                else:
                    yield _entry(container, item)
        if seen:
            return
        container, key = self._parts(path)
        key = key.rstrip("/")
        if not key or self.is_root(path):
            return
        if self._sync(self._is_blob(container, key, path)):
            raise fs_error("not_a_file", f"{path} is a file, not a directory", path=path)
        raise fs_error("not_found", f"{path} does not exist", path=path)

    async def _is_blob(self, container: str, key: str, path: str) -> bool:
        try:
            await self._blob(container, key).get_blob_properties()
        except Exception as exc:
            if _status(exc) == 404 and _code(exc) != "ContainerNotFound":
                return False
            raise _translate(exc, path, container) from exc
        return True

    # -- reading ----------------------------------------------------------------------

    async def _get_listed(self, path: str, length: int | None) -> Blob:
        return await self.get_async(path, length=length, explain_missing=False)

    async def get_async(
        self, path: str, *, start: int = 0, length: int | None = None,
        if_version: FileVersion | None = None, explain_missing: bool = True,
        _again: bool = False,
    ) -> Blob:
        """See :meth:`Store.get`; with ``explain_missing`` a 404 is checked for a
        "directory", a file above it, or a missing container (extra requests, on 404
        only)."""
        container, key = self._split(path)
        client = self._blob(container, key)
        kw: dict[str, Any] = {}
        if if_version is not None:
            kw.update(etag=if_version.value, match_condition=MatchConditions.IfNotModified)
        ranged = start > 0 or length is not None
        if ranged:
            # A zero-length window still needs the version and size: ask for one byte.
            kw.update(offset=start, length=max(length or 0, 1) if length is not None
                      else None)
        try:
            try:
                downloader = await client.download_blob(**kw)
                data: bytes = await downloader.readall()
            except HttpResponseError as exc:
                if _status(exc) != 416 or not ranged:
                    raise
                # An empty blob answers 416 to any range (as does a start past the
                # end). Its properties say version and size in one request, with the
                # same pin; there are no bytes to carry.
                kw.pop("offset", None)
                kw.pop("length", None)
                head = await client.get_blob_properties(**kw)
                if _marks_folder(getattr(head, "metadata", None)):
                    raise fs_error("not_a_file", f"{path} is a directory",
                                   path=path) from exc
                if head.size > start and not _again:
                    # It grew in between: read the range afresh, once.
                    return await self.get_async(path, start=start, length=length,
                                                if_version=if_version,
                                                explain_missing=explain_missing,
                                                _again=True)
                return Blob(data=b"", version=_version_of(head), size=int(head.size),
                            start=min(start, int(head.size)))
        except Exception as exc:
            err = _translate(exc, path, container)
            if err.code == "not_found" and err.details.get("bucket"):
                raise err from exc
            if err.code == "not_found" and if_version is not None:
                raise fs_error("stale", f"{path} was deleted", path=path) from exc
            if err.code == "not_found" and explain_missing:
                conflict = await self._conflict(container, key, path)
                if conflict is not None:
                    raise conflict from exc
            raise err from exc
        props = downloader.properties
        if _marks_folder(getattr(props, "metadata", None)):
            # An ADLS Gen2 directory seen through the Blob API (its metadata says so).
            raise fs_error("not_a_file", f"{path} is a directory", path=path)
        content_range = getattr(props, "content_range", None)
        size = (int(str(content_range).rsplit("/", 1)[1]) if content_range
                else len(data))
        if not ranged:
            start = 0
        if length is not None:
            data = data[:length]
        return Blob(data=data, version=_version_of(props), size=size, start=start)

    # -- writing ----------------------------------------------------------------------

    async def put_async(self, path: str, data: bytes, mode: PutMode) -> FileVersion:
        container, key = self._split(path)
        if not isinstance(mode, Update):  # an existing file needs no directory check
            conflict = await self._conflict(container, key, path)
            if conflict is not None:
                raise conflict
        client = self._blob(container, key)
        condition: dict[str, Any] = {}
        if isinstance(mode, Create):
            condition["match_condition"] = MatchConditions.IfMissing
        elif isinstance(mode, Update):
            condition.update(etag=mode.expected.value,
                             match_condition=MatchConditions.IfNotModified)
        md5 = hashlib.md5(data, usedforsecurity=False).digest()
        settings = ContentSettings(content_md5=bytearray(md5))
        retries: list[int] = []

        def on_retry(**_: Any) -> None:  # the SDK's retry policy tells us it resent
            retries.append(1)

        # Unless aiohttp's hidden resend is off, any put may have been sent twice.
        resent = not _hidden_resends_off(self._service)
        failures = 0
        while True:
            try:
                if len(data) <= self._put_limit(client):
                    resp = await client.upload_blob(
                        data, overwrite=True, length=len(data), content_settings=settings,
                        retry_hook=on_retry, **condition)
                else:
                    resp = await self._put_blocks(client, data, settings, condition,
                                                  on_retry)
                return FileVersion(kind="etag", value=_quoted(resp["etag"]),
                                   version_id=resp.get("version_id"))
            except (ServiceRequestError, ServiceResponseError) as exc:
                failures += 1
                if failures > CONNECTION_RETRIES:
                    raise fs_error("backend_error", f"{path}: {exc}", path=path) from exc
                await asyncio.sleep(0.05 * failures)
            except Exception as exc:
                status, code = _status(exc), _code(exc)
                # 409 also means a lease or a blob type in the way: only these are
                # a condition that did not hold.
                lost = (status == 412 or code in _CONDITION_CODES
                        or (status == 404 and isinstance(mode, Update)
                            and code != "ContainerNotFound"))
                if not lost:
                    raise _translate(exc, path, container) from exc
                if resent or retries or failures:
                    # The first attempt may have landed before its response was lost.
                    try:
                        own = await self._own_write(container, key, data)
                    except Exception as check:  # unknown outcome: not "stale"
                        raise _translate(check, path, container) from check
                    if own is not None:
                        return own
                what = {Create: "was created by someone else",
                        Update: "changed" if status != 404 else "was deleted"}
                raise fs_error("stale", f"{path} {what.get(type(mode), 'changed')}",
                               path=path, details={"status": status, "azure_code": code}
                               ) from exc

    async def _put_blocks(self, client: Any, data: bytes, settings: ContentSettings,
                          condition: dict[str, Any], on_retry: Any) -> dict[str, Any]:
        """Stage ``data`` in blocks, then commit them on ``condition`` in one
        ``Put Block List``. Staged blocks are invisible until committed; a refused
        commit leaves the blob as it was (the service drops uncommitted blocks)."""
        step = max(1, self.block_size)
        # Unique per write (a racing writer stages its own), all of one length.
        tag = uuid.uuid4().hex
        ids = [base64.b64encode(f"{tag}-{i:08d}".encode()).decode()
               for i in range(0, max(1, -(-len(data) // step)))]
        gate = asyncio.Semaphore(STAGE_IN_FLIGHT)

        async def stage(i: int, block_id: str) -> None:
            async with gate:
                await client.stage_block(block_id, data[i * step:(i + 1) * step],
                                         retry_hook=on_retry)

        await asyncio.gather(*(stage(i, b) for i, b in enumerate(ids)))
        resp: dict[str, Any] = await client.commit_block_list(
            ids, content_settings=settings, retry_hook=on_retry, **condition)
        return resp

    async def _own_write(self, container: str, key: str, data: bytes) -> FileVersion | None:
        """The current version if the blob holds exactly ``data`` (its Content-MD5,
        set on every write); ``None`` if it holds something else or is gone."""
        try:
            props = await self._blob(container, key).get_blob_properties()
        except Exception as exc:
            if _status(exc) == 404 and _code(exc) != "ContainerNotFound":
                return None
            raise
        stored = props.content_settings.content_md5
        if stored is None or bytes(stored) != hashlib.md5(
                data, usedforsecurity=False).digest() or props.size != len(data):
            return None
        return _version_of(props)

    async def delete_async(self, path: str, mode: Update | Overwrite) -> None:
        container, key = self._split(path)
        kw: dict[str, Any] = {}
        if isinstance(mode, Update):
            kw.update(etag=mode.expected.value, match_condition=MatchConditions.IfNotModified)
        retries: list[int] = []

        def on_retry(**_: Any) -> None:  # the SDK's retry policy tells us it resent
            retries.append(1)

        # Unless aiohttp's hidden resend is off, the delete may be sent twice.
        resent = not _hidden_resends_off(self._service)
        try:
            await self._blob(container, key).delete_blob(retry_hook=on_retry, **kw)
        except Exception as exc:
            status, code = _status(exc), _code(exc)
            if (code == "ContainerNotFound" or status not in (404, 412)
                    or not isinstance(mode, Update)):
                # Unconditional: nothing checked the blob was there before, so a 404
                # after a resend may as well mean it never was (not_found).
                raise _translate(exc, path, container) from exc
            if resent or retries:
                # The first attempt may have deleted the blob before its response was
                # lost, and the resend met it gone. The caller saw it at the version it
                # named, so gone now means that version is gone, as asked. A failing
                # check is an unknown outcome (backend_error), never stale.
                try:
                    there = await self._is_blob(container, key, path)
                except Exception as check:
                    raise _translate(check, path, container) from check
                if not there:
                    return
            what = "was deleted" if status == 404 else "changed"
            raise fs_error("stale", f"{path} {what}", path=path,
                           details={"status": status, "azure_code": code}) from exc


# -- helpers ------------------------------------------------------------------------


def _own(fs: Any, path: str) -> str:
    """``container/blob`` of a path. The policy hands over paths already in that form;
    only a URL goes through adlfs's parser, whose URL rules (``user@host``, queries)
    must not reinterpret a plain name."""
    return str(fs._strip_protocol(path)) if "://" in path else path.lstrip("/")


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return int(status) if isinstance(status, int) else None


def _code(exc: BaseException) -> str:
    """The service's error code (``BlobNotFound``, ``ConditionNotMet``, ...)."""
    code = getattr(exc, "error_code", None)
    value = getattr(code, "value", code)
    if value:
        return str(value)
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    return str(headers.get("x-ms-error-code", ""))


def _translate(exc: BaseException, path: str, container: str) -> FsError:
    """An Azure SDK error as an :class:`FsError` (the boundary of this adapter)."""
    if isinstance(exc, FsError):
        return exc
    status, code = _status(exc), _code(exc)
    if code == "ContainerNotFound":
        return _no_container(container, path)
    if status == 404:
        return fs_error("not_found", f"{path} does not exist", path=path)
    if status == 412 or code in _CONDITION_CODES:
        return fs_error("stale", f"{path} changed", path=path,
                        details={"status": status, "azure_code": code})
    if isinstance(exc, ClientAuthenticationError) or status in (401, 403):
        return fs_error("denied", f"{path}: Azure refused the credentials or permission "
                        f"(HTTP {status} {code})".strip(), path=path,
                        details={"status": status, "azure_code": code})
    if status == 400 and code in _BAD_NAME_CODES:
        return fs_error("invalid_arguments", f"{path}: Azure Blob Storage refuses this "
                        f"name ({code})", path=path,
                        details={"status": status, "azure_code": code})
    if isinstance(exc, ServiceRequestError | ServiceResponseError):
        return fs_error("backend_error", f"{path}: the connection to Azure failed: "
                        f"{type(exc).__name__}", path=path)
    if isinstance(exc, AzureError) and status is None:
        return fs_error("backend_error", f"{path}: {type(exc).__name__}", path=path)
    detail = f"HTTP {status} {code}".strip() if status else type(exc).__name__
    return fs_error("backend_error", f"{path}: Azure answered {detail}", path=path,
                    details={"status": status, "azure_code": code})


def _no_container(container: str, path: str) -> FsError:
    # "bucket" is the key the policy looks for (a missing bucket is not a missing file).
    return fs_error("not_found", f"the container {container} does not exist", path=path,
                    details={"bucket": container, "container": container})


def _version_of(props: Any) -> FileVersion:
    """The version in a response's blob properties (download or Get Blob Properties)."""
    return FileVersion(kind="etag", value=_quoted(props.etag),
                       version_id=getattr(props, "version_id", None) or None)


def _quoted(etag: str) -> str:
    """ETags as response headers carry them (quoted); listings give them bare."""
    return f'"{str(etag).strip(chr(34))}"'


def _is_prefix(item: Any) -> bool:
    """A ``BlobPrefix`` of a delimiter listing (it has no ``etag``)."""
    return type(item).__name__ == "BlobPrefix"


def _is_marker(item: Any) -> bool:
    """A blob that stands for a directory, not a file."""
    if item.name.endswith("/"):
        return True
    return _marks_folder(getattr(item, "metadata", None))


def _marks_folder(metadata: Any) -> bool:
    """Whether blob metadata marks a directory (``hdi_isfolder``, adlfs's marker)."""
    meta = {str(k).lower(): str(v).lower() for k, v in (metadata or {}).items()}
    return any(meta.get(k) == v for k, v in _FOLDER_MARKS)


def _entry(container: str, item: Any) -> Entry:
    """A file entry from one blob of a List Blobs page."""
    etag = getattr(item, "etag", None)
    return Entry(path=f"{container}/{item.name}", kind="file", size=int(item.size or 0),
                 mtime=epoch_of(item.last_modified),
                 version=FileVersion(kind="etag", value=_quoted(etag)) if etag else None)


def _hidden_resends_off(service: Any) -> bool:
    """Turn off aiohttp's own resend of idempotent requests; True once it is off.

    As on S3 (see :func:`toolfs.backends.s3._hidden_resends_off`): aiohttp sends a PUT a
    second time, unseen by the SDK's retry policy, when a reused connection drops before
    the response, and a put that landed then meets its own 412. The SDK's aiohttp
    session is created on the client's first request; until then, or if these
    internals change, this returns False and the caller assumes a resend.
    """
    transport = getattr(getattr(service, "_pipeline", None), "_transport", None)
    session = getattr(transport, "session", None)
    if session is None or not hasattr(session, "_retry_connection"):
        return False
    session._retry_connection = False
    return True
