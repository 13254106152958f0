"""GCS dialect: multipart upload with ``ifGenerationMatch``, generation-pinned media GETs.

The semantics (literal paths, "directories", lost responses, retries, pages, the
deadline) are the object-store core's (:mod:`toolfs.backends.objectstore`); this module
is the JSON API's requests:

* version: the object generation, from the response that carried the bytes
  (``X-Goog-Generation``) or acknowledged the upload (``generation`` in its JSON);
* create = ``ifGenerationMatch=0``; update = ``ifGenerationMatch=<generation>``; one
  multipart upload request each. gcsfs offers neither (``open("wb", ifGenerationMatch=...)``
  is silently ignored and every 412 becomes ``FileExistsError``), so the request is built
  here and sent on gcsfs's own HTTP session and credentials;
* reads are media GETs with a ``Range``; follow-up blocks carry ``generation=N`` (that
  exact generation's bytes, 404 once it is gone) and ``ifGenerationMatch=N`` (412 once it
  is not current), so a view is never torn;
* a version-aware gcsfs cuts ``#<n>`` and ``?generation=<n>``: such paths are refused;
* every request is retried here on transient failures (connection errors, 408, 429,
  5xx), so the core knows when an upload or a DELETE may have been applied twice;
  aiohttp's own hidden resend is turned off. gcsfs leaves ``requests_timeout=None``
  (aiohttp's 300 s per attempt): under a deadline each request gets connect/read
  timeouts below it.

Relies on gcsfs internals present from 2024.x through 2026.x: ``GCSFileSystem._location``,
``_set_session()``, ``session``, ``_get_params()``, ``_get_headers()``, ``split_path()`` and
``requests_timeout``; tests/backends/test_object_store_requests.py pins them.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
from typing import Any, ClassVar, Literal
from urllib.parse import quote

import aiohttp  # gcsfs's own HTTP client

from toolfs.backends.base import Capabilities, Create, Entry, PutMode, Update, epoch_of
from toolfs.backends.objectstore import (
    Head,
    ObjectStore,
    Page,
    Read,
    Refused,
    Unsatisfiable,
    hidden_resends_off,
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


class GCSStore(ObjectStore):
    """Adapter for :class:`gcsfs.GCSFileSystem`."""

    name: ClassVar[str] = "gcs"
    client: ClassVar[str] = "gcsfs"
    capabilities: ClassVar[Capabilities] = Capabilities(
        atomic=True, cross_process=True, digest_versions=False)

    _LIST_FIELDS: ClassVar[str] = "items(name,size,updated,generation),prefixes,nextPageToken"

    def _url(self, bucket: str, key: str | None = None, *, api: str = "") -> str:
        url = f"{self.fs._location}{api}/storage/v1/b/{quote(bucket, safe='')}"
        return url if key is None else f"{url}/o/{quote(key, safe='')}"

    async def _request(self, method: str, url: str, path: str, *,
                       params: dict[str, Any] | None = None,
                       headers: dict[str, str] | None = None,
                       data: bytes | None = None) -> tuple[_Response, bool]:
        """Send one request (retrying transient failures); return it and whether it retried."""
        await self.fs._set_session()
        attempt = 0
        while True:
            timeouts = self.request_timeouts()
            timeout = self.fs.requests_timeout if timeouts is None else aiohttp.ClientTimeout(
                total=self.fs.requests_timeout, sock_connect=timeouts[0],
                sock_read=timeouts[1])
            try:
                async with self.fs.session.request(
                    method, url, params=self.fs._get_params(params or {}),
                    headers=self.fs._get_headers(headers), data=data, timeout=timeout,
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

    async def _may_resend(self, verb: Literal["write", "delete"]) -> bool:
        # An upload is a POST, which aiohttp never resends; a DELETE is idempotent to it.
        return verb == "delete" and not hidden_resends_off(self.fs.session)

    async def _check_bucket(self, bucket: str, path: str) -> None:
        r, _ = await self._request("GET", self._url(bucket), path)
        if r.status == 404:
            raise self._no_bucket(bucket, path)
        if r.status != 200:
            raise _backend_error(path, r)

    async def _head(self, bucket: str, key: str, path: str) -> Head | None:
        r, _ = await self._request("GET", self._url(bucket, key), path)
        if r.status == 404:
            return None
        if r.status != 200:
            raise _backend_error(path, r)
        meta: dict[str, Any] = json.loads(r.body)
        md5 = meta.get("md5Hash")
        return Head(FileVersion(kind="generation", value=str(meta["generation"])),
                    size=int(meta["size"]) if meta.get("size") is not None else None,
                    md5=base64.b64decode(md5) if md5 else None)

    async def _list_page(self, bucket: str, prefix: str, path: str, *, delimiter: bool,
                         token: str | None, limit: int | None = None) -> Page:
        params: dict[str, Any] = {"prefix": prefix, "maxResults": limit or self.list_page_size,
                                  "fields": self._LIST_FIELDS}
        if delimiter:
            params["delimiter"] = "/"
        if token:
            params["pageToken"] = token
        r, _ = await self._request("GET", self._url(bucket) + "/o", path, params=params)
        if r.status == 404:
            raise self._no_bucket(bucket, path)
        if r.status != 200:
            raise _backend_error(path, r)
        try:
            page: dict[str, Any] = json.loads(r.body or b"{}")
        except ValueError as exc:
            raise fs_error("backend_error", f"{path}: GCS answered a listing that is not "
                           "JSON", path=path) from exc
        items, prefixes = page.get("items", ()), page.get("prefixes", ())
        entries = [_entry(bucket, item) for item in items if not item["name"].endswith("/")]
        entries += [Entry(path=f"{bucket}/{p.rstrip('/')}", kind="dir") for p in prefixes]
        return Page(entries, seen=bool(items or prefixes),
                    token=page.get("nextPageToken") or None)

    async def _read(self, bucket: str, key: str, path: str, *,
                    window: tuple[int, int | None] | None,
                    if_version: FileVersion | None) -> Read:
        params: dict[str, Any] = {"alt": "media"}
        if if_version is not None:
            params["generation"] = if_version.value
            params["ifGenerationMatch"] = if_version.value
        headers: dict[str, str] = {}
        if window is not None:
            headers["Range"] = f"bytes={window[0]}-{'' if window[1] is None else window[1]}"
        url = self._url(bucket, key, api="/download")
        r, _ = await self._request("GET", url, path, params=params, headers=headers)
        if r.status == 416 and window is not None:
            raise Unsatisfiable()
        if r.status == 404:
            if if_version is not None:
                raise fs_error("stale", f"{path} changed or was deleted", path=path)
            raise fs_error("not_found", f"{path} does not exist", path=path)
        if r.status == 412:
            raise fs_error("stale", f"{path} changed", path=path)
        if r.status not in (200, 206):
            raise _backend_error(path, r)
        content_range = r.headers.get("Content-Range")
        total = int(content_range.rsplit("/", 1)[1]) if content_range else None
        version = FileVersion(kind="generation", value=r.headers["X-Goog-Generation"])
        start = window[0] if window is not None and r.status == 206 else 0
        return Read(r.body, version, total, start)

    async def _write(self, bucket: str, key: str, data: bytes, mode: PutMode,
                     path: str) -> FileVersion:
        params: dict[str, Any] = {"uploadType": "multipart"}
        if isinstance(mode, Create):
            params["ifGenerationMatch"] = 0
        elif isinstance(mode, Update):
            params["ifGenerationMatch"] = mode.expected.value
        boundary = f"toolfs-{secrets.token_hex(16)}"
        body = b"".join([
            f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n".encode(),
            json.dumps({"name": key}).encode(),
            f"\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n".encode(),
            data,
            f"\r\n--{boundary}--".encode(),
        ])
        r, retried = await self._request(
            "POST", self._url(bucket, api="/upload") + "/o", path, params=params, data=body,
            headers={"Content-Type": f'multipart/related; boundary="{boundary}"'})
        if r.status == 412:
            raise Refused(412, retried=retried)
        if r.status == 404:
            raise self._no_bucket(bucket, path)
        if r.status != 200:
            raise _backend_error(path, r)
        return FileVersion(kind="generation", value=str(json.loads(r.body)["generation"]))

    async def _before_delete(self, bucket: str, key: str, path: str,
                             mode: Update | Any) -> None:
        head = await self._head(bucket, key, path)
        if head is None:
            if isinstance(mode, Update):
                raise fs_error("stale", f"{path} was deleted", path=path)
            raise fs_error("not_found", f"{path} does not exist", path=path)
        if isinstance(mode, Update) and head.version.value != mode.expected.value:
            raise fs_error("stale", f"{path} changed", path=path)

    async def _remove(self, bucket: str, key: str, mode: Update | Any, path: str) -> None:
        params = {"ifGenerationMatch": mode.expected.value} if isinstance(mode, Update) else {}
        r, retried = await self._request("DELETE", self._url(bucket, key), path,
                                         params=params)
        if r.status in (404, 412):
            raise Refused(412, retried=retried)
        if r.status not in (200, 204):
            raise _backend_error(path, r)


def _entry(bucket: str, item: dict[str, Any]) -> Entry:
    """A file entry from one ``items`` element of an ``objects.list`` page."""
    size = item.get("size")
    generation = item.get("generation")
    return Entry(path=f"{bucket}/{item['name']}", kind="file",
                 size=int(size) if size is not None else None,
                 mtime=epoch_of(item.get("updated")),
                 version=FileVersion(kind="generation", value=str(generation))
                 if generation is not None else None)


def _backend_error(path: str, r: _Response) -> FsError:
    reason = ""
    try:
        reason = json.loads(r.body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        reason = r.body[:200].decode("utf-8", "replace")
    return fs_error("backend_error", f"{path}: GCS answered HTTP {r.status} {reason}".strip(),
                    path=path, details={"status": r.status})
