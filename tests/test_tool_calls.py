"""Pin what each tool call does: the filesystem calls it makes and the events it emits.

The tool layer may only call ``open`` and ``prepare_write`` on the policy filesystem and
commit through the handles they return (the condition travels with the bytes); the
policy filesystem may only reach the backend through its store's ``get``/``put``.
"""

from __future__ import annotations

from typing import Any

import pytest

import toolfs
from toolfs.policy.filesystem import PolicyFileSystem


class Recorder:
    def __init__(self, ws: toolfs.Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        self.events: list[str] = []
        ws.subscribe(lambda e: self.events.append(e.type))
        fs: PolicyFileSystem = ws.fs
        for name in ("open", "prepare_write", "pipe_file", "cat_file", "info", "exists", "ls",
                     "rm_file"):
            self._wrap(fs, name, monkeypatch, "fs.")
        for name in ("get", "put", "delete"):
            self._wrap(fs.store, name, monkeypatch, "store.")

    def _wrap(self, obj: Any, name: str, mp: pytest.MonkeyPatch, prefix: str) -> None:
        original = getattr(obj, name)

        def recorded(*args: Any, **kwargs: Any) -> Any:
            shown = [repr(a) if isinstance(a, str) else type(a).__name__ for a in args]
            shown += [f"{k}={v!r}" if isinstance(v, str | int) else k
                      for k, v in kwargs.items() if v is not None]
            self.calls.append(f"{prefix}{name}({', '.join(shown)})")
            return original(*args, **kwargs)

        mp.setattr(obj, name, recorded)

    def take(self) -> tuple[list[str], list[str]]:
        out = (self.calls[:], self.events[:])
        self.calls.clear()
        self.events.clear()
        return out


def test_calls_and_events_per_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    ws = toolfs.Workspace("memory://calls-test")
    rec = Recorder(ws, monkeypatch)
    root = "/calls-test"

    ws.write("a.txt", "one\ntwo\n")
    assert rec.take() == (
        ["fs.prepare_write('a.txt', operation='write')",
         f"store.put('{root}/a.txt', bytes, Create)"],
        ["fs/write-intent", "fs/written"])

    ws.read("a.txt")
    assert rec.take() == (
        ["fs.open('a.txt', 'rb')", f"store.get('{root}/a.txt', length={1024 * 1024})"],
        ["fs/read"])

    # An edit right after a full read reuses the bytes the read fetched: no second get.
    ws.edit("a.txt", "one", "1")
    calls, events = rec.take()
    assert calls == [
        "fs.open('a.txt', 'rb', intent='edit')",
        f"store.put('{root}/a.txt', bytes, Update)"]
    assert events == ["fs/write-intent", "fs/written"]

    # After a windowed read of a file, the same holds (small files are fetched whole).
    ws.read("a.txt", offset=2, limit=1)
    rec.take()
    ws.edit("a.txt", "two", "2")
    assert [c.split("(")[0] for c in rec.take()[0]] == ["fs.open", "store.put"]

    # A refused edit makes one store call beyond the conditional put: the current bytes,
    # for the diff it shows.
    other = ws.new_context()
    other.read("a.txt")
    other.write("a.txt", "changed\n")
    out = ws.execute("edit", {"file_path": "a.txt", "old_string": "1", "new_string": "uno"})
    assert out.error is not None and out.error.code == "stale"
    calls, events = rec.take()
    assert [c.split("(")[0] for c in calls] == ["fs.open", "store.put", "store.get"]
    assert events == ["fs/write-intent", "fs/denied"]
