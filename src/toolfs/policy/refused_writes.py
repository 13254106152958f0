"""A refused write keeps its file: no library removes it while handling the refusal.

A library that writes a file and fails often cleans up after itself by removing the
path it was writing, with the operating system's calls and not through the filesystem
it wrote with: ``pyarrow.parquet.write_table`` (and so ``DataFrame.to_parquet`` and
Polars' ``write_parquet(use_pyarrow=True)``) calls ``os.remove(path)`` whenever its
write raises, whatever filesystem it was given. When the failure is the guard's
refusal (``stale``: another writer changed the file; ``not_observed``; ``denied``...),
the path is the very file the guard kept -- on local disk the file itself, elsewhere a
local path of the same name -- and ``os.remove`` would delete it. Nothing the guard's
filesystem does can stop a call that never reaches it, so the refusal carries the
paths it kept (:func:`keep`), and a Python audit hook (:func:`sys.addaudithook`,
installed by the first refusal) refuses, *while that refusal is being handled* in the
same thread, every local call that would remove, truncate, replace or rename one of
them: ``os.remove``/``os.unlink``, ``os.truncate``, ``open`` for writing (and
``os.open`` with a write flag), ``os.rename``/``os.replace`` and ``shutil.rmtree`` of a
directory that holds one. The refusal is an :class:`~toolfs.errors.Denied` (a
``PermissionError``, so an ``OSError``): pyarrow, which ignores ``os.error`` there,
re-raises the guard's refusal and the file stays whole.

"While it is being handled" is what :func:`sys.exc_info` says in the calling thread:
inside the ``except`` or ``finally`` block that caught the refusal (or an error raised
from it). Once the refusal has been handled, the paths are free again: a person who
means to delete the file afterwards can. The hook looks at five audit events and returns
at once for every other one, or when no exception is being handled.

The hook is installed only by a refusal whose path names a local file (local disk, in
practice), and stays for the life of the process (audit hooks cannot be removed); from
then on every audited event in the process pays one Python call. Measured by
``benchmarks/bench_refused_writes.py``: an ``id()`` call, the most frequent audited
event, costs about 0.7 microseconds more (``copy.deepcopy``, which calls it per object,
is several times slower); file I/O and pandas reading and writing are within noise.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable
from typing import Any

from toolfs.errors import fs_error

__all__ = ["keep", "kept_paths"]

_ATTR = "_toolfs_kept_paths"
_EVENTS = frozenset({"os.remove", "os.truncate", "open", "os.rename", "shutil.rmtree"})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_TRUNC | os.O_CREAT
_CHAIN = 8
"""How far along ``__context__``/``__cause__`` a kept refusal is looked for."""

_installed = False
_install_lock = threading.Lock()
_busy = threading.local()  # the hook's own calls (os.getcwd...) are not looked at


def _normal(path: Any) -> str | None:
    """The absolute, normalised local form of an audited path argument (``None``: not a
    path, such as a file descriptor)."""
    if isinstance(path, int) or path is None:
        return None
    try:
        text = os.fsdecode(os.fspath(path))
    except TypeError:
        return None
    return os.path.abspath(text)


def keep(err: BaseException, paths: Iterable[str]) -> BaseException:
    """Mark ``err``, a refused write, as keeping those of ``paths`` (the names the
    writer may know the file by: the path it gave, the wrapped filesystem's, the
    display path) that are local files or directories now, and make sure the audit hook
    is installed when there is one. Returns ``err``."""
    # Only names that are local files now can be lost to the operating system's calls:
    # a refusal on an object store (whose keys are no local files) installs nothing.
    normal = {p for p in map(_normal, paths) if p and os.path.lexists(p)}
    if normal:
        previous: frozenset[str] = getattr(err, _ATTR, frozenset())
        try:
            setattr(err, _ATTR, frozenset(previous) | normal)
        except AttributeError:  # an exception class with __slots__: nothing to keep on
            return err
        _install()
    return err


def kept_paths(err: BaseException | None) -> frozenset[str]:
    """The paths ``err`` or an error along its chain keeps (empty: none)."""
    found: frozenset[str] = frozenset()
    seen = 0
    while err is not None and seen < _CHAIN:
        found |= getattr(err, _ATTR, frozenset())
        err = err.__cause__ or err.__context__
        seen += 1
    return found


def _install() -> None:
    global _installed
    if _installed:
        return
    with _install_lock:
        if not _installed:
            sys.addaudithook(_hook)
            _installed = True


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event not in _EVENTS:
        return
    handled = sys.exc_info()[1]
    if handled is None or getattr(_busy, "on", False):
        return
    _busy.on = True
    try:
        kept = kept_paths(handled)
        if kept:
            _check(event, args, kept)
    finally:
        _busy.on = False


def _check(event: str, args: tuple[Any, ...], kept: frozenset[str]) -> None:
    if event == "open":
        path, mode, flags = (*args, None, None, None)[:3]
        writes = any(c in mode for c in "wax+") if isinstance(mode, str) else \
            isinstance(flags, int) and bool(flags & _WRITE_FLAGS)
        names = [path] if writes else []
    elif event == "os.rename":
        names = list(args[:2])
    else:
        names = [args[0]] if args else []
    for name in names:
        normal = _normal(name)
        if normal is None:
            continue
        hit = normal in kept or (event == "shutil.rmtree" and any(
            k.startswith(normal.rstrip(os.sep) + os.sep) for k in kept))
        if hit:
            raise fs_error(
                "denied", f"{normal} is kept: toolfs refused a write to it and nothing "
                "was written, so removing, truncating or replacing it now (as a library "
                "cleaning up after its failed write does) would lose the file it kept",
                path=normal, details={"event": event, "kept": True})
