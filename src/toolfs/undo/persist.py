"""Opening a context's journal: in memory by default, persisted at an fsspec URL with
``Workspace(..., journal="s3://bucket/.toolfs/journal")``.

A persisted journal (:class:`JournalStore`) keeps, below ``URL/<context_id>/``:

* ``r/<position>.json``: one small record per change (paths, kind, versions before and
  after, time, tool, how to get the bytes before), written with a conditional create
  once the change is stored;
* ``c/<id>.json``: one per checkpoint;
* ``p/<uuid>.bin``: the bytes a change replaces, copied (conditional create) *before*
  the change, and only where the store keeps no old version to name
  (:mod:`toolfs.undo.old_versions`).

A context opened again with the same ``context_id`` and journal URL lists and rewinds
the changes its earlier process made (one listing and one read per record on
opening). Cost per change: one request for the record, plus one for the pre-image on
stores without versions. A process killed between a change and its record loses that
one record (the change itself is done): the window is one request long.
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Mapping
from typing import Any

from fsspec.core import url_to_fs

from toolfs.backends import Create, store_for
from toolfs.backends.objectstore import ObjectStore, Refused
from toolfs.errors import FsError, fs_error
from toolfs.policy.filesystem import PolicyFileSystem
from toolfs.undo.journal import JOURNAL_BYTES, Journal, Record
from toolfs.undo.model import Checkpoint
from toolfs.undo.old_versions import namer, reader
from toolfs.versions import FileVersion

__all__ = ["JournalStore", "open_journal"]

_POSITION_TRIES = 8


class JournalStore:
    """The objects of one context's persisted journal (see the module docstring)."""

    def __init__(self, url: str, context_id: str,
                 storage_options: Mapping[str, Any] | None = None) -> None:
        if not isinstance(url, str) or not url:
            raise fs_error("invalid_arguments", "journal must be an fsspec URL")
        if not context_id or "/" in context_id:
            raise fs_error("invalid_arguments", "a persisted journal needs a context_id "
                           "without '/'")
        try:
            fs, root = url_to_fs(url, **dict(storage_options or {}))
        except (ImportError, ValueError, TypeError) as exc:
            raise fs_error("invalid_arguments", f"cannot open the journal {url}: {exc}") \
                from exc
        self.url = url
        self.fs = fs
        if root and not fs.exists(root):  # local disk, memory: the directory must exist
            try:
                fs.makedirs(root, exist_ok=True)
            except Exception as exc:
                raise fs_error("invalid_arguments", f"cannot make the journal directory "
                               f"{url}: {exc}") from exc
        self.prefix = f"{root.rstrip('/')}/{context_id}"
        self.store = store_for(fs, root=root or None)
        self.requests = 0
        """Requests this journal store made (records, checkpoints, pre-images, loads)."""

    def _put(self, key: str, data: bytes) -> None:
        """A conditional create (``stale`` when the object exists): one request."""
        self.requests += 1
        store: Any = self.store
        if isinstance(store, ObjectStore):
            # The journal's own keys: the store's directory checks before a create (a
            # listing and a HEAD per parent) guard a user's names, not these; one
            # conditional PUT is the whole cost.
            bucket, name = store._split(key)
            try:
                store._sync(store._write(bucket, name, data, Create(), key))
            except Refused as refused:
                raise fs_error("stale", f"{key} exists", path=key) from refused
            return
        self.fs.makedirs(key.rsplit("/", 1)[0], exist_ok=True)
        store.put(key, data, Create())

    def save(self, record: Record) -> None:
        for _ in range(_POSITION_TRIES):
            try:
                self._put(f"{self.prefix}/r/{record.position:012d}.json", _dump(record))
                return
            except FsError as err:
                if err.code != "stale":  # a record at that position already: the next
                    raise
                record.position += 1
        raise fs_error("backend_error", f"no free journal position near {record.position}")

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        self._put(f"{self.prefix}/c/{checkpoint.id}.json", json.dumps({
            "id": checkpoint.id, "label": checkpoint.label,
            "created_at": checkpoint.created_at.isoformat(),
            "position": checkpoint.position}).encode())

    def save_pre_image(self, key: str, data: bytes) -> str:
        name = f"{self.prefix}/p/{uuid.uuid4().hex}.bin"
        self._put(name, data)
        return name

    def pre_image(self, record: Record) -> bytes | None:
        if record.persisted_pre is None:
            return None
        self.requests += 1
        try:
            return self.store.get(record.persisted_pre).data
        except FsError as err:
            if err.code == "not_found":
                return None
            raise

    def load(self) -> tuple[list[Record], list[Checkpoint]]:
        """Every record and checkpoint of the context, in position order."""
        records: list[Record] = []
        checkpoints: list[Checkpoint] = []
        self.requests += 1
        entries = sorted(e.path for e in self.store.list_files(self.prefix, sizes=False))
        for path in entries:
            part = path[len(self.prefix) + 1:].split("/", 1)[0]
            if part not in ("r", "c"):
                continue
            self.requests += 1
            data = json.loads(self.store.get(path).data)
            if part == "r":
                records.append(_load(data))
            else:
                checkpoints.append(Checkpoint(
                    id=data["id"], label=data["label"],
                    created_at=datetime.datetime.fromisoformat(data["created_at"]),
                    position=int(data["position"])))
        records.sort(key=lambda r: r.position)
        return records, checkpoints


def _version(value: Any) -> FileVersion | None:
    return None if value is None else FileVersion.model_validate(value)


def _dump(record: Record) -> bytes:
    return json.dumps({
        "position": record.position, "key": record.key, "path": record.path,
        "kind": record.kind,
        "before": record.before.model_dump() if record.before is not None else None,
        "after": record.after.model_dump() if record.after is not None else None,
        "at": record.at.isoformat(), "tool": record.tool,
        "move": list(record.move) if record.move is not None else None,
        "pre_version": record.pre_version, "persisted_pre": record.persisted_pre,
    }).encode()


def _load(data: dict[str, Any]) -> Record:
    move = data.get("move")
    return Record(position=int(data["position"]), key=data["key"], path=data["path"],
                  kind=data["kind"], before=_version(data["before"]),
                  after=_version(data["after"]),
                  at=datetime.datetime.fromisoformat(data["at"]), tool=data["tool"],
                  move=(int(move[0]), str(move[1]), str(move[2])) if move else None,
                  pre_version=data.get("pre_version"),
                  persisted_pre=data.get("persisted_pre"))


def open_journal(fs: PolicyFileSystem, url: str | None, *,
                 journal_bytes: int = JOURNAL_BYTES,
                 storage_options: Mapping[str, Any] | None = None) -> Journal:
    """The journal of ``fs``'s context: in memory when ``url`` is ``None``, else
    persisted there (its earlier records loaded, for a context opened again)."""
    read = reader(fs.store)
    names = namer(fs.store, fs.store.root) if read is not None else None
    if url is None:
        return Journal(journal_bytes=journal_bytes, size_cap=fs.size_cap, names=names,
                       read_version=read)
    sink = JournalStore(url, fs.context_id, storage_options)
    records, checkpoints = sink.load()

    def current(key: str, version: FileVersion) -> bytes | None:
        try:
            blob = fs.store.get(key, length=fs.size_cap + 1, if_version=version)
        except FsError:
            return None
        return blob.data if blob.complete else None

    return Journal(journal_bytes=journal_bytes, size_cap=fs.size_cap, names=names,
                   read_version=read, sink=sink, records=records, checkpoints=checkpoints,
                   read_current=current)
