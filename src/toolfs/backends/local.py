"""Local backend: advisory lock, re-check, temp file, fsync, ``os.replace``.

Atomic across threads and processes on one machine (POSIX ``flock``):

1. open the parent directory, walking down from the root with ``O_NOFOLLOW`` so that
   a symlink swapped in after the policy's check cannot redirect the write;
2. ``flock`` that directory (every toolfs writer in it waits here);
3. re-read the current bytes and check the condition against their digest;
4. write a temp file beside the target, ``fsync`` it, keep the target's mode,
   ``os.replace`` it over the target and ``fsync`` the directory.

A crash at any point leaves the old or the new content, never a torn file. A crash
between 4's first and last step can leave a ``.NAME.toolfs-tmp-*`` file; the next
successful write of NAME removes it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator
from typing import Any, ClassVar

from toolfs.backends.base import (
    Blob,
    Capabilities,
    Create,
    Overwrite,
    PutMode,
    Store,
    Update,
    clamp_range,
)
from toolfs.errors import FsError, fs_error
from toolfs.versions import FileVersion

_TMP_MARK = ".toolfs-tmp-"


def temp_prefix(name: str) -> str:
    """Prefix of the temp files that a write of ``name`` may leave after a crash."""
    return f".{name}{_TMP_MARK}"


class LocalStore(Store):
    """Adapter for :class:`fsspec.implementations.local.LocalFileSystem`.

    Paths are walked from ``root`` (``/`` when ``None``). Files up to ``size_cap`` get a
    content-digest version; larger ones (only ever read in windows) get a ``stat``
    version so that a window does not cost a full scan.
    """

    name: ClassVar[str] = "local"
    capabilities: ClassVar[Capabilities] = Capabilities(
        atomic=True, cross_process=True, digest_versions=True, symlinks=True,
        cheap_listing=True)

    def __init__(self, fs: Any, *, root: str | None = None,
                 size_cap: int = 10 * 1024 * 1024) -> None:
        super().__init__(fs, root=os.path.realpath(root) if root else "/", size_cap=size_cap)
        if not os.path.isdir(self.root or "/"):
            # Said once, here, rather than as a puzzling not_found on every call.
            raise fs_error("not_found", f"the workspace root {root} is not a directory",
                           path=root)

    # -- path walking ---------------------------------------------------------------

    @contextlib.contextmanager
    def _parent_fd(self, path: str, *, create: bool = False) -> Iterator[tuple[int, str]]:
        """Yield ``(fd of the parent directory, file name)``, walked symlink-free."""
        path = os.path.normpath(path)
        root = self.root or "/"
        rel = os.path.relpath(path, root)
        if rel == "." or rel.startswith(".." + os.sep) or rel == "..":
            raise fs_error("outside_root", f"{path} is outside {root}", path=path)
        *dirs, name = rel.split(os.sep)
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in dirs:
                try:
                    nfd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                                  dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o777, dir_fd=fd)
                    nfd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                                  dir_fd=fd)
                os.close(fd)
                fd = nfd
            yield fd, name
        except FsError:
            raise
        except OSError as exc:
            raise _translate(exc, path) from exc
        finally:
            os.close(fd)

    # -- reading ------------------------------------------------------------------

    def _read(self, dfd: int, name: str, path: str, start: int,
              length: int | None) -> Blob | None:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dfd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _translate(exc, path) from exc
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if stat.S_ISDIR(st.st_mode):
                raise fs_error("not_a_file", f"{path} is a directory", path=path)
            if st.st_size <= self.size_cap:
                data = f.read()
                version = FileVersion.of_bytes(data)
                if start == 0:  # read and digested whole anyway: spare a second call
                    return Blob(data=data, version=version, size=len(data))
                lo, hi = clamp_range(len(data), start, length)
                return Blob(data=data[lo:hi], version=version, size=len(data), start=lo)
            # Too big to digest on every window: name the state by inode, size and mtime.
            version = FileVersion(
                kind="stat", value=f"{st.st_ino}-{st.st_size}-{st.st_mtime_ns}")
            lo, hi = clamp_range(st.st_size, start, length)
            f.seek(lo)
            return Blob(data=f.read(hi - lo), version=version, size=st.st_size, start=lo)

    def get(
        self, path: str, *, start: int = 0, length: int | None = None,
        if_version: FileVersion | None = None,
    ) -> Blob:
        with self._parent_fd(path) as (dfd, name):
            blob = self._read(dfd, name, path, start, length)
        if blob is None:
            raise fs_error("not_found", f"{path} does not exist", path=path)
        if if_version is not None and blob.version != if_version:
            raise fs_error("stale", f"{path} changed", path=path)
        return blob

    # -- writing ------------------------------------------------------------------

    def _check(self, dfd: int, name: str, path: str, mode: PutMode) -> os.stat_result | None:
        """Check ``mode`` against the current file; return its stat (None if absent)."""
        if isinstance(mode, Overwrite):
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                return None
            if stat.S_ISDIR(st.st_mode):
                raise fs_error("not_a_file", f"{path} is a directory", path=path)
            return st
        current = self._read(dfd, name, path, 0, 0)
        if isinstance(mode, Create):
            if current is not None:
                raise fs_error("stale", f"{path} was created by someone else", path=path)
            return None
        if current is None:
            raise fs_error("stale", f"{path} was deleted", path=path)
        if current.version != mode.expected:
            raise fs_error("stale", f"{path} changed", path=path)
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)

    def put(self, path: str, data: bytes, mode: PutMode) -> FileVersion:
        with self._parent_fd(path, create=True) as (dfd, name):
            fcntl.flock(dfd, fcntl.LOCK_EX)
            try:
                st = self._check(dfd, name, path, mode)
                _remove_leftovers(dfd, name)
                tmp = f"{temp_prefix(name)}{secrets.token_hex(6)}"
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                             0o666, dir_fd=dfd)
                try:
                    try:
                        if st is not None:
                            os.fchmod(fd, stat.S_IMODE(st.st_mode))
                        view = memoryview(data)
                        while view:
                            view = view[os.write(fd, view):]
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                    os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp, dir_fd=dfd)
                    raise
                os.fsync(dfd)
            except FsError:
                raise
            except OSError as exc:
                raise _translate(exc, path) from exc
            finally:
                fcntl.flock(dfd, fcntl.LOCK_UN)
        if len(data) <= self.size_cap:
            return FileVersion.of_bytes(data)
        return self.get(path, length=0).version

    def delete(self, path: str, mode: Update | Overwrite) -> None:
        with self._parent_fd(path) as (dfd, name):
            fcntl.flock(dfd, fcntl.LOCK_EX)
            try:
                if self._check(dfd, name, path, mode) is None:
                    raise fs_error("not_found", f"{path} does not exist", path=path)
                os.unlink(name, dir_fd=dfd)
            except FsError:
                raise
            except OSError as exc:
                raise _translate(exc, path) from exc
            finally:
                fcntl.flock(dfd, fcntl.LOCK_UN)


def _remove_leftovers(dfd: int, name: str) -> None:
    """Remove temp files of ``name`` left by a crashed writer (we hold the lock)."""
    prefix = temp_prefix(name)
    for entry in os.listdir(dfd):
        if entry.startswith(prefix):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry, dir_fd=dfd)


def _translate(exc: OSError, path: str) -> FsError:
    if exc.errno == errno.ENOENT:
        return fs_error("not_found", f"{path} does not exist", path=path)
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        # O_NOFOLLOW met a symlink (or a file) where the checked path had a directory.
        return fs_error("outside_root", f"{path} crosses a symlink or non-directory",
                        path=path)
    if exc.errno == errno.EISDIR:
        return fs_error("not_a_file", f"{path} is a directory", path=path)
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return fs_error("denied", f"{path}: {exc.strerror}", path=path)
    return fs_error("backend_error", f"{path}: {exc.strerror or exc}", path=path)

