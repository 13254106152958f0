"""Undo and forks (issue 37): the journal of a context's changes, checkpoints, rewind,
and the all-or-nothing commit of several files they stand on.

``UndoJournal`` holds the journal's, the rewind's and the all-or-nothing commit's
behaviours; ``Forks`` those of ``ws.fork()``: a copy-on-write view with the same policy,
whose changes land in the base all or nothing at ``commit()``, conditionally on the base
versions they were made from. Both run on every backend through
``tests/contract/test_backends.py``.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

import toolfs
from tests.backend_fixtures import Backend
from toolfs import Policy
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


MERGE = Policy(on_stale="merge")
TEN = "".join(f"line {i}\n" for i in range(1, 11))


def _text(ws: Any, path: str) -> str:
    out = ws.execute("read", {"file_path": path})
    assert not out.is_error, out.text
    return "".join(line + "\n" for line in out.value.lines)


def _edit(ws: Any, path: str, old: str, new: str) -> toolfs.ToolOutput:
    out: toolfs.ToolOutput = ws.execute("edit", {"file_path": path, "old_string": old,
                                                 "new_string": new})
    return out


def _ok(out: toolfs.ToolOutput) -> Any:
    assert not out.is_error, out.text
    return out.value


def _code(out: toolfs.ToolOutput) -> str:
    assert out.is_error and out.error is not None, out.text
    return out.error.code


def _paths(ws: Any, pattern: str = "**/*") -> set[str]:
    return set(_ok(ws.execute("glob", {"pattern": pattern})).paths)


def _overlay_url(backend: Backend) -> str:
    """An overlay URL on the backend's own store, beside the root (outside it)."""
    return str(backend.fs.unstrip_protocol(f"{backend.root}-overlay-{uuid.uuid4().hex[:6]}"))


class Forks:
    """``ws.fork()``, ``fork.commit()``, ``fork.discard()``, ``fork.changes()``."""

    def test_fork_reads_fall_through_and_the_base_sees_nothing(self, backend: Backend
                                                               ) -> None:
        backend.put("a.txt", b"alpha\n")
        backend.put("b.txt", b"beta\n")
        ws = backend.workspace()
        fork = ws.fork()
        assert _text(fork, "a.txt") == "alpha\n"  # falls through
        _ok(_edit(fork, "a.txt", "alpha", "ALPHA"))
        _ok(fork.execute("write", {"file_path": "c/new.txt", "content": "new\n"}))
        assert _text(fork, "a.txt") == "ALPHA\n"
        assert _text(fork, "c/new.txt") == "new\n"
        # The base, and every other context on it, sees nothing of the fork.
        other = ws.new_context()
        for ctx in (ws, other):
            assert _text(ctx, "a.txt") == "alpha\n"
            assert _code(ctx.execute("read", {"file_path": "c/new.txt"})) == "not_found"
            assert _paths(ctx) == {"a.txt", "b.txt"}
        assert backend.get("a.txt") == b"alpha\n" and not backend.exists("c/new.txt")
        # A file the fork has not changed falls through live: a base change shows.
        backend.put("b.txt", b"beta 2\n")
        assert _text(fork, "b.txt") == "beta 2\n"

    def test_a_delete_in_a_fork_is_a_whiteout(self, backend: Backend) -> None:
        backend.put("keep.txt", b"keep\n")
        backend.put("d/gone.txt", b"needle gone\n")
        backend.put("d/stay.txt", b"needle stays\n")
        ws = backend.workspace()
        fork = ws.fork()
        _text(fork, "d/gone.txt")
        fork.fs.rm_file("d/gone.txt")
        assert _code(fork.execute("read", {"file_path": "d/gone.txt"})) == "not_found"
        assert _paths(fork) == {"keep.txt", "d/stay.txt"}
        grep = _ok(fork.execute("grep", {"pattern": "needle"}))
        assert grep.files == ["d/stay.txt"]
        assert [e.name for e in _ok(fork.execute("ls", {"path": "d"})).entries] == ["stay.txt"]
        assert backend.get("d/gone.txt") == b"needle gone\n"  # the base keeps it
        assert _paths(ws) == {"keep.txt", "d/gone.txt", "d/stay.txt"}
        # Written again in the fork: an update of the base file, not a create.
        _ok(fork.execute("write", {"file_path": "d/gone.txt", "content": "back\n"}))
        assert _text(fork, "d/gone.txt") == "back\n"
        (change,) = fork.changes()
        assert (change.path, change.kind) == ("d/gone.txt", "updated")
        assert change.before is not None and change.after is not None

    def test_glob_grep_and_ls_show_the_merged_view(self, backend: Backend) -> None:
        backend.put("src/a.py", b"x = 1\n")
        backend.put("src/b.py", b"y = 2\n")
        backend.put("docs/r.md", b"x marks\n")
        fork = backend.workspace().fork()
        _text(fork, "src/a.py")
        _ok(_edit(fork, "src/a.py", "x = 1", "z = 1"))
        _ok(fork.execute("write", {"file_path": "src/c.py", "content": "x = 3\n"}))
        _ok(fork.execute("write", {"file_path": "new/deep/n.py", "content": "x = 4\n"}))
        _text(fork, "docs/r.md")
        fork.fs.rm_file("docs/r.md")
        assert _paths(fork, "**/*.py") == {"src/a.py", "src/b.py", "src/c.py",
                                           "new/deep/n.py"}
        grep = _ok(fork.execute("grep", {"pattern": "^x", "output_mode": "content"}))
        assert sorted((m.path, m.text) for m in grep.matches) == [
            ("new/deep/n.py", "x = 4"), ("src/c.py", "x = 3")]
        names = {e.name for e in _ok(fork.execute("ls", {"path": "src"})).entries}
        assert names == {"a.py", "b.py", "c.py"}
        top = {e.name for e in _ok(fork.execute("ls", {})).entries}
        assert {"src", "new"} <= top
        if not backend.keeps_empty_dirs:  # its only file is deleted in the fork
            assert "docs" not in top
        assert fork.fs.isfile("new/deep/n.py") and fork.fs.isdir("new/deep")
        assert not fork.fs.exists("docs/r.md")
        assert set(fork.fs.find("src")) >= {"src/a.py", "src/b.py", "src/c.py"}

    def test_the_fork_keeps_the_policy(self, backend: Backend) -> None:
        backend.put(".env", b"SECRET=1\n")
        backend.put("a.txt", b"a\n")
        fork = backend.workspace(deny=[".env"]).fork()
        assert _code(fork.execute("read", {"file_path": ".env"})) == "denied"
        assert _paths(fork) == {"a.txt"}
        assert _code(fork.execute("read", {"file_path": "../x"})) in ("outside_root",
                                                                       "invalid_arguments")
        # Unread files are not changed, in the fork as in the base.
        assert _code(fork.execute("write", {"file_path": "a.txt", "content": "x"})) \
            == "not_observed"
        ro = backend.workspace(read_only=True).fork()
        assert _code(ro.execute("write", {"file_path": "n.txt", "content": "x"})) \
            == "denied"
        assert backend.workspace(policy=MERGE).fork().fs.policy.on_stale == "merge"

    def test_the_fork_starts_from_what_its_context_read(self, backend: Backend) -> None:
        backend.put("a.txt", b"alpha\n")
        ws = backend.workspace()
        _text(ws, "a.txt")
        fork = ws.fork()
        _ok(_edit(fork, "a.txt", "alpha", "ALPHA"))  # no read in the fork needed
        backend.put("a.txt", b"changed\n")
        assert _code(_edit(ws.fork(), "a.txt", "alpha", "x")) == "stale"

    def test_two_forks_change_disjoint_files_and_both_commit(self, backend: Backend
                                                            ) -> None:
        backend.put("a.txt", b"a\n")
        backend.put("b.txt", b"b\n")
        ws = backend.workspace()
        one, two = ws.fork(), ws.fork()
        _text(one, "a.txt")
        _text(two, "b.txt")
        _ok(_edit(one, "a.txt", "a", "A"))
        _ok(one.execute("write", {"file_path": "one.txt", "content": "1\n"}))
        _ok(_edit(two, "b.txt", "b", "B"))
        two.fs.rm_file("b.txt")
        _ok(two.execute("write", {"file_path": "two.txt", "content": "2\n"}))
        first = one.commit()
        assert first.ok and sorted(first.committed) == ["a.txt", "one.txt"]
        second = two.commit()
        assert second.ok and sorted(second.committed) == ["b.txt", "two.txt"]
        assert backend.get("a.txt") == b"A\n" and backend.get("one.txt") == b"1\n"
        assert not backend.exists("b.txt") and backend.get("two.txt") == b"2\n"
        assert one.changes() == [] and two.changes() == []

    def test_two_forks_change_one_line_the_second_is_refused_with_the_diff(
            self, backend: Backend) -> None:
        backend.put("f.txt", TEN.encode())
        backend.put("g.txt", b"g\n")
        ws = backend.workspace()
        one, two = ws.fork(), ws.fork()
        for fork, word in ((one, "ONE"), (two, "TWO")):
            _text(fork, "f.txt")
            _ok(_edit(fork, "f.txt", "line 5\n", f"{word}\n"))
        _text(two, "g.txt")
        _ok(_edit(two, "g.txt", "g", "G"))
        _ok(two.execute("write", {"file_path": "h.txt", "content": "h\n"}))
        assert one.commit().ok
        refused = two.commit()
        assert not refused.ok and refused.committed == []
        err = refused.refused["f.txt"]
        assert err.code == "stale"
        assert "-line 5" in err.details["diff"] and "+ONE" in err.details["diff"]
        # All or nothing: none of the fork's other changes landed either.
        assert backend.get("g.txt") == b"g\n" and not backend.exists("h.txt")
        assert "ONE\n" in backend.get("f.txt").decode()
        # The refused fork still holds its changes.
        assert {c.path for c in two.changes()} == {"f.txt", "g.txt", "h.txt"}

    def test_a_commit_that_fails_midway_rolls_back_and_the_fork_keeps_its_changes(
            self, backend: Backend) -> None:
        for name in ("a", "b", "c"):
            backend.put(f"{name}.txt", f"{name}\n".encode())
        ws = backend.workspace()
        fork = ws.fork()
        for name in ("a", "b", "c"):
            _text(fork, f"{name}.txt")
            _ok(_edit(fork, f"{name}.txt", name, name.upper()))
        _ok(fork.execute("write", {"file_path": "d.txt", "content": "d\n"}))

        def veto_c(event: FsEvent) -> None:  # the base refuses the third write
            if event.type == "fs/write-intent" and event.path == "c.txt":
                raise Veto("not now")

        ws.subscribe(veto_c)
        result = fork.commit()
        assert not result.ok and result.committed == []
        assert result.refused["c.txt"].code == "denied"
        # Written before the refused one (in commit_all's order), then restored.
        assert {"a.txt", "b.txt"} <= set(result.rolled_back) and \
            "c.txt" not in result.rolled_back
        assert set(result.states.values()) == {"old"}
        for name in ("a", "b", "c"):
            assert backend.get(f"{name}.txt") == f"{name}\n".encode()
        assert not backend.exists("d.txt")
        assert {c.path for c in fork.changes()} == {"a.txt", "b.txt", "c.txt", "d.txt"}
        ws.fs.subscribers.remove(veto_c)
        assert fork.commit().ok  # the base's own roll back moved nothing the fork read
        assert backend.get("c.txt") == b"C\n" and backend.get("d.txt") == b"d\n"

    def test_in_merge_mode_disjoint_lines_merge_and_overlaps_are_refused(
            self, backend: Backend) -> None:
        backend.put("f.txt", TEN.encode())
        ws = backend.workspace(policy=MERGE)
        one, two, three = ws.fork(), ws.fork(), ws.fork()
        for fork in (one, two, three):
            _text(fork, "f.txt")
        _ok(_edit(one, "f.txt", "line 2\n", "ONE\n"))
        _ok(_edit(two, "f.txt", "line 8\n", "TWO\n"))
        _ok(_edit(three, "f.txt", "line 2\n", "THREE\n"))
        assert one.commit().ok
        merged = two.commit()
        assert merged.ok and merged.merged == ["f.txt"]
        assert backend.get("f.txt").decode() == TEN.replace("line 2\n", "ONE\n").replace(
            "line 8\n", "TWO\n")
        refused = three.commit()
        assert not refused.ok and refused.refused["f.txt"].code == "stale"
        assert refused.refused["f.txt"].details["overlap"] is True

    def test_changes_list_the_fork_against_the_base_versions(self, backend: Backend
                                                            ) -> None:
        backend.put("u.txt", b"old\n")
        backend.put("d.txt", b"doomed\n")
        ws = backend.workspace()
        fork = ws.fork()
        read = fork.read("u.txt")
        _ok(_edit(fork, "u.txt", "old", "new"))
        _text(fork, "d.txt")
        fork.fs.rm_file("d.txt")
        _ok(fork.execute("write", {"file_path": "c.txt", "content": "made\n"}))
        changes = {c.path: c for c in fork.changes()}
        assert {p: c.kind for p, c in changes.items()} == {
            "c.txt": "created", "d.txt": "deleted", "u.txt": "updated"}
        assert changes["u.txt"].before == read.version
        assert changes["c.txt"].before is None and changes["d.txt"].after is None
        assert "-old\n+new" in changes["u.txt"].diff()
        assert "-doomed" in changes["d.txt"].diff() and "+made" in changes["c.txt"].diff()
        assert all(c.at.tzinfo is not None for c in changes.values())
        # A file created and deleted again in the fork is no change at all.
        fork.fs.rm_file("c.txt")
        assert {c.path for c in fork.changes()} == {"d.txt", "u.txt"}
        # A move is one change; it lands as the create and the delete it is.
        fork.fs.mv("u.txt", "m/moved.txt")
        (move,) = [c for c in fork.changes() if c.kind == "moved"]
        assert (move.path, move.to_path, move.before) == ("u.txt", "m/moved.txt",
                                                          read.version)
        assert "-old\n+new" in move.diff()
        assert fork.commit().ok
        assert backend.get("m/moved.txt") == b"new\n" and not backend.exists("u.txt")

    def test_after_a_commit_the_fork_goes_on(self, backend: Backend) -> None:
        backend.put("a.txt", b"one\n")
        ws = backend.workspace()
        fork = ws.fork()
        _text(fork, "a.txt")
        _ok(_edit(fork, "a.txt", "one", "two"))
        assert fork.commit().ok
        assert backend.get("a.txt") == b"two\n" and fork.changes() == []
        # Both contexts observed the version committed: each edits on without a read.
        _ok(_edit(fork, "a.txt", "two", "three"))
        assert fork.commit().ok
        assert backend.get("a.txt") == b"three\n"
        _text(ws, "a.txt")
        _ok(_edit(ws, "a.txt", "three", "four"))
        assert _text(fork, "a.txt") == "four\n"

    def test_changes_of_a_fork_while_it_commits_are_refused_reads_go_on(
            self, backend: Backend) -> None:
        backend.put("a.txt", b"a\n")
        ws = backend.workspace()
        fork = ws.fork()
        _text(fork, "a.txt")
        _ok(_edit(fork, "a.txt", "a", "A"))
        inside, release = threading.Event(), threading.Event()

        def hold(event: FsEvent) -> None:  # the base's hook holds the commit midway
            if event.type == "fs/write-intent":
                inside.set()
                release.wait(30)

        ws.subscribe(hold)
        results: list[Any] = []
        committing = threading.Thread(target=lambda: results.append(fork.commit()))
        committing.start()
        assert inside.wait(30)
        try:
            out = fork.execute("write", {"file_path": "b.txt", "content": "b\n"})
            assert _code(out) == "denied" and "being committed" in out.text
            assert _text(fork, "a.txt") == "A\n"  # reads go on
        finally:
            release.set()
            committing.join()
        assert results[0].ok and backend.get("a.txt") == b"A\n"
        _ok(fork.execute("write", {"file_path": "b.txt", "content": "b\n"}))

    def test_discard_drops_the_changes_and_spends_the_fork(self, backend: Backend
                                                          ) -> None:
        backend.put("a.txt", b"a\n")
        ws = backend.workspace()
        fork = ws.fork()
        _ok(fork.execute("write", {"file_path": "n.txt", "content": "n\n"}))
        fork.discard()
        assert not backend.exists("n.txt")
        for call in (("read", {"file_path": "a.txt"}), ("glob", {"pattern": "*"}),
                     ("write", {"file_path": "m.txt", "content": "m"})):
            out = fork.execute(*call)
            assert _code(out) == "denied" and "discarded" in out.text
        with pytest.raises(toolfs.FsError) as caught:
            fork.commit()
        assert caught.value.code == "denied"
        assert _text(ws, "a.txt") == "a\n"  # the base is untouched and usable
        with pytest.raises(toolfs.FsError) as not_a_fork:
            ws.commit()
        assert not_a_fork.value.code == "invalid_arguments"

    def test_a_url_overlay_survives_a_new_workspace(self, backend: Backend) -> None:
        backend.put("a.txt", b"alpha\n")
        backend.put("b.txt", b"beta\n")
        url = _overlay_url(backend)
        fork = backend.workspace().fork(overlay=url)
        _text(fork, "a.txt")
        _ok(_edit(fork, "a.txt", "alpha", "ALPHA"))
        _text(fork, "b.txt")
        fork.fs.rm_file("b.txt")
        _ok(fork.execute("write", {"file_path": "c/c.txt", "content": "sea\n"}))
        del fork
        again = backend.workspace().fork(overlay=url)  # a new process would do the same
        assert _text(again, "a.txt") == "ALPHA\n" and _text(again, "c/c.txt") == "sea\n"
        assert _paths(again) == {"a.txt", "c/c.txt"}
        assert {c.path: c.kind for c in again.changes()} == {
            "a.txt": "updated", "b.txt": "deleted", "c/c.txt": "created"}
        assert "-alpha\n+ALPHA" in {c.path: c for c in again.changes()}["a.txt"].diff()
        assert backend.get("a.txt") == b"alpha\n"
        assert again.commit().ok
        assert backend.get("a.txt") == b"ALPHA\n" and not backend.exists("b.txt")
        assert backend.get("c/c.txt") == b"sea\n"
        # Discarded, the overlay leaves no object behind.
        _ok(again.execute("write", {"file_path": "x.txt", "content": "x\n"}))
        again.discard()
        backend.fs.invalidate_cache()
        prefix = backend.fs._strip_protocol(url)
        assert not [p for p in backend.fs.find(prefix)
                    if p.rstrip("/") != prefix.rstrip("/")]

    def test_an_overlay_on_another_store(self, backend: Backend, tmp_path: Any) -> None:
        backend.put("a.txt", b"alpha\n")
        overlay = str(tmp_path / "overlay")  # a local directory, whatever the base
        fork = backend.workspace().fork(overlay=overlay)
        _text(fork, "a.txt")
        _ok(_edit(fork, "a.txt", "alpha", "ALPHA"))
        assert (tmp_path / "overlay" / "files" / "a.txt").read_bytes() == b"ALPHA\n"
        again = backend.workspace().fork(overlay=overlay)
        assert _text(again, "a.txt") == "ALPHA\n"
        assert again.commit().ok and backend.get("a.txt") == b"ALPHA\n"
        again.discard()
        assert not [p for p in (tmp_path / "overlay").rglob("*") if p.is_file()]

    def test_an_overlay_url_belongs_to_one_base_and_lies_outside_it(
            self, backend: Backend) -> None:
        ws = backend.workspace()
        inside = str(backend.fs.unstrip_protocol(f"{backend.root}/.fork"))
        for url in (inside, str(backend.fs.unstrip_protocol(backend.root))):
            with pytest.raises(toolfs.FsError) as caught:
                ws.fork(overlay=url)
            assert caught.value.code == "invalid_arguments"
        url = _overlay_url(backend)
        ws.fork(overlay=url)
        backend.put("sub/x.txt", b"x\n")
        other = toolfs.Workspace(backend.fs, root=f"{backend.root}/sub")
        with pytest.raises(toolfs.FsError) as taken:
            other.fork(overlay=url)
        assert taken.value.code == "invalid_arguments" and "another base" in str(taken.value)

    def test_a_fork_of_a_fork_commits_into_its_parent(self, backend: Backend) -> None:
        backend.put("a.txt", b"a\n")
        ws = backend.workspace()
        parent = ws.fork()
        _text(parent, "a.txt")
        _ok(_edit(parent, "a.txt", "a", "parent"))
        child = parent.fork()
        _ok(_edit(child, "a.txt", "parent", "child"))  # the parent's read carries over
        _ok(child.execute("write", {"file_path": "c.txt", "content": "c\n"}))
        assert _text(parent, "a.txt") == "parent\n"
        assert _code(parent.execute("read", {"file_path": "c.txt"})) == "not_found"
        assert child.commit().ok
        assert _text(parent, "a.txt") == "child\n" and _text(parent, "c.txt") == "c\n"
        assert backend.get("a.txt") == b"a\n" and not backend.exists("c.txt")
        assert parent.commit().ok
        assert backend.get("a.txt") == b"child\n" and backend.get("c.txt") == b"c\n"

    def test_a_commit_racing_writers_on_the_base_loses_no_update(self, backend: Backend
                                                                 ) -> None:
        backend.put("f.txt", b"head\n" + b"".join(b"pad %d\n" % i for i in range(6))
                    + b"END\n")
        ws = backend.workspace(policy=MERGE)
        fork = ws.fork()
        _text(fork, "f.txt")
        _ok(_edit(fork, "f.txt", "head\n", "HEAD (fork)\n"))
        racer = ws.new_context()
        wins: list[str] = []
        started = threading.Event()

        def race() -> None:
            for i in range(6):
                marker = f"<racer {i}>"
                _text(racer, "f.txt")
                if not _edit(racer, "f.txt", "END", f"{marker}\nEND").is_error:
                    wins.append(marker)
                started.set()

        thread = threading.Thread(target=race)
        thread.start()
        started.wait(30)
        result = fork.commit()
        thread.join()
        final = backend.get("f.txt").decode()
        # Every edit the racer made stands, and the fork's change landed exactly when
        # the commit says so (merged onto the racer's lines, which it does not touch).
        assert wins and all(m in final for m in wins) and final.count("<racer") == len(wins)
        assert result.ok == ("HEAD (fork)" in final), (result, final)
        assert result.ok or result.refused["f.txt"].code == "stale"

    def test_parallel_calls_in_one_fork_never_overwrite_each_other(
            self, backend: Backend) -> None:
        backend.put("f.txt", b"0\n")
        fork = backend.workspace().fork()
        # Six changes made from one version of a file the fork has not changed yet
        # (the base's), stored in parallel: exactly one lands, the others are stale.
        handles = [fork.fs.open("f.txt", "rb") for _ in range(6)]
        assert len({h.version for h in handles}) == 1
        barrier = threading.Barrier(6)
        outcomes: list[str] = []

        def race(k: int) -> None:
            barrier.wait()
            try:  # bytes of their own (identical bytes keep a digest version)
                handles[k].commit(f"{len(outcomes)}-{uuid.uuid4().hex}-{k}\n".encode())
                outcomes.append("ok")
            except toolfs.FsError as err:
                outcomes.append(err.code)

        _run_threads(race, 6)
        assert sorted(outcomes) == ["ok"] + ["stale"] * 5
        # And again from one version of the fork's own bytes.
        handles = [fork.fs.open("f.txt", "rb") for _ in range(6)]
        outcomes.clear()
        _run_threads(race, 6)
        assert sorted(outcomes) == ["ok"] + ["stale"] * 5
        # Contexts of the fork racing read -> edit: every edit that succeeded is kept.
        backend.put("race.txt", b"START\nEND\n")
        contexts = [fork.new_context() for _ in range(4)]
        wins: list[str] = []
        codes: list[str] = []

        def agent(k: int) -> None:
            for i in range(8):
                marker = f"<{k}:{i}>"
                _text(contexts[k], "race.txt")
                out = _edit(contexts[k], "race.txt", "END", f"{marker}\nEND")
                (codes.append(_code(out)) if out.is_error else wins.append(marker))

        _run_threads(agent, 4)
        assert set(codes) <= {"stale"} and wins
        final = _text(fork, "race.txt")
        assert all(m in final for m in wins) and final.count("<") == len(wins)
        assert backend.get("race.txt") == b"START\nEND\n"  # the base saw nothing
        assert fork.commit().ok
        assert backend.get("race.txt").decode() == final


def _run_threads(fn: Any, n: int) -> None:
    threads = [threading.Thread(target=fn, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
