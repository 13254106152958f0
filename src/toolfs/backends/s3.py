"""S3 dialect: single-request conditional ``PutObject`` and version-pinned ranged ``GetObject``.

The semantics (literal paths, "directories", lost responses, retries, pages, the
deadline) are the object-store core's (:mod:`toolfs.backends.objectstore`); this module
is S3's requests:

* version: the ETag exactly as S3 returns it (quoted), plus ``VersionId`` on versioned
  buckets, always taken from the response that carried the bytes or acknowledged the write
  (never from s3fs's listing cache, which answers ``info`` with stale ETags after ``ls``);
* create = ``PutObject If-None-Match: *``; update = ``PutObject If-Match: <etag>``; both
  one request, never multipart (s3fs's multipart path silently drops ``If-Match``, which is
  why the payload is capped well under the single-PUT limit);
* a read is one ``GetObject`` with a ``Range``; its response carries the content, the
  ETag and the total size. Further blocks are ``If-Match``-pinned;
* s3fs's ``split_path`` cuts a key at ``?versionId=``: such paths are refused.

S3 implementations differ; proven on moto (as AWS answers) and SeaweedFS
(tests/backends/test_s3.py), both handled to the same outcome:

* ``If-Match`` on a missing key (put or delete): AWS 404, SeaweedFS 412; both ``stale``.
* ``If-None-Match: *`` on a key SeaweedFS's filer holds as a folder (an empty one stays
  after its last file is deleted): 412 although no object exists. On a 412 from a
  SeaweedFS gateway (its ``Server`` header) the create checks: no object and nothing
  below ``key/`` means the empty folder is removed and the same conditional create is
  sent once more; files below make it ``not_a_file``; an object makes it ``stale``.
  Never an unconditional write. A refused create on SeaweedFS costs one ``HeadObject``
  more than on AWS.
* A "directory" outlives its last file on SeaweedFS (listed by ``ls``, as on a local
  disk); on AWS the prefix goes with its last object.
* A conditional delete is preceded by a conditional ``HeadObject``: it says ``stale`` on
  every S3 implementation, while ``DeleteObject``'s ``If-Match`` is recent.

Requests go straight to s3fs's aiobotocore client rather than through ``_call_s3``:
``_call_s3`` drops parameters its botocore does not know (an old botocore would turn a
conditional put into an unconditional one without a word) and retries connection errors
out of our sight, and we must know whether a put was retried to recognise our own write
after a lost response. botocore validates every parameter we send.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar, Literal

import aiohttp  # aiobotocore's HTTP client, via s3fs
from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.exceptions import HTTPClientError

from toolfs.backends import objectstore
from toolfs.backends.base import Capabilities, Create, Entry, PutMode, Update, epoch_of
from toolfs.backends.objectstore import Head, ObjectStore, Page, Read, Refused, Unsatisfiable
from toolfs.errors import FsError, fs_error
from toolfs.versions import FileVersion

# 409 ConditionalRequestConflict: two conditional writes crossed; S3 asks for a retry.
CONFLICT_RETRIES = 3


def status_of(exc: BaseException) -> int | None:
    """HTTP status of a botocore ``ClientError``."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return int(status) if status is not None else None


def _retried(exc: BaseException) -> bool:
    response = getattr(exc, "response", None) or {}
    return bool(response.get("ResponseMetadata", {}).get("RetryAttempts", 0))


class S3Store(ObjectStore):
    """Adapter for :class:`s3fs.S3FileSystem`."""

    name: ClassVar[str] = "s3"
    client: ClassVar[str] = "s3fs"
    capabilities: ClassVar[Capabilities] = Capabilities(
        atomic=True, cross_process=True, digest_versions=True)
    connection_errors: ClassVar[tuple[type[BaseException], ...]] = (
        BotoConnectionError, HTTPClientError, asyncio.TimeoutError, ConnectionError,
        aiohttp.ClientError)

    async def _client(self) -> Any:
        return await self.fs.set_session()

    async def _call(self, method: str, **kw: Any) -> Any:
        """One client call; errors translated except a refused condition (412, 409,
        404), left to the caller. The S3 client has no per-call timeouts (botocore's
        own connect/read timeouts apply): the core's deadline bounds it."""
        return await getattr(await self._client(), method)(**kw)

    async def _may_resend(self, verb: Literal["write", "delete"]) -> bool:
        client = await self._client()  # made on first use: its sessions come later
        http = getattr(getattr(client, "_endpoint", None), "http_session", None)
        sessions = getattr(http, "_sessions", None)
        if not isinstance(sessions, dict) or not sessions:
            return True
        return not all([_hidden_resends_off(s) for s in sessions.values()])

    async def _check_bucket(self, bucket: str, path: str) -> None:
        try:
            await self._call("head_bucket", Bucket=bucket)
        except Exception as exc:
            if status_of(exc) == 404:
                raise self._no_bucket(bucket, path) from exc
            raise _backend_error(path, exc) from exc

    async def _head(self, bucket: str, key: str, path: str) -> Head | None:
        try:
            head = await self._call("head_object", Bucket=bucket, Key=key)
        except Exception as exc:
            if status_of(exc) == 404 and _s3_code(exc) != "NoSuchBucket":
                return None
            raise self._translate(exc, bucket, path) from exc
        return _head_of(head)

    def _translate(self, exc: BaseException, bucket: str, path: str) -> FsError:
        """An S3 client error as an ``FsError``."""
        status = status_of(exc)
        if status == 404 and _s3_code(exc) == "NoSuchBucket":
            return self._no_bucket(bucket, path)
        if status == 404:
            return fs_error("not_found", f"{path} does not exist", path=path)
        if status == 412:
            return fs_error("stale", f"{path} changed", path=path)
        return _backend_error(path, exc)

    async def _list_page(self, bucket: str, prefix: str, path: str, *, delimiter: bool,
                         token: str | None, limit: int | None = None) -> Page:
        kw: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix,
                              "MaxKeys": limit or self.list_page_size}
        if delimiter:
            kw["Delimiter"] = "/"
        if token:
            kw["ContinuationToken"] = token
        try:
            page = await self._call("list_objects_v2", **kw)
        except self.connection_errors as exc:
            raise fs_error("backend_error", f"{path}: listing failed: {exc}",
                           path=path) from exc
        except Exception as exc:
            if _s3_code(exc) == "NoSuchBucket":
                raise self._no_bucket(bucket, path) from exc
            raise _backend_error(path, exc) from exc
        contents, prefixes = page.get("Contents", ()), page.get("CommonPrefixes", ())
        entries = [_entry(bucket, obj) for obj in contents if not obj["Key"].endswith("/")]
        entries += [Entry(path=f"{bucket}/{p['Prefix'].rstrip('/')}", kind="dir")
                    for p in prefixes]
        more = page.get("NextContinuationToken") if page.get("IsTruncated") else None
        return Page(entries, seen=bool(page.get("KeyCount", len(contents)) or contents
                                        or prefixes), token=more or None)

    async def _read(self, bucket: str, key: str, path: str, *,
                    window: tuple[int, int | None] | None,
                    if_version: FileVersion | None) -> Read:
        kw: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if if_version is not None:
            kw["IfMatch"] = if_version.value
        if window is not None:
            kw["Range"] = f"bytes={window[0]}-{'' if window[1] is None else window[1]}"
        try:
            resp = await self._call("get_object", **kw)
        except Exception as exc:
            if status_of(exc) == 416 and window is not None:
                raise Unsatisfiable() from exc
            raise self._translate(exc, bucket, path) from exc
        try:
            async with resp["Body"] as body:
                data: bytes = await body.read()
        except Exception as exc:  # the connection failed mid-body (reset, timeout, short)
            raise fs_error("backend_error", f"{path}: reading the body failed: "
                           f"{type(exc).__name__}", path=path) from exc
        content_range = resp.get("ContentRange")
        total = int(content_range.rsplit("/", 1)[1]) if content_range else int(
            resp["ContentLength"])
        version = FileVersion(kind="etag", value=resp["ETag"], version_id=resp.get("VersionId"))
        return Read(data, version, total, window[0] if window is not None else 0)

    async def _write(self, bucket: str, key: str, data: bytes, mode: PutMode,
                     path: str) -> FileVersion:
        kw: dict[str, Any] = {"Bucket": bucket, "Key": key, "Body": data}
        if isinstance(mode, Create):
            kw["IfNoneMatch"] = "*"
        elif isinstance(mode, Update):
            kw["IfMatch"] = mode.expected.value
        conflicts = 0
        while True:
            try:
                resp = await self._call("put_object", **kw)
                return FileVersion(kind="etag", value=resp["ETag"],
                                   version_id=resp.get("VersionId"))
            except self.connection_errors:
                raise
            except Exception as exc:
                status = status_of(exc)
                if status is None:
                    raise fs_error("backend_error", f"{path}: {exc}", path=path) from exc
                if _s3_code(exc) == "NoSuchBucket":
                    raise self._no_bucket(bucket, path) from exc
                if status == 409 and conflicts < CONFLICT_RETRIES:
                    conflicts += 1
                    await asyncio.sleep(0.05 * conflicts)
                    continue
                if status in (409, 412) or (status == 404 and isinstance(mode, Update)):
                    refused = Refused(status, retried=bool(conflicts) or _retried(exc))
                    refused.seaweedfs = _from_seaweedfs(exc)  # type: ignore[attr-defined]
                    raise refused from exc
                raise _backend_error(path, exc) from exc

    async def _clear_for_create(self, bucket: str, key: str, path: str,
                                refused: Refused) -> bool:
        """After SeaweedFS refused a create with 412: True if ``key`` held no object,
        only an empty folder, now removed (the create may be retried, still
        conditional); False if an object is there (the 412 was a real one);
        ``not_a_file`` if files lie below ``key/`` (it is a directory)."""
        if refused.status != 412 or not getattr(refused, "seaweedfs", False):
            return False
        if await self._head(bucket, key, path) is not None:
            return False
        below = await self._call("list_objects_v2", Bucket=bucket, Prefix=key + "/",
                                 MaxKeys=2)
        if any(obj["Key"] != key + "/" for obj in below.get("Contents", ())):
            raise fs_error("not_a_file", f"{path} is a directory", path=path)
        # On SeaweedFS a key ending in "/" names the folder itself; deleting it removes
        # the entry (the filer refuses to delete a folder that is not empty).
        await self._call("delete_object", Bucket=bucket, Key=key + "/")
        return True

    async def _before_delete(self, bucket: str, key: str, path: str,
                             mode: Update | Any) -> None:
        kw: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if isinstance(mode, Update):
            kw["IfMatch"] = mode.expected.value
        try:
            await self._call("head_object", **kw)
        except Exception as exc:
            err = self._translate(exc, bucket, path)
            if err.code == "not_found" and isinstance(mode, Update):
                raise fs_error("stale", f"{path} was deleted", path=path) from exc
            raise err from exc

    async def _remove(self, bucket: str, key: str, mode: Update | Any, path: str) -> None:
        kw: dict[str, Any] = {"Bucket": bucket, "Key": key}
        client = await self._client()
        if isinstance(mode, Update) and "IfMatch" in _members(client, "DeleteObject"):
            kw["IfMatch"] = mode.expected.value
        try:
            await client.delete_object(**kw)
        except Exception as exc:
            if status_of(exc) not in (404, 412):
                raise _backend_error(path, exc) from exc
            raise Refused(412, retried=_retried(exc)) from exc


def _head_of(head: dict[str, Any]) -> Head:
    etag = str(head["ETag"]).strip('"')
    single = len(etag) == 32 and all(c in "0123456789abcdef" for c in etag.lower())
    return Head(FileVersion(kind="etag", value=head["ETag"], version_id=head.get("VersionId")),
                size=head.get("ContentLength"), md5=bytes.fromhex(etag) if single else None)


def _hidden_resends_off(session: Any) -> bool:
    """:func:`~toolfs.backends.objectstore.hidden_resends_off` on one of aiobotocore's
    aiohttp sessions (created on the client's first request)."""
    return objectstore.hidden_resends_off(session)


def _from_seaweedfs(exc: BaseException) -> bool:
    """Whether the error response came from a SeaweedFS S3 gateway (its ``Server``
    header), whose 412 may mean "a folder is there" rather than "an object is there"."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return False
    headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    return str(headers.get("server", "")).startswith("SeaweedFS")


def _s3_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return ""
    return str(response.get("Error", {}).get("Code", ""))


def _entry(bucket: str, obj: dict[str, Any]) -> Entry:
    """A file entry from one ``Contents`` item of a ``ListObjectsV2`` page."""
    return Entry(path=f"{bucket}/{obj['Key']}", kind="file", size=int(obj.get("Size", 0)),
                 mtime=epoch_of(obj.get("LastModified")),
                 version=FileVersion(kind="etag", value=obj["ETag"]) if obj.get("ETag")
                 else None)


def _members(client: Any, operation: str) -> set[str]:
    shape = client.meta.service_model.operation_model(operation).input_shape
    return set(shape.members)


def _backend_error(path: str, exc: BaseException) -> FsError:
    status = status_of(exc)
    code = _s3_code(exc)
    detail = f"HTTP {status} {code}".strip() if status else type(exc).__name__
    return fs_error("backend_error", f"{path}: S3 answered {detail}", path=path,
                    details={"status": status, "s3_code": code})
