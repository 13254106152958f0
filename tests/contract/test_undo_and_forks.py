"""Undo and forks (issue 37): the journal of a context's changes, checkpoints, rewind,
and the all-or-nothing commit of several files they stand on.

``UndoJournal`` holds the journal's, the rewind's and the all-or-nothing commit's
behaviours; it runs on every backend through ``tests/contract/test_backends.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

import toolfs
from tests.backends import Backend
from toolfs.errors import FsError
from toolfs.policy.events import FsEvent, Veto
from toolfs.undo.atomic import Planned, commit_all


def _seed(backend: Backend, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        backend.put(rel, data)


def _versions(ws: Any, paths: list[str]) -> dict[str, Any]:
    """Read every file through ``ws`` (so its context observes them)."""
    out = {}
    for p in paths:
        f = ws.fs.open(p, "rb")
        out[p] = (f.version, f.read())
    return out


class UndoJournal:
    """The journal, checkpoints, rewind and all-or-nothing commits, on every backend."""

    # -- all-or-nothing commits (toolfs.undo.atomic) ---------------------------------

    def test_commit_all_lands_every_file(self, backend: Backend) -> None:
        _seed(backend, {"a.txt": b"a\n", "b.txt": b"b\n", "c.txt": b"c\n"})
        ws = backend.workspace()
        seen = _versions(ws, ["a.txt", "b.txt", "c.txt"])
        result = commit_all(ws.fs, [
            Planned("a.txt", seen["a.txt"][0], b"A\n", seen["a.txt"][1]),
            Planned("b.txt", seen["b.txt"][0], None, seen["b.txt"][1]),
            Planned("d.txt", None, b"d\n"),
        ])
        assert result.ok, result.refused
        assert result.committed == ["a.txt", "b.txt", "d.txt"]
        assert result.states == {"a.txt": "new", "b.txt": "new", "d.txt": "new"}
        assert backend.get("a.txt") == b"A\n"
        assert not backend.exists("b.txt")
        assert backend.get("d.txt") == b"d\n"
        assert backend.get("c.txt") == b"c\n"

    def test_commit_all_refuses_the_set_when_one_file_is_stale(self,
                                                               backend: Backend) -> None:
        _seed(backend, {"a.txt": b"a\n", "b.txt": b"one\ntwo\n"})
        ws = backend.workspace()
        seen = _versions(ws, ["a.txt", "b.txt"])
        backend.put("b.txt", b"one\nTWO\n")  # another program
        result = commit_all(ws.fs, [
            Planned("a.txt", seen["a.txt"][0], b"A\n", seen["a.txt"][1]),
            Planned("b.txt", seen["b.txt"][0], b"ONE\ntwo\n", seen["b.txt"][1]),
            Planned("new.txt", None, b"n\n"),
        ], on_stale="refuse")
        assert not result.ok and result.committed == []
        assert set(result.refused) == {"b.txt"}
        err = result.refused["b.txt"]
        assert err.code == "stale"
        assert "+TWO" in err.details["diff"] and "-two" in err.details["diff"]
        assert result.states == {"a.txt": "old", "b.txt": "old", "new.txt": "old"}
        assert backend.get("a.txt") == b"a\n"  # nothing written
        assert backend.get("b.txt") == b"one\nTWO\n"
        assert not backend.exists("new.txt")

    def test_commit_all_merges_disjoint_changes_and_refuses_overlaps(
            self, backend: Backend) -> None:
        base = b"1\n2\n3\n4\n5\n"
        _seed(backend, {"m.txt": base, "o.txt": base})
        ws = backend.workspace()
        seen = _versions(ws, ["m.txt", "o.txt"])
        backend.put("m.txt", b"1\n2\n3\n4\nFIVE\n")
        ok = commit_all(ws.fs, [Planned("m.txt", seen["m.txt"][0], b"ONE\n2\n3\n4\n5\n",
                                        base)], on_stale="merge")
        assert ok.ok and ok.merged == ["m.txt"]
        assert backend.get("m.txt") == b"ONE\n2\n3\n4\nFIVE\n"
        backend.put("o.txt", b"1\n2\nthree\n4\n5\n")
        no = commit_all(ws.fs, [Planned("o.txt", seen["o.txt"][0], b"1\n2\nTHREE\n4\n5\n",
                                        base)], on_stale="merge")
        assert not no.ok and no.refused["o.txt"].code == "stale"
        assert no.refused["o.txt"].details["overlap"] is True
        assert backend.get("o.txt") == b"1\n2\nthree\n4\n5\n"

    def test_commit_all_refuses_a_create_over_a_file_made_meanwhile(
            self, backend: Backend) -> None:
        ws = backend.workspace()
        backend.put("x.txt", b"theirs\n")
        result = commit_all(ws.fs, [Planned("x.txt", None, b"mine\n")])
        assert result.refused["x.txt"].code == "stale"
        assert backend.get("x.txt") == b"theirs\n"

    def test_commit_all_rolls_back_when_a_write_fails_midway(self,
                                                             backend: Backend) -> None:
        _seed(backend, {"a.txt": b"a\n", "b.txt": b"b\n", "c.txt": b"c\n"})
        ws = backend.workspace()
        seen = _versions(ws, ["a.txt", "b.txt", "c.txt"])
        writes = []

        def veto_third(event: FsEvent) -> None:
            if event.type == "fs/write-intent":
                writes.append(event.path)
                if len(writes) == 3:
                    raise Veto("the third write is refused")

        ws.subscribe(veto_third)
        result = commit_all(ws.fs, [
            Planned("a.txt", seen["a.txt"][0], b"A\n", seen["a.txt"][1]),
            Planned("new.txt", None, b"n\n"),
            Planned("c.txt", seen["c.txt"][0], b"C\n", seen["c.txt"][1]),
            Planned("b.txt", seen["b.txt"][0], None, seen["b.txt"][1]),
        ])
        assert not result.ok and result.committed == []
        assert result.refused["c.txt"].code == "denied"
        assert sorted(result.rolled_back) == ["a.txt", "new.txt"]
        assert set(result.states.values()) == {"old"}
        assert backend.get("a.txt") == b"a\n" and backend.get("b.txt") == b"b\n"
        assert backend.get("c.txt") == b"c\n" and not backend.exists("new.txt")

    def test_commit_all_roll_back_keeps_a_change_made_after_its_write(
            self, backend: Backend) -> None:
        _seed(backend, {"a.txt": b"a\n", "b.txt": b"b\n"})
        ws = backend.workspace()
        seen = _versions(ws, ["a.txt", "b.txt"])

        def meddle(event: FsEvent) -> None:
            if event.type == "fs/write-intent" and event.path == "b.txt":
                backend.put("a.txt", b"someone else\n")  # after a.txt was written
                raise Veto("no")

        ws.subscribe(meddle)
        result = commit_all(ws.fs, [
            Planned("a.txt", seen["a.txt"][0], b"A\n", seen["a.txt"][1]),
            Planned("b.txt", seen["b.txt"][0], b"B\n", seen["b.txt"][1]),
        ])
        assert result.states == {"a.txt": "theirs", "b.txt": "old"}
        assert result.refused["a.txt"].code == "stale"
        assert backend.get("a.txt") == b"someone else\n"  # never overwritten
        assert backend.get("b.txt") == b"b\n"

    def test_commit_all_refuses_a_path_given_twice(self, backend: Backend) -> None:
        ws = backend.workspace()
        with pytest.raises(FsError) as info:
            commit_all(ws.fs, [Planned("a", None, b""), Planned("a", None, b"x")])
        assert info.value.code == "invalid_arguments"
        assert isinstance(toolfs.FsError, type)
