"""A content cache for discovery reads, validated by the listing.

``grep`` on an object store lists the prefix (one paginated listing) and then reads each
candidate. The listing already carries each object's version (S3 and Azure ETag, GCS
generation), which says exactly whether the bytes changed since the last grep: an object
whose listed version equals the cached one is served from here, no request; a changed or
new one is fetched (and replaces what was cached); one that no longer lists drops out.

The key is the backend's version **as listed**, never a time, so a hit is never stale:
the listing is fresh on every call (``Store.list_files`` never uses a listing cache), and
an entry is used only for the exact version that listing names. Backends whose listing
carries no version (local disk, memory) never use the cache.

Bounded by a byte budget, least recently used out first; held in memory, or as files in
a directory (``directory``: a private subdirectory is made there for this process and
removed at exit). One cache per process and option set (:func:`shared_cache`), shared by
every context. Only bytes a context was allowed to read are put in (the policy reads
only confined, non-denied paths), and only whole files within the size cap.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass

from toolfs.versions import FileVersion

MiB = 1024 * 1024
DEFAULT_CACHE_BYTES = 64 * MiB
"""Default byte budget of the process-wide discovery content cache."""


@dataclass
class _Item:
    version: FileVersion
    size: int
    data: bytes | None
    """The bytes when held in memory; ``None`` when they are in a file."""
    file: str | None = None


class ContentCache:
    """Whole-file bytes keyed by ``(namespace, path)`` and valid for one version only.

    ``namespace`` tells filesystems apart (two endpoints may hold the same bucket/key);
    ``path`` is the backend path. Thread-safe; every method is O(1) but
    :meth:`paths_under`, which is linear in the entries of that namespace.
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES, directory: str | None = None
                 ) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError("the content cache's budget must be a non-negative integer")
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[str, str], _Item] = OrderedDict()
        self._by_namespace: dict[str, set[str]] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self._directory: str | None = None
        if directory is not None:
            os.makedirs(directory, exist_ok=True)
            self._directory = tempfile.mkdtemp(prefix="toolfs-cache-", dir=directory)
            atexit.register(shutil.rmtree, self._directory, True)
        self.hits = 0
        self.misses = 0

    @property
    def bytes_held(self) -> int:
        """Bytes currently held (at most ``max_bytes``)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def get(self, namespace: str, path: str, version: FileVersion) -> bytes | None:
        """The bytes of ``path`` at exactly ``version``, or ``None`` (an entry for another
        version is dropped: the file changed)."""
        key = (namespace, path)
        with self._lock:
            item = self._items.get(key)
            if item is None:
                self.misses += 1
                return None
            if item.version != version:
                self._drop(key)
                self.misses += 1
                return None
            self._items.move_to_end(key)
            data = item.data
            file = item.file
        if data is None and file is not None:
            try:
                with open(file, "rb") as fh:
                    data = fh.read()
            except OSError:
                data = None
            if data is None or len(data) != item.size:
                with self._lock:
                    if self._items.get(key) is item:
                        self._drop(key)
                    self.misses += 1
                return None
        with self._lock:
            self.hits += 1
        return data

    def put(self, namespace: str, path: str, version: FileVersion, data: bytes) -> None:
        """Hold ``data`` as ``path``'s bytes at ``version`` (replacing any other version),
        evicting the least recently used entries to stay within the budget; bytes larger
        than the whole budget are not held."""
        size = len(data)
        key = (namespace, path)
        if size > self.max_bytes:
            with self._lock:
                self._drop(key)
            return
        file: str | None = None
        if self._directory is not None:
            name = hashlib.sha256(f"{namespace}\0{path}\0{version}".encode(
                "utf-8", "surrogateescape")).hexdigest()
            file = os.path.join(self._directory, name)
            try:
                with open(file + ".tmp", "wb") as fh:
                    fh.write(data)
                os.replace(file + ".tmp", file)
            except OSError:
                return  # a full or unwritable disk: nothing cached, nothing wrong
        with self._lock:
            self._drop(key)
            self._items[key] = _Item(version=version, size=size,
                                     data=None if file is not None else data, file=file)
            self._by_namespace.setdefault(namespace, set()).add(path)
            self._bytes += size
            while self._bytes > self.max_bytes and self._items:
                self._drop(next(iter(self._items)))

    def forget(self, namespace: str, path: str) -> None:
        """Drop ``path``'s entry, if any."""
        with self._lock:
            self._drop((namespace, path))

    def paths_under(self, namespace: str, prefix: str) -> set[str]:
        """The paths held below the directory ``prefix`` (``""``: all of the namespace)."""
        base = prefix.rstrip("/")
        with self._lock:
            paths = self._by_namespace.get(namespace)
            if not paths:
                return set()
            return {p for p in paths if not base or p.startswith(base + "/")}

    def forget_paths(self, namespace: str, paths: set[str]) -> None:
        """Drop the entries of ``paths``."""
        with self._lock:
            for p in paths:
                self._drop((namespace, p))

    def clear(self) -> None:
        """Drop everything."""
        with self._lock:
            for key in list(self._items):
                self._drop(key)

    def _drop(self, key: tuple[str, str]) -> None:
        item = self._items.pop(key, None)
        if item is None:
            return
        self._bytes -= item.size
        paths = self._by_namespace.get(key[0])
        if paths is not None:
            paths.discard(key[1])
            if not paths:
                del self._by_namespace[key[0]]
        if item.file is not None:
            with contextlib.suppress(OSError):
                os.remove(item.file)


_SHARED: dict[tuple[int, str | None], ContentCache] = {}
_SHARED_LOCK = threading.Lock()


def shared_cache(max_bytes: int = DEFAULT_CACHE_BYTES, directory: str | None = None
                 ) -> ContentCache | None:
    """The process-wide cache for this budget and directory (``None`` for a budget of
    0: caching off). Every context made with the same options shares it."""
    if max_bytes == 0:
        return None
    key = (max_bytes, os.path.abspath(directory) if directory is not None else None)
    with _SHARED_LOCK:
        cache = _SHARED.get(key)
        if cache is None:
            cache = _SHARED[key] = ContentCache(max_bytes, directory)
        return cache


__all__ = ["DEFAULT_CACHE_BYTES", "ContentCache", "shared_cache"]
