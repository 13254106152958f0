"""Memory backend: compare-and-set under one process-wide lock.

``MemoryFileSystem.store`` is a class attribute shared by every instance, so two
workspaces over ``memory://`` see the same files; the lock is shared the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from fsspec.implementations.memory import MemoryFile

from toolfs.backends.base import (
    Blob,
    Capabilities,
    Entry,
    Overwrite,
    PutMode,
    Store,
    Update,
    check_condition,
    clamp_range,
    epoch_of,
)
from toolfs.errors import fs_error
from toolfs.versions import FileVersion

_LOCK = threading.RLock()


class MemoryStore(Store):
    """Adapter for :class:`fsspec.implementations.memory.MemoryFileSystem`."""

    name: ClassVar[str] = "memory"
    capabilities: ClassVar[Capabilities] = Capabilities(
        atomic=True, cross_process=False, digest_versions=True, cheap_listing=True,
        removes_empty_dirs=True)

    def _current(self, path: str) -> bytes | None:
        entry: Any = self.fs.store.get(self.fs._strip_protocol(path))
        if entry is None:
            if self.fs.isdir(path):
                raise fs_error("not_a_file", f"{path} is a directory", path=path)
            self._check_ancestors(path)
            return None
        # The BytesIO's own bytes, not a copy: a later write to it copies them first,
        # so these stay the bytes they are now.
        return entry.getvalue()  # type: ignore[no-any-return]

    def _check_ancestors(self, path: str) -> None:
        """``not_a_file`` if a directory above ``path`` is in fact a file."""
        for parent in self.ancestors(self.fs._strip_protocol(path)):
            if parent in self.fs.store:
                raise fs_error("not_a_file", f"{parent} is a file, not a directory, in "
                               f"{path}", path=path, details={"file": parent})

    # -- listing: straight from ``fs.store`` and ``fs.pseudo_dirs`` (no ``find``) ------

    def _starter(self, path: str) -> tuple[str, str]:
        own = self.fs._strip_protocol(path).rstrip("/")
        return own, own + "/" if own else "/"

    def list_files(self, prefix: str, *, sizes: bool = True) -> Iterator[Entry]:
        _, starter = self._starter(prefix)
        with _LOCK:
            found = [(k, f) for k, f in self.fs.store.items() if k.startswith(starter)]
        for key, file in found:
            yield _file_entry(key, file)

    def list_dir(self, path: str) -> Iterator[Entry]:
        own, starter = self._starter(path)
        with _LOCK:
            if own in self.fs.store:
                raise fs_error("not_a_file", f"{path} is a file, not a directory", path=path)
            files = [(k, f) for k, f in self.fs.store.items() if k.startswith(starter)]
            pseudo = [d for d in self.fs.pseudo_dirs if d.startswith(starter)]
            exists = bool(files or pseudo) or own in self.fs.pseudo_dirs
        if not exists and not self.is_root(path):
            raise fs_error("not_found", f"{path} does not exist", path=path)
        dirs: set[str] = set()
        for key, file in files:
            rest = key[len(starter):]
            if "/" not in rest:
                yield _file_entry(key, file)
            else:
                dirs.add(starter + rest.split("/", 1)[0])
        for d in pseudo:
            rest = d[len(starter):].rstrip("/")
            if rest:
                dirs.add(starter + rest.split("/", 1)[0])
        for d in sorted(dirs):
            yield Entry(path=d, kind="dir")

    def remove_empty_dirs(self, path: str, keep: Callable[[str], bool], *,
                          limit: int = 10_000) -> list[str]:
        """:meth:`Store.remove_empty_dirs` over ``fs.pseudo_dirs``, under the lock every
        write takes (no file can appear in a directory between the check and the
        removal). No symlinks here."""
        own, starter = self._starter(path)
        if not own or self.is_root(path):
            return []
        kept: dict[str, bool] = {}

        def is_kept(d: str) -> bool:
            # A directory is kept when it or a directory between it and `own` is.
            if d not in kept:
                parent = d.rsplit("/", 1)[0]
                kept[d] = keep(d) or (d != own and is_kept(parent))
            return kept[d]

        def below(d: str) -> bool:
            return d == own or d.startswith(starter)

        removed: list[str] = []
        with _LOCK:
            every = sorted((d for d in self.fs.pseudo_dirs if below(d)),
                           key=lambda d: d.count("/"))
            # The shallowest `limit` directories not kept are candidates; every other
            # directory (kept, or past the limit) and every file holds its parents up.
            candidates = [d for d in every[:limit] if not is_kept(d)]
            chosen = set(candidates)
            occupied: set[str] = set()
            holders = [k for k in self.fs.store if k.startswith(starter)]
            holders += [d for d in every if d not in chosen]
            for held in holders:
                parent = held.rsplit("/", 1)[0]
                while below(parent) and parent not in occupied:
                    occupied.add(parent)
                    parent = parent.rsplit("/", 1)[0]
            for d in reversed(candidates):  # deepest first
                if d in occupied:
                    occupied.add(d.rsplit("/", 1)[0])
                    continue
                self.fs.pseudo_dirs.remove(d)
                removed.append(d)
        return removed

    def get(
        self, path: str, *, start: int = 0, length: int | None = None,
        if_version: FileVersion | None = None,
    ) -> Blob:
        with _LOCK:
            data = self._current(path)
        if data is None:
            raise fs_error("not_found", f"{path} does not exist", path=path)
        version = FileVersion.of_bytes(data, like=if_version)
        if if_version is not None and version != if_version:
            raise fs_error("stale", f"{path} changed", path=path)
        if start == 0 and len(data) <= self.size_cap:
            return Blob(data=data, version=version, size=len(data))  # no second call
        lo, hi = clamp_range(len(data), start, length)
        return Blob(data=data[lo:hi], version=version, size=len(data), start=lo)

    def put(self, path: str, data: bytes, mode: PutMode) -> FileVersion:
        with _LOCK:
            current = self._current(path)
            check_condition(path, current, mode)
            if current is not None:
                # Replacing a file: its directories exist and none is a file, so the
                # new MemoryFile goes in as pipe_file would put it, without pipe_file's
                # walk up the parents (a dozen path normalisations per call).
                MemoryFile(self.fs, self.fs._strip_protocol(path), data).commit()
            else:
                parent = self.fs._parent(path)
                if parent and not self.fs.exists(parent):
                    self.fs.makedirs(parent, exist_ok=True)
                self.fs.pipe_file(path, data)
        return FileVersion.of_bytes(data)

    def delete(self, path: str, mode: Update | Overwrite) -> None:
        with _LOCK:
            current = self._current(path)
            if current is None and isinstance(mode, Overwrite):
                raise fs_error("not_found", f"{path} does not exist", path=path)
            check_condition(path, current, mode)
            self.fs.rm_file(path)



def _file_entry(key: str, file: Any) -> Entry:
    stamp = getattr(file, "modified", None) or getattr(file, "created", None)
    size = file.size  # MemoryFile: the buffer's length
    return Entry(path=key, kind="file", size=int(size), mtime=epoch_of(stamp))
