"""A ``stale`` refusal shows what changed since the read, and counts as a read when whole.

On every backend: the refusal of an edit or a write carries the unified diff from the
observed version to the current one (``details["diff"]``, in the model text between
message and advice); when the whole diff was shown, the next call needs no read; when it
was cut, or the observed bytes are no longer held, nothing is recorded and the advice is
to read. Approval hooks see the diff of each change about to be committed.
"""

from __future__ import annotations

import difflib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolfs
from tests.backend_fixtures import Backend
from toolfs.errors import STALE_SHOWN_ADVICE
from toolfs.formats.diff import diff_lines, line_keys, split_lines_keepends, unified
from toolfs.integrations.anthropic import MemoryTool, TextEditor
from toolfs.integrations.deepagents import ToolfsBackend
from toolfs.integrations.openai import apply_patch

FORTY = "".join(f"line {i}\n" for i in range(1, 41)).encode()


def _stale(out: toolfs.ToolOutput) -> toolfs.FsError:
    assert out.is_error and out.error is not None, out.text
    assert out.error.code == "stale", out.text
    return out.error


lines = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "d", "a\r\n"]), max_size=14)


@settings(max_examples=300, deadline=None)
@given(lines, lines)
def test_hunks_rebuild_the_new_text_with_the_fewest_changed_lines(
        a: list[str], b: list[str]) -> None:
    ka, kb = line_keys(a), line_keys(b)
    hunks = diff_lines(ka, kb)
    assert hunks is not None
    rebuilt: list[str] = []
    x = 0
    for h in hunks:
        assert x <= h.a_start
        rebuilt += ka[x:h.a_start] + kb[h.b_start:h.b_end]
        x = h.a_end
    assert rebuilt + ka[x:] == kb
    same = sum(m.size for m in difflib.SequenceMatcher(None, ka, kb, autojunk=False)
               .get_matching_blocks())
    changed = sum(h.a_end - h.a_start + h.b_end - h.b_start for h in hunks)
    assert changed <= len(ka) + len(kb) - 2 * same  # never worse than difflib


def test_unified_text_is_what_diff_u_prints() -> None:
    a = split_lines_keepends("".join(f"{i}\n" for i in range(1, 21)) + "end")
    b = split_lines_keepends("".join(f"{i}\n" for i in range(1, 21) if i != 9) + "end\n")
    hunks = diff_lines(line_keys(a), line_keys(b))
    assert hunks is not None
    ours = unified(a, b, hunks, a_label="x", b_label="y").text
    theirs = "".join(difflib.unified_diff(a, b, "x", "y")).replace(
        "-end+end", "-end\n\\ No newline at end of file\n+end")
    assert ours == theirs.replace("--- x\n+++ y\n", "--- x\n+++ y\n")


def test_a_large_file_with_a_few_changes_diffs_cheaply() -> None:
    a = [f"line {i}\n" for i in range(100_000)]
    b = list(a)
    for i in range(0, 100_000, 5_000):
        b[i] = "changed\n"
    hunks = diff_lines(a, b, max_work=5_000)  # 20 changes: a few hundred diagonals
    assert hunks is not None and len(hunks) == 20
    assert diff_lines([f"{i}\n" for i in range(3000)], [f"{i}x\n" for i in range(3000)],
                      max_work=5_000) is None


class StaleDiff:
    """A stale refusal shows the change since the observation (sync and async)."""

    def test_edit_refusal_shows_the_change_and_the_retry_needs_no_read(
            self, backend: Backend) -> None:
        backend.put("f.txt", FORTY)
        ws = backend.workspace()
        ws.read("f.txt")
        backend.put("f.txt", FORTY.replace(b"line 5\n", b"line five\n"))
        args = {"file_path": "f.txt", "old_string": "line 30", "new_string": "line thirty"}
        err = _stale(ws.execute("edit", args))
        diff = err.details["diff"]
        assert "@@ -2,7 +2,7 @@\n line 2\n line 3\n line 4\n-line 5\n+line five\n" in diff
        assert err.details["diff_complete"] is True and err.details["counts_as_read"] is True
        assert backend.get("f.txt").count(b"line five") == 1  # refused: nothing written
        out = ws.execute("edit", args)  # no read between
        assert not out.is_error, out.text
        assert backend.get("f.txt") == FORTY.replace(b"line 5\n", b"line five\n").replace(
            b"line 30", b"line thirty")


class SyncStaleDiff:
    """A stale refusal shows the change since the observation."""

    def test_refusal_text_holds_the_diff_between_message_and_advice(
            self, sync_backend: Backend) -> None:
        sync_backend.put("f.txt", FORTY)
        ws = sync_backend.workspace()
        ws.read("f.txt")
        sync_backend.put("f.txt", FORTY.replace(b"line 5\n", b"line five\n"))
        out = ws.execute("write", {"file_path": "f.txt", "content": "mine\n"})
        err = _stale(out)
        head, _, rest = out.text.partition("\n")
        assert head == "Error [stale]: f.txt changed since you read it"
        assert rest.startswith("Changes since you read it:\n--- f.txt (as you read it)\n"
                               "+++ f.txt (now)\n@@ -2,7 +2,7 @@\n")
        assert rest.endswith("\n" + STALE_SHOWN_ADVICE)
        assert out.to_dict()["error"]["details"]["diff"] == err.details["diff"]
        # The write saw every change: it may now replace the file, knowingly.
        assert not ws.execute("write", {"file_path": "f.txt", "content": "mine\n"}).is_error
        assert sync_backend.get("f.txt") == b"mine\n"

    def test_a_cut_diff_records_nothing_and_says_read(self, sync_backend: Backend) -> None:
        sync_backend.put("f.txt", FORTY)
        ws = sync_backend.workspace(diff_chars=200)
        ws.read("f.txt")
        sync_backend.put("f.txt", FORTY.replace(b"line 5\n", b"five\n").replace(b"line 35", b"x"))
        args = {"file_path": "f.txt", "old_string": "line 20", "new_string": "twenty"}
        out = ws.execute("edit", args)
        err = _stale(out)
        assert err.details["diff_complete"] is False and err.details["counts_as_read"] is False
        assert "-line 5\n+five\n" in err.details["diff"] and "line 35" not in err.details["diff"]
        assert "[diff cut" in out.text and "Read it again" in out.text
        _stale(ws.execute("edit", args))  # still the old observation
        ws.read("f.txt")
        assert not ws.execute("edit", args).is_error

    def test_without_the_observed_bytes_there_is_no_diff(self, sync_backend: Backend) -> None:
        sync_backend.put("f.txt", FORTY)
        ws = sync_backend.workspace(cache_bytes=0)  # the ledger keeps versions, not bytes
        ws.read("f.txt")
        sync_backend.put("f.txt", FORTY.replace(b"line 5\n", b"line five\n"))
        args = {"file_path": "f.txt", "old_string": "line 30", "new_string": "line thirty"}
        err = _stale(ws.execute("edit", args))
        assert "diff" not in err.details
        _stale(ws.execute("edit", args))

    def test_a_file_created_since_it_was_seen_absent_is_shown_whole(
            self, sync_backend: Backend) -> None:
        ws = sync_backend.workspace()
        with pytest.raises(toolfs.FsError):
            ws.read("new.txt")  # seen absent
        sync_backend.put("new.txt", b"theirs\n")
        err = _stale(ws.execute("write", {"file_path": "new.txt", "content": "mine\n"}))
        assert err.details["diff"].endswith("@@ -0,0 +1 @@\n+theirs\n")
        assert err.details["counts_as_read"] is True
        assert sync_backend.get("new.txt") == b"theirs\n"
        assert not ws.execute("write", {"file_path": "new.txt", "content": "mine\n"}).is_error

    def test_a_deleted_file_is_said_deleted_and_can_be_written_again(
            self, sync_backend: Backend) -> None:
        sync_backend.put("f.txt", b"one\n")
        ws = sync_backend.workspace()
        ws.read("f.txt")
        sync_backend.remove("f.txt")
        err = _stale(ws.execute("write", {"file_path": "f.txt", "content": "1\n"}))
        assert err.details["deleted"] is True and err.details["counts_as_read"] is True
        assert "deleted since you read it" in err.message
        assert not ws.execute("write", {"file_path": "f.txt", "content": "1\n"}).is_error
        assert sync_backend.get("f.txt") == b"1\n"

    def test_crlf_and_bom_files_diff_on_lines_and_keep_their_bytes(
            self, sync_backend: Backend) -> None:
        original = b"\xef\xbb\xbfa\r\nb\r\nc\r\nd\r\ne\r\nf\r\ng\r\nh\r\n"
        sync_backend.put("w.txt", original)
        ws = sync_backend.workspace()
        ws.read("w.txt")
        sync_backend.put("w.txt", original.replace(b"b\r\n", b"B\r\n"))
        err = _stale(ws.execute("edit", {"file_path": "w.txt", "old_string": "g",
                                         "new_string": "G"}))
        assert err.details["diff"].endswith("@@ -1,5 +1,5 @@\n a\n-b\n+B\n c\n d\n e\n")
        assert not ws.execute("edit", {"file_path": "w.txt", "old_string": "g",
                                       "new_string": "G"}).is_error
        assert sync_backend.get("w.txt") == original.replace(b"b\r\n", b"B\r\n").replace(b"g", b"G")
        # A formatter that only changed the line endings: the lines are the same.
        ws.read("w.txt")
        sync_backend.put("w.txt", sync_backend.get("w.txt").replace(b"\r\n", b"\n"))
        err = _stale(ws.execute("write", {"file_path": "w.txt", "content": "x\n"}))
        assert err.details["diff"].startswith("(only the line endings")

    def test_a_diff_over_the_work_cap_is_not_shown(self, sync_backend: Backend) -> None:
        many = "".join(f"{i}\n" for i in range(2000)).encode()
        sync_backend.put("big.txt", many)
        ws = sync_backend.workspace()
        ws.read("big.txt")
        sync_backend.put("big.txt", "".join(f"{i}x\n" for i in range(2000)).encode())
        out = ws.execute("write", {"file_path": "big.txt", "content": "y\n"})
        err = _stale(out)
        assert err.details["diff"] is None and err.details["counts_as_read"] is False
        assert "too large to show" in err.message and "Read it again" in out.text

    def test_adapters_show_the_diff(self, sync_backend: Backend) -> None:
        sync_backend.put("a.py", FORTY)
        # The adapters take a Workspace (sync) or an AsyncWorkspace of their own.
        ws = toolfs.Workspace(sync_backend.fs, root=sync_backend.root)
        editor = TextEditor(ws)
        assert not editor.execute({"command": "view", "path": "a.py"}).is_error
        sync_backend.put("a.py", FORTY.replace(b"line 5\n", b"line five\n"))
        out = editor.execute({"command": "str_replace", "path": "a.py", "old_str": "line 30",
                              "new_str": "line thirty"})
        assert out.text.startswith("Error [stale]: a.py changed since you last viewed it\n"
                                   "Changes since you read it:\n")
        assert "-line 5\n+line five\n" in out.text and out.text.endswith(STALE_SHOWN_ADVICE)
        assert not editor.execute({"command": "str_replace", "path": "a.py",
                                   "old_str": "line 30", "new_str": "line thirty"}).is_error

        ws2 = ws.new_context()
        ws2.read("a.py")
        sync_backend.put("a.py", sync_backend.get("a.py").replace(b"line 1\n", b"line one\n"))
        out = apply_patch(ws2, {"type": "update_file", "path": "a.py",
                                "diff": "@@\n-line 20\n+line twenty\n"})
        assert out.error is not None and out.error.code == "stale"
        assert "-line 1\n+line one\n" in out.text

        memory = MemoryTool(ws.new_context())
        assert not memory.execute_input({"command": "view", "path": "/memories/a.py"}).is_error
        sync_backend.put("a.py", sync_backend.get("a.py").replace(b"line 3\n", b"line three\n"))
        out = memory.execute_input({"command": "str_replace", "path": "/memories/a.py",
                              "old_str": "line 22", "new_str": "line twenty-two"})
        assert out.error is not None and "-line 3\n+line three\n" in out.text

        ws3 = ws.new_context()
        agent = ToolfsBackend(ws3)
        ws3.read("a.py")
        sync_backend.put("a.py", sync_backend.get("a.py").replace(b"line 2\n", b"line two\n"))
        done = agent.edit("/a.py", "line 21", "line twenty-one")
        assert done.error is not None and "-line 2\n+line two\n" in done.error
        assert agent.edit("/a.py", "line 21", "line twenty-one").error is None

    def test_write_intent_events_carry_the_diff(self, sync_backend: Backend) -> None:
        seen: list[toolfs.FsEvent] = []
        ws = sync_backend.workspace(subscribers=[seen.append])
        ws.write("n.txt", "a\nb\n")
        ws.edit("n.txt", "b", "B")
        intents = [e for e in seen if e.type == "fs/write-intent"]
        assert intents[0].diff == "--- n.txt (now)\n+++ n.txt (after this change)\n" \
            "@@ -0,0 +1,2 @@\n+a\n+b\n"
        assert intents[1].diff is not None
        assert intents[1].diff.endswith("@@ -1,2 +1,2 @@\n a\n-b\n+B\n")
        # Unconditional overwrites (no policy) replace bytes nobody holds: no diff.
        blind = sync_backend.workspace(policy=None, subscribers=[seen.append])
        blind.write("n.txt", "c\n")
        assert seen[-2].type == "fs/write-intent" and seen[-2].diff is None
        assert all(e.diff is None for e in ws.audit.events)  # the audit log keeps none

    def test_a_binary_change_is_said_not_shown(self, sync_backend: Backend) -> None:
        sync_backend.put("b.txt", b"text\n")
        ws = sync_backend.workspace()
        ws.read("b.txt")
        sync_backend.put("b.txt", b"\x00\x01binary")
        out = ws.execute("write", {"file_path": "b.txt", "content": "mine\n"})
        err = _stale(out)
        assert err.details["diff"] is None and err.details["counts_as_read"] is False
        assert err.message.endswith("it is not text, so the change cannot be shown")
        assert sync_backend.get("b.txt") == b"\x00\x01binary"
