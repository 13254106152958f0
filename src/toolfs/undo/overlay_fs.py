"""The fsspec face of a fork's merged view (:mod:`toolfs.undo.overlay`), in the base's
path space: the lookups the policy makes of the filesystem it wraps (``info``, ``ls``,
``find``, ``walk``, ``exists``...), each forwarded explicitly, as fsspec's
``DirFileSystem`` does. Every change goes through
:class:`~toolfs.undo.overlay_store.OverlayStore` instead."""

from __future__ import annotations

import datetime
import hashlib
import uuid
from typing import Any, ClassVar

from fsspec.spec import AbstractFileSystem

from toolfs.errors import FsError, fs_error
from toolfs.undo.overlay import OverlayState, Record, is_below, parents
from toolfs.undo.overlay_store import OverlayStore


class OverlayFileSystem(AbstractFileSystem):  # type: ignore[misc]
    """The fsspec face of a fork's merged view, in the base's path space (see the
    module docstring). Lookups only: every change goes through :class:`OverlayStore`."""

    cachable = False
    protocol: ClassVar[str | tuple[str, ...]] = "toolfs-fork"

    def __init__(self, state: OverlayState) -> None:
        super().__init__()
        base = state.base_fs
        self.state = state
        self.base = base
        # The base's path conventions, on this instance: names are the base's own.
        self.__dict__.update(protocol=base.protocol, root_marker=base.root_marker,
                             sep=base.sep, _strip_protocol=base._strip_protocol,
                             _parent=base._parent)
        self._token = uuid.uuid4().hex  # one content-cache namespace per overlay
        self.store = OverlayStore(state, self)

    @property
    def _fs_token(self) -> str:
        return self._token

    @property
    def fsid(self) -> str:
        return f"toolfs-fork-{self._token}"

    def _rel(self, path: str) -> str | None:
        return self.state.roots.rel(self.base._strip_protocol(path).rstrip("/") or
                                    self.base._strip_protocol(path))

    def invalidate_cache(self, path: str | None = None) -> None:
        self.base.invalidate_cache(path)

    def _file_info(self, path: str, rec: Record) -> dict[str, Any]:
        return {"name": path, "size": rec.size or 0, "type": "file", "mtime": rec.mtime}

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        self.state.check_open()
        own = self.base._strip_protocol(path).rstrip("/") or self.base._strip_protocol(path)
        rel = self.state.roots.rel(own)
        if rel:
            rec = self.state.record(rel)
            if rec is not None and rec.state == "written":
                return self._file_info(own, rec)
            if (rec is not None or self.state.written_parent(rel) is not None) \
                    and not self.state.written_under(rel):
                raise FileNotFoundError(path)
        try:
            info: dict[str, Any] = self.base.info(own, **kwargs)
        except FileNotFoundError:
            if rel is not None and self.state.written_under(rel):
                return {"name": own, "size": 0, "type": "directory"}
            raise
        if rel and info.get("type") == "directory" and \
                not self.store.base.capabilities.removes_empty_dirs and \
                any(r.state == "deleted" for r in self.state.under(rel)) and \
                not self.store._dir_holds(own, rel):
            raise FileNotFoundError(path)
        return info

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        own = self.base._strip_protocol(path).rstrip("/") or self.base._strip_protocol(path)
        try:
            entries = list(self.store.list_dir(own))
        except FsError as err:
            if err.code == "not_found":
                raise FileNotFoundError(path) from err
            if err.code == "not_a_file":
                info = self.info(own)
                return [info] if detail else [info["name"]]
            raise
        out = [{"name": e.path, "size": e.size or 0,
                "type": "directory" if e.kind == "dir" else "file", "mtime": e.mtime}
               for e in entries]
        return out if detail else [e["name"] for e in out]

    def find(self, path: str, maxdepth: int | None = None, withdirs: bool = False,
             detail: bool = False, **kwargs: Any) -> Any:
        self.state.check_open()
        own = self.base._strip_protocol(path).rstrip("/") or self.base._strip_protocol(path)
        rel = self.state.roots.rel(own)
        if rel:
            rec = self.state.record(rel)
            if rec is not None and rec.state == "written":
                found = {own: self._file_info(own, rec)}
                return found if detail else sorted(found)
        try:
            listed = self.base.find(own, maxdepth=maxdepth, withdirs=withdirs, detail=True)
        except FileNotFoundError:
            listed = {}
        if not isinstance(listed, dict):
            listed = {name: self.base.info(name) for name in listed}
        changed = {r.rel: r for r in self.state.under(rel)} if rel is not None else {}
        itself = self.state.record(rel) if rel else None
        if itself is not None:  # a whiteout (a written file was answered above)
            changed[itself.rel] = itself
        out: dict[str, Any] = {}
        for name, info in listed.items():
            key = self.base._strip_protocol(name)
            mine = self.state.roots.rel(key.rstrip("/"))
            if mine is not None and (mine in changed
                                     or self.state.written_parent(mine) is not None):
                continue
            out[key] = info
        if rel is not None:
            base_depth = rel.count("/") + 1 if rel else 0
            for r in changed.values():
                if r.state != "written":
                    continue
                depth = r.rel.count("/") + 1 - base_depth
                if maxdepth is not None and depth > maxdepth:
                    continue
                name = self.state.roots.join(r.rel)
                out[name] = self._file_info(name, r)
                if withdirs:
                    for parent in parents(r.rel):
                        if not is_below(parent, rel):
                            break
                        pname = self.state.roots.join(parent)
                        out.setdefault(pname, {"name": pname, "size": 0,
                                               "type": "directory"})
        return out if detail else sorted(out)

    def exists(self, path: str, **kwargs: Any) -> bool:
        try:
            self.info(path)
        except FileNotFoundError:
            return False
        return True

    def isfile(self, path: str) -> bool:
        try:
            return bool(self.info(path).get("type") == "file")
        except FileNotFoundError:
            return False

    def isdir(self, path: str) -> bool:
        try:
            return bool(self.info(path).get("type") == "directory")
        except FileNotFoundError:
            return False

    def modified(self, path: str) -> datetime.datetime:
        info = self.info(path)
        rel = self._rel(path)
        if rel and self.state.record(rel) is not None:
            return datetime.datetime.fromtimestamp(info.get("mtime") or 0, datetime.UTC)
        return self.base.modified(path)  # type: ignore[no-any-return]

    def created(self, path: str) -> datetime.datetime:
        return self.modified(path)

    def ukey(self, path: str) -> str:
        info = self.info(path)
        return hashlib.sha256(repr(sorted(info.items(), key=str)).encode()).hexdigest()

    def cat_file(self, path: str, start: int | None = None, end: int | None = None,
                 **kwargs: Any) -> bytes:
        try:
            blob = self.store.get(path)
        except FsError as err:
            if err.code == "not_found":
                raise FileNotFoundError(path) from err
            raise
        return blob.data[start:end]

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        """Directories are implied by the files in them, as on object stores: a fork
        keeps no empty directory of its own."""
        self.state.check_open()
        if self.isfile(path):
            raise FileExistsError(path)

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        self.makedirs(path, exist_ok=True)

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise fs_error("denied", "a fork's files change through its workspace only")

    pipe_file = rm_file = rmdir = cp_file = mv = _refuse

    def __repr__(self) -> str:
        return f"OverlayFileSystem({self.state.url or 'in memory'} over {self.state.identity})"
