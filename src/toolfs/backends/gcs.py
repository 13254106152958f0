"""GCS backend: multipart upload with ``ifGenerationMatch``, generation-pinned media GETs.

* version: the object generation, from the response that carried the bytes
  (``X-Goog-Generation``) or acknowledged the upload (``generation`` in its JSON);
* create = ``ifGenerationMatch=0``; update = ``ifGenerationMatch=<generation>``; one
  multipart upload request each. gcsfs offers neither (``open("wb", ifGenerationMatch=...)``
  is silently ignored and every 412 becomes ``FileExistsError``), so the request is built
  here and sent on gcsfs's own HTTP session and credentials;
* reads are media GETs with a ``Range``; follow-up blocks carry ``generation=N`` (that
  exact generation's bytes, 404 once it is gone) and ``ifGenerationMatch=N`` (412 once it
  is not current), so a view is never torn;
* a path gcsfs's ``split_path`` would not address by its literal name (a version-aware
  gcsfs cuts ``#<n>`` and ``?generation=<n>``) is refused as ``invalid_arguments`` before
  any request, listings included;
* as on S3, a create first checks that the name is not a "directory" and that no parent
  below the root is an object (one listing plus one metadata GET per parent, in
  parallel), a 404 on a read is explained the same way, and a missing bucket is
  ``not_found`` naming the bucket.

A DELETE resent after a lost response (by :meth:`GCSStore._request`; aiohttp's own
hidden resend is turned off) may meet the object gone (404, 412): a metadata GET then
says whether it is gone (success) or there (``stale``); a failing check is
``backend_error``.

Relies on gcsfs internals present from 2024.x through 2026.x: ``GCSFileSystem._location``,
``_set_session()``, ``session``, ``_get_params()``, ``_get_headers()``, ``split_path()`` and
``requests_timeout``; tests/test_cloud.py pins them.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
from collections.abc import Iterator
from typing import Any, ClassVar
from urllib.parse import quote

import aiohttp  # gcsfs's own HTTP client

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

# Transient failures (connection resets, 429, 5xx) retried by us, so that we know when an
# upload was retried and a 412 may be our own first attempt answering.
RETRIES = 3
_TRANSIENT = {408, 429, 500, 502, 503, 504}


class _Response:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


class GCSStore(AsyncStore):
    """Adapter for :class:`gcsfs.GCSFileSystem`."""

    name: ClassVar[str] = "gcs"
    capabilities: ClassVar[Capabilities] = Capabilities(
        atomic=True, cross_process=True, digest_versions=False)

    def _parts(self, path: str) -> tuple[str, str]:
        """``(bucket, key)`` of ``path`` (the key may be empty), refused as
        ``invalid_arguments`` unless they spell ``path`` exactly: a version-aware gcsfs
        cuts a key at ``#<n>`` or ``?generation=<n>`` (see
        :func:`~toolfs.backends.base.check_literal`). Every request goes to the bucket
        and key this returns."""
        split = self.fs.split_path(path)
        check_literal(path, split, client="gcsfs")
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
        url = f"{self.fs._location}/storage/v1/b/{quote(bucket, safe='')}"
        r, _ = await self._request("GET", url, path)
        if r.status == 404:
            raise _no_bucket(bucket, path)
        if r.status != 200:
            raise _backend_error(path, r)

    async def _conflict(self, bucket: str, key: str, path: str) -> FsError | None:
        """``not_a_file`` if ``key`` is a "directory" or a parent below the root is an
        object; ``None`` if the name is free to be a file."""
        # The parents' keys are prefixes of the checked key, cut literally: gcsfs's parser
        # must not read a parent ("d#1" of "d#1/f") another way.
        parents = [a[len(bucket) + 1:] for a in self.ancestors(path)
                   if a.startswith(bucket + "/") and len(a) > len(bucket) + 1]
        url = f"{self.fs._location}/storage/v1/b/{quote(bucket, safe='')}/o"
        listing, *found = await asyncio.gather(
            self._request("GET", url, path, params={"prefix": key + "/", "maxResults": 1,
                                                    "fields": "items/name"}),
            *(self._metadata(bucket, k, path) for k in parents))
        r, _ = listing
        if r.status == 404:
            raise _no_bucket(bucket, path)
        if r.status != 200:
            raise _backend_error(path, r)
        for k, meta in zip(parents, found, strict=True):
            if meta is not None:
                return fs_error("not_a_file", f"{bucket}/{k} is a file, not a directory, "
                                f"in {path}", path=path, details={"file": f"{bucket}/{k}"})
        if json.loads(r.body or b"{}").get("items"):
            return fs_error("not_a_file", f"{path} is a directory", path=path)
        return None

    # -- listing: the JSON API's objects.list, never gcsfs's cached find/ls ---------

    list_page_size: ClassVar[int] = 1000
    """``maxResults`` of each listing page (1000 is the service's own maximum)."""

    _LIST_FIELDS: ClassVar[str] = "items(name,size,updated,generation),prefixes,nextPageToken"

    async def _list_page(self, bucket: str, prefix: str, path: str, *, delimiter: bool,
                         token: str | None) -> dict[str, Any]:
        params: dict[str, Any] = {"prefix": prefix, "maxResults": self.list_page_size,
                                  "fields": self._LIST_FIELDS}
        if delimiter:
            params["delimiter"] = "/"
        if token:
            params["pageToken"] = token
        url = f"{self.fs._location}/storage/v1/b/{quote(bucket, safe='')}/o"
        r, _ = await self._request("GET", url, path, params=params)
        if r.status == 404:
            raise _no_bucket(bucket, path)
        if r.status != 200:
            raise _backend_error(path, r)
        try:
            page: dict[str, Any] = json.loads(r.body or b"{}")
        except ValueError as exc:
            raise fs_error("backend_error", f"{path}: GCS answered a listing that is not "
                           "JSON", path=path) from exc
        return page

    def _pages(self, path: str, *, delimiter: bool) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(bucket, page)`` for each page of the listing of the directory ``path``,
        fetched one at a time as the caller asks (``pageToken``)."""
        bucket, key = self._parts(path)
        key = key.rstrip("/")
        prefix = f"{key}/" if key else ""
        token: str | None = None
        while True:
            page = self._sync(self._list_page(bucket, prefix, path, delimiter=delimiter,
                                              token=token))
            yield bucket, page
            token = page.get("nextPageToken")
            if not token:
                return

    def list_files(self, prefix: str, *, sizes: bool = True) -> Iterator[Entry]:
        """One ``objects.list`` of ``prefix/`` (paginated), no request per object;
        "directory marker" objects (names ending in ``/``) are not files."""
        for bucket, page in self._pages(prefix, delimiter=False):
            for item in page.get("items", ()):
                if not item["name"].endswith("/"):
                    yield _entry(bucket, item)

    def list_dir(self, path: str) -> Iterator[Entry]:
        """One ``objects.list`` of ``path/`` with ``delimiter=/`` (paginated): items are
        files, ``prefixes`` directories. Nothing there: ``not_a_file`` if ``path`` is an
        object (one metadata GET), else ``not_found`` (the root, or a bucket, lists
        empty)."""
        own = path.rstrip("/")
        seen = False
        dirs: set[str] = set()  # a prefix may come again on a later page: once each
        for bucket, page in self._pages(path, delimiter=True):
            for item in page.get("items", ()):
                seen = True
                if not item["name"].endswith("/"):  # the directory's own marker
                    yield _entry(bucket, item)
            for prefix in page.get("prefixes", ()):
                seen = True
                name = f"{bucket}/{prefix.rstrip('/')}"
                if name != own and name not in dirs:
                    dirs.add(name)
                    yield Entry(path=name, kind="dir")
        if seen:
            return
        bucket, key = self._parts(path)
        key = key.rstrip("/")
        if not key or self.is_root(path):
            return
        if self._sync(self._metadata(bucket, key, path)) is not None:
            raise fs_error("not_a_file", f"{path} is a file, not a directory", path=path)
        raise fs_error("not_found", f"{path} does not exist", path=path)

    async def _request(self, method: str, url: str, path: str, *,
                       params: dict[str, Any] | None = None,
                       headers: dict[str, str] | None = None,
                       data: bytes | None = None) -> tuple[_Response, bool]:
        """Send one request (retrying transient failures); return it and whether it retried."""
        await self.fs._set_session()
        attempt = 0
        while True:
            try:
                async with self.fs.session.request(
                    method, url, params=self.fs._get_params(params or {}),
                    headers=self.fs._get_headers(headers), data=data,
                    timeout=self.fs.requests_timeout,
                ) as r:
                    response = _Response(r.status, dict(r.headers), await r.read())
            except (TimeoutError, OSError, aiohttp.ClientError) as exc:
                if attempt >= RETRIES:
                    raise fs_error("backend_error", f"{path}: {exc}", path=path) from exc
            except Exception as exc:  # not transient: no retry, but still an FsError
                raise fs_error("backend_error", f"{path}: {exc}", path=path) from exc
            else:
                if response.status not in _TRANSIENT or attempt >= RETRIES:
                    return response, attempt > 0
            attempt += 1
            await asyncio.sleep(0.05 * 2 ** attempt)

    def _media_url(self, bucket: str, key: str) -> str:
        return (f"{self.fs._location}/download/storage/v1/b/{quote(bucket, safe='')}/o/"
                f"{quote(key, safe='')}")

    async def _get_listed(self, path: str, length: int | None) -> Blob:
        return await self.get_async(path, length=length, explain_missing=False)

    async def get_async(
        self, path: str, *, start: int = 0, length: int | None = None,
        if_version: FileVersion | None = None, explain_missing: bool = True,
    ) -> Blob:
        """See :meth:`Store.get`; with ``explain_missing`` a 404 is checked for a
        "directory", a file above it, or a missing bucket (extra requests, on 404 only)."""
        bucket, key = self._split(path)
        params: dict[str, Any] = {"alt": "media"}
        if if_version is not None:
            params["generation"] = if_version.value
            params["ifGenerationMatch"] = if_version.value
        headers: dict[str, str] = {}
        if start > 0 or length is not None:
            last = start + max(length or 0, 1) - 1 if length is not None else ""
            headers["Range"] = f"bytes={start}-{last}"
        url = self._media_url(bucket, key)
        r, _ = await self._request("GET", url, path, params=params, headers=headers)
        if r.status == 416:
            # Empty object (or a start past the end): one unranged GET has size and version.
            headers.pop("Range", None)
            start = 0
            r, _ = await self._request("GET", url, path, params=params)
        if r.status == 404:
            if if_version is not None:
                raise fs_error("stale", f"{path} changed or was deleted", path=path)
            # A "directory", a file above it, or a missing bucket (extra requests)
            conflict = await self._conflict(bucket, key, path) if explain_missing else None
            raise conflict or fs_error("not_found", f"{path} does not exist", path=path)
        if r.status == 412:
            raise fs_error("stale", f"{path} changed", path=path)
        if r.status not in (200, 206):
            raise _backend_error(path, r)
        content_range = r.headers.get("Content-Range")
        size = int(content_range.rsplit("/", 1)[1]) if content_range else len(r.body)
        if r.status == 200:
            start = 0
        data = r.body if length is None else r.body[:length]
        version = FileVersion(kind="generation", value=r.headers["X-Goog-Generation"])
        return Blob(data=data, version=version, size=size, start=start)

    async def put_async(self, path: str, data: bytes, mode: PutMode) -> FileVersion:
        bucket, key = self._split(path)
        params: dict[str, Any] = {"uploadType": "multipart"}
        if isinstance(mode, Create):
            params["ifGenerationMatch"] = 0
        elif isinstance(mode, Update):
            params["ifGenerationMatch"] = mode.expected.value
        if not isinstance(mode, Update):  # an existing file needs no directory check
            conflict = await self._conflict(bucket, key, path)
            if conflict is not None:
                raise conflict
        boundary = f"toolfs-{secrets.token_hex(16)}"
        meta = json.dumps({"name": key}).encode()
        body = b"".join([
            f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n".encode(),
            meta,
            f"\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n".encode(),
            data,
            f"\r\n--{boundary}--".encode(),
        ])
        url = f"{self.fs._location}/upload/storage/v1/b/{quote(bucket, safe='')}/o"
        r, retried = await self._request(
            "POST", url, path, params=params, data=body,
            headers={"Content-Type": f'multipart/related; boundary="{boundary}"'})
        if r.status == 412:
            if retried:
                own = await self._own_write(bucket, key, data, path)
                if own is not None:
                    return own
            what = "was created by someone else" if isinstance(mode, Create) else "changed"
            raise fs_error("stale", f"{path} {what}", path=path)
        if r.status == 404:
            raise _no_bucket(bucket, path)
        if r.status != 200:
            raise _backend_error(path, r)
        return FileVersion(kind="generation", value=str(json.loads(r.body)["generation"]))

    async def _metadata(self, bucket: str, key: str, path: str) -> dict[str, Any] | None:
        url = (f"{self.fs._location}/storage/v1/b/{quote(bucket, safe='')}/o/"
               f"{quote(key, safe='')}")
        r, _ = await self._request("GET", url, path)
        if r.status == 404:
            return None
        if r.status != 200:
            raise _backend_error(path, r)
        meta: dict[str, Any] = json.loads(r.body)
        return meta

    async def _own_write(self, bucket: str, key: str, data: bytes,
                         path: str) -> FileVersion | None:
        """The current generation if the object holds exactly ``data`` (by its md5Hash)."""
        meta = await self._metadata(bucket, key, path)
        digest = base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()
        if meta is None or meta.get("md5Hash") != digest:
            return None
        return FileVersion(kind="generation", value=str(meta["generation"]))

    async def delete_async(self, path: str, mode: Update | Overwrite) -> None:
        bucket, key = self._split(path)
        meta = await self._metadata(bucket, key, path)
        if meta is None:
            if isinstance(mode, Update):
                raise fs_error("stale", f"{path} was deleted", path=path)
            raise fs_error("not_found", f"{path} does not exist", path=path)
        params: dict[str, Any] = {}
        if isinstance(mode, Update):
            if str(meta["generation"]) != mode.expected.value:
                raise fs_error("stale", f"{path} changed", path=path)
            params["ifGenerationMatch"] = mode.expected.value
        url = (f"{self.fs._location}/storage/v1/b/{quote(bucket, safe='')}/o/"
               f"{quote(key, safe='')}")
        # A DELETE is idempotent to aiohttp: unless its hidden resend is off, it may go
        # twice out of our sight (see toolfs.backends.s3._hidden_resends_off).
        resent = not _hidden_resends_off(self.fs.session)
        r, retried = await self._request("DELETE", url, path, params=params)
        if r.status in (404, 412):
            # The first attempt may have deleted the object before its response was
            # lost: gone now means the generation we named is gone, as asked. A
            # failing check raises backend_error (unknown outcome), never stale.
            if (resent or retried) and await self._metadata(bucket, key, path) is None:
                return
            raise fs_error("stale", f"{path} changed", path=path)
        if r.status not in (200, 204):
            raise _backend_error(path, r)


def _hidden_resends_off(session: Any) -> bool:
    """Turn off aiohttp's own resend of idempotent requests (GET, PUT, DELETE) on
    gcsfs's session; True once it is off. As on S3: aiohttp resends such a request,
    unseen by :meth:`GCSStore._request`'s count, when a reused connection drops before
    the response; with the resend off the failure reaches ``_request``, which retries it
    and says so. ``False`` (no session yet, or these internals changed): the caller
    assumes a resend."""
    if session is None or not hasattr(session, "_retry_connection"):
        return False
    session._retry_connection = False
    return True


def _entry(bucket: str, item: dict[str, Any]) -> Entry:
    """A file entry from one ``items`` element of an ``objects.list`` page."""
    size = item.get("size")
    generation = item.get("generation")
    return Entry(path=f"{bucket}/{item['name']}", kind="file",
                 size=int(size) if size is not None else None,
                 mtime=epoch_of(item.get("updated")),
                 version=FileVersion(kind="generation", value=str(generation))
                 if generation is not None else None)


def _no_bucket(bucket: str, path: str) -> FsError:
    return fs_error("not_found", f"the bucket {bucket} does not exist", path=path,
                    details={"bucket": bucket})


def _backend_error(path: str, r: _Response) -> FsError:
    reason = ""
    try:
        reason = json.loads(r.body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        reason = r.body[:200].decode("utf-8", "replace")
    return fs_error("backend_error", f"{path}: GCS answered HTTP {r.status} {reason}".strip(),
                    path=path, details={"status": r.status})
