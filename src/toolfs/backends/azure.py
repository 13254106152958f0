"""Azure Blob dialect: ETag-conditional ``Put Blob`` and ETag-pinned ranged ``Get Blob``.

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
from typing import Any, ClassVar, Literal

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
    Capabilities,
    Create,
    Entry,
    PutMode,
    Update,
    check_literal,
    epoch_of,
)
from toolfs.backends.objectstore import (
    Head,
    ObjectStore,
    Page,
    Read,
    Refused,
    hidden_resends_off,
    missing_bucket,
)
from toolfs.errors import FsError, fs_error
from toolfs.versions import FileVersion

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


class AzureBlobStore(ObjectStore):
    """Adapter for :class:`adlfs.AzureBlobFileSystem` (``az://``, ``abfs://``)."""

    name: ClassVar[str] = "azure"
    client: ClassVar[str] = "adlfs"
    bucket_word: ClassVar[str] = "container"
    capabilities: ClassVar[Capabilities] = Capabilities(
        atomic=True, cross_process=True, digest_versions=False, trailing_dot_names=False)
    connection_errors: ClassVar[tuple[type[BaseException], ...]] = (
        ServiceRequestError, ServiceResponseError)

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
        that name; still, a path adlfs would read as another name is refused, so that
        adlfs's own calls on it (``info``, ``isdir``) cannot reach another file."""
        own = self._own(path)
        try:
            split = self.fs.split_path(own)
        except ValueError as exc:  # a path its URL parser rejects: not a literal name
            raise fs_error("invalid_arguments", f"{path}: adlfs cannot parse this path",
                           path=path) from exc
        check_literal(own, split, client=self.client)
        container, _, blob = own.partition("/")
        return container, blob

    def _split(self, path: str) -> tuple[str, str]:
        container, blob = super()._split(path)
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

    def _kw(self, **kw: Any) -> dict[str, Any]:
        """``kw`` plus this request's connect/read timeouts under the deadline."""
        timeouts = self.request_timeouts()
        if timeouts is not None:
            kw.update(connection_timeout=timeouts[0], read_timeout=timeouts[1])
        return kw

    async def _may_resend(self, verb: Literal["write", "delete"]) -> bool:
        return not _hidden_resends_off(self._service)

    # -- the dialect ------------------------------------------------------------------

    async def _check_bucket(self, bucket: str, path: str) -> None:
        try:
            await self._container(bucket).get_container_properties(**self._kw())
        except Exception as exc:
            raise _translate(exc, path, bucket) from exc

    async def _head(self, bucket: str, key: str, path: str, **kw: Any) -> Head | None:
        try:
            props = await self._blob(bucket, key).get_blob_properties(**self._kw(**kw))
        except Exception as exc:
            if _status(exc) == 404 and _code(exc) != "ContainerNotFound":
                return None
            raise _translate(exc, path, bucket) from exc
        md5 = props.content_settings.content_md5
        return Head(_version_of(props), size=int(props.size),
                    md5=bytes(md5) if md5 is not None else None,
                    folder=_marks_folder(getattr(props, "metadata", None)))

    async def _list_page(self, bucket: str, prefix: str, path: str, *, delimiter: bool,
                         token: str | None, limit: int | None = None) -> Page:
        cc = self._container(bucket)
        kw = self._kw(name_starts_with=prefix or None, include=["metadata"],
                      results_per_page=limit or self.list_page_size)
        pager = (cc.walk_blobs(delimiter="/", **kw) if delimiter
                 else cc.list_blobs(**kw)).by_page(continuation_token=token)
        items: list[Any] = []
        try:
            async for page in pager:
                async for item in page:
                    items.append(item)
                break
        except Exception as exc:
            raise _translate(exc, path, bucket) from exc
        entries: list[Entry] = []
        for item in items:
            name = f"{bucket}/{item.name.rstrip('/')}"
            if _is_prefix(item):
                entries.append(Entry(path=name, kind="dir"))
            elif _is_marker(item):
                # An HNS folder also lists as a prefix when it has children; an empty
                # one is a directory all the same.
                if delimiter and not item.name.endswith("/"):
                    entries.append(Entry(path=name, kind="dir"))
            else:
                entries.append(_entry(bucket, item))
        return Page(entries, seen=bool(items), token=pager.continuation_token or None)

    async def _read(self, bucket: str, key: str, path: str, *,
                    window: tuple[int, int | None] | None,
                    if_version: FileVersion | None, again: bool = False) -> Read:
        client = self._blob(bucket, key)
        kw: dict[str, Any] = {}
        if if_version is not None:
            kw.update(etag=if_version.value, match_condition=MatchConditions.IfNotModified)
        if window is not None:
            last = window[1]
            kw.update(offset=window[0], length=None if last is None else last - window[0] + 1)
        try:
            downloader = await client.download_blob(**self._kw(**kw))
            data: bytes = await downloader.readall()
        except HttpResponseError as exc:
            if _status(exc) != 416 or window is None:
                raise _translate(exc, path, bucket) from exc
            # An empty blob answers 416 to any range (as does a start past the end).
            # Its properties say version and size in one request, with the same pin;
            # there are no bytes to carry.
            kw.pop("offset", None)
            kw.pop("length", None)
            head = await self._head(bucket, key, path, **kw)
            if head is None:
                raise fs_error("not_found", f"{path} does not exist", path=path) from exc
            if head.folder:
                raise fs_error("not_a_file", f"{path} is a directory", path=path) from exc
            if (head.size or 0) > window[0] and not again:
                # It grew in between: read the range afresh, once.
                return await self._read(bucket, key, path, window=window,
                                        if_version=if_version, again=True)
            size = head.size or 0
            return Read(b"", head.version, size, min(window[0], size))
        except Exception as exc:
            raise _translate(exc, path, bucket) from exc
        props = downloader.properties
        if _marks_folder(getattr(props, "metadata", None)):
            # An ADLS Gen2 directory seen through the Blob API (its metadata says so).
            raise fs_error("not_a_file", f"{path} is a directory", path=path)
        content_range = getattr(props, "content_range", None)
        total = int(str(content_range).rsplit("/", 1)[1]) if content_range else None
        return Read(data, _version_of(props), total, window[0] if window else 0)

    async def _write(self, bucket: str, key: str, data: bytes, mode: PutMode,
                     path: str) -> FileVersion:
        client = self._blob(bucket, key)
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

        try:
            if len(data) <= self._put_limit(client):
                resp = await client.upload_blob(
                    data, overwrite=True, length=len(data), content_settings=settings,
                    retry_hook=on_retry, **self._kw(**condition))
            else:
                resp = await self._put_blocks(client, data, settings, condition, on_retry)
            return FileVersion(kind="etag", value=_quoted(resp["etag"]),
                               version_id=resp.get("version_id"))
        except self.connection_errors:
            raise
        except Exception as exc:
            status, code = _status(exc), _code(exc)
            # 409 also means a lease or a blob type in the way: only these are a
            # condition that did not hold.
            if (status == 412 or code in _CONDITION_CODES
                    or (status == 404 and isinstance(mode, Update)
                        and code != "ContainerNotFound")):
                raise Refused(status, retried=bool(retries),
                              details={"status": status, "azure_code": code}) from exc
            raise _translate(exc, path, bucket) from exc

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
                                         retry_hook=on_retry, **self._kw())

        await asyncio.gather(*(stage(i, b) for i, b in enumerate(ids)))
        resp: dict[str, Any] = await client.commit_block_list(
            ids, content_settings=settings, retry_hook=on_retry, **self._kw(**condition))
        return resp

    async def _remove(self, bucket: str, key: str, mode: Update | Any, path: str) -> None:
        kw: dict[str, Any] = {}
        if isinstance(mode, Update):
            kw.update(etag=mode.expected.value, match_condition=MatchConditions.IfNotModified)
        retries: list[int] = []

        def on_retry(**_: Any) -> None:  # the SDK's retry policy tells us it resent
            retries.append(1)

        try:
            await self._blob(bucket, key).delete_blob(retry_hook=on_retry, **self._kw(**kw))
        except Exception as exc:
            status, code = _status(exc), _code(exc)
            if (code == "ContainerNotFound" or status not in (404, 412)
                    or not isinstance(mode, Update)):
                # Unconditional: nothing checked the blob was there before, so a 404
                # after a resend may as well mean it never was (not_found).
                raise _translate(exc, path, bucket) from exc
            raise Refused(status, retried=bool(retries),
                          details={"status": status, "azure_code": code}) from exc


# -- helpers ------------------------------------------------------------------------


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
        return missing_bucket("container", container, path)
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
    """:func:`~toolfs.backends.objectstore.hidden_resends_off` on the SDK's aiohttp
    session (created on the client's first request)."""
    transport = getattr(getattr(service, "_pipeline", None), "_transport", None)
    return hidden_resends_off(getattr(transport, "session", None))
