"""The conditional store of a fork: the merged view of :mod:`toolfs.undo.overlay`.

Reads fall through to the base store for the paths the fork has not changed, come from
the upper for the fork's own, and find nothing behind a whiteout; listings merge both.
A change of a file the fork has not changed yet is checked against the base version the
change was made from (one request, which also fetches the pre-image when the caller does
not hold it), then stored in the upper with its record; later changes are conditional
puts on the upper. Changes to one path take turns (:meth:`OverlayState.turn`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any, ClassVar

from toolfs.backends import (
    Blob,
    Capabilities,
    Create,
    Entry,
    Overwrite,
    PutMode,
    Store,
    Update,
)
from toolfs.errors import FsError, fs_error
from toolfs.policy.recorder import current_move, current_tool
from toolfs.undo.overlay import OverlayState, Record, parents
from toolfs.versions import FileVersion


def _tool(default: str) -> str:
    """The call making the running change (the journal's :func:`tool_scope`)."""
    return current_tool() or default


def _move() -> tuple[str, str] | None:
    """``(from, to)`` when the running change is half of a move."""
    move = current_move()
    return None if move is None else (move[1], move[2])


def _in_base_terms(err: FsError, key: str, path: str) -> FsError:
    """An upper store's refusal, naming the base path instead of the upper key."""
    err.message = err.message.replace(key, path)
    err.args = (err.message,)
    err.path = path
    return err


class OverlayStore(Store):
    """The conditional store of a fork: the merged view (see the module docstring)."""

    name: ClassVar[str] = "overlay"
    capabilities: ClassVar[Capabilities] = Capabilities(
        atomic=True, cross_process=False, digest_versions=False)

    def __init__(self, state: OverlayState, fs: Any) -> None:
        base = state.base_store
        super().__init__(fs, root=base.root, size_cap=base.size_cap)
        self.state = state
        self.base = base
        # What the policy reads of a store's capabilities follows the base: symlinks
        # are resolved on the base's disk as the base resolves them, and the cheap
        # "did you mean" listing is offered where the base offers it.
        self.__dict__["capabilities"] = replace(
            base.capabilities, atomic=True, cross_process=False, digest_versions=False,
            removes_empty_dirs=False)
        self.folds_case = base.folds_case

    # -- paths ---------------------------------------------------------------------

    def _rel(self, path: str) -> str | None:
        return self.state.roots.rel(path)

    def _changeable(self, path: str) -> str:
        rel = self._rel(path)
        if not rel:
            raise fs_error("outside_root", f"{path} is not a file inside the fork's root",
                           path=path)
        self.base.check_path(path)
        return rel

    def check_root(self) -> None:
        self.base.check_root()

    def check_path(self, path: str) -> None:
        self.base.check_path(path)

    def is_root(self, path: str) -> bool:
        return self.base.is_root(path)

    # -- reads ---------------------------------------------------------------------

    def get(self, path: str, *, start: int = 0, length: int | None = None,
            if_version: FileVersion | None = None) -> Blob:
        self.state.check_open()
        rel = self._rel(path)
        for _ in range(2):
            rec = self.state.record(rel) if rel else None
            if rec is None:
                if rel and (parent := self.state.written_parent(rel)) is not None:
                    raise fs_error("not_a_file", f"{self._rel_path(parent)} is a file, not "
                                   f"a directory, in {path}", path=path,
                                   details={"file": self._rel_path(parent)})
                return self.base.get(path, start=start, length=length,
                                     if_version=if_version)
            if rec.state == "deleted":
                raise fs_error("not_found", f"{path} does not exist", path=path)
            key = self.state.file_key(rec.rel)
            try:
                return self.state.upper.get(key, start=start, length=length,
                                            if_version=if_version)
            except FsError as err:
                if err.code == "not_found" and self.state.record(rel or "") != rec:
                    continue  # committed or changed meanwhile: look again
                raise _in_base_terms(err, key, path) from err.__cause__
        return self.base.get(path, start=start, length=length, if_version=if_version)

    def _rel_path(self, rel: str) -> str:
        return self.state.roots.join(rel)

    def _falls_through(self, path: str) -> bool:
        rel = self._rel(path)
        return not rel or (self.state.record(rel) is None
                           and self.state.written_parent(rel) is None)

    def get_many(self, paths: Iterable[str], *, max_in_flight: int = 16,
                 length: int | None = None) -> Iterator[tuple[str, Blob | FsError]]:
        """The base's ``get_many`` for the files that fall through (its requests in
        flight together), the upper's bytes for the fork's own; in input order."""
        self.state.check_open()
        window = max(1, max_in_flight)
        source = iter(paths)
        while True:
            chunk = list(itertools.islice(source, window))
            if not chunk:
                return
            through = [p for p in chunk if self._falls_through(p)]
            fetched: dict[str, list[Blob | FsError]] = {}
            if through:
                for p, outcome in self.base.get_many(through, max_in_flight=max_in_flight,
                                                     length=length):
                    fetched.setdefault(p, []).append(outcome)
            for p in chunk:
                held = fetched.get(p)
                if held:
                    yield p, held.pop(0)
                    continue
                try:
                    yield p, self.get(p, length=length)
                except FsError as err:
                    yield p, err

    def list_files(self, prefix: str, *, sizes: bool = True) -> Iterator[Entry]:
        self.state.check_open()
        rel = self._rel(prefix)
        if rel is None:
            yield from self.base.list_files(prefix, sizes=sizes)
            return
        records = {r.rel: r for r in self.state.under(rel)}
        for entry in self.base.list_files(prefix, sizes=sizes):
            own = self._rel(entry.path)
            if own is not None and (own in records or (
                    records and self.state.written_parent(own) is not None)):
                continue  # the fork's record decides (written: listed below)
            yield entry
        for r in records.values():
            if r.state == "written":
                yield Entry(path=self._rel_path(r.rel), kind="file", size=r.size,
                            mtime=r.mtime, version=r.version)

    def list_dir(self, path: str) -> Iterator[Entry]:
        self.state.check_open()
        rel = self._rel(path)
        if rel is None:
            yield from self.base.list_dir(path)
            return
        rec = self.state.record(rel) if rel else None
        records = self.state.under(rel)
        written = [r for r in records if r.state == "written"]
        if rec is not None and rec.state == "written":
            raise fs_error("not_a_file", f"{path} is a file, not a directory", path=path)
        if rec is not None and not written:
            raise fs_error("not_found", f"{path} does not exist", path=path)
        changed = {r.rel for r in records}
        deleted_dirs = {p for r in records if r.state == "deleted" for p in parents(r.rel)}
        shown: set[str] = set()
        missing = False
        try:
            for entry in self.base.list_dir(path):
                own = self._rel(entry.path.rstrip("/"))
                if own is None:
                    yield entry
                    continue
                if entry.kind == "file":
                    if own in changed:
                        continue
                elif own in deleted_dirs and not self._dir_holds(entry.path, own):
                    continue  # every file the base holds there is deleted in the fork
                shown.add(own)
                yield entry
        except FsError as err:
            if err.code == "not_found" or (err.code == "not_a_file" and rec is not None):
                missing = True
            else:
                raise
        head = f"{rel}/" if rel else ""
        for r in written:
            child = r.rel[len(head):].split("/", 1)
            name = head + child[0]
            if name in shown:
                continue
            shown.add(name)
            if len(child) == 1:
                yield Entry(path=self._rel_path(name), kind="file", size=r.size,
                            mtime=r.mtime, version=r.version)
            else:
                yield Entry(path=self._rel_path(name), kind="dir")
        if missing and not shown and not self.base.is_root(path):
            raise fs_error("not_found", f"{path} does not exist", path=path)

    def _dir_holds(self, backend_dir: str, rel: str) -> bool:
        """Whether the directory ``rel`` holds a file in the fork's view (the base may
        keep a directory whose every file the fork deleted: memory and local disk keep
        empty directories, and so does the fork there)."""
        if self.base.capabilities.removes_empty_dirs:
            return True
        if self.state.written_under(rel):
            return True
        changed = {r.rel for r in self.state.under(rel)}
        return any(self._rel(e.path) not in changed
                   for e in self.base.list_files(backend_dir, sizes=False))

    # -- changes -------------------------------------------------------------------

    def put(self, path: str, data: bytes, mode: PutMode) -> FileVersion:
        state = self.state
        rel = self._changeable(path)
        with state.changing(), state.turn(rel):
            rec = state.record(rel)
            key = state.file_key(rel)
            now = time.time()
            if rec is not None and rec.state == "written":
                try:
                    version = state.store(key, data, mode)
                except FsError as err:
                    raise _in_base_terms(err, key, path) from err.__cause__
                state.put_record(replace(rec, version=version, size=len(data), mtime=now))
                return version
            if rec is not None:  # a whiteout: the file is absent in the fork
                if isinstance(mode, Update):
                    raise fs_error("stale", f"{path} was deleted", path=path)
                version = state.store(key, data, Overwrite())
                state.put_record(replace(rec, state="written", version=version,
                                         size=len(data), mtime=now))
                return version
            parent = state.written_parent(rel)
            if parent is not None:
                raise fs_error("not_a_file", f"{self._rel_path(parent)} is a file, not a "
                               f"directory, in {path}", path=path,
                               details={"file": self._rel_path(parent)})
            base, pre = self._base_of(path, mode, deleting=False)
            version = state.store(key, data, Overwrite())
            if pre is not None:
                state.store(state.pre_key(rel), pre, Overwrite())
            state.put_record(Record(rel=rel, state="written", base=base, version=version,
                                    size=len(data), mtime=now, tool=_tool("write"),
                                    pre=pre is not None, move=_move()))
            return version

    def delete(self, path: str, mode: Update | Overwrite) -> None:
        state = self.state
        rel = self._changeable(path)
        with state.changing(), state.turn(rel):
            rec = state.record(rel)
            if rec is not None and rec.state == "written":
                key = state.file_key(rel)
                try:
                    state.upper.delete(key, mode)
                except FsError as err:
                    raise _in_base_terms(err, key, path) from err.__cause__
                if rec.base is None:  # created in the fork: no change is left
                    state.drop_record(rec)
                else:
                    state.put_record(replace(rec, state="deleted", version=None, size=None,
                                             mtime=time.time(), move=_move()))
                return
            if rec is not None:
                if isinstance(mode, Update):
                    raise fs_error("stale", f"{path} was deleted", path=path)
                raise fs_error("not_found", f"{path} does not exist", path=path)
            if state.written_parent(rel) is not None:
                raise fs_error("not_found", f"{path} does not exist", path=path)
            base, pre = self._base_of(path, mode, deleting=True)
            if pre is not None:
                state.store(state.pre_key(rel), pre, Overwrite())
            state.put_record(Record(rel=rel, state="deleted", base=base, mtime=time.time(),
                                    tool=_tool("delete"), pre=pre is not None,
                                    move=_move()))

    def _base_of(self, path: str, mode: PutMode, *, deleting: bool
                 ) -> tuple[FileVersion | None, bytes | None]:
        """Check ``mode`` against the base for a file the fork has not changed yet, and
        return the base version the change is made from (``None``: absent) with its
        bytes where the change replaces a file (the pre-image: one request, which is
        also the check; none when the caller holds them)."""
        cap = self.size_cap + 1
        try:
            if isinstance(mode, Create):
                self.base.get(path, length=1)
                raise fs_error("stale", f"{path} was created by someone else", path=path)
            if isinstance(mode, Update):
                if mode.known is not None:
                    self.base.get(path, length=1, if_version=mode.expected)
                    return mode.expected, mode.known
                blob = self.base.get(path, length=cap, if_version=mode.expected)
                return mode.expected, blob.data if blob.complete else None
            blob = self.base.get(path, length=cap)
            return blob.version, blob.data if blob.complete else None
        except FsError as err:
            if err.code != "not_found" or err.details.get("bucket"):
                raise
            if isinstance(mode, Update):
                raise fs_error("stale", f"{path} was deleted", path=path) from err
            if deleting:
                raise
            return None, None
