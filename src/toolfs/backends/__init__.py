"""Backend adapters: one conditional-store interface, one small module per backend.

:func:`store_for` picks the adapter for a filesystem by its protocol. A new backend is
one module with a :class:`~toolfs.backends.base.Store` subclass plus one line in
``_ADAPTERS``; anything else gets the non-atomic :class:`GenericStore`.
"""

from __future__ import annotations

import importlib
import posixpath
from typing import Any

from toolfs.backends.base import (
    AsyncStore,
    Blob,
    Capabilities,
    Create,
    Entry,
    Overwrite,
    PutMode,
    Store,
    Update,
)
from toolfs.backends.generic import GenericStore

__all__ = [
    "AsyncStore", "Blob", "Capabilities", "Create", "Entry", "GenericStore", "Overwrite",
    "PutMode",
    "Store", "Update", "store_for", "unwrapped",
]

# fsspec class path -> adapter class path; imported lazily so s3fs/gcsfs/adlfs stay optional.
_ADAPTERS: dict[str, str] = {
    "fsspec.implementations.memory.MemoryFileSystem": "toolfs.backends.memory:MemoryStore",
    "fsspec.implementations.local.LocalFileSystem": "toolfs.backends.local:LocalStore",
    "s3fs.core.S3FileSystem": "toolfs.backends.s3:S3Store",
    "gcsfs.core.GCSFileSystem": "toolfs.backends.gcs:GCSStore",
    "adlfs.spec.AzureBlobFileSystem": "toolfs.backends.azure:AzureBlobStore",
}


def _adapter(fs: Any) -> type[Store] | None:
    """The adapter class for ``fs``'s class or the nearest of its bases, if any."""
    for cls in type(fs).__mro__:
        target = _ADAPTERS.get(f"{cls.__module__}.{cls.__qualname__}")
        if target is not None:
            module, _, name = target.partition(":")
            adapter: type[Store] = getattr(importlib.import_module(module), name)
            return adapter
    return None


def store_for(fs: Any, *, root: str | None = None, size_cap: int = 10 * 1024 * 1024) -> Store:
    """The adapter for ``fs``: exact class match first, then its base classes."""
    adapter = _adapter(fs)
    if adapter is None:
        return GenericStore(fs, root=root, size_cap=size_cap)
    return adapter(fs, root=root, size_cap=size_cap)


def unwrapped(fs: Any, root: str) -> tuple[Any, str]:
    """``(fs, root)`` with fsspec ``DirFileSystem`` layers taken off, each layer's path put
    in front of ``root``, when what they wrap has an adapter of its own.

    A path-prefix wrapper must not hide a backend's guarantees behind the generic store,
    which is not atomic and resolves no symlinks: over a local disk a link would lead out
    of the root and past deny rules, and over S3 two writers could overwrite each other.
    Only ``DirFileSystem`` itself is taken off, never a subclass (which may change more
    than paths)."""
    from fsspec.implementations.dirfs import DirFileSystem  # fsspec is a dependency

    while type(fs) is DirFileSystem and (
            type(fs.fs) is DirFileSystem or _adapter(fs.fs) is not None):
        # The wrapper's own reading of a path below it: "/sub", "./sub" and "sub/" are
        # all its "sub" (joined as they are, "dir//sub" would list nothing).
        rel = posixpath.normpath(root).strip("/") if root else ""
        root = fs._join(rel) if rel not in ("", ".") else fs.path
        fs = fs.fs
    return fs, root
