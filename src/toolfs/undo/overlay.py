"""The copy-on-write overlay under a fork: the base's files, with the fork's changes on top.

A fork (:mod:`toolfs.undo.fork`) is a :class:`~toolfs.policy.PolicyFileSystem` over two
pieces made here, both in the base's own path space (a path in the fork is the path of
the same file in the base, so the fork keeps the base's root, confinement and deny rules,
and the base context's observations carry over):

* :class:`~toolfs.undo.overlay_store.OverlayStore`, the conditional store every read and
  change of the fork goes through; and
* :class:`~toolfs.undo.overlay_fs.OverlayFileSystem`, the fsspec face of the same merged
  view for the policy's lookups (``info``, ``ls``, ``find``, ``walk``...), forwarding
  each method explicitly as fsspec's ``DirFileSystem`` does.

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
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from fsspec.implementations.memory import MemoryFileSystem
from fsspec.spec import AbstractFileSystem

from toolfs.backends import Create, Overwrite, PutMode, Store, store_for
from toolfs.backends.objectstore import ObjectStore
from toolfs.errors import FsError, fs_error
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


def is_below(rel: str, prefix: str) -> bool:
    """Whether ``rel`` lies strictly below the directory ``prefix`` (``""``: the root)."""
    return not prefix or rel.startswith(prefix + "/")


def parents(rel: str) -> Iterator[str]:
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
            return [r for r in self.records.values() if is_below(r.rel, prefix)]

    def written_under(self, prefix: str) -> bool:
        with self._lock:
            return any(r.state == "written" and is_below(r.rel, prefix)
                       for r in self.records.values())

    def written_parent(self, rel: str) -> str | None:
        """A directory above ``rel`` that the fork holds as a file, if any."""
        for parent in parents(rel):
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
