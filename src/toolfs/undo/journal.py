"""The journal of one context's changes: what :meth:`Workspace.changes` lists and
:meth:`Workspace.rewind` undoes.

A :class:`Journal` is the :class:`~toolfs.policy.recorder.ChangeRecorder` a workspace
gives its policy filesystem: the policy tells it of every write and delete before and
after it is stored (its one commit point), whichever tool or adapter made it. Each
:class:`Record` is one file's change: the version before and after, and the bytes before
(the *pre-image*):

* the pre-image of an ``edit`` or a ``write`` is the observed content the context
  already holds (the edit's bytes, the ledger's cache): **no request**. Only a change
  whose replaced bytes are no longer held (evicted from the ledger's cache, or a write
  or delete without a policy) reads them first: one request, pinned to the version
  replaced. Where the store keeps versions (S3 with versioning, GCS generations, Azure
  blob versions) the old version's id is kept instead, and nothing is read.
* the bytes each change left are kept while they are the file's latest (the same bytes
  object the ledger caches, not a copy): the base of a reverse merge.
* everything held counts against ``journal_bytes`` (default 256 MiB). Past it, the
  oldest pre-images are dropped (the record stays, marked); a rewind that would need
  one is refused, naming the file, and never restores wrong bytes. A single pre-image
  larger than the bound, or over the whole-file cap, refuses its change before
  anything is stored (``too_large``).

A :class:`Journal` may also persist each record (:mod:`toolfs.undo.persist`), so that a
context opened again with the same ``context_id`` lists and rewinds its changes.
"""

from __future__ import annotations

import datetime
import itertools
import logging
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from toolfs.errors import fs_error
from toolfs.policy.recorder import PendingChange
from toolfs.undo.model import Change, Changes, Checkpoint
from toolfs.versions import FileVersion

_log = logging.getLogger("toolfs.undo")

JOURNAL_BYTES = 256 * 1024 * 1024
"""Default bound of the bytes one journal holds (``Workspace(journal_bytes=...)``)."""

RecordKind = Literal["created", "updated", "deleted"]


@dataclass
class Record:
    """One file's change, as the journal keeps it."""

    position: int
    key: str
    """The store's key (the wrapped filesystem's path)."""
    path: str
    """The display path."""
    kind: RecordKind
    before: FileVersion | None
    after: FileVersion | None
    at: datetime.datetime
    tool: str
    move: tuple[int, str, str] | None = None
    pre_image: bytes | None = field(default=None, repr=False)
    """The bytes of ``before``; ``None`` when ``before`` is ``None``, when the store
    keeps the old version (``pre_version``), or once dropped (``dropped``)."""
    pre_version: str | None = None
    """The store's id of the old version (S3 ``VersionId``, GCS generation, Azure
    version id) when the store keeps versions: the pre-image is read from it."""
    dropped: bool = False
    """The pre-image was dropped to stay within ``journal_bytes``."""
    after_bytes: bytes | None = field(default=None, repr=False)
    """The bytes stored, while this is the file's latest record (else ``None``)."""
    persisted_pre: str | None = None
    """Where a persisted journal copied the pre-image (a key below the journal URL)."""

    @property
    def held(self) -> int:
        """Bytes this record holds in memory."""
        return len(self.pre_image or b"") + len(self.after_bytes or b"")

    @property
    def restorable(self) -> bool:
        """Whether the bytes of ``before`` can still be had (or none are needed)."""
        return self.before is None or self.pre_image is not None or \
            self.pre_version is not None or self.persisted_pre is not None


class Sink(Protocol):
    """Where a persisted journal writes its records (:mod:`toolfs.undo.persist`)."""

    def save(self, record: Record) -> None: ...

    def save_checkpoint(self, checkpoint: Checkpoint) -> None: ...

    def save_pre_image(self, key: str, data: bytes) -> str: ...

    def pre_image(self, record: Record) -> bytes | None: ...


@dataclass(frozen=True)
class _Token:
    change: PendingChange
    pre_image: bytes | None
    before: FileVersion | None
    kind: RecordKind
    pre_version: str | None
    persisted_pre: str | None = None


class Journal:
    """One context's journal (see the module docstring); thread-safe."""

    def __init__(self, *, journal_bytes: int = JOURNAL_BYTES, size_cap: int | None = None,
                 names: Callable[[FileVersion], str | None] | None = None,
                 read_version: Callable[[str, FileVersion], bytes | None] | None = None,
                 sink: Sink | None = None, records: Iterable[Record] = (),
                 checkpoints: Iterable[Checkpoint] = (),
                 read_current: Callable[[str, FileVersion], bytes | None] | None = None
                 ) -> None:
        if isinstance(journal_bytes, bool) or not isinstance(journal_bytes, int) \
                or journal_bytes < 0:
            raise fs_error("invalid_arguments",
                           "journal_bytes must be a non-negative integer")
        self.journal_bytes = journal_bytes
        self.size_cap = size_cap
        self._names = names if read_version is not None else None
        """The id the store keeps an old version under (versioned buckets), if any."""
        self._read_version = read_version
        self._read_current = read_current
        """Reads a file's bytes if it is still at a version (for a diff's after side that
        is no longer held; one request)."""
        self._sink = sink
        self._lock = threading.Lock()
        self._records: list[Record] = list(records)
        self._held = sum(r.held for r in self._records)
        self._next = itertools.count(
            (self._records[-1].position + 1) if self._records else 0)
        self._checkpoints: dict[str, Checkpoint] = {c.id: c for c in checkpoints}
        self.requests = 0
        self.unsaved = 0
        """Records the sink failed to persist (kept in memory only)."""
        """Requests this journal made to read pre-images the context did not hold."""

    # -- the policy's hook (toolfs.policy.recorder.ChangeRecorder) -------------------

    def before_change(self, change: PendingChange) -> object:
        kind: RecordKind | None = change.kind
        before, pre = change.before, change.pre_image
        unheld = kind is None or (kind != "created" and pre is None)
        pre_version = None
        if kind is not None and (unheld or self._sink is not None):
            # Not held, or to be persisted: an old version the store keeps is enough.
            pre_version = self._name(before)
        if unheld and pre_version is None:
            # Not held, and no old version to name: read the bytes (one request).
            if change.read_pre_image is None:
                raise fs_error("unsupported", f"{change.path}: the bytes this change "
                               "replaces cannot be journaled", path=change.path)
            self.requests += 1
            data, version = change.read_pre_image()
            if kind is None:
                kind = "created" if version is None else "updated"
            before = version if version is not None else before
            pre_version = self._name(version)
            if version is not None and data is None and pre_version is None:
                raise self._too_large(change.path, None)  # over the whole-file cap
            pre = data
        if pre is not None and pre_version is None and (len(pre) > self.journal_bytes or (
                self.size_cap is not None and len(pre) > self.size_cap)):
            raise self._too_large(change.path, len(pre))
        assert kind is not None
        persisted = None
        if self._sink is not None and pre is not None and pre_version is None:
            # Before the change: the bytes it replaces are safe before they are gone.
            persisted = self._sink.save_pre_image(change.key, pre)
        return _Token(change, pre, before, kind, pre_version, persisted)

    def _name(self, version: FileVersion | None) -> str | None:
        return None if version is None or self._names is None else self._names(version)

    def after_change(self, token: object, after: FileVersion | None,
                     data: bytes | None) -> None:
        assert isinstance(token, _Token)
        change = token.change
        record = Record(position=0, key=change.key, path=change.path, kind=token.kind,
                        before=token.before, after=after,
                        at=datetime.datetime.now(datetime.UTC), tool=change.tool,
                        move=change.move, pre_image=token.pre_image,
                        pre_version=token.pre_version, after_bytes=data,
                        persisted_pre=token.persisted_pre)
        with self._lock:
            record.position = next(self._next)
            for old in reversed(self._records):  # the file's previous tip: not any more
                if old.key == record.key:
                    if old.after_bytes is not None:
                        self._held -= len(old.after_bytes)
                        old.after_bytes = None
                    break
            self._records.append(record)
            self._held += record.held
            self._bound()
        if self._sink is not None:
            try:
                self._sink.save(record)
            except Exception:  # the change is done and must be answered as done
                self.unsaved += 1
                _log.exception("toolfs: a journal record of %s was not persisted",
                               change.path)

    def _too_large(self, path: str, size: int | None) -> Exception:
        bound = min(self.journal_bytes, self.size_cap or self.journal_bytes)
        what = f"{size} bytes" if size is not None else "over the whole-file cap"
        return fs_error(
            "too_large", f"{path} is {what}: the bytes this change replaces cannot be "
            f"journaled (the journal keeps at most {bound} bytes of one file), so it "
            "could not be undone; nothing was changed", path=path,
            details={"size": size, "journal_bytes": self.journal_bytes,
                     "cap": self.size_cap})

    def _bound(self) -> None:
        """Drop the oldest pre-images until the held bytes fit (the lock held)."""
        if self._held <= self.journal_bytes:
            return
        for record in self._records:
            if self._held <= self.journal_bytes:
                return
            if record.pre_image is not None:
                self._held -= len(record.pre_image)
                record.pre_image = None
                record.dropped = record.pre_version is None and record.persisted_pre is None
            if record.after_bytes is not None and self._held > self.journal_bytes:
                self._held -= len(record.after_bytes)
                record.after_bytes = None

    # -- reading the journal -----------------------------------------------------------

    @property
    def held_bytes(self) -> int:
        """Bytes the journal holds in memory now."""
        return self._held

    def records(self, since: int = 0) -> list[Record]:
        """The records from position ``since`` on, oldest first (copies)."""
        with self._lock:
            return [replace(r) for r in self._records if r.position >= since]

    @property
    def position(self) -> int:
        """The position the next record will have."""
        with self._lock:
            return self._records[-1].position + 1 if self._records else 0

    def pre_image(self, record: Record) -> bytes | None:
        """The bytes of ``record.before`` (``b""``-less ``None`` when absent or lost):
        held, read from the store's old version, or from the persisted copy."""
        if record.before is None:
            return None
        if record.pre_image is not None:
            return record.pre_image
        if record.pre_version is not None and self._read_version is not None:
            return self._read_version(record.key, record.before.model_copy(
                update={"version_id": record.pre_version}))
        if record.persisted_pre is not None and self._sink is not None:
            return self._sink.pre_image(record)
        return None

    def _bytes_at(self, key: str, version: FileVersion) -> bytes | None:
        """The bytes of ``key`` at ``version`` when the store still has them (the file
        is still there, or the store keeps the version): for a diff, never a restore."""
        vid = self._name(version)
        try:
            if vid is not None and self._read_version is not None:
                return self._read_version(key, version.model_copy(
                    update={"version_id": vid}))
            if self._read_current is not None:
                return self._read_current(key, version)
        except Exception:  # a diff that cannot be shown says so; nothing else depends on it
            return None
        return None

    def checkpoint(self, label: str | None = None) -> Checkpoint:
        """A checkpoint at the current position."""
        cp = Checkpoint(id=uuid.uuid4().hex[:12], label=label,
                        created_at=datetime.datetime.now(datetime.UTC),
                        position=self.position)
        with self._lock:
            self._checkpoints[cp.id] = cp
        if self._sink is not None:
            self._sink.save_checkpoint(cp)
        return cp

    def find_checkpoint(self, ref: Checkpoint | str | int) -> Checkpoint:
        """A checkpoint by value, id, label (the latest with it) or position."""
        if isinstance(ref, Checkpoint):
            return ref
        if isinstance(ref, int) and not isinstance(ref, bool):
            if ref < 0 or ref > self.position:
                raise fs_error("invalid_arguments", f"no journal position {ref}")
            return Checkpoint(id=f"position-{ref}", label=None,
                              created_at=datetime.datetime.now(datetime.UTC), position=ref)
        if isinstance(ref, str):
            with self._lock:
                found = self._checkpoints.get(ref) or next(
                    (c for c in reversed(self._checkpoints.values()) if c.label == ref), None)
            if found is not None:
                return found
            raise fs_error("invalid_arguments", f"no checkpoint {ref!r} in this context's "
                           "journal", details={"checkpoint": ref})
        raise fs_error("invalid_arguments", "a checkpoint is a Checkpoint, its id or label, "
                       "or a journal position")

    def checkpoints(self) -> list[Checkpoint]:
        with self._lock:
            return sorted(self._checkpoints.values(), key=lambda c: (c.position, c.created_at))

    def changes(self, since: int = 0) -> Changes:
        """The changes from position ``since`` on, oldest first; the copy and the delete
        of one move are one ``moved`` change."""
        records = self.records(since)
        later: dict[int, Record] = {}  # position -> the next record of the same file
        last: dict[str, Record] = {}
        for r in records:
            prev = last.get(r.key)
            if prev is not None:
                later[prev.position] = r
            last[r.key] = r
        out: list[Change] = []
        moves: dict[int, Record] = {}
        for r in records:
            if r.move is not None:
                partner = moves.pop(r.move[0], None)
                if partner is None:
                    moves[r.move[0]] = r
                    continue
                copy, gone = (partner, r) if partner.kind != "deleted" else (r, partner)
                out.append(Change(path=gone.path, kind="moved", before=gone.before,
                                  after=copy.after, to_path=copy.path, at=r.at,
                                  tool="move" if copy.tool in ("write", "delete")
                                  else copy.tool, position=partner.position,
                                  _load=self._loader(gone, copy, later)))
                continue
            out.append(Change(path=r.path, kind=r.kind, before=r.before, after=r.after,
                              to_path=None, at=r.at, tool=r.tool, position=r.position,
                              _load=self._loader(r, r, later)))
        for r in moves.values():  # half a move (the other half failed): as it is
            out.append(Change(path=r.path, kind=r.kind, before=r.before, after=r.after,
                              to_path=None, at=r.at, tool=r.tool, position=r.position,
                              _load=self._loader(r, r, later)))
        out.sort(key=lambda c: c.position)
        return Changes(out)

    def _loader(self, first: Record, last: Record, later: dict[int, Record]
                ) -> Callable[[], tuple[bytes | None, bytes | None]]:
        def load() -> tuple[bytes | None, bytes | None]:
            before = self.pre_image(first)
            nxt = later.get(last.position)
            after = last.after_bytes if nxt is None else self.pre_image(nxt)
            if last.after is None:
                after = None
            elif after is None:
                with self._lock:
                    tip = next((r for r in self._records if r.position == last.position),
                               None)
                after = tip.after_bytes if tip is not None else None
            if after is None and last.after is not None:
                after = self._bytes_at(last.key, last.after)
            return before, after
        return load


def describe(records: list[Record]) -> dict[str, Any]:
    """Counts for a benchmark or a log line: records, bytes held, pre-images dropped."""
    return {"records": len(records), "held": sum(r.held for r in records),
            "dropped": sum(1 for r in records if r.dropped)}
