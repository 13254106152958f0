"""Undo and forks (issue 37): the journal of a context's changes, checkpoints, rewind,
and the all-or-nothing commit of several files they stand on.

``UndoJournal`` holds the journal's, the rewind's and the all-or-nothing commit's
behaviours; it runs on every backend through ``tests/contract/test_backends.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

import toolfs
from tests.backend_fixtures import Backend
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

    # -- the journal ---------------------------------------------------------------------

    def test_changes_list_every_kind_of_change_oldest_first(self, backend: Backend) -> None:
        backend.put("keep.txt", b"k\n")
        backend.put("gone.txt", b"g\n")
        ws = backend.workspace()
        assert ws.changes() == []
        ws.write("a.txt", "one\n")
        ws.edit("a.txt", "one", "two")
        ws.read("gone.txt")
        ws.fs.rm_file("gone.txt")
        ws.read("keep.txt")
        ws.fs.mv("keep.txt", "moved.txt")
        changes = ws.changes()
        assert [(c.path, c.kind, c.tool) for c in changes] == [
            ("a.txt", "created", "write"), ("a.txt", "updated", "edit"),
            ("gone.txt", "deleted", "delete"), ("keep.txt", "moved", "move")]
        created, edited, deleted, moved = changes
        assert created.before is None and created.after == edited.before
        assert edited.after is not None and deleted.after is None
        assert moved.to_path == "moved.txt" and moved.after is not None
        assert all(c.at.tzinfo is not None and c.at.utcoffset().total_seconds() == 0
                   for c in changes)
        assert "-one" in edited.diff() and "+two" in edited.diff()
        assert "+one" in created.diff()
        assert "-g" in deleted.diff()
        assert moved.diff().startswith("moved keep.txt -> moved.txt")
        cp = ws.checkpoint("later")
        assert isinstance(cp, toolfs.Checkpoint) and cp.position == 5 and cp.label == "later"
        ws.write("b.txt", "b\n")
        assert [c.path for c in ws.changes(since=cp)] == ["b.txt"]
        assert [c.path for c in ws.changes(since="later")] == ["b.txt"]

    def test_the_journal_adds_no_request_when_the_observed_bytes_are_held(
            self, backend: Backend) -> None:
        backend.put("a.txt", b"x = 1\n")
        counts = {"with": 0, "without": 0}
        for label in ("with", "without"):
            ws = backend.workspace()
            if label == "without":
                ws.fs.journal = None
            ws.read("a.txt")
            store = ws.fs.store
            calls: list[str] = []
            for name in ("get", "put", "delete"):
                real = getattr(store, name)

                def counted(*args: Any, _real: Any = real, _name: str = name,
                            _calls: list[str] = calls, **kwargs: Any) -> Any:
                    _calls.append(_name)
                    return _real(*args, **kwargs)
                setattr(store, name, counted)
            try:
                ws.edit("a.txt", "x = 1", "x = 2")
                ws.write("a.txt", "x = 3\n")
                ws.edit("a.txt", "x = 3", "x = 1")
            finally:
                for name in ("get", "put", "delete"):
                    delattr(store, name)
            counts[label] = len(calls)
        assert counts["with"] == counts["without"], counts
        assert ws.journal.requests == 0

    # -- rewind ----------------------------------------------------------------------------

    def test_rewind_restores_every_kind_of_change(self, backend: Backend) -> None:
        backend.put("upd.txt", b"old\n")
        backend.put("del.txt", b"deleted\n")
        backend.put("mv.txt", b"moving\n")
        ws = backend.workspace()
        for p in ("upd.txt", "del.txt", "mv.txt"):
            ws.read(p)
        cp = ws.checkpoint()
        ws.edit("upd.txt", "old", "new")
        ws.write("new.txt", "created\n")
        ws.fs.rm_file("del.txt")
        ws.fs.mv("mv.txt", "dir/moved.txt")
        done = ws.checkpoint("done")
        result = ws.rewind(cp)
        assert isinstance(result, toolfs.RewindResult)
        assert not result.refused, result.refused
        assert sorted(result.restored) == ["del.txt", "dir/moved.txt", "mv.txt", "new.txt",
                                           "upd.txt"]
        assert backend.get("upd.txt") == b"old\n"
        assert not backend.exists("new.txt")
        assert backend.get("del.txt") == b"deleted\n"
        assert backend.get("mv.txt") == b"moving\n" and not backend.exists("dir/moved.txt")
        # The rewind is journaled: rewinding to a checkpoint before it redoes the work.
        assert {c.tool for c in ws.changes()[-5:]} == {"rewind"}
        redo = ws.rewind(done)
        assert not redo.refused, redo.refused
        assert backend.get("upd.txt") == b"new\n" and backend.get("new.txt") == b"created\n"
        assert backend.get("dir/moved.txt") == b"moving\n" and not backend.exists("mv.txt")
        assert not backend.exists("del.txt")

    def test_rewind_never_undoes_someone_elses_change(self, backend: Backend) -> None:
        backend.put("mine.txt", b"m\n")
        backend.put("shared.txt", b"1\n2\n3\n4\n5\n")
        ws = backend.workspace()
        ws.read("mine.txt")
        ws.read("shared.txt")
        cp = ws.checkpoint()
        ws.edit("mine.txt", "m", "M")
        ws.edit("shared.txt", "1\n", "ONE\n")
        backend.put("shared.txt", b"ONE\n2\n3\n4\nFIVE\n")  # another program, later
        result = ws.rewind(cp)
        assert result.restored == []
        err = result.refused["shared.txt"]
        assert err.code == "stale" and "+FIVE" in err.details["diff"]
        assert "-5" in err.details["diff"]
        assert backend.get("shared.txt") == b"ONE\n2\n3\n4\nFIVE\n"
        assert backend.get("mine.txt") == b"M\n"  # all or nothing: not restored either

    def test_rewind_in_merge_mode_is_a_reverse_three_way_merge(self,
                                                                backend: Backend) -> None:
        backend.put("shared.txt", b"1\n2\n3\n4\n5\n")
        ws = backend.workspace(policy=toolfs.Policy(on_stale="merge"))
        ws.read("shared.txt")
        cp = ws.checkpoint()
        ws.edit("shared.txt", "1\n", "ONE\n")
        backend.put("shared.txt", b"ONE\n2\n3\n4\nFIVE\n")
        result = ws.rewind(cp)
        assert result.restored == ["shared.txt"], result.refused
        assert backend.get("shared.txt") == b"1\n2\n3\n4\nFIVE\n"
        ws.read("shared.txt")
        cp2 = ws.checkpoint()
        ws.edit("shared.txt", "1\n", "uno\n")
        backend.put("shared.txt", b"UNO\n2\n3\n4\nFIVE\n")  # the same line: overlaps
        refused = ws.rewind(cp2)
        assert refused.restored == [] and refused.refused["shared.txt"].code == "stale"
        assert backend.get("shared.txt") == b"UNO\n2\n3\n4\nFIVE\n"

    def test_rewind_past_dropped_pre_images_is_refused(self, backend: Backend) -> None:
        ws = backend.workspace(journal_bytes=64)
        ws.write("a.txt", "a" * 30 + "\n")
        cp = ws.checkpoint()
        ws.write("a.txt", "b" * 30 + "\n")
        ws.write("a.txt", "c" * 30 + "\n")  # holds: b..b (pre) and c..c (tip): a..a dropped
        result = ws.rewind(cp)
        assert result.restored == [] and result.refused["a.txt"].code == "unsupported"
        assert "no longer holds" in result.refused["a.txt"].message
        assert backend.get("a.txt") == b"c" * 30 + b"\n"

    def test_a_pre_image_over_the_journal_bound_refuses_the_change(
            self, backend: Backend) -> None:
        backend.put("big.txt", b"x" * 100)
        ws = backend.workspace(journal_bytes=50)
        ws.read("big.txt")
        with pytest.raises(FsError) as info:
            ws.write("big.txt", "small\n")
        assert info.value.code == "too_large" and "journal" in info.value.message
        assert backend.get("big.txt") == b"x" * 100  # nothing changed
        with pytest.raises(FsError):
            ws.fs.rm_file("big.txt")
        assert backend.exists("big.txt")

    def test_commit_all_rolls_back_when_a_file_changes_between_check_and_write(
            self, backend: Backend) -> None:
        _seed(backend, {"a.txt": b"a\n", "b.txt": b"b\n", "c.txt": b"c\n"})
        ws = backend.workspace()
        seen = _versions(ws, ["a.txt", "b.txt", "c.txt"])

        def meddle(event: FsEvent) -> None:  # after phase 1 checked c.txt, before its write
            if event.type == "fs/write-intent" and event.path == "b.txt":
                backend.put("c.txt", b"someone else\n")

        ws.subscribe(meddle)
        result = commit_all(ws.fs, [
            Planned(p, seen[p][0], p.upper().encode(), seen[p][1])
            for p in ("a.txt", "b.txt", "c.txt")])
        assert not result.ok and result.refused["c.txt"].code == "stale"
        assert result.states == {"a.txt": "old", "b.txt": "old", "c.txt": "old"}
        assert sorted(result.rolled_back) == ["a.txt", "b.txt"]
        assert backend.get("a.txt") == b"a\n" and backend.get("b.txt") == b"b\n"
        assert backend.get("c.txt") == b"someone else\n"  # theirs, untouched
