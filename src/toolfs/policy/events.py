"""``fs/*`` events: what subscribers (audit logs, approval hooks) see of each operation.

========================= =====================================================
``fs/read``               a context observed a file (version of the bytes read)
``fs/write-intent``       a change is about to be committed; a subscriber may veto it
                          by raising :class:`Veto` (the call then fails ``denied``)
``fs/written``            a change was committed (version before and after)
``fs/denied``             a change or read was refused (the error code is ``reason``)
========================= =====================================================
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Literal, overload

from pydantic import BaseModel, ConfigDict, Field

from toolfs._trusted import trusted
from toolfs.versions import FileVersion

EventType = Literal["fs/read", "fs/write-intent", "fs/written", "fs/denied"]
Operation = Literal["read", "write", "edit", "delete", "mkdir"]


class FsEvent(BaseModel):
    """One ``fs/*`` event."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: EventType
    context_id: str
    operation: Operation
    path: str
    """Display path, relative to the workspace root."""
    version_before: FileVersion | None = None
    version_after: FileVersion | None = None
    reason: str | None = None
    """For ``fs/denied``: the error code and message."""
    at: float = Field(default_factory=time.time)
    diff: str | None = None
    """For ``fs/write-intent``: the unified diff of the change about to be committed
    (from the version it replaces; a new file diffs from nothing), so that an approval
    hook can show it. ``None`` when the replaced bytes are not held (an unconditional
    overwrite), either side is not text, or the diff is over the policy's ``diff_chars``
    or work cap. Only events given to subscribers carry it: the audit log keeps none. It
    is computed only when a subscriber may read it: one with ``wants_diff = False`` (the
    audit log, ``toolfs.server``'s audit trail) says it never does."""


class Veto(Exception):
    """Raised by an ``fs/write-intent`` subscriber to refuse the change."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


Subscriber = Callable[[FsEvent], None]


# What the audit log keeps of an event: its fields in FsEvent's order. A tuple, not the
# model: one object for the garbage collector to track per kept event rather than
# three (the model, its ``__dict__``, its set of given fields), and the policy records
# one without making an FsEvent at all when the log is its only subscriber (see
# AuditLog.record), which is every workspace's default: two events per write.
_Record = tuple[EventType, str, Operation, str, FileVersion | None, FileVersion | None,
                str | None, float]
_FIELDS = tuple(name for name in FsEvent.model_fields if name != "diff")
# The fields a validated FsEvent(...) call names (``at`` comes from its default).
EVENT_FIELDS_SET = frozenset(_FIELDS) - {"at"}


def _event_of(record: _Record) -> FsEvent:
    # Every value came from an FsEvent or from the policy, valid by construction.
    values: dict[str, object] = dict(zip(_FIELDS, record, strict=True))
    values["diff"] = None
    return trusted(FsEvent, EVENT_FIELDS_SET, values)


class AuditEvents(Sequence[FsEvent]):
    """The events an :class:`AuditLog` keeps, oldest first, as :class:`FsEvent` objects
    (read-only; made on access, so ``events[0] is events[0]`` need not hold, while
    ``==`` does). Iterating takes a snapshot first: parallel calls may add events
    meanwhile."""

    def __init__(self, records: deque[_Record]) -> None:
        self._records = records

    def __len__(self) -> int:
        return len(self._records)

    @overload
    def __getitem__(self, index: int) -> FsEvent: ...
    @overload
    def __getitem__(self, index: slice) -> list[FsEvent]: ...
    def __getitem__(self, index: int | slice) -> FsEvent | list[FsEvent]:
        if isinstance(index, slice):
            return [_event_of(r) for r in list(self._records)[index]]
        return _event_of(self._records[index])

    def __iter__(self) -> Iterator[FsEvent]:
        return map(_event_of, list(self._records))  # list(deque) is one C call

    def __reversed__(self) -> Iterator[FsEvent]:
        return map(_event_of, reversed(list(self._records)))

    def __repr__(self) -> str:
        return f"AuditEvents({len(self._records)} events)"


class AuditLog:
    """A subscriber that keeps the last ``max_events`` events; a table in notebooks.

    Every workspace has one (``ws.audit``); the bound keeps a long-running agent or
    server from growing without end. ``events`` gives them as :class:`FsEvent` objects.
    """

    wants_diff = False
    """It keeps no diff: a subscriber that says so spares the policy computing one."""

    def __init__(self, max_events: int = 10_000) -> None:
        self.max_events = max_events
        self._records: deque[_Record] = deque(maxlen=max_events)
        self.events = AuditEvents(self._records)
        """The kept events, oldest first (a read-only sequence)."""

    def __call__(self, event: FsEvent) -> None:
        self._records.append((event.type, event.context_id, event.operation, event.path,
                              event.version_before, event.version_after, event.reason,
                              event.at))

    def record(self, type_: EventType, context_id: str, operation: Operation, path: str,
               before: FileVersion | None, after: FileVersion | None,
               reason: str | None) -> None:
        """Keep an event given by its values, stamped now, without making an
        :class:`FsEvent` first (how the policy records one when this log is its only
        subscriber). The caller guarantees the values are valid: they are not checked."""
        self._records.append((type_, context_id, operation, path, before, after, reason,
                              time.time()))

    def clear(self) -> None:
        """Forget every kept event."""
        self._records.clear()

    def rows(self) -> list[dict[str, str]]:
        """One dict of strings per event, for tables."""
        return [{
            "type": type_, "context": context, "operation": operation, "path": path,
            "before": before.short if before else "",
            "after": after.short if after else "",
            "reason": reason or "",
        } for type_, context, operation, path, before, after, reason, _ in
            list(self._records)]
