"""Local listing: the confined ``os.scandir`` walk of :class:`~toolfs.backends.local.LocalStore`
(``list_files`` for glob and grep, ``list_dir`` for ls), and what the local backend's
reads and writes share with it: which entries are regular files, which names are
toolfs's temp files (never listed), and how an ``OSError`` becomes an ``FsError``.

Each directory is listed through a descriptor opened with ``O_NOFOLLOW`` and checked to
be the directory its parent's listing saw; symlinked directories are never entered; a
symlinked file counts only if it resolves inside the root; FIFOs, sockets and devices
are never listed as files (so never opened by a search).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator

from toolfs.backends.base import Entry
from toolfs.errors import FsError, fs_error

_TMP_MARK = ".toolfs-tmp-"


def is_temp_name(name: str) -> bool:
    """Whether ``name`` has the form of toolfs's temp files (never listed; refused for
    writing, so that no file of a tool's making is ever taken for a leftover)."""
    return name.startswith(".") and _TMP_MARK in name


def _is_regular(st: os.stat_result) -> bool:
    return stat.S_ISREG(st.st_mode)


class LocalListing:
    """The listing half of :class:`~toolfs.backends.local.LocalStore` (a mixin: it uses
    the store's ``root`` and its symlink-free ``_walk``)."""

    root: str | None

    def _walk(self, path: str, *, create: bool = False) -> tuple[int, str]:
        raise NotImplementedError  # LocalStore's

    def _inside(self, real: str) -> bool:
        root = self.root or "/"
        return real == root or real.startswith(root.rstrip(os.sep) + os.sep)

    def _listable(self, path: str) -> str:
        """``path`` normalised, refusing a start that resolves outside the root."""
        path = os.path.normpath(path)
        if not self._inside(os.path.realpath(path)):
            raise fs_error("outside_root", f"{path} is outside {self.root}", path=path)
        return path

    def _linked(self, entry: os.DirEntry[str],
                path: str) -> tuple[os.stat_result, str] | None:
        """The target's stat and real path for a symlink (``entry``, at ``path``) that
        resolves inside the root; ``None`` for a dangling, looping or outside-pointing
        link, and for one whose path or target is too long to resolve."""
        try:
            st = entry.stat()  # follows the link
            real = os.path.realpath(path, strict=True)
        except OSError:
            return None
        return (st, real) if self._inside(real) else None

    def list_files(self, prefix: str, *, sizes: bool = True) -> Iterator[Entry]:
        """An ``os.scandir`` walk: symlinked directories are never followed (no loops,
        no escapes); a symlinked file counts only if it resolves inside the root (with
        its target's size and mtime, under the link's own path); FIFOs, sockets and
        devices are skipped. A missing prefix or a file lists nothing. ``sizes=False``
        spares the stat of each regular file (its entry has no size or mtime). A link's
        entry names its real path as ``target``: reads go there, since the store never
        follows a symlink itself."""
        start = self._listable(prefix)
        # Each directory with the identity it was listed with (the start: none known).
        stack: list[tuple[str, tuple[int, int] | None]] = [(start, None)]
        while stack:
            top, identity = stack.pop()
            try:
                scan = self._scan(top, identity)
            except OSError as exc:
                if top == start and exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                    raise _translate(exc, top) from exc
                continue  # gone meanwhile, or unreadable below the start: skipped
            with scan as entries:
                for path, entry in entries:
                    if is_temp_name(entry.name):
                        continue  # a crashed write's leftover, not a file of the tree
                    target: str | None = None
                    try:
                        if entry.is_symlink():
                            linked = self._linked(entry, path)
                            if linked is None or not _is_regular(linked[0]):
                                continue
                            st, target = linked
                        elif entry.is_dir(follow_symlinks=False):
                            st = entry.stat(follow_symlinks=False)
                            stack.append((path, (st.st_dev, st.st_ino)))
                            continue
                        elif entry.is_file(follow_symlinks=False):  # no stat: d_type
                            if not sizes:
                                yield _file_entry(path, None, None, None)
                                continue
                            st = entry.stat(follow_symlinks=False)
                        else:
                            continue  # FIFO, socket, device
                    except OSError:
                        continue  # removed between the listing and the stat
                    yield _file_entry(path, st.st_size, st.st_mtime, target)

    def _scan(self, top: str, identity: tuple[int, int] | None = None
              ) -> contextlib.AbstractContextManager[Iterator[tuple[str, os.DirEntry[str]]]]:
        """The entries of the directory ``top`` with their full paths, to use in a
        ``with``, listed through a descriptor: opened by path with ``O_NOFOLLOW`` or, for
        a path longer than the system takes (``ENAMETOOLONG`` past PATH_MAX), one
        directory at a time from the root, never through a symlink (as writes walk).
        With ``identity`` (``(st_dev, st_ino)`` as the parent's listing saw it), a
        directory that is no longer that one -- swapped meanwhile, for a symlink to
        outside the root say -- is not listed (``FileNotFoundError``). Opening errors
        are raised here, as ``os.scandir`` raises them."""
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
        try:
            fd = os.open(top, flags)
        except OSError as exc:
            if exc.errno != errno.ENAMETOOLONG:
                raise
            dfd, name = self._walk(top)
            try:
                fd = os.open(name, flags, dir_fd=dfd)
            finally:
                os.close(dfd)
        if identity is not None:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != identity:
                os.close(fd)
                raise FileNotFoundError(errno.ENOENT, "replaced while listed", top)
        return _paths_under(fd, top)

    def list_dir(self, path: str) -> Iterator[Entry]:
        """One ``os.scandir``: directories (a symlinked one only if it resolves inside
        the root) and regular files; other kinds and outside links are skipped."""
        start = self._listable(path)
        try:
            scan = self._scan(start)
        except OSError as exc:
            if exc.errno == errno.ENOTDIR:
                raise fs_error("not_a_file", f"{path} is a file, not a directory",
                               path=path) from exc
            if isinstance(exc, FsError):
                raise
            raise _translate(exc, path) from exc
        with scan as entries:
            for full, entry in entries:
                if is_temp_name(entry.name):
                    continue
                target: str | None = None
                try:
                    if entry.is_symlink():
                        linked = self._linked(entry, full)
                        if linked is None:
                            continue
                        st, target = linked
                    else:
                        st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    yield Entry(path=full, kind="dir", mtime=st.st_mtime, target=target)
                elif _is_regular(st):
                    yield Entry(path=full, kind="file", size=st.st_size,
                                mtime=st.st_mtime, target=target)


@contextlib.contextmanager
def _paths_under(fd: int, top: str) -> Iterator[Iterator[tuple[str, os.DirEntry[str]]]]:
    """An ``os.scandir`` of the directory fd ``fd`` (closed after), whose path is
    ``top``: its entries paired with ``top/name``."""
    try:
        with os.scandir(fd) as entries:
            yield ((f"{top}/{entry.name}", entry) for entry in entries)
    finally:
        os.close(fd)


def _file_entry(path: str, size: int | None, mtime: float | None,
                target: str | None) -> Entry:
    """``Entry(path=path, kind="file", size=size, mtime=mtime, target=target)``, without
    the frozen dataclass's ``__setattr__`` call per field (a listing makes one per
    file)."""
    entry: Entry = object.__new__(Entry)
    entry.__dict__.update(path=path, kind="file", size=size, mtime=mtime, version=None,
                          target=target)
    return entry


def _translate(exc: OSError, path: str) -> FsError:
    if exc.errno == errno.ENOENT:
        return fs_error("not_found", f"{path} does not exist", path=path)
    if exc.errno == errno.ELOOP:
        # O_NOFOLLOW met a symlink where the checked path had a file or directory.
        return fs_error("outside_root", f"{path} crosses a symlink", path=path)
    if exc.errno == errno.ENOTDIR:
        return fs_error("not_a_file", f"a part of {path} is a file, not a directory",
                        path=path)
    if exc.errno == errno.ENAMETOOLONG:
        return fs_error("invalid_arguments", f"{path}: a name is too long for this "
                        "filesystem", path=path)
    if exc.errno == errno.EISDIR:
        return fs_error("not_a_file", f"{path} is a directory", path=path)
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return fs_error("denied", f"{path}: {exc.strerror}", path=path)
    return fs_error("backend_error", f"{path}: {exc.strerror or exc}", path=path)

