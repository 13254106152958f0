"""Events and hooks: write intents can veto, subscribers cannot break a commit, events
carry context, path and versions, the audit log is bounded and read-only."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

import toolfs
from tests.backend_fixtures import Backend
from tests.contract.calls import err, exec_err, exec_ok, ok
from tests.contract.test_arguments import _same_as_validated
from toolfs.policy.events import FsEvent, Veto
from toolfs.policy.filesystem import PolicyFileSystem


def _calls(ws: toolfs.Workspace) -> None:
    """Reads, writes, edits and refusals, the same on every workspace given."""
    ws.write("a.txt", "one\ntwo\n")
    ws.read("a.txt")
    ws.edit("a.txt", "one", "1")
    ws.execute("write", {"file_path": "b.txt", "content": "x\n"})
    ws.execute("edit", {"file_path": "a.txt", "old_string": "nowhere", "new_string": "y"})
    ws.execute("write", {"file_path": "c\udcff.txt", "content": "x\n"})
    ws.write("ünïcödé/ファイル.txt", "x\n")
    ws.execute("read", {"file_path": ".env"})


def _what(event: toolfs.FsEvent) -> tuple[object, ...]:
    return (event.type, event.operation, event.path, event.version_before,
            event.version_after, event.reason)


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


def test_the_audit_log_keeps_the_events_its_subscribers_see(tmp_path: pathlib.Path) -> None:
    """A log that is a workspace's only subscriber keeps each event's values without an
    FsEvent being made; it gives the same events as when another subscriber (which gets
    FsEvent objects) is there too."""
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    (tmp_path / "one" / "b.txt").write_text("old\n")
    (tmp_path / "two" / "b.txt").write_text("old\n")
    alone = toolfs.Workspace(str(tmp_path / "one"), deny=[".env"])
    seen: list[toolfs.FsEvent] = []
    shared = toolfs.Workspace(str(tmp_path / "two"), deny=[".env"], subscribers=[seen.append])
    _calls(alone)
    _calls(shared)
    types = {e.type for e in seen}
    assert types == {"fs/read", "fs/write-intent", "fs/written", "fs/denied"}
    # The same values, `at` included; only what subscribers get carries write diffs.
    assert list(shared.audit.events) == [e.model_copy(update={"diff": None}) for e in seen]
    assert [_what(e) for e in alone.audit.events] == [_what(e) for e in seen]
    assert {e.context_id for e in alone.audit.events} == {alone.context_id}
    for event in alone.audit.events:
        assert type(event) is toolfs.FsEvent
        _same_as_validated(event)
    assert alone.audit.rows() == [
        {**row, "context": alone.context_id} for row in shared.audit.rows()]


def test_the_audit_events_are_a_read_only_sequence() -> None:
    log = toolfs.AuditLog(max_events=3)
    assert not log.events and len(log.events) == 0 and list(log.events) == []
    made = [toolfs.FsEvent(type="fs/read", context_id="c", operation="read", path=f"{i}")
            for i in range(5)]
    for event in made:
        log(event)
    assert len(log.events) == 3 and log.max_events == 3  # the oldest two dropped
    assert list(log.events) == made[2:]
    assert log.events[0] == made[2] and log.events[-1] == made[4]
    assert log.events[1:] == made[3:] and list(reversed(log.events)) == made[:1:-1]
    assert log.events.index(made[3]) == 1 and made[4] in log.events
    with pytest.raises(IndexError):
        log.events[3]
    with pytest.raises(TypeError):
        log.events[0] = made[0]  # type: ignore[index]
    log.clear()
    assert len(log.events) == 0 and log.rows() == []


def test_the_audit_events_can_be_read_while_parallel_calls_add_more() -> None:
    """Iterating the events takes a snapshot: writers in other threads never make it
    fail (a deque iterated while it grows raises)."""
    import threading
    import time

    ws = toolfs.Workspace("memory://audit-threads")
    stop = threading.Event()

    def writer(n: int) -> None:
        while not stop.is_set():
            ws.write(f"f{n}.txt", "x\n")

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 30
        while len(ws.audit.events) < 200 and time.monotonic() < deadline:
            time.sleep(0.001)
        first = len(ws.audit.events)
        for _ in range(20):
            events = list(ws.audit.events)
            rows = ws.audit.rows()
            assert all(type(e) is toolfs.FsEvent for e in events) and len(rows) >= len(events)
        last = len(ws.audit.events)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert 200 <= first < last  # the writers did add events while the log was read


def test_audit_log_is_bounded() -> None:
    log = toolfs.AuditLog(max_events=3)
    ws = toolfs.Workspace("memory://audit-bound", subscribers=[log])
    for i in range(5):
        ws.write(f"f{i}.txt", "x\n")
    assert len(log.events) == 3
    assert [e.path for e in log.events] == ["f3.txt", "f4.txt", "f4.txt"]
    assert len(ws.audit.events) == 10  # the workspace's own log keeps up to 10,000


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


class EventsAndHooks:
    """Write-intent hooks and events."""

    def test_a_raising_written_subscriber_does_not_turn_a_commit_into_an_error(self,
            backend: Backend) -> None:
        ws = backend.workspace()

        def broken(event: FsEvent) -> None:
            if event.type in ("fs/written", "fs/denied"):
                raise RuntimeError("audit sink down")

        ws.subscribe(broken)
        out = exec_ok(ws, "write", file_path="w.txt", content="one\n")
        assert out.text.startswith("Created")
        assert backend.get("w.txt") == b"one\n"
        exec_ok(ws, "edit", file_path="w.txt", old_string="one", new_string="two")
        assert backend.get("w.txt") == b"two\n"
        other = ws.new_context()
        exec_err(other, "write", "not_observed", file_path="w.txt", content="three\n")

    def test_a_failing_write_intent_hook_refuses_the_write(self, backend: Backend) -> None:
        ws = backend.workspace()

        def hook(event: FsEvent) -> None:
            if event.type == "fs/write-intent":
                raise ConnectionError("approval service down")

        ws.subscribe(hook)
        out = exec_err(ws, "write", "denied", file_path="h.txt", content="x")
        assert "subscriber failed" in out.text
        assert not backend.exists("h.txt")

    def test_write_intent_veto(self, backend: Backend) -> None:
        ws = backend.workspace()

        def no_migrations(event: toolfs.FsEvent) -> None:
            if event.type == "fs/write-intent" and event.path.startswith("migrations/"):
                raise Veto("migrations are frozen")

        ws.subscribe(no_migrations)
        out = err(ws, "write", "denied", file_path="migrations/001.sql", content="drop\n")
        assert "migrations are frozen" in out.text
        assert not backend.exists("migrations/001.sql")
        ok(ws, "write", file_path="ok.sql", content="select 1\n")

    def test_events_carry_context_path_and_versions(self, backend: Backend) -> None:
        backend.put("ev.txt", b"a\n")
        ws = backend.workspace(context_id="agent-1")
        seen: list[toolfs.FsEvent] = []
        ws.subscribe(seen.append)
        r = ws.read("ev.txt")
        e = ws.edit("ev.txt", "a", "b")
        other = backend.workspace()
        other.read("ev.txt")
        other.write("ev.txt", "c\n")
        ws.execute("edit", {"file_path": "ev.txt", "old_string": "b", "new_string": "d"})
        assert [x.type for x in seen] == [
            "fs/read", "fs/write-intent", "fs/written", "fs/write-intent", "fs/denied"]
        assert {x.context_id for x in seen} == {"agent-1"}
        assert {x.path for x in seen} == {"ev.txt"}
        assert seen[0].version_after == r.version
        assert seen[2].version_before == r.version and seen[2].version_after == e.version
        assert seen[4].reason is not None and seen[4].reason.startswith("stale")

    def test_audit_log_records_all_contexts_events(self, backend: Backend) -> None:
        ws = backend.workspace()
        ws.write("log.txt", "x\n")
        rows = ws.audit.rows()
        assert [r["type"] for r in rows] == ["fs/write-intent", "fs/written"]
        from toolfs.integrations.display import markdown  # the notebook view lives above the core

        assert "| type |" in markdown(ws.audit)
