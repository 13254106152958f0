"""Old versions a store keeps, which the journal can name instead of holding bytes.

* S3 with versioning on: every version carries a ``VersionId`` (``FileVersion.
  version_id``); the old bytes are ``GetObject(VersionId=...)``.
* GCS with object versioning on (the bucket's ``versioning.enabled``, asked once per
  journal): the generation is the version; the old bytes are a media GET with
  ``generation=N``.
* Azure with blob versioning on: the version id (``x-ms-version-id``); the old bytes are
  a download with ``version_id``. Azurite (the emulator) does not implement blob
  versioning (it returns no version id), so there the journal keeps the bytes.

Elsewhere (memory, local disk, an unversioned bucket) there are no old versions to
name: :func:`namer` answers ``None`` and the journal holds (or persists) the bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from toolfs.backends.base import Store
from toolfs.errors import FsError, fs_error
from toolfs.versions import FileVersion

Namer = Callable[[FileVersion], str | None]
"""The id the store keeps a version under, or ``None`` (not kept)."""
Reader = Callable[[str, FileVersion], bytes | None]
"""The bytes of an old version by its id (``version_id``) at a key; ``None``: gone."""

__all__ = ["Namer", "Reader", "namer", "reader"]


def _kind(store: Store) -> str:
    return type(store).__name__


def namer(store: Store, root: str | None) -> Namer:
    """How ``store`` names old versions (see the module docstring). For GCS this asks
    the bucket whether object versioning is on (one request, on the first change)."""
    kind = _kind(store)
    if kind in ("S3Store", "AzureBlobStore"):
        def by_id(version: FileVersion) -> str | None:
            vid = version.version_id
            return vid if vid and vid != "null" else None
        return by_id
    if kind == "GCSStore" and root:
        bucket = root.split("/", 1)[0]
        known: list[bool] = []  # asked on the first change that needs it, then kept

        def by_generation(version: FileVersion) -> str | None:
            if not known:
                known.append(_gcs_versioning(store, bucket))
            return version.value if known[0] and version.kind == "generation" else None
        return by_generation
    return lambda version: None


def _gcs_versioning(store: Any, bucket: str) -> bool:
    async def ask() -> bool:
        r, _ = await store._request("GET", store._url(bucket), bucket,
                                    params={"fields": "versioning"})
        if r.status != 200:
            return False
        return bool((json.loads(r.body or b"{}").get("versioning") or {}).get("enabled"))
    try:
        return bool(store._sync(ask()))
    except Exception:  # unknown: keep the bytes, the safe choice
        return False


def reader(store: Store) -> Reader | None:
    """How to read an old version's bytes back from ``store`` (``None``: it keeps none)."""
    kind = _kind(store)
    impl: Any = store

    def run(coro: Any) -> bytes | None:
        try:
            out: bytes | None = impl._sync(coro)
            return out
        except FsError:
            raise
        except Exception as exc:
            err = fs_error("backend_error", f"reading an old version failed: "
                           f"{type(exc).__name__}: {exc}")
            err.__cause__ = exc
            raise err from exc

    if kind == "S3Store":
        def s3(key: str, version: FileVersion) -> bytes | None:
            bucket, name = impl._split(key)

            async def get() -> bytes | None:
                resp = await impl._call("get_object", Bucket=bucket, Key=name,
                                        VersionId=version.version_id)
                async with resp["Body"] as body:
                    data: bytes = await body.read()
                return data
            return run(get())
        return s3
    if kind == "GCSStore":
        def gcs(key: str, version: FileVersion) -> bytes | None:
            bucket, name = impl._split(key)

            async def get() -> bytes | None:
                r, _ = await impl._request("GET", impl._url(bucket, name, api="/download"),
                                           key, params={"alt": "media",
                                                        "generation": version.version_id
                                                        or version.value})
                return r.body if r.status == 200 else None
            return run(get())
        return gcs
    if kind == "AzureBlobStore":
        def azure(key: str, version: FileVersion) -> bytes | None:
            bucket, name = impl._split(key)

            async def get() -> bytes | None:
                client = impl._blob(bucket, name)
                downloader = await client.download_blob(version_id=version.version_id)
                data: bytes = await downloader.readall()
                return data
            return run(get())
        return azure
    return None
