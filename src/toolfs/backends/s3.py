"""S3 backend: single-request conditional ``PutObject`` and version-pinned ranged ``GetObject``.

* version: the ETag exactly as S3 returns it (quoted), plus ``VersionId`` on versioned
  buckets, always taken from the response that carried the bytes or acknowledged the write
  (never from s3fs's listing cache, which answers ``info`` with stale ETags after ``ls``);
* create = ``PutObject If-None-Match: *``; update = ``PutObject If-Match: <etag>``; both
  one request, never multipart (s3fs's multipart path silently drops ``If-Match``, which is
  why the payload is capped well under the single-PUT limit);
* a read is one ``GetObject`` with a ``Range`` for the first block; its response carries
  the content, the ETag and the total size. Further blocks are ``If-Match``-pinned.
* a path s3fs's ``split_path`` would not address by its literal name (it cuts a key at
  ``?versionId=``) is refused as ``invalid_arguments`` before any request, listings
  included, so ``.env?versionId=x`` never reaches ``.env`` past a deny rule;
* S3 has no directories, yet toolfs answers as a filesystem would on every backend: a
  create first checks (one ``ListObjectsV2`` of ``key/`` and one ``HeadObject`` per
  parent below the root, in parallel) that the name is not a "directory" and that no
  parent is a file (``not_a_file``); a 404 on a read is explained the same way, and a
  missing bucket is ``not_found`` naming the bucket. Updates cost one request as before.

S3 implementations differ; proven on moto (as AWS answers) and SeaweedFS (tests/
test_s3_differences.py), both handled to the same outcome:

* ``If-Match`` on a missing key (put or delete): AWS 404, SeaweedFS 412; both ``stale``.
* ``If-None-Match: *`` on a key SeaweedFS's filer holds as a folder (an empty one stays
  after its last file is deleted): 412 although no object exists. On a 412 from a
  SeaweedFS gateway (its ``Server`` header) the create checks: no object and nothing
  below ``key/`` means the empty folder is removed and the same conditional create is
  sent once more; files below make it ``not_a_file``; an object makes it ``stale``.
  Never an unconditional write. The 412s look alike, so a refused create on SeaweedFS
  costs one ``HeadObject`` more than on AWS.
* A "directory" outlives its last file on SeaweedFS (listed by ``ls``, as on a local
  disk); on AWS the prefix goes with its last object.
* SeaweedFS's ETags are the same quoted MD5s, its conditional puts are atomic under
  concurrent requests, and it honours ``If-Match`` on ``DeleteObject``.

A conditional ``DeleteObject`` resent after a lost response (botocore's retry, or
aiohttp's hidden resend) meets the key gone: 404 on AWS, 412 on SeaweedFS. Then a
``HeadObject`` decides: gone is success (the version we named is gone), present is
``stale``, and a failing check is ``backend_error`` (unknown outcome), as for puts.

Requests go straight to s3fs's aiobotocore client rather than through ``_call_s3``:
``_call_s3`` drops parameters its botocore does not know (an old botocore would turn a
conditional put into an unconditional one without a word) and retries connection errors
out of our sight, and we must know whether a put was retried to recognise our own write
after a lost response. botocore validates every parameter we send.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from typing import Any, ClassVar

import aiohttp  # aiobotocore's HTTP client, via s3fs
from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.exceptions import HTTPClientError

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

# 409 ConditionalRequestConflict: two conditional writes crossed; S3 asks for a retry.
CONFLICT_RETRIES = 3
# Connection-level failures (reset, timeout) retried by us after botocore's own retries.
CONNECTION_RETRIES = 2


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


# Connection-level failures of one attempt (reset, timeout, broken body).
_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    BotoConnectionError, HTTPClientError, asyncio.TimeoutError, ConnectionError,
    aiohttp.ClientError)


class S3Store(AsyncStore):
    """Adapter for :class:`s3fs.S3FileSystem`."""

    name: ClassVar[str] = "s3"
    capabilities: ClassVar[Capabilities] = Capabilities(
        atomic=True, cross_process=True, digest_versions=True)

    async def _client(self) -> Any:
        return await self.fs.set_session()

    def _parts(self, path: str) -> tuple[str, str]:
        """``(bucket, key)`` of ``path`` (the key may be empty), refused as
        ``invalid_arguments`` unless they spell ``path`` exactly: s3fs's ``split_path``
        cuts a key at ``?versionId=`` (see :func:`~toolfs.backends.base.check_literal`).
        Every request goes to the bucket and key this returns."""
        split = self.fs.split_path(path)
        check_literal(path, split, client="s3fs")
        return split[0], split[1]

    def check_path(self, path: str) -> None:
        self._parts(path)

    def _split(self, path: str) -> tuple[str, str]:
        bucket, key = self._parts(path)
        if not key:
            raise fs_error("not_a_file", f"{path} is a bucket", path=path)
        return bucket, key

    def check_root(self) -> None:
        self._sync(self._check_bucket(self.root or ""))

    async def _check_bucket(self, path: str) -> None:
        bucket = self.fs.split_path(path)[0]
        client = await self._client()
        try:
            await client.head_bucket(Bucket=bucket)
        except Exception as exc:
            if status_of(exc) == 404:
                raise _no_bucket(bucket, path) from exc
            raise _backend_error(path, exc) from exc

    async def _conflict(self, bucket: str, key: str, path: str) -> FsError | None:
        """``not_a_file`` if ``key`` is a "directory" (other keys lie under ``key/``) or
        a parent below the root is an object; ``None`` if the name is free to be a file."""
        client = await self._client()
        # The parents' keys are prefixes of the checked key, cut literally: s3fs's parser
        # must not read a parent ("d?versionId=x" of "d?versionId=x/f") another way.
        parents = [a[len(bucket) + 1:] for a in self.ancestors(path)
                   if a.startswith(bucket + "/") and len(a) > len(bucket) + 1]

        async def is_object(k: str) -> bool:
            try:
                await client.head_object(Bucket=bucket, Key=k)
            except Exception as exc:
                if status_of(exc) == 404:
                    return False
                raise
            return True

        try:
            listing, *found = await asyncio.gather(
                client.list_objects_v2(Bucket=bucket, Prefix=key + "/", MaxKeys=1),
                *(is_object(k) for k in parents))
        except Exception as exc:
            if _s3_code(exc) == "NoSuchBucket":
                raise _no_bucket(bucket, path) from exc
            raise _backend_error(path, exc) from exc
        for k, hit in zip(parents, found, strict=True):
            if hit:
                return fs_error("not_a_file", f"{bucket}/{k} is a file, not a directory, "
                                f"in {path}", path=path, details={"file": f"{bucket}/{k}"})
        if listing.get("KeyCount", len(listing.get("Contents", []))):
            return fs_error("not_a_file", f"{path} is a directory", path=path)
        return None

    # -- listing: ListObjectsV2 on the client, never s3fs's cached find/ls ---------

    list_page_size: ClassVar[int] = 1000
    """``MaxKeys`` of each listing page (1000 is S3's own maximum)."""

    async def _list_page(self, bucket: str, prefix: str, path: str, *, delimiter: bool,
                         token: str | None) -> dict[str, Any]:
        kw: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix,
                              "MaxKeys": self.list_page_size}
        if delimiter:
            kw["Delimiter"] = "/"
        if token:
            kw["ContinuationToken"] = token
        client = await self._client()
        try:
            page: dict[str, Any] = await client.list_objects_v2(**kw)
        except _CONNECTION_ERRORS as exc:
            raise fs_error("backend_error", f"{path}: listing failed: {exc}",
                           path=path) from exc
        except Exception as exc:
            if _s3_code(exc) == "NoSuchBucket":
                raise _no_bucket(bucket, path) from exc
            raise _backend_error(path, exc) from exc
        return page

    def _pages(self, path: str, *, delimiter: bool) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(bucket, page)`` for each page of the listing of the directory ``path``,
        fetched one at a time as the caller asks (continuation tokens)."""
        bucket, key = self._parts(path)
        key = key.rstrip("/")
        prefix = f"{key}/" if key else ""
        token: str | None = None
        while True:
            page = self._sync(self._list_page(bucket, prefix, path, delimiter=delimiter,
                                              token=token))
            yield bucket, page
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    def list_files(self, prefix: str, *, sizes: bool = True) -> Iterator[Entry]:
        """One ``ListObjectsV2`` of ``prefix/`` (paginated), no request per object;
        "directory marker" keys (ending in ``/``) are not files."""
        for bucket, page in self._pages(prefix, delimiter=False):
            for obj in page.get("Contents", ()):
                if not obj["Key"].endswith("/"):
                    yield _entry(bucket, obj)

    def list_dir(self, path: str) -> Iterator[Entry]:
        """One ``ListObjectsV2`` of ``path/`` with ``Delimiter="/"`` (paginated): keys
        are files, ``CommonPrefixes`` directories. Nothing there: ``not_a_file`` if
        ``path`` is an object (one ``HeadObject``), else ``not_found`` (the root, or a
        bucket, lists empty)."""
        own = path.rstrip("/")
        seen = False
        dirs: set[str] = set()  # a prefix may come again on a later page: once each
        for bucket, page in self._pages(path, delimiter=True):
            for obj in page.get("Contents", ()):
                seen = True
                if not obj["Key"].endswith("/"):  # the directory's own marker
                    yield _entry(bucket, obj)
            for common in page.get("CommonPrefixes", ()):
                seen = True
                name = f"{bucket}/{common['Prefix'].rstrip('/')}"
                if name != own and name not in dirs:  # "d//x" would name d itself
                    dirs.add(name)
                    yield Entry(path=name, kind="dir")
        if seen:
            return
        bucket, key = self._parts(path)
        key = key.rstrip("/")
        if not key or self.is_root(path):
            return
        if self._sync(self._is_object(bucket, key, path)):
            raise fs_error("not_a_file", f"{path} is a file, not a directory", path=path)
        raise fs_error("not_found", f"{path} does not exist", path=path)

    async def _is_object(self, bucket: str, key: str, path: str) -> bool:
        try:
            await self._call("head_object", {"Bucket": bucket, "Key": key}, path)
        except FsError as err:
            if err.code == "not_found" and not err.details.get("bucket"):
                return False
            raise
        return True

    async def _get_listed(self, path: str, length: int | None) -> Blob:
        return await self.get_async(path, length=length, explain_missing=False)

    async def get_async(
        self, path: str, *, start: int = 0, length: int | None = None,
        if_version: FileVersion | None = None, explain_missing: bool = True,
    ) -> Blob:
        """See :meth:`Store.get`; with ``explain_missing`` a 404 is checked for a
        "directory", a file above it, or a missing bucket (extra requests, on 404 only)."""
        bucket, key = self._split(path)
        kw: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if if_version is not None:
            kw["IfMatch"] = if_version.value
        ranged = start > 0 or length is not None
        if ranged:
            # A zero-length window still needs the version and size: ask for one byte.
            last = start + max(length or 0, 1) - 1 if length is not None else ""
            kw["Range"] = f"bytes={start}-{last}"
        try:
            resp = await self._call("get_object", kw, path)
        except _RangeNotSatisfiable:
            # An empty object answers 416 to any range (as does a start past the end):
            # one unranged GET gets its version and size.
            kw.pop("Range")
            resp = await self._call("get_object", kw, path)
            ranged = False
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
        try:
            async with resp["Body"] as body:
                data: bytes = await body.read()
        except Exception as exc:  # the connection failed mid-body (reset, timeout, short)
            raise fs_error("backend_error", f"{path}: reading the body failed: "
                           f"{type(exc).__name__}", path=path) from exc
        content_range = resp.get("ContentRange")
        size = int(content_range.rsplit("/", 1)[1]) if content_range else int(
            resp["ContentLength"])
        if not ranged:
            start = 0
        if length is not None:
            data = data[:length]
        version = FileVersion(kind="etag", value=resp["ETag"], version_id=resp.get("VersionId"))
        return Blob(data=data, version=version, size=size, start=start)

    async def put_async(self, path: str, data: bytes, mode: PutMode) -> FileVersion:
        bucket, key = self._split(path)
        kw: dict[str, Any] = {"Bucket": bucket, "Key": key, "Body": data}
        if isinstance(mode, Create):
            kw["IfNoneMatch"] = "*"
        elif isinstance(mode, Update):
            kw["IfMatch"] = mode.expected.value
        if not isinstance(mode, Update):  # an existing file needs no directory check
            conflict = await self._conflict(bucket, key, path)
            if conflict is not None:
                raise conflict
        client = await self._client()
        conflicts = connection_failures = 0
        folder_dropped = False
        # Unless aiohttp's hidden resend is off, any put may have been sent twice.
        retried = not _hidden_resends_off(client)
        while True:
            try:
                resp = await client.put_object(**kw)
                return FileVersion(kind="etag", value=resp["ETag"],
                                   version_id=resp.get("VersionId"))
            except _CONNECTION_ERRORS as exc:
                connection_failures += 1
                retried = True
                if connection_failures > CONNECTION_RETRIES:
                    raise fs_error("backend_error", f"{path}: {exc}", path=path) from exc
                await asyncio.sleep(0.05 * connection_failures)
            except Exception as exc:
                status = status_of(exc)
                if status is None:
                    raise fs_error("backend_error", f"{path}: {exc}", path=path) from exc
                if _s3_code(exc) == "NoSuchBucket":
                    raise _no_bucket(bucket, path) from exc
                retried = retried or _retried(exc)
                if status == 409 and conflicts < CONFLICT_RETRIES:
                    conflicts += 1
                    retried = True
                    await asyncio.sleep(0.05 * conflicts)
                    continue
                if status in (409, 412) or (status == 404 and isinstance(mode, Update)):
                    if retried:
                        # The first attempt may have landed before its response was lost.
                        try:
                            own = await self._own_write(bucket, key, data)
                        except Exception as check:  # unknown outcome: not "stale"
                            raise _backend_error(path, check) from check
                        if own is not None:
                            return own
                    if (status == 412 and isinstance(mode, Create) and not folder_dropped
                            and _from_seaweedfs(exc)):
                        # SeaweedFS refuses If-None-Match on a key its filer holds as a
                        # folder, even an empty one (left by the folder's last file):
                        # no object is there, so S3 semantics say the create may go on.
                        try:
                            folder_dropped = await self._drop_empty_folder(bucket, key, path)
                        except FsError:
                            raise
                        except Exception as check:
                            raise _backend_error(path, check) from check
                        if folder_dropped:
                            continue  # the same conditional create, once more
                    what = {Create: "was created by someone else",
                            Update: "changed" if status != 404 else "was deleted"}
                    raise fs_error("stale", f"{path} {what.get(type(mode), 'changed')}",
                                   path=path) from exc
                raise _backend_error(path, exc) from exc

    async def _drop_empty_folder(self, bucket: str, key: str, path: str) -> bool:
        """After SeaweedFS refused a create with 412: True if ``key`` held no object, only
        an empty folder, now removed (the create may be retried, still conditional);
        False if an object is there (the 412 was a real one); ``not_a_file`` if files
        lie below ``key/`` (it is a directory)."""
        client = await self._client()
        try:
            await client.head_object(Bucket=bucket, Key=key)
        except Exception as exc:
            if status_of(exc) != 404:
                raise
        else:
            return False
        below = await client.list_objects_v2(Bucket=bucket, Prefix=key + "/", MaxKeys=2)
        if any(obj["Key"] != key + "/" for obj in below.get("Contents", ())):
            raise fs_error("not_a_file", f"{path} is a directory", path=path)
        # On SeaweedFS a key ending in "/" names the folder itself; deleting it removes
        # the entry (the filer refuses to delete a folder that is not empty).
        await client.delete_object(Bucket=bucket, Key=key + "/")
        return True

    async def _own_write(self, bucket: str, key: str, data: bytes) -> FileVersion | None:
        """The current version if the object holds exactly ``data`` (single-part ETag = MD5).

        ``None`` if it holds something else or is gone; raises if the check itself fails.
        """
        try:
            head = await (await self._client()).head_object(Bucket=bucket, Key=key)
        except Exception as exc:
            if status_of(exc) == 404:
                return None
            raise
        if head["ETag"].strip('"') != hashlib.md5(data, usedforsecurity=False).hexdigest():
            return None
        return FileVersion(kind="etag", value=head["ETag"], version_id=head.get("VersionId"))

    async def delete_async(self, path: str, mode: Update | Overwrite) -> None:
        bucket, key = self._split(path)
        kw: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if isinstance(mode, Update):
            kw["IfMatch"] = mode.expected.value
        # HEAD first: it says "stale" on every S3 implementation, while DeleteObject's
        # If-Match is recent and an emulator may ignore it.
        try:
            await self._call("head_object", kw, path)
        except FsError as err:
            if err.code == "not_found" and isinstance(mode, Update):
                raise fs_error("stale", f"{path} was deleted", path=path) from err.__cause__
            raise
        client = await self._client()
        delete_kw = dict(kw)
        if "IfMatch" in delete_kw and "IfMatch" not in _members(client, "DeleteObject"):
            delete_kw.pop("IfMatch")
        # Unless aiohttp's hidden resend is off, the delete may be sent twice.
        resent = not _hidden_resends_off(client)
        try:
            await client.delete_object(**delete_kw)
        except Exception as exc:
            if status_of(exc) not in (404, 412):
                raise _backend_error(path, exc) from exc
            if resent or _retried(exc):
                # The first attempt may have deleted the object before its response was
                # lost, and the resend met the missing key: if it is gone now, the file
                # at the version we named is gone, which is what was asked.
                try:
                    gone = not await self._is_there(bucket, key)
                except Exception as check:  # unknown outcome: never "stale"
                    raise _backend_error(path, check) from check
                if gone:
                    return
            raise fs_error("stale", f"{path} changed", path=path) from exc

    async def _is_there(self, bucket: str, key: str) -> bool:
        """Whether an object is stored at ``key`` now (one ``HeadObject``); raises if
        the check itself fails."""
        try:
            await (await self._client()).head_object(Bucket=bucket, Key=key)
        except Exception as exc:
            if status_of(exc) == 404:
                return False
            raise
        return True

    async def _call(self, method: str, kw: dict[str, Any], path: str) -> Any:
        client = await self._client()
        try:
            return await getattr(client, method)(**kw)
        except Exception as exc:
            status = status_of(exc)
            if status == 404 and _s3_code(exc) == "NoSuchBucket":
                raise _no_bucket(kw["Bucket"], path) from exc
            if status == 404:
                raise fs_error("not_found", f"{path} does not exist", path=path) from exc
            if status == 412:
                raise fs_error("stale", f"{path} changed", path=path) from exc
            if status == 416:
                raise _RangeNotSatisfiable() from exc
            raise _backend_error(path, exc) from exc


class _RangeNotSatisfiable(Exception):
    pass


def _hidden_resends_off(client: Any) -> bool:
    """Turn off aiohttp's own resend of idempotent requests; True once it is off.

    aiohttp (3.9+, aio-libs/aiohttp#7363) sends a PUT a second time, out of botocore's
    sight, when the connection drops before the response; it has no public switch
    (aio-libs/aiohttp#10790; its own test client sets ``_retry_connection``). A put that
    landed then meets its own 412 with ``RetryAttempts == 0``. With the resend off, the
    failure reaches botocore, whose retry is counted. aiobotocore creates its aiohttp
    sessions on the client's first request: until then, or if these internals change,
    this returns False and the caller assumes the put may have been resent.
    """
    http = getattr(getattr(client, "_endpoint", None), "http_session", None)
    sessions = getattr(http, "_sessions", None)
    if not isinstance(sessions, dict) or not sessions:
        return False
    for session in sessions.values():
        if not hasattr(session, "_retry_connection"):
            return False
        session._retry_connection = False
    return True


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


def _no_bucket(bucket: str, path: str) -> FsError:
    return fs_error("not_found", f"the bucket {bucket} does not exist", path=path,
                    details={"bucket": bucket})


def _members(client: Any, operation: str) -> set[str]:
    shape = client.meta.service_model.operation_model(operation).input_shape
    return set(shape.members)


def _backend_error(path: str, exc: BaseException) -> FsError:
    status = status_of(exc)
    code = ""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code", "")
    detail = f"HTTP {status} {code}".strip() if status else type(exc).__name__
    return fs_error("backend_error", f"{path}: S3 answered {detail}", path=path,
                    details={"status": status, "s3_code": code})

