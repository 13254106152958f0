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
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

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


class Veto(Exception):
    """Raised by an ``fs/write-intent`` subscriber to refuse the change."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


Subscriber = Callable[[FsEvent], None]


class AuditLog:
    """A subscriber that keeps the last ``max_events`` events; a table in notebooks.

    Every workspace has one (``ws.audit``); the bound keeps a long-running agent or
    server from growing without end.
    """

    def __init__(self, max_events: int = 10_000) -> None:
        self.events: deque[FsEvent] = deque(maxlen=max_events)

    def __call__(self, event: FsEvent) -> None:
        self.events.append(event)

    def rows(self) -> list[dict[str, str]]:
        """One dict of strings per event, for tables."""
        return [{
            "type": e.type, "context": e.context_id, "operation": e.operation, "path": e.path,
            "before": e.version_before.short if e.version_before else "",
            "after": e.version_after.short if e.version_after else "",
            "reason": e.reason or "",
        } for e in self.events]
