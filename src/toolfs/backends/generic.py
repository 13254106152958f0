"""Generic fallback for any fsspec filesystem without an adapter: check, then write.

Best effort and **not atomic**: another writer can slip in between the check and the
write (``Capabilities.atomic`` is False, and the docs say so). Versions are content
digests of what ``cat_file`` returns, so they are exact for whole-file reads.
"""

from __future__ import annotations

import threading
from typing import ClassVar

from toolfs.backends.base import (
    Blob,
    Capabilities,
    Overwrite,
    PutMode,
    Store,
    Update,
    check_condition,
    clamp_range,
)
from toolfs.errors import FsError, fs_error
from toolfs.versions import FileVersion

# Serialises writers within this process, which is all a check-then-write can offer.
_LOCK = threading.RLock()


class GenericStore(Store):
    """Check-then-write over plain ``AbstractFileSystem`` methods."""

    name: ClassVar[str] = "generic"
    capabilities: ClassVar[Capabilities] = Capabilities(
        atomic=False, cross_process=False, digest_versions=True)

    def _current(self, path: str) -> bytes | None:
        try:
            data = self.fs.cat_file(path)
        except FileNotFoundError:
            self._check_free(path)
            return None
        except IsADirectoryError as exc:
            raise fs_error("not_a_file", f"{path} is a directory", path=path) from exc
        except FsError:
            raise
        except Exception as exc:
            if self.fs.isdir(path):
                raise fs_error("not_a_file", f"{path} is a directory", path=path) from exc
            raise fs_error("backend_error", f"{path}: {exc}", path=path) from exc
        return bytes(data)

    def _check_free(self, path: str) -> None:
        """``not_a_file`` if the missing ``path`` is a directory or lies below a file."""
        try:
            if self.fs.isdir(path):
                raise fs_error("not_a_file", f"{path} is a directory", path=path)
            for parent in self.ancestors(path):
                if self.fs.isfile(parent):
                    raise fs_error("not_a_file", f"{parent} is a file, not a directory, in "
                                   f"{path}", path=path, details={"file": parent})
        except FsError:
            raise
        except Exception as exc:
            raise fs_error("backend_error", f"{path}: {exc}", path=path) from exc

    def get(
        self, path: str, *, start: int = 0, length: int | None = None,
        if_version: FileVersion | None = None,
    ) -> Blob:
        data = self._current(path)
        if data is None:
            raise fs_error("not_found", f"{path} does not exist", path=path)
        version = FileVersion.of_bytes(data, like=if_version)
        if if_version is not None and version != if_version:
            raise fs_error("stale", f"{path} changed", path=path)
        lo, hi = clamp_range(len(data), start, length)
        return Blob(data=data[lo:hi], version=version, size=len(data), start=lo)

    def _check(self, path: str, mode: PutMode) -> bytes | None:
        current = self._current(path)
        check_condition(path, current, mode)
        return current

    def put(self, path: str, data: bytes, mode: PutMode) -> FileVersion:
        with _LOCK:
            self._check(path, mode)
            try:
                parent = self.fs._parent(path)
                if parent:
                    self.fs.makedirs(parent, exist_ok=True)
                self.fs.pipe_file(path, data)
            except Exception as exc:
                raise fs_error("backend_error", f"{path}: {exc}", path=path) from exc
        return FileVersion.of_bytes(data)

    def delete(self, path: str, mode: Update | Overwrite) -> None:
        with _LOCK:
            if self._check(path, mode) is None:
                raise fs_error("not_found", f"{path} does not exist", path=path)
            try:
                self.fs.rm_file(path)
            except Exception as exc:
                raise fs_error("backend_error", f"{path}: {exc}", path=path) from exc
