"""Local backend: advisory lock, re-check, temp file, fsync, ``os.replace``.

Atomic across threads and processes on one machine (POSIX ``flock``):

1. open the parent directory, walking down from the root with ``O_NOFOLLOW`` so that
   a symlink swapped in after the policy's check cannot redirect the write;
2. ``flock`` that directory (every toolfs writer in it waits here);
3. write a temp file beside the target, keep the target's mode, ``fsync`` it;
4. re-read the current bytes and check the condition against their digest -- *after*
   the temp file is written, immediately before the swap, so that a program that does
   not take the lock has the smallest window to slip a change in unseen;
5. ``os.replace`` the temp file over the target and ``fsync`` the directory.

A crash at any point leaves the old or the new content, never a torn file. A crash
between 3 and 5 can leave a temp file (``.NAME.toolfs-tmp-*``, or a hashed name for
names too long to extend); it is never listed or read, and the next successful write of
NAME removes it. That write looks for leftovers (a ``listdir``, O(directory)) unless this
store's own last write in that directory, of any name, left it with the mtime and ctime it
still has: creating a temp file changes both, so nothing can have been left since (a
writer creates its temp file only while it holds the directory's lock, never during
another's write). That write remembers the temp files of other names it saw there (left
to their own names' writes), so a write that skips the ``listdir`` still removes its
own. (On a filesystem whose directory timestamps are coarser than the time between two
writes, a temp file created in the same tick as that write is removed by the first write
of NAME after the directory changes again, or by another store's first write.)

Only regular files are read or replaced: a FIFO, socket or device is opened with
``O_NONBLOCK`` and refused (``not_a_file``) before anything is read from it, so no call
blocks on one. A file without write permission is refused (``denied``) rather than
replaced, as ``open(path, "w")`` would refuse it. The new file keeps the target's mode,
and its owner and group where this process may set them (root may; others keep the group
when they belong to it), as ``sed -i`` does. Mode and owner are taken from the target
again at the step-4 check: a ``chmod`` or ``chown`` made during the write is kept, and a
file made read-only meanwhile is refused.

Names of toolfs's temp-file form (``.NAME.toolfs-tmp-*``, never listed) are refused for
writing (``invalid_arguments``), and only names exactly of the form this module makes are
ever removed as leftovers.

One concept in one module (a little over 700 lines): reads and conditional writes share
the confined open, the lock and the digest check above; the directory walk of ``glob``,
``grep`` and ``ls`` is :mod:`toolfs.backends.local_listing`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import itertools
import os
import secrets
import stat
from collections.abc import Callable, Iterable, Iterator
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
    is_at,
)
from toolfs.backends.local_listing import (
    _TMP_MARK,
    LocalListing,
    _translate,
    is_temp_name,
)
from toolfs.errors import FsError, fs_error
from toolfs.versions import DIGEST_KINDS, FileVersion, stat_version

_NAME_MAX = 255
_TMP_RANDOM = 12  # hex characters of randomness after the prefix
_TMP_MASK = (1 << (4 * _TMP_RANDOM)) - 1
_PRUNE_DEPTH = 128
"""Directory levels :meth:`LocalStore.remove_empty_dirs` descends (one fd open per
level); deeper ones are left in place."""
_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
_CLEAN_MEMORY = 4096  # directories a store remembers as swept
_LEFTOVERS_MEMORY = 64  # other names' temp files remembered per directory, at most
_HEX = frozenset("0123456789abcdef")


def _pread(fd: int, length: int, offset: int) -> bytes:
    """``os.pread`` of a regular file opened with ``O_NONBLOCK`` (see
    :meth:`LocalStore._open_regular`): POSIX filesystems ignore the flag for regular
    files; one that answers ``EAGAIN`` anyway gets the fd made blocking and the read
    again."""
    try:
        return os.pread(fd, length, offset)
    except BlockingIOError:
        os.set_blocking(fd, True)
        return os.pread(fd, length, offset)


def _read_to_end(fd: int, expected: int) -> bytes:
    """Everything from the start of ``fd`` to its end (a file may grow after its stat)."""
    parts = [_pread(fd, expected + 1, 0)]
    offset = len(parts[0])
    while len(parts[-1]) > 0 and offset > expected:
        more = _pread(fd, 1 << 20, offset)
        if not more:
            break
        parts.append(more)
        offset += len(more)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _is_normal(path: str) -> bool:
    """Whether ``os.path.normpath`` would leave the absolute ``path`` as it is."""
    return (path.startswith(os.sep) and not path.endswith(os.sep)
            and "//" not in path and "/." not in path)


def _is_leftover(entry: str, prefix: str) -> bool:
    """Whether ``entry`` is exactly a temp file name :func:`_create_temp` makes for the
    name whose :func:`temp_prefix` is ``prefix``: the prefix and 12 lowercase hex
    digits."""
    suffix = entry[len(prefix):]
    return (entry.startswith(prefix) and len(suffix) == _TMP_RANDOM
            and all(c in _HEX for c in suffix))


def temp_prefix(name: str) -> str:
    """Prefix of the temp files that a write of ``name`` may leave after a crash.

    ``.NAME.toolfs-tmp-`` when that still fits in NAME_MAX with the random suffix; for
    longer (legal) names, a fixed-length prefix derived from a digest of the name.
    """
    prefix = f".{name}{_TMP_MARK}"
    # An ASCII name is as many bytes as characters (no encoding needed to know).
    if (len(prefix) if prefix.isascii() else len(os.fsencode(prefix))) + _TMP_RANDOM \
            <= _NAME_MAX:
        return prefix
    digest = hashlib.sha256(os.fsencode(name)).hexdigest()[:24]
    return f"{_TMP_MARK}{digest}-"


def _kind(st: os.stat_result) -> str:
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    return "not a regular file"


class LocalStore(LocalListing, Store):
    """Adapter for :class:`fsspec.implementations.local.LocalFileSystem`.

    Paths are walked from ``root`` (``/`` when ``None``). Files up to ``size_cap`` get a
    content-digest version; larger ones (only ever read in windows) get a ``stat``
    version so that a window does not cost a full scan.
    """

    name: ClassVar[str] = "local"
    capabilities: ClassVar[Capabilities] = Capabilities(
        atomic=True, cross_process=True, digest_versions=True, symlinks=True,
        cheap_listing=True, removes_empty_dirs=True)
    checks_root: ClassVar[bool] = True

    def __init__(self, fs: Any, *, root: str | None = None,
                 size_cap: int = 10 * 1024 * 1024) -> None:
        super().__init__(fs, root=os.path.realpath(root) if root else "/", size_cap=size_cap)
        if not os.path.isdir(self.root or "/"):
            # Said once, here, rather than as a puzzling not_found on every call.
            raise fs_error("not_found", f"the workspace root {root} is not a directory",
                           path=root)
        self.folds_case = _folds_case(self.root or "/")
        self._root_dir = self.root or "/"
        st = os.stat(self._root_dir)
        self._root_id = (st.st_dev, st.st_ino)
        self._prefix = self._root_dir if self._root_dir.endswith(os.sep) else \
            self._root_dir + os.sep
        # (dev, inode) of a directory -> its (mtime_ns, ctime_ns) just after this store's
        # last write there, and the temp files of other names it then held (leftovers
        # that only their own names' writes remove; almost always none). Creating a temp
        # file changes the directory's mtime and ctime, so a later write that finds the
        # same stamps knows nothing was created there since (a crashed writer's temp
        # file included): it removes its own name's remembered leftovers, if any, and
        # skips the `listdir`, whichever file of the directory it writes. Bounded:
        # dropped whole when full (the next writes sweep again).
        self._clean: dict[tuple[int, int], tuple[int, int, tuple[str, ...]]] = {}

    # -- path walking ---------------------------------------------------------------

    def _walk(self, path: str, *, create: bool = False) -> tuple[int, str]:
        """``(fd of the parent directory, file name)``, walked symlink-free from the root
        (which must still be the directory resolved at construction, see
        :meth:`_check_root`); the caller closes the fd. Errors leave as
        :class:`FsError`."""
        fd, name, _ = self._walk_to(path, create=create, defer_root_check=False)
        return fd, name

    def _walk_to(self, path: str, *, create: bool,
                 defer_root_check: bool) -> tuple[int, str, bool]:
        """:meth:`_walk`; with ``defer_root_check``, a file in the root itself comes back
        with its root not yet checked (the third value says so): the caller checks it
        with a stat of the fd it makes anyway (``put``: under the lock)."""
        # The policy hands over normalised paths below the root: no normpath then
        # (_is_normal, written out).
        if not path.startswith(os.sep) or path.endswith(os.sep) or "//" in path \
                or "/." in path:
            path = os.path.normpath(path)
        root, prefix = self._root_dir, self._prefix
        # Slicing is relpath for those (relpath, for anything else, also answers
        # "outside").
        rel = path[len(prefix):] if path.startswith(prefix) else os.path.relpath(path, root)
        if rel in ("", ".") or rel.startswith(".." + os.sep) or rel == "..":
            raise fs_error("outside_root", f"{path} is outside {root}", path=path)
        try:
            fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise _translate(exc, path) from exc
        at_root = os.sep not in rel  # a file in the root itself: nothing to walk
        if at_root and defer_root_check:
            return fd, rel, True
        try:
            self._check_root(os.fstat(fd), path)
        except BaseException:
            os.close(fd)
            raise
        if at_root:
            return fd, rel, False
        *dirs, name = rel.split(os.sep)
        try:
            for i, part in enumerate(dirs):
                try:
                    nfd = _open_dir(part, fd, path, root, dirs[: i + 1])
                except FileNotFoundError:
                    if not create:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o777, dir_fd=fd)
                    nfd = _open_dir(part, fd, path, root, dirs[: i + 1])
                os.close(fd)
                fd = nfd
        except BaseException as exc:
            os.close(fd)
            if isinstance(exc, OSError) and not isinstance(exc, FsError):
                raise _translate(exc, path) from exc
            raise
        return fd, name, False

    def _check_root(self, st: os.stat_result, path: str) -> None:
        """Refuse (``outside_root``) when the root's path, opened just now (``st``), no
        longer leads to the directory resolved at construction because a parent was
        swapped for a symlink: the walk would start somewhere else. A root re-created
        in place (its path still free of links) is walked as it is now. This is the
        check the policy's confinement otherwise makes with a ``stat`` of the root
        before each call (``Store.checks_root``)."""
        if (st.st_dev, st.st_ino) == self._root_id:
            return
        if os.path.realpath(self._root_dir) != self._root_dir:
            raise fs_error("outside_root",
                           f"{path} resolves through a symlink to outside the root",
                           path=path)

    @contextlib.contextmanager
    def _parent_fd(self, path: str, *, create: bool = False) -> Iterator[tuple[int, str]]:
        """Yield ``(fd of the parent directory, file name)``, walked symlink-free."""
        fd, name = self._walk(path, create=create)
        try:
            yield fd, name
        except FsError:
            raise
        except OSError as exc:
            raise _translate(exc, path) from exc
        finally:
            os.close(fd)

    # -- removing empty directories ------------------------------------------------

    def remove_empty_dirs(self, path: str, keep: Callable[[str], bool], *,
                          limit: int = 10_000) -> list[str]:
        """:meth:`Store.remove_empty_dirs` by file descriptors: the parent of ``path`` is
        walked from the (checked) root with ``O_NOFOLLOW``, each directory is opened
        relative to its parent with ``O_NOFOLLOW`` and listed through that fd, and
        removed with ``rmdir`` relative to its parent's fd, right after an ``lstat``
        there shows it is still the directory walked. A symlink is never walked through
        (a directory swapped for one meanwhile is left alone, and ``rmdir`` never
        follows one), so nothing outside the root is touched."""
        if keep(path):
            return []
        try:
            parent, name = self._walk(path)  # outside_root for the root itself
        except FsError:
            return []
        removed: list[str] = []
        try:
            self._prune(parent, name, path, keep, removed, [limit], 0)
        finally:
            os.close(parent)
        return removed

    def _prune(self, parent: int, name: str, path: str, keep: Callable[[str], bool],
               removed: list[str], budget: list[int], depth: int) -> None:
        """Remove the empty directories below ``name`` (in the directory ``parent``, an
        fd), then ``name`` itself if it is empty by then; ``path`` is its full path, for
        ``keep`` and the answer. ``budget``: directories still to look at (shared)."""
        if budget[0] <= 0 or depth > _PRUNE_DEPTH:
            return
        budget[0] -= 1
        try:
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
        except OSError:
            return  # gone, a file, or a symlink: left alone
        try:
            walked = os.fstat(fd)
            try:
                with os.scandir(fd) as it:
                    subdirs = [e.name for e in it if e.is_dir(follow_symlinks=False)]
            except OSError:
                return  # unreadable: it stays, and so does everything below it
            for sub in subdirs:
                child = f"{path.rstrip(os.sep)}{os.sep}{sub}"
                if not keep(child):  # a kept directory is not even listed
                    self._prune(fd, sub, child, keep, removed, budget, depth + 1)
        finally:
            os.close(fd)
        try:
            now = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except OSError:
            return
        if not stat.S_ISDIR(now.st_mode) or \
                (now.st_dev, now.st_ino) != (walked.st_dev, walked.st_ino):
            return  # swapped meanwhile (for a link, or another directory): not ours
        try:
            os.rmdir(name, dir_fd=parent)
        except OSError:
            return  # not empty (a file written meanwhile, a kept directory below)
        removed.append(path)

    # -- reading ------------------------------------------------------------------

    def _read(self, dfd: int, name: str, path: str, start: int,
              length: int | None, like: FileVersion | None = None, *,
              digest: bool = True) -> Blob | None:
        """The file's bytes and version (``None`` if absent); a digest version in the
        algorithm ``like`` names, when given (see :meth:`FileVersion.of_bytes`).
        ``digest=False`` names the state by stat alone (inode, size, mtime), for reads
        that record no observation."""
        opened = self._open_regular(dfd, name, path)
        if opened is None:
            return None
        fd, st = opened
        try:
            if digest and st.st_size <= self.size_cap:
                data = _read_to_end(fd, st.st_size)
                version = FileVersion.of_bytes(data, like=like)
                if start == 0:  # read and digested whole anyway: spare a second call
                    return Blob(data=data, version=version, size=len(data))
                lo, hi = clamp_range(len(data), start, length)
                return Blob(data=data[lo:hi], version=version, size=len(data), start=lo)
            # Too big to digest on every window (or a listing read that keeps no
            # version): name the state by inode, size and mtime.
            version = _stat_version(st)
            lo, hi = clamp_range(st.st_size, start, length)
            return Blob(data=_pread(fd, hi - lo, lo), version=version, size=st.st_size,
                        start=lo)
        finally:
            os.close(fd)

    def _read_listed(self, dfd: int, name: str, path: str,
                     length: int | None) -> Blob | None:
        """``_read(dfd, name, path, 0, length, digest=False)``, a listing's read, with
        less work per file (a grep reads thousands): the same open, checks and read,
        and the :class:`Blob` made without its frozen ``__setattr__`` per field."""
        opened = self._open_regular(dfd, name, path)
        if opened is None:
            return None
        fd, st = opened
        try:
            size = st.st_size
            data = _pread(fd, size if length is None or length > size else max(length, 0), 0)
        finally:
            os.close(fd)
        blob: Blob = object.__new__(Blob)
        blob.__dict__.update(data=data, version=_stat_version(st), size=size, start=0)
        return blob

    def _open_regular(self, dfd: int, name: str, path: str
                      ) -> tuple[int, os.stat_result] | None:
        """An fd open for reading the regular file ``name`` (read it with
        :func:`_pread`), with its stat; ``None`` if absent. The caller closes the fd."""
        try:
            # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # a socket (or a device without a driver)
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                raise fs_error("not_a_file", f"{path} is {_kind(st)}", path=path) from exc
            raise _translate(exc, path) from exc
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise fs_error("not_a_file", f"{path} is {_kind(st)}", path=path)
        # The fd stays O_NONBLOCK: the flag means nothing to a regular file's reads, and
        # clearing it would cost one more system call on every read and edit.
        return fd, st

    def get(
        self, path: str, *, start: int = 0, length: int | None = None,
        if_version: FileVersion | None = None,
    ) -> Blob:
        with self._parent_fd(path) as (dfd, name):
            blob = self._read(dfd, name, path, start, length, like=if_version)
        if blob is None:
            raise fs_error("not_found", f"{path} does not exist", path=path)
        if if_version is not None and blob.version != if_version:
            raise fs_error("stale", f"{path} changed", path=path)
        return blob

    def get_many(self, paths: Iterable[str], *, max_in_flight: int = 16,
                 length: int | None = None) -> Iterator[tuple[str, Blob | FsError]]:
        """``get`` for each path, in input order, walking each parent directory once
        (listed files come grouped by directory): the same symlink-free walk and checks
        as :meth:`get`, without repeating them per file. The blobs carry stat versions,
        not digests: these reads come from a listing and record no observation (grep
        searches the bytes and forgets them), so hashing them would be wasted work."""
        parent: tuple[str, contextlib.ExitStack, int] | None = None
        try:
            for path in paths:
                # Listed paths come normalised: split them without normalising again.
                norm = path if _is_normal(path) else os.path.normpath(path)
                directory, _, name = norm.rpartition(os.sep)
                try:
                    if parent is None or parent[0] != directory:
                        if parent is not None:
                            parent[1].close()
                            parent = None
                        stack = contextlib.ExitStack()
                        dfd, _ = stack.enter_context(self._parent_fd(path))
                        parent = (directory, stack, dfd)
                    blob = self._read_listed(parent[2], name, path, length)
                    if blob is None:
                        raise fs_error("not_found", f"{path} does not exist", path=path)
                except FsError as err:
                    yield path, err
                    continue
                yield path, blob
        finally:
            if parent is not None:
                parent[1].close()

    # -- writing ------------------------------------------------------------------

    def _stat(self, dfd: int, name: str, path: str) -> os.stat_result | None:
        """The target's own stat (never following a symlink); ``None`` if absent.
        Refuses anything but a regular file, and a file without write permission."""
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(st.st_mode):
            raise fs_error("not_a_file", f"{path} is {_kind(st)}", path=path)
        self._refuse_unwritable(dfd, name, path, st)
        return st

    @staticmethod
    def _refuse_unwritable(dfd: int, name: str, path: str, st: os.stat_result) -> None:
        """``denied`` unless the file (``st``: its stat) may be written."""
        # `st_mode & 0o222` too: root passes access(W_OK) for any mode, yet a 0444 file
        # says "do not change me" and replacing it would silently drop that.
        if not st.st_mode & 0o222 or not os.access(name, os.W_OK, dir_fd=dfd,
                                                    follow_symlinks=False):
            raise fs_error("denied", f"{path} is read-only (mode "
                           f"{stat.filemode(st.st_mode)})", path=path)

    def _check(self, dfd: int, name: str, path: str,
               mode: PutMode) -> os.stat_result | None:
        """Raise ``stale`` unless ``mode`` holds for the file as it is now; the stat of
        the file checked (``None`` when none was: absent, or ``Overwrite``)."""
        if isinstance(mode, Overwrite):
            return None
        opened = self._open_regular(dfd, name, path)
        if isinstance(mode, Create):
            if opened is not None:
                os.close(opened[0])
                raise fs_error("stale", f"{path} was created by someone else", path=path)
            return None
        if opened is None:
            raise fs_error("stale", f"{path} was deleted", path=path)
        fd, st = opened
        try:
            if st.st_size > self.size_cap:  # a stat version (see _read)
                at = _stat_version(st) == mode.expected
            else:
                # The bytes only: is_at compares them with the caller's copy when it has
                # one, else hashes them with the algorithm the expected version names.
                at = is_at(_read_to_end(fd, st.st_size), mode)
        finally:
            os.close(fd)
        if not at:
            raise fs_error("stale", f"{path} changed", path=path)
        return st

    def put(self, path: str, data: bytes, mode: PutMode) -> FileVersion:
        if _TMP_MARK in path and any(is_temp_name(part) for part in path.split(os.sep)):
            # A file or directory of that form would be hidden from listings, and one
            # named like a leftover would be taken for one: refused before any is made.
            raise fs_error("invalid_arguments", f"{path}: names of the form "
                           f".NAME{_TMP_MARK}* are reserved for toolfs's temp files on "
                           "local disk", path=path)
        dfd, name, at_unchecked_root = self._walk_to(path, create=True,
                                                     defer_root_check=True)
        try:
            try:
                fcntl.flock(dfd, fcntl.LOCK_EX)
            except OSError as exc:  # ENOLCK on some network filesystems
                raise _translate(exc, path) from exc
            try:
                self._put_locked(dfd, name, path, data, mode, at_unchecked_root)
            finally:
                fcntl.flock(dfd, fcntl.LOCK_UN)
        finally:
            os.close(dfd)
        if len(data) <= self.size_cap:
            return FileVersion.of_bytes(data)
        return self.get(path, length=0).version

    def _put_locked(self, dfd: int, name: str, path: str, data: bytes,
                    mode: PutMode, at_unchecked_root: bool = False) -> None:
        """Steps 3-5 of the module docstring, with the directory lock held.

        One pass with the checks of :meth:`_stat` and :meth:`_check` written out: this
        is the critical section of every local write and edit, and each call and
        object here was measurable on a 1 KB write."""
        try:
            dir_st = os.fstat(dfd)
            if at_unchecked_root:  # dfd is the root itself: its stat serves the check
                self._check_root(dir_st, path)
            st = self._stat(dfd, name, path)
            if st is None:
                if type(mode) is Update:
                    raise fs_error("stale", f"{path} was deleted", path=path)
            elif type(mode) is Create:
                raise fs_error("stale", f"{path} was created by someone else",
                               path=path)
            key = (dir_st.st_dev, dir_st.st_ino)
            swept = self._clean.pop(key, None)
            if swept is None or swept[0] != dir_st.st_mtime_ns \
                    or swept[1] != dir_st.st_ctime_ns:
                others = _remove_leftovers(dfd, name, os.listdir(dfd))
            elif swept[2]:  # the directory as this store left it, with others' leftovers
                others = _remove_leftovers(dfd, name, swept[2])
            else:
                others = ()
            tmp, fd = _create_temp(dfd, name)
            try:
                try:
                    if st is not None:
                        _keep_owner_and_mode(fd, st, dir_st)
                    written = os.write(fd, data)
                    if written < len(data):
                        view = memoryview(data)[written:]
                        while view:
                            view = view[os.write(fd, view):]
                    os.fsync(fd)
                    cst: os.stat_result | None = None
                    # The last look before the swap (see the module docstring, step 4).
                    if type(mode) is Update and mode.known is not None \
                            and mode.expected.kind in DIGEST_KINDS:
                        # The caller holds the expected bytes: compare the file with them
                        # (what _check does through is_at), without the calls around it.
                        opened = self._open_regular(dfd, name, path)
                        if opened is None:
                            raise fs_error("stale", f"{path} was deleted", path=path)
                        cfd, cst = opened
                        try:
                            # Over the cap the file has a stat version, never the digest
                            # expected (as in _check); else its bytes must be the known
                            # ones.
                            at = cst.st_size <= self.size_cap and \
                                _read_to_end(cfd, cst.st_size) == mode.known
                        finally:
                            os.close(cfd)
                        if not at:
                            raise fs_error("stale", f"{path} changed", path=path)
                    elif type(mode) is not Overwrite:
                        cst = self._check(dfd, name, path, mode)
                    elif st is not None:
                        cst = self._stat(dfd, name, path)
                    if st is not None and cst is not None and (
                            cst.st_mode != st.st_mode or cst.st_uid != st.st_uid
                            or cst.st_gid != st.st_gid):
                        # Changed by chmod/chown during the write: the new file takes
                        # what the target has now, or is refused if now read-only.
                        self._refuse_unwritable(dfd, name, path, cst)
                        _keep_owner_and_mode(fd, cst, dir_st)
                finally:
                    os.close(fd)
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dfd)
                raise
            os.fsync(dfd)
            # No temp file of `name` is left in the directory as it is now: until the
            # directory changes again (any entry created, removed or renamed), the next
            # write here need not look for leftovers (see self._clean).
            dir_st = os.fstat(dfd)
            if len(self._clean) >= _CLEAN_MEMORY:
                self._clean.clear()
            if len(others) <= _LEFTOVERS_MEMORY:  # else the next write lists them again
                self._clean[key] = (dir_st.st_mtime_ns, dir_st.st_ctime_ns, others)
        except FsError:
            raise
        except OSError as exc:
            raise _translate(exc, path) from exc

    def delete(self, path: str, mode: Update | Overwrite) -> None:
        with self._parent_fd(path) as (dfd, name):
            fcntl.flock(dfd, fcntl.LOCK_EX)
            try:
                if self._stat(dfd, name, path) is None:
                    if isinstance(mode, Update):
                        raise fs_error("stale", f"{path} was deleted", path=path)
                    raise fs_error("not_found", f"{path} does not exist", path=path)
                self._check(dfd, name, path, mode)
                os.unlink(name, dir_fd=dfd)
            except FsError:
                raise
            except OSError as exc:
                raise _translate(exc, path) from exc
            finally:
                fcntl.flock(dfd, fcntl.LOCK_UN)


def _stat_version(st: os.stat_result) -> FileVersion:
    """The version of a file over the whole-file cap: inode, size and mtime."""
    return stat_version(st.st_ino, st.st_size, st.st_mtime_ns)


def _open_dir(part: str, dfd: int, path: str, root: str, dirs: list[str]) -> int:
    """Open one directory below ``dfd`` (``root/dirs...``, ``part`` the last of
    ``dirs``) without following a symlink; a file or a symlink where a directory should
    be is ``not_a_file`` or ``outside_root``."""
    try:
        return os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dfd)
    except OSError as exc:
        if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
        walked = os.path.join(root, *dirs)
        try:
            st = os.stat(part, dir_fd=dfd, follow_symlinks=False)
        except OSError:
            raise exc from None
        if stat.S_ISLNK(st.st_mode):
            raise fs_error("outside_root", f"{path} crosses a symlink that appeared after "
                           "the path was checked", path=path) from exc
        raise fs_error("not_a_file", f"{walked} is a file, not a directory, in {path}",
                       path=path, details={"file": walked}) from exc


def _folds_case(root: str) -> bool:
    """Whether the volume holding ``root`` is case-insensitive (macOS and Windows by
    default): the same directory answers to a case-swapped spelling of its name."""
    path = root
    while path not in ("", os.sep):
        head, tail = os.path.split(path)
        swapped = tail.swapcase()
        if swapped != tail:
            try:
                a, b = os.stat(path), os.stat(os.path.join(head, swapped))
            except OSError:
                return False
            return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
        path = head
    return False


def _keep_owner_and_mode(fd: int, st: os.stat_result, dir_st: os.stat_result) -> None:
    """Give the new file ``fd`` the mode of the target (``st``), and its owner and group
    where this process may: root may set both, an owner may set a group it belongs to
    (as ``sed -i`` does, failing quietly otherwise). A new file belongs to the effective
    uid, and to the directory's group when it is set-group-ID, else the effective gid."""
    gid = dir_st.st_gid if dir_st.st_mode & stat.S_ISGID else os.getegid()
    if st.st_uid != os.geteuid() or st.st_gid != gid:
        try:
            os.fchown(fd, st.st_uid, st.st_gid)
        except PermissionError:
            with contextlib.suppress(PermissionError):
                os.fchown(fd, -1, st.st_gid)
    # After fchown, which may clear the set-user/group-ID bits.
    os.fchmod(fd, stat.S_IMODE(st.st_mode))


def _create_temp(dfd: int, name: str) -> tuple[str, int]:
    """A new temp file for ``name`` in ``dfd`` (``O_EXCL``, never through a symlink):
    its name and an fd open for writing."""
    prefix = temp_prefix(name)
    tmp = f"{prefix}{next(_temp_serials) & _TMP_MASK:0{_TMP_RANDOM}x}"
    try:
        return tmp, os.open(tmp, _TMP_FLAGS, 0o666, dir_fd=dfd)
    except FileExistsError:
        # Taken (a leftover with this name, or another program's file): a fresh random
        # name, as every name was before the serials.
        tmp = f"{prefix}{secrets.token_hex(_TMP_RANDOM // 2)}"
        return tmp, os.open(tmp, _TMP_FLAGS, 0o666, dir_fd=dfd)


def _reseed_temp_serials() -> None:
    """A random start for this process's temp-file serials (a forked child gets its own,
    so parent and child do not step through the same names)."""
    global _temp_serials
    _temp_serials = itertools.count(int.from_bytes(os.urandom(_TMP_RANDOM // 2), "big"))


_temp_serials: Iterator[int]
_reseed_temp_serials()
os.register_at_fork(after_in_child=_reseed_temp_serials)


def _remove_leftovers(dfd: int, name: str, entries: Iterable[str]) -> tuple[str, ...]:
    """Remove, of ``entries`` (names in the directory ``dfd``), the temp files of
    ``name`` left by a crashed writer (we hold the lock); the temp files of other names
    among them, which are left to those names' own writes."""
    prefix = temp_prefix(name)
    others = []
    for entry in entries:
        if _is_leftover(entry, prefix):
            # Gone meanwhile, or not a file at all (a directory made by someone else):
            # either way nothing of ours to remove, and no reason to fail the write.
            with contextlib.suppress(FileNotFoundError, IsADirectoryError,
                                     PermissionError):
                os.unlink(entry, dir_fd=dfd)
        elif is_temp_name(entry):
            others.append(entry)
    return tuple(others)
