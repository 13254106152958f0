"""The copy-on-write overlay under a fork: the base's files, with the fork's changes on top.

A fork (:mod:`toolfs.undo.fork`) is a :class:`~toolfs.policy.PolicyFileSystem` over two
pieces made here, both in the base's own path space (a path in the fork is the path of
the same file in the base, so the fork keeps the base's root, confinement and deny rules,
and the base context's observations carry over):

* :class:`OverlayStore`, the conditional store every read and change of the fork goes
  through; and
* :class:`OverlayFileSystem`, the fsspec face of the same merged view for the policy's
  lookups (``info``, ``ls``, ``find``, ``walk``...), forwarding each method explicitly as
  fsspec's ``DirFileSystem`` does.

Both read :class:`OverlayState`: the fork's changes, one :class:`Record` per path, and the
*upper* filesystem that holds their bytes (a private in-memory filesystem, or a prefix at
an fsspec URL that survives the process):

* a path without a record **falls through** to the base store (live: a change another
  context makes on the base shows in the fork until the fork changes that file);
* a ``written`` record is the fork's bytes, in the upper at ``files/<path>``;
* a ``deleted`` record is a **whiteout**: the file is gone in the fork, whatever the base
  holds.

Every record remembers the **base version** the fork's change was made from (``None``:
the file was absent in the base), and the base bytes of that version (the pre-image, at
``pre/<path>``) where the change replaced a base file: a commit lands conditionally on
that version, and shows the diff of, or merges with, a base change made since.

Versions. A file that falls through has its base version; a file the fork wrote has the
upper store's version of its bytes. Changes of the fork are conditional on the version
the fork's context read, exactly as on the base: a change of a fall-through file is
checked against the base (one request), then stored in the upper; a change of a file
the fork already wrote is a conditional put on the upper. Changes to one path take turns
(a lock per stripe of paths, per overlay), so two parallel calls in a fork made from one
version cannot both land: the second is ``stale``.

Layout at an overlay URL (``s3://bucket/forks/f1``)::

    fork.json         the manifest: which base this overlay belongs to
    meta/<hash>.json  one record per changed path (path, state, base version, time)
    files/<path>      the fork's bytes of a created or updated file
    pre/<path>        the base bytes a change was made from

A record is written after the bytes it names, so an overlay reopened after a crash never
names bytes it does not have (a file written without its record is ignored).
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import itertools
import json
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

from fsspec.implementations.memory import MemoryFileSystem
from fsspec.spec import AbstractFileSystem

from toolfs.backends import (
    Blob,
    Capabilities,
    Create,
    Entry,
    Overwrite,
    PutMode,
    Store,
    Update,
    store_for,
)
from toolfs.backends.objectstore import ObjectStore
from toolfs.errors import FsError, fs_error
from toolfs.policy.recorder import current_move, current_tool
from toolfs.versions import FileVersion

RecordState = Literal["written", "deleted"]
MANIFEST = "fork.json"
FORMAT = 1
_STRIPES = 64


@dataclass(frozen=True)
class Record:
    """One path the fork changed."""

    rel: str
    """The path relative to the root (the display path)."""
    state: RecordState
    """``written``: the fork's bytes are in the upper; ``deleted``: a whiteout."""
    base: FileVersion | None
    """The base version the change was made from; ``None``: absent in the base."""
    version: FileVersion | None = None
    """The upper's version of the fork's bytes (``written``)."""
    size: int | None = None
    mtime: float | None = None
    at: datetime.datetime = field(
        default_factory=lambda: datetime.datetime.now(datetime.UTC))
    """When the fork first changed this path."""
    tool: str = "fork"
    """The call that first changed this path in the fork."""
    pre: bool = False
    """The base bytes of ``base`` are kept at ``pre/<rel>``."""
    move: tuple[str, str] | None = None
    """``(from, to)`` display paths when the change was half of a move (the write of
    ``to``, the delete of ``from``)."""

    def to_json(self) -> dict[str, Any]:
        return {"path": self.rel, "state": self.state,
                "base": None if self.base is None else self.base.model_dump(),
                "at": self.at.isoformat(), "tool": self.tool, "pre": self.pre,
                "move": None if self.move is None else list(self.move)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Record:
        base, move = data.get("base"), data.get("move")
        return cls(rel=str(data["path"]), state=data["state"],
                   base=None if base is None else FileVersion.model_validate(base),
                   at=datetime.datetime.fromisoformat(data["at"]),
                   tool=str(data.get("tool", "fork")), pre=bool(data.get("pre")),
                   move=None if not move else (str(move[0]), str(move[1])))


class _Roots:
    """The base's root, in the forms its backend paths take (as given, and resolved
    through symlinks on local disk): relative paths to backend paths and back."""

    def __init__(self, root: str, real_root: str) -> None:
        self.root = root
        self.forms = tuple(dict.fromkeys((root, real_root)))

    def rel(self, path: str) -> str | None:
        """``path`` relative to the root (``""``: the root), ``None`` outside it."""
        for root in self.forms:
            if path == root or (root and path == root.rstrip("/")):
                return ""
            if root in ("", "/"):
                if root == "" or path.startswith("/"):
                    return path.lstrip("/")
                continue
            prefix = root.rstrip("/") + "/"
            if path.startswith(prefix):
                return path[len(prefix):]
        return None

    def join(self, rel: str) -> str:
        if not rel:
            return self.root
        if self.root in ("", "/"):
            return f"{self.root}{rel}"
        return f"{self.root.rstrip('/')}/{rel}"


def _under(rel: str, prefix: str) -> bool:
    """Whether ``rel`` lies strictly below the directory ``prefix`` (``""``: the root)."""
    return not prefix or rel.startswith(prefix + "/")


def _parents(rel: str) -> Iterator[str]:
    """The directories above ``rel``, innermost first (``a/b`` and ``a`` for ``a/b/c``)."""
    parts = rel.split("/")
    for n in range(len(parts) - 1, 0, -1):
        yield "/".join(parts[:n])


class OverlayState:
    """A fork's changes and the upper filesystem that holds them (see the module
    docstring). Thread-safe; shared by every context of the fork."""

    def __init__(self, *, base_fs: AbstractFileSystem, base_store: Store, root: str,
                 real_root: str, upper_fs: AbstractFileSystem, upper_root: str,
                 identity: str, url: str | None) -> None:
        self.base_fs = base_fs
        self.base_store = base_store
        self.roots = _Roots(root, real_root)
        self.upper_fs = upper_fs
        self.upper_root = upper_root.rstrip("/")
        self.upper = store_for(upper_fs, root=self.upper_root or None,
                               size_cap=base_store.size_cap)
        self.identity = identity
        """Names the base (its filesystem and root): an overlay URL belongs to one."""
        self.url = url
        """The overlay's URL; ``None``: in memory."""
        self.records: dict[str, Record] = {}
        self._lock = threading.Lock()
        self._turns = [threading.RLock() for _ in range(_STRIPES)]
        self._idle = threading.Condition(self._lock)
        self._active = 0
        self._committing = False
        self.closed: str | None = None
        """Why the overlay can no longer be used (discarded); ``None``: open."""

    # -- keys in the upper ---------------------------------------------------------

    def _key(self, area: str, rel: str) -> str:
        return f"{self.upper_root}/{area}/{rel}"

    def file_key(self, rel: str) -> str:
        return self._key("files", rel)

    def pre_key(self, rel: str) -> str:
        return self._key("pre", rel)

    def meta_key(self, rel: str) -> str:
        digest = hashlib.sha256(rel.encode("utf-8", "surrogatepass")).hexdigest()[:40]
        return self._key("meta", f"{digest}.json")

    def store(self, key: str, data: bytes, mode: PutMode) -> FileVersion:
        """Store one of the overlay's own objects. An unconditional write on an object
        store is one PUT: the adapter's checks before a create (a listing that the name
        is no directory, a HEAD per parent) guard the names a user gives, not these
        keys, which only the overlay makes."""
        upper: Any = self.upper
        if isinstance(mode, Overwrite) and isinstance(upper, ObjectStore):
            bucket, name = upper._split(key)
            try:
                version: FileVersion = upper._sync(upper._write(bucket, name, data, mode, key))
            except FsError:
                raise
            except Exception as exc:  # the client's own error (connection, auth...)
                raise fs_error("backend_error", f"{key}: {type(exc).__name__}: {exc}",
                               path=key) from exc
            return version
        return self.upper.put(key, data, mode)

    # -- who may change it, and when ----------------------------------------------

    def check_open(self) -> None:
        if self.closed is not None:
            raise fs_error("denied", self.closed)

    def turn(self, rel: str) -> threading.RLock:
        """Changes of one path in this fork take turns (check, then store)."""
        return self._turns[hash(rel) % _STRIPES]

    @contextlib.contextmanager
    def changing(self) -> Iterator[None]:
        """A change of the fork: refused while the fork commits or once it is closed."""
        with self._lock:
            self.check_open()
            if self._committing:
                raise fs_error("denied", "this fork is being committed; change it again "
                               "once the commit has returned")
            self._active += 1
        try:
            yield
        finally:
            with self._lock:
                self._active -= 1
                if not self._active:
                    self._idle.notify_all()

    @contextlib.contextmanager
    def committing(self) -> Iterator[None]:
        """Hold every change of the fork off while it commits (changes already running
        finish first; new ones are refused, never kept waiting: a change waits for no
        lock a commit holds)."""
        with self._lock:
            self.check_open()
            if self._committing:
                raise fs_error("denied", "this fork is already being committed")
            self._committing = True
            self._idle.wait_for(lambda: self._active == 0)
        try:
            yield
        finally:
            with self._lock:
                self._committing = False

    # -- records -------------------------------------------------------------------

    def record(self, rel: str) -> Record | None:
        return self.records.get(rel)

    def snapshot(self) -> list[Record]:
        """Every record, by path."""
        with self._lock:
            return sorted(self.records.values(), key=lambda r: r.rel)

    def under(self, prefix: str) -> list[Record]:
        """The records strictly below the directory ``prefix``."""
        with self._lock:
            return [r for r in self.records.values() if _under(r.rel, prefix)]

    def written_under(self, prefix: str) -> bool:
        with self._lock:
            return any(r.state == "written" and _under(r.rel, prefix)
                       for r in self.records.values())

    def written_parent(self, rel: str) -> str | None:
        """A directory above ``rel`` that the fork holds as a file, if any."""
        for parent in _parents(rel):
            rec = self.records.get(parent)
            if rec is not None and rec.state == "written":
                return parent
        return None

    def put_record(self, rec: Record) -> None:
        """Keep ``rec`` (its bytes already stored): in the upper, then in memory. A
        record the upper already holds as it is (a later change of the same file:
        only the version of its bytes moved, which a reopened overlay lists) costs no
        request."""
        held = self.records.get(rec.rel)
        if held is None or held.to_json() != rec.to_json():
            self.store(self.meta_key(rec.rel), json.dumps(rec.to_json()).encode(),
                       Overwrite())
        with self._lock:
            self.records[rec.rel] = rec

    def drop_record(self, rec: Record, *, keep_bytes: bool = False) -> None:
        """Forget ``rec`` and remove what the upper holds of it."""
        with self._lock:
            if self.records.get(rec.rel) == rec:
                del self.records[rec.rel]
        self._remove(self.meta_key(rec.rel))
        if not keep_bytes:
            if rec.state == "written":
                self._remove(self.file_key(rec.rel))
            if rec.pre:
                self._remove(self.pre_key(rec.rel))

    def _remove(self, key: str) -> None:
        """Remove one of the overlay's own objects: one unconditional delete (no
        conditional store's read first); already gone is fine, and a failure leaves an
        object that no record names (ignored, as after a crash)."""
        with contextlib.suppress(Exception):
            self.upper_fs.rm_file(key)

    def pre_image(self, rec: Record) -> bytes | None:
        """The base bytes ``rec``'s change was made from (``b""`` for a created file;
        ``None``: not kept)."""
        if rec.base is None:
            return b""
        if not rec.pre:
            return None
        try:
            return self.upper.get(self.pre_key(rec.rel)).data
        except FsError:
            return None

    def data(self, rec: Record) -> bytes:
        """The fork's bytes of a ``written`` record."""
        blob = self.upper.get(self.file_key(rec.rel))
        if not blob.complete:  # over the cap: the policy never wrote such a file here
            raise fs_error("too_large", f"{rec.rel} is over the size cap", path=rec.rel)
        return blob.data

    # -- persistence ---------------------------------------------------------------

    def open_url(self) -> None:
        """Claim the overlay at ``url`` for this base, or load what it holds (a fork
        reopened by a new workspace): the manifest, every record, and the versions of
        the fork's bytes (one listing)."""
        manifest = json.dumps({"format": FORMAT, "base": self.identity,
                               "created": datetime.datetime.now(datetime.UTC).isoformat()})
        key = f"{self.upper_root}/{MANIFEST}"
        try:
            self.upper.put(key, manifest.encode(), Create())
            return  # a new overlay: nothing to load
        except FsError as err:
            if err.code != "stale":
                raise
        try:
            held = json.loads(self.upper.get(key).data)
        except (ValueError, FsError) as exc:
            raise fs_error("invalid_arguments", f"{self.url} holds a {MANIFEST} that is "
                           "not a fork's manifest") from exc
        if held.get("format") != FORMAT or held.get("base") != self.identity:
            raise fs_error("invalid_arguments",
                           f"the overlay at {self.url} belongs to another base "
                           f"({held.get('base')!r}, not {self.identity!r}); give an "
                           "overlay URL of its own to each fork",
                           details={"base": held.get("base")})
        records: dict[str, Record] = {}
        for entry in self.upper.list_files(self._key("meta", "").rstrip("/")):
            try:
                loaded = Record.from_json(json.loads(self.upper.get(entry.path).data))
            except (ValueError, KeyError, TypeError) as exc:
                raise fs_error("backend_error", f"{self.url}: a damaged fork record "
                               f"({entry.path})") from exc
            records[loaded.rel] = loaded
        files = self._key("files", "")
        for entry in self.upper.list_files(files.rstrip("/")):
            listed = records.get(entry.path[len(files):]) \
                if entry.path.startswith(files) else None
            if listed is not None and listed.state == "written":
                records[listed.rel] = replace(listed, version=entry.version,
                                              size=entry.size, mtime=entry.mtime)
        for rel, rec in list(records.items()):
            if rec.state == "written" and rec.version is None:
                try:  # no version in the listing (local disk, memory): one small read
                    blob = self.upper.get(self.file_key(rel), length=1)
                except FsError as missing:
                    if missing.code != "not_found":
                        raise
                    del records[rel]  # a record whose bytes never landed
                    continue
                records[rel] = replace(rec, version=blob.version, size=blob.size,
                                       mtime=rec.mtime or time.time())
        with self._lock:
            self.records = records

    def _own_objects(self) -> list[str]:
        """The upper's objects this overlay made (never anything else under its root)."""
        found = []
        for area in ("files", "pre", "meta"):
            found += [e.path for e in self.upper.list_files(self._key(area, "").rstrip("/"))]
        return found

    def close(self, why: str) -> None:
        """Discard: forget everything, remove the upper's objects (manifest too)."""
        with self._lock:
            if self.closed is not None:
                return
            self.closed = why
            self.records = {}
        for key in self._own_objects():
            self._remove(key)
        self._remove(f"{self.upper_root}/{MANIFEST}")


def private_memory() -> MemoryFileSystem:
    """An in-memory filesystem of its own (not fsspec's shared ``memory://``)."""
    fs = MemoryFileSystem(global_store=False, skip_instance_cache=True)
    return fs


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

    def __init__(self, state: OverlayState, fs: OverlayFileSystem) -> None:
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
        deleted_dirs = {p for r in records if r.state == "deleted" for p in _parents(r.rel)}
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
                    for parent in _parents(r.rel):
                        if not _under(parent, rel):
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
