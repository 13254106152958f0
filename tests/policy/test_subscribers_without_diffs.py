"""An ``fs/write-intent`` event's diff is computed only for subscribers that may read it:
one that says ``wants_diff = False`` (the audit log, the server's audit trail) spares it."""

from __future__ import annotations

import toolfs
from toolfs.policy.events import FsEvent


class _NoDiffs:
    wants_diff = False

    def __init__(self) -> None:
        self.events: list[FsEvent] = []

    def __call__(self, event: FsEvent) -> None:
        self.events.append(event)


def _intents(events: list[FsEvent]) -> list[FsEvent]:
    return [e for e in events if e.type == "fs/write-intent"]


def test_no_diff_is_made_when_no_subscriber_reads_it() -> None:
    quiet = _NoDiffs()
    ws = toolfs.Workspace("memory://toolfs-no-diffs", subscribers=[quiet])
    ws.write("f.txt", "one\ntwo\n")
    ws.edit("f.txt", "two", "TWO")
    intents = _intents(quiet.events)
    assert len(intents) == 2 and all(e.diff is None for e in intents)


def test_a_subscriber_that_reads_diffs_still_gets_them() -> None:
    quiet, seen = _NoDiffs(), []
    ws = toolfs.Workspace("memory://toolfs-some-diffs", subscribers=[quiet, seen.append])
    ws.write("f.txt", "one\ntwo\n")
    ws.edit("f.txt", "two", "TWO")
    edit = _intents(seen)[-1]
    assert edit.diff is not None and "+TWO" in edit.diff
    assert _intents(quiet.events)[-1].diff == edit.diff  # the one event, shared
