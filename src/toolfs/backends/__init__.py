"""Backend adapters: one conditional-store interface, one small module per backend.

:func:`store_for` picks the adapter for a filesystem by its protocol. A new backend is
one module with a :class:`~toolfs.backends.base.Store` subclass plus one line in
``_ADAPTERS``; anything else gets the non-atomic :class:`GenericStore`.
"""

from __future__ import annotations

import importlib
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
    "Store", "Update", "store_for",
]

# fsspec class path -> adapter class path; imported lazily so s3fs/gcsfs/adlfs stay optional.
_ADAPTERS: dict[str, str] = {
    "fsspec.implementations.memory.MemoryFileSystem": "toolfs.backends.memory:MemoryStore",
    "fsspec.implementations.local.LocalFileSystem": "toolfs.backends.local:LocalStore",
    "s3fs.core.S3FileSystem": "toolfs.backends.s3:S3Store",
    "gcsfs.core.GCSFileSystem": "toolfs.backends.gcs:GCSStore",
    "adlfs.spec.AzureBlobFileSystem": "toolfs.backends.azure:AzureBlobStore",
}


def store_for(fs: Any, *, root: str | None = None, size_cap: int = 10 * 1024 * 1024) -> Store:
    """The adapter for ``fs``: exact class match first, then its base classes."""
    for cls in type(fs).__mro__:
        target = _ADAPTERS.get(f"{cls.__module__}.{cls.__qualname__}")
        if target is None:
            continue
        module, _, name = target.partition(":")
        adapter: type[Store] = getattr(importlib.import_module(module), name)
        return adapter(fs, root=root, size_cap=size_cap)
    return GenericStore(fs, root=root, size_cap=size_cap)
