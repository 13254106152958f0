"""OpenAI's apply_patch over toolfs: the V4A applier, the raw Responses API shape, and the
Agents SDK's ApplyPatchTool driven by its own Runner with a scripted model (no network).
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import pathlib
import random
import shutil
import subprocess
import threading
import uuid
from collections import Counter
from typing import Any

import pytest
from agents import Agent, ApplyPatchTool, RunConfig, Runner, function_tool
from agents.apply_diff import apply_diff as sdk_apply_diff
from agents.editor import ApplyPatchOperation, ApplyPatchResult
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from openai.types.responses import ResponseApplyPatchToolCall, ResponseApplyPatchToolCallOutput
from openai.types.responses.response_input_item_param import ApplyPatchCallOutput
from pydantic import TypeAdapter

import toolfs
from tests.backend_fixtures import Backend
from toolfs.errors import STALE_SHOWN_ADVICE, FsError
from toolfs.integrations.openai import (
    ApplyPatchEditor,
    AsyncApplyPatchEditor,
    PatchOperation,
    apply_patch,
    apply_patch_async,
    apply_patch_call_output,
    apply_patch_text,
    handle_apply_patch_call,
)
from toolfs.integrations.v4a import apply_diff, parse_update

NO_TRACES = RunConfig(tracing_disabled=True)


def _mem(name: str) -> toolfs.Workspace:
    """A fresh memory workspace (the memory filesystem is shared by the whole process)."""
    return toolfs.Workspace(f"memory://{name}-{uuid.uuid4().hex[:8]}")


def _err(text: str, diff: str, mode: str = "default") -> FsError:
    with pytest.raises(FsError) as info:
        apply_diff(text, diff, mode)  # type: ignore[arg-type]
    return info.value


# -- the applier: the SDK's semantics where they are sound ---------------------------------


def _random_case(rng: random.Random) -> tuple[str, str]:
    """A file of unique lines and a diff of a few ordered hunks (context, -, +)."""
    n = rng.randint(1, 14)
    lines = [f"line {i}" for i in range(n)]
    text = "\n".join(lines) + ("\n" if rng.random() < 0.7 else "")
    out: list[str] = []
    pos = 0
    while pos < n and len(out) < 40:
        start = rng.randint(pos, min(n - 1, pos + 4))
        first = max(pos, start - 2)
        before = lines[first:start]
        deleted = lines[start:start + rng.randint(0, 2)]
        after = lines[start + len(deleted):start + len(deleted) + rng.randint(0, 2)]
        added = [f"new {rng.randint(0, 99)}" for _ in range(rng.randint(0, 2))] or ["added"]
        if not (before or deleted or after):  # a hunk must say where it goes
            after = lines[start:start + 1]
        # An anchor names a line above the context (one no earlier hunk has passed).
        anchored = first > pos and rng.random() < 0.3
        header = f"@@ {lines[first - 1]}" if anchored else "@@"
        out += [header, *(" " + s for s in before), *("-" + s for s in deleted),
                *("+" + s for s in added), *(" " + s for s in after)]
        pos = start + len(deleted) + len(after)
    return text, "\n".join(out) + "\n"


def test_applier_agrees_with_the_agents_sdk_on_unambiguous_diffs() -> None:
    rng = random.Random(11)
    for _ in range(600):
        text, diff = _random_case(rng)
        for variant in (text, text.replace("\n", "\r\n")):
            assert apply_diff(variant, diff) == sdk_apply_diff(variant, diff), (variant, diff)


def test_final_newline_follows_the_sdk() -> None:
    cases = [("a\nb\n", "@@\n a\n-b\n+c\n"),  # kept
             ("a\nb", "@@\n a\n-b\n+c\n"),  # kept absent
             ("a\n", "@@\n a\n-\n"),  # an empty '-' after the last line removes it
             ("a", "@@\n a\n+\n"),  # an empty '+' adds it
             ("", "@@\n+x\n"), ("x\n", "@@\n x\n*** End of File\n")]
    for text, diff in cases:
        assert apply_diff(text, diff) == sdk_apply_diff(text, diff), (text, diff)
    assert apply_diff("", "+a\n+b\n", "create") == sdk_apply_diff("", "+a\n+b\n", "create")
    assert apply_diff("", "+a\n+b\n+\n", "create") == "a\nb\n"
    assert apply_diff("", "+a\r\n+b\r\n", "create") == "a\r\nb"


def test_untouched_bytes_stay_and_added_lines_take_the_local_line_ending() -> None:
    text = "one\r\ntwo\r\nthree\nfour\n  tab\t \r\nlast"
    out = apply_diff(text, "@@\n one\n-two\n+TWO\n+2b\n three\n")
    assert out == "one\r\nTWO\r\n2b\r\nthree\nfour\n  tab\t \r\nlast"
    out = apply_diff(text, "@@\n four\n+ins\n")  # inserted after an LF line: LF
    assert out == "one\r\ntwo\r\nthree\nfour\nins\n  tab\t \r\nlast"
    out = apply_diff(text, "@@\n-last\n+LAST\n+more\n")  # no final newline stays absent
    assert out == "one\r\ntwo\r\nthree\nfour\n  tab\t \r\nLAST\r\nmore"
    # A lone \r inside a line is text, matched and kept as such.
    assert apply_diff("a\rb\nc\n", "@@\n a\rb\n-c\n+d\n") == "a\rb\nd\n"


def test_anchors_locate_and_stack() -> None:
    text = ("class A:\n    def f(self):\n        return 1\n"
            "class B:\n    def f(self):\n        return 1\n")
    err = _err(text, "@@\n-        return 1\n+        return 2\n")
    assert err.code == "ambiguous_match" and err.details["lines"] == [3, 6]
    assert "hunk 1" in err.message and "@@" in err.message
    out = apply_diff(text, "@@ class B:\n@@     def f(self):\n"
                           "-        return 1\n+        return 2\n")
    assert out.endswith("class B:\n    def f(self):\n        return 2\n")
    assert out.startswith("class A:\n    def f(self):\n        return 1\n")
    # An anchor is compared without surrounding whitespace; the context stays exact.
    assert apply_diff(text, "@@ class B:\n@@ def f(self):\n-        return 1\n"
                            "+        return 0\n").count("return 0") == 1
    # An anchor that occurs twice, the hunk fitting after both, chooses nothing.
    err = _err(text, "@@ def f(self):\n-        return 1\n+        return 0\n")
    assert err.code == "ambiguous_match" and err.details["anchor_lines"] == [2, 5]
    err = _err(text, "@@ class C:\n-        return 1\n+        return 2\n")
    assert err.code == "no_match" and err.details["anchor"] == "class C:"
    # Two hunks under one anchor: the second does not move past the first's scope.
    two = "def f():\n    a = 1\n    b = 2\n"
    assert apply_diff(two, "@@ def f():\n-    a = 1\n+    a = 10\n@@ def f():\n-    b = 2\n"
                           "+    b = 20\n") == "def f():\n    a = 10\n    b = 20\n"


def test_repeated_lines_are_refused_unless_located_uniquely() -> None:
    text = "x\n" * 5 + "end\n"
    assert _err(text, "@@\n-x\n+y\n").code == "ambiguous_match"
    # Context that pins the place: the last x before end.
    assert apply_diff(text, "@@\n-x\n+y\n end\n") == "x\n" * 4 + "y\nend\n"
    # Later hunks bound the check: the first hunk's match is the only one before them.
    text = "a\nk\nb\nk\n"
    assert apply_diff(text, "@@\n a\n-k\n+K\n@@\n b\n-k\n+K\n") == "a\nK\nb\nK\n"


def test_a_diff_applies_as_meant_or_not_at_all() -> None:
    # Files of a few repeated lines, diffs with 0-3 context lines: the result is the
    # target, or the diff is refused as ambiguous; never a write somewhere else.
    rng = random.Random(5)
    outcomes: Counter[str] = Counter()
    for _ in range(1500):
        old = [rng.choice("abc") for _ in range(rng.randint(1, 25))]
        new = list(old)
        for _ in range(rng.randint(1, 3)):
            at = rng.randint(0, len(new))
            if rng.random() < 0.5 and at < len(new):
                del new[at]
            else:
                new.insert(at, rng.choice(["a", "b", "X", "Y"]))
        old_text, new_text = "\n".join(old) + "\n", "\n".join(new) + "\n"
        if old_text == new_text:
            continue
        diff = v4a_diff(old_text, new_text, rng.randint(0, 3))
        try:
            assert apply_diff(old_text, diff) == new_text, (old_text, diff)
            outcomes["applied"] += 1
        except FsError as err:
            assert err.code == "ambiguous_match", (old_text, diff, err)
            outcomes["refused"] += 1
    assert outcomes["applied"] > 300 and outcomes["refused"] > 300, outcomes


def test_added_lines_need_a_place() -> None:
    err = _err("a\nb\n", "@@\n+x\n")
    assert err.code == "ambiguous_match" and "neither context nor" in err.message
    assert apply_diff("a\nb\n", "@@ a\n+x\n") == "a\nx\nb\n"
    assert apply_diff("a\nb\n", "@@\n+x\n*** End of File\n") == "a\nb\nx\n"
    assert apply_diff("", "@@\n+x\n+y\n") == "x\ny\n" == sdk_apply_diff("", "@@\n+x\n+y\n")


def test_no_match_names_the_hunk_and_the_near_miss() -> None:
    text = "def f():\n    return  1\n"
    err = _err(text, "@@\n def f():\n-    return 1\n+    return 2\n")
    assert err.code == "no_match" and err.details["hunk"] == 1
    assert err.details["similar_lines"] == [1]
    assert "differs only in whitespace" in err.message
    assert err.details["context"] == ["def f():", "    return 1"]
    # Hunks out of order: the context exists, before where the search may start.
    err = _err("a\nb\nc\n", "@@\n-c\n+C\n@@\n-a\n+A\n")
    assert err.details["hunk"] == 2 and err.details["earlier_line"] == 1
    err = _err("a\nb\n", "@@\n-a\n+A\n*** End of File\n")
    assert err.details["matches_at_line"] == 1 and "End of File" in err.message
    # Half a diff never applies: the first hunk matches, the second does not.
    assert _err("a\nb\n", "@@\n-a\n+A\n@@\n-zzz\n+Z\n").details["hunk"] == 2


@pytest.mark.parametrize(("diff", "where"), [
    ("@@ -1,2 +1,2 @@\n-a\n+b\n", "unified-diff hunk header"),
    ("--- a/f\n+++ b/f\n@@\n-a\n+b\n", "unified diff"),
    ("@@\n-a\nb\n", "no ' ', '-' or '+' prefix"),
    ("@@x\n-a\n", "not a hunk header"),
    ("@@\n-a\n+b\n*** Update File: other\n@@\n-c\n", "one operation per file"),
    ("*** Begin Patch\n*** Update File: f\n@@\n-a\n+b\n*** End Patch\n", "not part of"),
    ("", "empty"), ("\n\n", "empty"), ("@@\n", "no lines"),
    ("@@\n-a\n+b\x00\n", "NUL"),
    ("-a\n+b\n-c\n", None),  # valid (first hunk needs no header); kept for the contrast
])
def test_malformed_diffs_are_refused_with_the_line(diff: str, where: str | None) -> None:
    if where is None:
        assert apply_diff("a\nc\n", diff) == "b\n"
        return
    err = _err("a\nb\n", diff)
    assert err.code == "invalid_arguments" and where in err.message, err.message
    assert err.details["operation"] == "apply_patch"


def test_trailing_end_patch_is_accepted_and_create_lines_need_a_plus() -> None:
    assert apply_diff("a\n", "@@\n-a\n+b\n*** End Patch\n\n") == "b\n"
    err = _err("", "+a\nb\n", "create")
    assert err.code == "invalid_arguments" and "diff line 2" in err.message


def test_adversarial_sizes_stay_linear_and_errors_bounded() -> None:
    # The naive search's worst case: 200k equal lines, a context of 2,000 of them then a
    # line that never comes (KMP: one pass; a slice-compare per offset: 400M compares).
    text = "a\n" * 200_000
    diff = "@@\n" + " a\n" * 2_000 + "-b\n+c\n"
    err = _err(text, diff)
    assert err.code == "no_match" and err.details["missing_line"] == "b"
    assert len(err.message) < 2_000 and len(err.details["context"]) == 5
    # 5,000 anchorless hunks on a 50k-line file: each located and checked for uniqueness
    # once, the checks covering disjoint stretches.
    lines = [f"v{i}" for i in range(50_000)]
    diff = "".join(f"@@\n-v{i}\n+w{i}\n" for i in range(0, 50_000, 10))
    out = apply_diff("\n".join(lines) + "\n", diff).split("\n")
    assert out[0] == "w0" and out[10] == "w10" and out[11] == "v11" and out[-1] == ""
    # A megabyte-long context line is clipped in the message and the details.
    long = "x" * 1_000_000
    err = _err("short\n", f"@@\n-{long}\n+y\n")
    assert len(err.message) < 2_000 and len(err.details["context"][0]) < 300


def test_parse_update_keeps_chunks_in_order() -> None:
    [hunk] = parse_update("@@ def f():\n a\n-b\n+B\n c\n-d\n+D\n")
    assert hunk.anchors == ("def f():",) and hunk.old == ("a", "b", "c", "d")
    assert [(c.offset, c.deleted, c.inserted) for c in hunk.chunks] == [
        (1, ("b",), ("B",)), (3, ("d",), ("D",))]


# -- real history: this repository's own commits, replayed as V4A patches -----------------

REPO = pathlib.Path(__file__).resolve().parents[2]


def v4a_diff(old: str, new: str, context: int) -> str:
    """A V4A diff from ``old`` to ``new`` (anchorless hunks with ``context`` lines each
    side), over the SDK's model of a file (``split("\\n")``, so a change of the final
    newline is expressed too)."""
    a, b = old.split("\n"), new.split("\n")
    out: list[str] = []
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(
            context):
        out.append("@@")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [" " + s for s in a[i1:i2]]
                continue
            out += ["-" + s for s in a[i1:i2]]
            out += ["+" + s for s in b[j1:j2]]
    return "\n".join(out) + "\n"


def unique_diff(old: str, new: str) -> str:
    """What a careful model does: more context until every hunk is located uniquely."""
    for context in (3, 8, 30, 200):
        diff = v4a_diff(old, new, context)
        try:
            apply_diff(old, diff)
        except FsError as err:
            if err.code != "ambiguous_match":
                raise
            continue
        return diff
    return v4a_diff(old, new, len(old))


@functools.cache
def history(limit: int) -> list[tuple[str, str, str]]:
    """(path, old, new) of up to ``limit`` changes of Python files in this repository's
    history, oldest first."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        return []

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True,
                              text=True, check=True).stdout

    try:
        commits = git("log", "--reverse", "--format=%H", "--", "src/toolfs").split()
    except subprocess.CalledProcessError:
        return []
    changes: list[tuple[str, str, str]] = []
    for commit in commits[1:]:
        for line in git("diff-tree", "--no-commit-id", "-r", "--name-status", commit,
                        "--", "src/toolfs").splitlines():
            status, _, path = line.partition("\t")
            if status != "M" or not path.endswith(".py"):
                continue
            old, new = git("show", f"{commit}^:{path}"), git("show", f"{commit}:{path}")
            changes.append((path, old, new))
            if len(changes) >= limit:
                return changes
    return changes


def _variants(text: str) -> dict[str, str]:
    return {"lf": text, "crlf": text.replace("\n", "\r\n"), "no-final-newline": text[:-1]}


def test_replayed_history_matches_the_target_bytes_and_the_sdk() -> None:
    changes = history(120)
    if len(changes) < 10:
        pytest.skip("no git history to replay")
    for path, old, new in changes:
        diff = unique_diff(old, new)
        assert apply_diff(old, diff) == new, path
        assert sdk_apply_diff(old, diff) == new, path  # the generator speaks the SDK's V4A
        for name, variant in _variants(old).items():
            target = _variants(new)[name]
            got = apply_diff(variant, v4a_diff(variant.replace("\r\n", "\n"),
                                               target.replace("\r\n", "\n"), 200))
            assert got == target, (path, name)


def test_replayed_history_on_every_backend(backend: Backend) -> None:
    changes = history(120)[::12]
    if not changes:
        pytest.skip("no git history to replay")
    ws = backend.workspace()
    bom = b"\xef\xbb\xbf"
    for n, (_path, old, new) in enumerate(changes):
        diff = unique_diff(old, new)
        for name, encode in (("crlf", lambda t: t.replace("\n", "\r\n").encode()),
                             ("bom", lambda t: bom + t.encode())):
            rel = f"replay/{n}-{name}.py"
            backend.put(rel, encode(old))
            ws.read(rel)
            out = _run(backend, ws, _update(rel, diff))
            assert out.text == f"Updated {rel}", out.text
            assert backend.get(rel) == encode(new), (rel, name)


# -- the raw Responses API shape ----------------------------------------------------------


def _update(path: str, diff: str, **extra: Any) -> dict[str, Any]:
    return {"type": "update_file", "path": path, "diff": diff, **extra}


def test_raw_operations_and_the_call_output_item() -> None:
    ws = _mem("oa-raw")
    out = apply_patch(ws, {"type": "create_file", "path": "src/app.py",
                           "diff": "+def main():\n+    return 1\n+\n"})
    assert (out.text, out.is_error) == ("Created src/app.py", False)
    assert ws.fs.cat_file("src/app.py") == b"def main():\n    return 1\n"
    call = ResponseApplyPatchToolCall(
        id="apc_1", call_id="call_1", status="completed", type="apply_patch_call",
        operation={"type": "update_file", "path": "src/app.py",
                   "diff": "@@ def main():\n-    return 1\n+    return 2\n"})
    item = handle_apply_patch_call(ws, call)
    assert item == {"type": "apply_patch_call_output", "call_id": "call_1",
                    "status": "completed", "output": "Updated src/app.py"}
    # The openai SDK's own types accept it, as input item and as output item.
    TypeAdapter(ApplyPatchCallOutput).validate_python(item)
    ResponseApplyPatchToolCallOutput.model_validate({**item, "id": "apco_1"})
    failed = apply_patch(ws, _update("src/app.py", "@@\n-    return 9\n+    return 3\n"))
    item = apply_patch_call_output({"call_id": "call_2", "caller": {"type": "direct"}}, failed)
    assert item["status"] == "failed" and item["caller"] == {"type": "direct"}
    assert item["output"].startswith("Error [no_match] (src/app.py): hunk 1 (diff line 1)")
    assert item["output"].endswith("Read the file again and copy the context and '-' lines "
                                   "exactly, including whitespace, in file order.")
    out = apply_patch(ws, {"type": "delete_file", "path": "src/app.py"})
    assert out.text == "Deleted src/app.py" and not ws.fs.exists("src/app.py")
    assert out.to_dict()["result"]["action"] == "deleted"


@pytest.mark.parametrize(("operation", "needle"), [
    ({"type": "rename_file", "path": "a"}, "operation type must be one of"),
    ({"type": "update_file", "path": "a"}, "needs its diff"),
    ({"type": "update_file", "path": "", "diff": "@@\n-a\n"}, "non-empty"),
    ({"type": "create_file", "path": "a", "diff": "+a", "move_to": "b"}, "update_file only"),
    ({"type": "create_file", "path": "a", "diff": "+a", "patch": "x"}, "unknown operation"),
    ("not an object", "must be an object"),
])
def test_bad_operations_get_invalid_arguments(operation: Any, needle: str) -> None:
    out = apply_patch(_mem("oa-bad"), operation)
    assert out.error is not None and out.error.code == "invalid_arguments"
    assert needle in out.text


@pytest.mark.parametrize("path", ["../escape.txt", "/etc/passwd", "a/../../b"])
def test_paths_leaving_the_root_are_refused_before_anything_is_stored(path: str) -> None:
    root = f"oa-jail-{uuid.uuid4().hex[:8]}"
    ws = toolfs.Workspace(f"memory://{root}/root")
    ws.write("inside.txt", "x\n")
    for op in ({"type": "create_file", "path": path, "diff": "+x"},
               _update(path, "@@\n-x\n+y\n"), {"type": "delete_file", "path": path},
               _update("inside.txt", "@@\n-x\n+y\n", move_to=path)):
        out = apply_patch(ws, op)
        assert out.error is not None and out.error.code == "outside_root", out.text
    assert ws.fs.cat_file("inside.txt") == b"x\n"
    assert sorted(ws.fs.fs.find(f"/{root}")) == [f"/{root}/root/inside.txt"]


def test_not_text_missing_files_and_create_over_an_existing_file() -> None:
    ws = _mem("oa-text")
    out = apply_patch(ws, _update("nope.txt", "@@\n-a\n+b\n"))
    assert out.text == ("Error [not_found]: nope.txt does not exist\n"
                        "Check the path; make a new file with a create_file operation.")
    ws.fs.fs.pipe_file(ws.fs.resolve("bin.dat").backend_path, b"\xfe a\n")
    ws.fs.cat_file("bin.dat")
    out = apply_patch(ws, _update("bin.dat", "@@\n- a\n+ b\n"))
    assert out.error is not None and out.error.code == "not_text"
    assert "not valid UTF-8 (byte 0)" in out.text
    ws.write("a.txt", "a\n")
    out = apply_patch(ws, {"type": "create_file", "path": "a.txt", "diff": "+b"})
    assert out.text.startswith("Error [invalid_arguments]: apply_patch cannot create a.txt "
                               "because it already exists. Use an update_file operation")
    assert ws.fs.cat_file("a.txt") == b"a\n"


def test_update_needs_an_observation_unless_the_patch_may_be_it() -> None:
    ws = _mem("oa-observe")
    ws.write("a.txt", "one\ntwo\n")
    other = ws.new_context()
    out = apply_patch(other, _update("a.txt", "@@\n-two\n+2\n"))
    assert out.error is not None and out.error.code == "not_observed"
    out = apply_patch(other, {"type": "delete_file", "path": "a.txt"})
    assert out.error is not None and out.error.code == "not_observed"
    # require_read=False: the patch's own read is the observation, context still exact.
    out = apply_patch(other, _update("a.txt", "@@\n-TWO\n+2\n"), require_read=False)
    assert out.error is not None and out.error.code == "no_match"
    out = apply_patch(other, _update("a.txt", "@@\n-two\n+2\n"), require_read=False)
    assert out.text == "Updated a.txt" and ws.fs.fs.cat_file(
        ws.fs.resolve("a.txt").backend_path) == b"one\n2\n"
    # A file this context read earlier is patched on that version, whatever the option.
    out = apply_patch(ws, _update("a.txt", "@@\n-one\n+1\n"), require_read=False)
    assert out.error is not None and out.error.code == "stale"


def test_move_is_a_guarded_create_and_a_guarded_delete() -> None:
    ws = _mem("oa-move")
    ws.write("a.txt", "a\n")
    ws.write("taken.txt", "mine\n")
    out = apply_patch(ws, _update("a.txt", "@@\n-a\n+b\n", move_to="taken.txt"))
    assert out.error is not None and out.error.code == "invalid_arguments"
    assert "already exists" in out.text
    assert (ws.fs.cat_file("a.txt"), ws.fs.cat_file("taken.txt")) == (b"a\n", b"mine\n")
    out = apply_patch(ws, _update("a.txt", "@@\n-a\n+b\n", move_to="sub/b.txt"))
    assert out.text == "Updated a.txt\nMoved a.txt to sub/b.txt"
    assert not ws.fs.exists("a.txt") and ws.fs.cat_file("sub/b.txt") == b"b\n"
    assert out.to_dict()["result"]["moved_to"] == "sub/b.txt"


def _behind_after(ws: toolfs.Workspace, path: str, changes: dict[str, bytes]) -> None:
    """Once ``path`` is written through ``ws``, write ``changes`` behind its back."""
    fired = []

    def hook(event: Any) -> None:
        if event.type == "fs/written" and event.path.endswith(path) and not fired:
            fired.append(event)
            for rel, data in changes.items():
                ws.fs.fs.pipe_file(ws.fs.resolve(rel).backend_path, data)

    ws.subscribe(hook)


def test_move_undoes_its_copy_when_the_source_changed_meanwhile() -> None:
    ws = _mem("oa-move-race")
    ws.write("a.txt", "a\n")
    _behind_after(ws, "b.txt", {"a.txt": b"theirs\n"})
    out = apply_patch(ws, _update("a.txt", "@@\n-a\n+b\n", move_to="b.txt"))
    assert out.error is not None and out.error.code == "stale", out.text
    assert "nothing was moved" in out.text
    assert ws.fs.cat_file("a.txt") == b"theirs\n" and not ws.fs.exists("b.txt")


def test_move_keeps_a_copy_someone_else_changed_before_the_undo() -> None:
    ws = _mem("oa-move-race2")
    ws.write("a.txt", "a\n")
    _behind_after(ws, "b.txt", {"a.txt": b"theirs\n", "b.txt": b"also theirs\n"})
    out = apply_patch(ws, _update("a.txt", "@@\n-a\n+b\n", move_to="b.txt"))
    assert out.error is not None and out.error.code == "stale"
    assert out.error.details["copy_kept"] == "b.txt"
    raw = ws.fs.fs
    assert raw.cat_file(ws.fs.resolve("a.txt").backend_path) == b"theirs\n"
    assert raw.cat_file(ws.fs.resolve("b.txt").backend_path) == b"also theirs\n"


def test_move_whose_delete_has_an_unknown_outcome_keeps_the_copy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The source's delete fails without saying whether it happened (a timeout after the
    store applied it): undoing the copy then could lose the file, so the copy stays."""
    ws = _mem("oa-move-unknown")
    ws.write("a.txt", "a\n")
    store = ws.fs.store
    real = store.delete
    source = ws.fs.resolve("a.txt").backend_path

    def delete_then_time_out(path: str, mode: Any) -> None:
        real(path, mode)
        if path == source:
            raise toolfs.FsError("backend_error", "the request timed out", path=path)

    monkeypatch.setattr(store, "delete", delete_then_time_out)
    out = apply_patch(ws, _update("a.txt", "@@\n-a\n+b\n", move_to="b.txt"))
    assert out.error is not None and out.error.code == "backend_error", out.text
    assert "may exist now" in out.text and out.error.details["copy_kept"] == "b.txt"
    assert ws.fs.cat_file("b.txt") == b"b\n"  # the only copy left is kept


def test_a_whole_patch_reports_per_file_what_landed() -> None:
    ws = _mem("oa-envelope")
    ws.write("old.py", "x = 1\n")
    ws.write("gone.txt", "bye\n")
    ws.read("gone.txt")
    report = apply_patch_text(ws, (
        "*** Begin Patch\n"
        "*** Add File: new.txt\n+hello\n"
        "*** Update File: old.py\n*** Move to: pkg/new.py\n@@\n-x = 1\n+x = 2\n"
        "*** Delete File: gone.txt\n"
        "*** End Patch\n"))
    assert not report.is_error
    assert report.text == ("Created new.txt\nUpdated old.py\nMoved old.py to pkg/new.py\n"
                           "Deleted gone.txt")
    assert ws.fs.cat_file("new.txt") == b"hello\n" and ws.fs.cat_file("pkg/new.py") == b"x = 2\n"
    assert not ws.fs.exists("old.py") and not ws.fs.exists("gone.txt")
    # The second file fails: the whole patch is refused, nothing lands (all or nothing).
    report = apply_patch_text(ws, (
        "*** Begin Patch\n*** Update File: new.txt\n@@\n-hello\n+hi\n"
        "*** Update File: pkg/new.py\n@@\n-x = 9\n+x = 3\n"
        "*** Add File: later.txt\n+later\n*** End Patch"))
    assert report.is_error and [o.is_error for o in report.outputs] == [True]
    assert report.skipped == ("new.txt", "later.txt")
    assert report.text.startswith("Error [no_match] (pkg/new.py): hunk 1")
    assert report.text.endswith("Not applied, because of the error above: new.txt, later.txt")
    assert ws.fs.cat_file("new.txt") == b"hello\n" and not ws.fs.exists("later.txt")


@pytest.mark.parametrize(("patch", "needle"), [
    ("*** Update File: a\n@@\n-a\n+b\n*** End Patch\n", "starts with '*** Begin Patch'"),
    ("*** Begin Patch\n*** Update File: a\n@@\n-a\n+b\n", "ends with '*** End Patch'"),
    ("*** Begin Patch\n*** Frobnicate File: a\n*** End Patch", "not a file header"),
    ("*** Begin Patch\n*** Delete File: a\n+x\n*** End Patch", "a deleted file has no"),
    ("*** Begin Patch\n*** Update File: \n*** End Patch", "names no file"),
    ("*** Begin Patch\n*** End Patch", "names no file"),
    # A bad diff in the last file: nothing at all is applied, the first file included.
    ("*** Begin Patch\n*** Add File: first.txt\n+x\n*** Update File: a\n@@ -1 +1 @@\n"
     "-a\n+b\n*** End Patch", "unified-diff hunk header"),
])
def test_a_malformed_patch_changes_nothing(patch: str, needle: str) -> None:
    ws = _mem("oa-envelope-bad")
    ws.write("a", "a\n")
    report = apply_patch_text(ws, patch)
    assert report.is_error and len(report.outputs) == 1 and needle in report.text, report.text
    assert report.outputs[0].error is not None
    assert report.outputs[0].error.code == "invalid_arguments"
    assert ws.fs.cat_file("a") == b"a\n" and not ws.fs.exists("first.txt")


# -- every backend -----------------------------------------------------------------------


def _run(backend: Backend, ws: Any, op: dict[str, Any]) -> toolfs.ToolOutput:
    if backend.use_async:  # through AsyncWorkspace's coroutines
        aws = toolfs.AsyncWorkspace(ws._sync)
        try:
            return asyncio.run(apply_patch_async(aws, op))
        finally:
            aws.close()
    return apply_patch(ws, op)


def test_patch_lifecycle_keeps_bytes_on_every_backend(backend: Backend) -> None:
    ws = backend.workspace()
    body = b"\xef\xbb\xbfhead\r\nkeep \t\r\nold\r\ntail"  # BOM, CRLF, no final newline
    backend.put("dir/f.txt", body)
    ws.read("dir/f.txt")
    out = _run(backend, ws, _update("dir/f.txt", "@@\n keep \t\n-old\n+new\n+more\n"))
    assert out.text == "Updated dir/f.txt", out.text
    assert backend.get("dir/f.txt") == b"\xef\xbb\xbfhead\r\nkeep \t\r\nnew\r\nmore\r\ntail"
    backend.put("dir/f.txt", b"\xef\xbb\xbfchanged\r\n")  # an outside change
    out = _run(backend, ws, _update("dir/f.txt", "@@\n-tail\n+TAIL\n"))
    assert out.error is not None and out.error.code == "stale", out.text
    assert backend.get("dir/f.txt") == b"\xef\xbb\xbfchanged\r\n"
    ws.read("dir/f.txt")
    out = _run(backend, ws, _update("dir/f.txt", "@@\n-changed\n+x\n", move_to="g.txt"))
    assert out.text == "Updated dir/f.txt\nMoved dir/f.txt to g.txt", out.text
    assert backend.get("g.txt") == b"\xef\xbb\xbfx\r\n" and not backend.exists("dir/f.txt")
    out = _run(backend, ws, {"type": "create_file", "path": "n.txt", "diff": "+a\n+b\n"})
    assert out.text == "Created n.txt" and backend.get("n.txt") == b"a\nb"
    out = _run(backend, ws, {"type": "delete_file", "path": "g.txt"})
    assert out.text == "Deleted g.txt" and not backend.exists("g.txt")


@pytest.mark.parametrize("backend", ["memory", "local", "s3", "gcs"], indirect=True)
def test_racing_patches_lose_no_reported_success(backend: Backend) -> None:
    backend.put("shared.txt", b"START\nEND\n")
    rounds = 12 if backend.name in ("memory", "local") else 6
    wins: list[str] = []
    failures: Counter[str] = Counter()

    def agent(name: str) -> None:
        ws = backend.workspace()
        editor = ApplyPatchEditor(ws)
        for i in range(rounds):
            ws.read("shared.txt")
            marker = f"<{name}:{i}>"
            result = editor.update_file(ApplyPatchOperation(
                type="update_file", path="shared.txt", diff=f"@@\n-END\n+{marker}\n+END\n"))
            if result.status == "completed":
                wins.append(marker)
            else:
                failures[(result.output or "").split("]")[0]] += 1

    threads = [threading.Thread(target=agent, args=(f"a{n}",)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = backend.get("shared.txt").decode()
    assert set(failures) <= {"Error [stale"}, failures
    assert wins and len(wins) + sum(failures.values()) == 6 * rounds
    assert [m for m in wins if m not in final] == []
    assert final.count("<") == len(wins) and final.endswith("END\n")


@pytest.mark.parametrize("backend", ["memory", "s3"], indirect=True)
def test_one_context_parallel_patches_lose_no_reported_success(backend: Backend) -> None:
    # A model sends several apply_patch calls at once; the async editor runs them in
    # parallel on one context. Patches computed from one version cannot both land.
    backend.put("f.txt", b"".join(b"slot %d\n" % i for i in range(8)))
    aws = toolfs.AsyncWorkspace(backend.fs, root=backend.root, max_workers=8)
    aws.sync.read("f.txt")
    editor = AsyncApplyPatchEditor(aws)

    async def all_at_once() -> list[ApplyPatchResult]:
        return await asyncio.gather(*(editor.update_file(ApplyPatchOperation(
            type="update_file", path="f.txt", diff=f"@@\n-slot {i}\n+SLOT {i}\n"))
            for i in range(8)))

    try:
        results = asyncio.run(all_at_once())
    finally:
        aws.close()
    final = backend.get("f.txt").decode()
    won = [i for i, r in enumerate(results) if r.status == "completed"]
    assert won and all((r.output or "").startswith("Error [stale]") for i, r in
                       enumerate(results) if i not in won)
    assert [i for i in won if f"SLOT {i}\n" not in final] == []
    assert final.count("SLOT") == len(won)


def test_deny_rules_and_read_only_refuse_before_anything_is_stored() -> None:
    ws = toolfs.Workspace(f"memory://oa-deny-{uuid.uuid4().hex[:8]}", deny=[".env", "secret/**"])
    ws.write("a.txt", "a\n")
    ws.read("a.txt")
    for op in ({"type": "create_file", "path": ".env", "diff": "+KEY=1"},
               _update("a.txt", "@@\n-a\n+b\n", move_to="secret/a.txt")):
        out = apply_patch(ws, op)
        assert out.error is not None and out.error.code == "denied", out.text
    assert ws.fs.cat_file("a.txt") == b"a\n" and ws.fs.find("") == ["a.txt"]
    ro = ws.new_context(read_only=True)
    ro.read("a.txt")
    out = apply_patch(ro, _update("a.txt", "@@\n-a\n+b\n"))
    assert out.error is not None and out.error.code == "denied"
    assert "read-only" in out.text and ws.fs.cat_file("a.txt") == b"a\n"


def test_patch_operations_on_a_symlink_to_the_root_are_not_a_file(
        tmp_path: pathlib.Path) -> None:
    """`self -> .` and `docs/up -> ..` lead to the root, a directory: every operation on
    them (and a move onto one) is not_a_file, as for the root itself, not outside_root
    ("self is outside self"); nothing changes."""
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "a.md").write_text("a\n")
    (root / "self").symlink_to(".")
    (root / "docs" / "up").symlink_to("..")
    ws = toolfs.Workspace(str(root))
    ws.read("a.md")
    for op in ({"type": "delete_file", "path": "self"},
               {"type": "create_file", "path": "self", "diff": "+x\n"},
               {"type": "update_file", "path": "docs/up", "diff": "@@\n-a\n+b\n"},
               {"type": "update_file", "path": "a.md", "diff": "@@\n-a\n+b\n",
                "move_to": "docs/up"}):
        out = apply_patch(ws, op)
        assert out.error is not None and out.error.code == "not_a_file", (op, out.text)
    assert sorted(p.name for p in root.iterdir()) == ["a.md", "docs", "self"]
    assert (root / "a.md").read_text() == "a\n"


# -- the Agents SDK's Runner, scripted model --------------------------------------------


def _patch_call(call_id: str, operation: dict[str, Any]) -> dict[str, Any]:
    return {"type": "apply_patch_call", "call_id": call_id, "status": "completed",
            "operation": operation}


def _outputs(model: ScriptedModel) -> dict[str, str]:
    """call_id -> the output text the model was sent, from the last recorded call."""
    last = model.calls[-1].input
    return {i["call_id"]: i["output"] for i in last
            if isinstance(i, dict) and i.get("type") in ("apply_patch_call_output",
                                                         "function_call_output")}


def test_runner_loop_read_patch_stale_reread_patch() -> None:
    ws = _mem("oa-runner")
    ws.write("app.py", "def greet():\r\n    print('hi')\r\n")
    agent_ws = ws.new_context()

    @function_tool
    def read(file_path: str) -> str:
        """Read a file with line numbers."""
        return agent_ws.execute("read", {"file_path": file_path}).text

    def outside_change_then(items: list[Any]) -> ModelStep:
        def respond(call: Any) -> list[Any]:
            ws.fs.fs.pipe_file(ws.fs.resolve("app.py").backend_path,
                               b"def greet():\r\n    print('hello')\r\n")
            return items
        return ModelStep.respond(respond)

    model = ScriptedModel([
        [function_call("read", {"file_path": "app.py"}, call_id="r1")],
        [_patch_call("p1", _update("app.py", "@@ def greet():\n-    print('hi')\n"
                                             "+    print('hi', 1)\n"))],
        outside_change_then([_patch_call("p2", _update(
            "app.py", "@@ def greet():\n-    print('hi', 1)\n+    print('hi', 2)\n"))]),
        [function_call("read", {"file_path": "app.py"}, call_id="r2")],
        [_patch_call("p3", _update("app.py", "@@ def greet():\n-    print('hello')\n"
                                             "+    print('hello', 3)\n"))],
        [assistant_message("done")],
    ])
    agent = Agent(name="coder", model=model,
                  tools=[read, ApplyPatchTool(editor=ApplyPatchEditor(agent_ws))])
    result = Runner.run_sync(agent, "edit app.py", run_config=NO_TRACES)
    assert result.final_output == "done"
    model.assert_complete()
    seen = _outputs(model)
    assert seen["r1"] == "     1\tdef greet():\n     2\t    print('hi')"
    assert seen["p1"] == "Updated app.py"
    assert seen["p2"].startswith("Error [stale]: app.py changed since you read it\n"
                                 "Changes since you read it:\n--- app.py (as you read it)\n")
    assert "-    print('hi', 1)\n+    print('hello')\n" in seen["p2"]  # (CRLF shown as LF)
    assert seen["p2"].endswith(STALE_SHOWN_ADVICE)
    assert seen["r2"] == "     1\tdef greet():\n     2\t    print('hello')"
    assert seen["p3"] == "Updated app.py"
    statuses = {i["call_id"]: i["status"] for i in model.calls[-1].input
                if isinstance(i, dict) and i.get("type") == "apply_patch_call_output"}
    assert statuses == {"p1": "completed", "p2": "failed", "p3": "completed"}
    assert ws.fs.fs.cat_file(ws.fs.resolve("app.py").backend_path) == (
        b"def greet():\r\n    print('hello', 3)\r\n")


def test_runner_with_the_async_editor_creates_moves_and_deletes() -> None:
    aws = toolfs.AsyncWorkspace(_mem("oa-runner-async"))
    model = ScriptedModel([
        [_patch_call("c1", {"type": "create_file", "path": "a.md", "diff": "+# A\n+\n"}),
         _patch_call("c2", {"type": "create_file", "path": "a.md", "diff": "+again"})],
        [_patch_call("u1", _update("a.md", "@@\n-# A\n+# B\n", move_to="b.md"))],
        [_patch_call("d1", {"type": "delete_file", "path": "b.md"})],
        [assistant_message("ok")],
    ])
    agent = Agent(name="coder", model=model,
                  tools=[ApplyPatchTool(editor=AsyncApplyPatchEditor(aws))])
    try:
        result = asyncio.run(Runner.run(agent, "go", run_config=NO_TRACES))
    finally:
        aws.close()
    assert result.final_output == "ok"
    seen = _outputs(model)
    assert seen["c1"] == "Created a.md"
    assert seen["c2"].startswith("Error [invalid_arguments]: apply_patch cannot create a.md")
    assert seen["u1"] == "Updated a.md\nMoved a.md to b.md"
    assert seen["d1"] == "Deleted b.md"
    assert aws.sync.fs.find("") == []


def test_editor_speaks_the_sdk_types() -> None:
    ws = _mem("oa-types")
    editor = ApplyPatchEditor(ws)
    result = editor.create_file(ApplyPatchOperation(type="create_file", path="x.txt",
                                                    diff="+x\n"))
    assert isinstance(result, ApplyPatchResult)
    assert (result.status, result.output) == ("completed", "Created x.txt")
    result = editor.update_file(ApplyPatchOperation(type="update_file", path="x.txt",
                                                    diff="@@\n-y\n+z\n"))
    assert result.status == "failed" and (result.output or "").startswith("Error [no_match]")
    op = PatchOperation.of(ApplyPatchOperation(type="delete_file", path="x.txt"))
    assert op == PatchOperation(type="delete_file", path="x.txt")


def test_an_update_over_the_cap_names_the_result_and_advises_a_smaller_change() -> None:
    ws = toolfs.Workspace("memory://" + uuid.uuid4().hex, size_cap=1000)
    ws.write("a.txt", "one\ntwo\n")
    ws.read("a.txt")
    out = apply_patch(ws, {"type": "update_file", "path": "a.txt",
                           "diff": "@@\n one\n+" + "x" * 5000 + "\n two\n"})
    assert out.error is not None and out.error.code == "too_large", out.text
    assert "would make a.txt" in out.text and "smaller" in out.text, out.text
    assert "offset" not in out.text  # the file is 8 bytes: nothing to read in windows
    assert ws.read("a.txt").lines == ["one", "two"]
