"""Anthropic's text editor tool (``str_replace_based_edit_tool``) over toolfs: views,
edits, inserts, the reference editor's texts, adversarial paths and sizes."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic", reason="the anthropic extra is not installed")
httpx2 = pytest.importorskip("httpx2", reason="the anthropic SDK's HTTP client is missing")

from tests.backend_fixtures import (  # noqa: E402
    Backend,
    LocalBackend,
)
from toolfs.integrations.anthropic import (  # noqa: E402
    MemoryTool,
    TextEditor,
)

EDITOR = "str_replace_based_edit_tool"


Call = tuple[str, dict[str, Any]]


Policy = Callable[[list[dict[str, Any]]], list[Call] | None]


class ScriptedModel:
    """The model's side: ``policy(results)`` gets the tool_result blocks the runner sent
    in its last request (none on the first) and returns the next tool calls, or None to
    end the conversation."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.requests: list[dict[str, Any]] = []
        self.results: list[list[dict[str, Any]]] = []

    def handler(self, request: Any) -> Any:
        body = json.loads(request.content)
        self.requests.append(body)
        last = body["messages"][-1]
        results: list[dict[str, Any]] = []
        if last["role"] == "user" and isinstance(last["content"], list):
            results = [b for b in last["content"] if b.get("type") == "tool_result"]
        if results:
            self.results.append(results)
        calls = self.policy(results)
        n = len(self.requests)
        if calls is None:
            content: list[dict[str, Any]] = [{"type": "text", "text": "Done."}]
            stop = "end_turn"
        else:
            content = [{"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name,
                        "input": args} for i, (name, args) in enumerate(calls)]
            stop = "tool_use"
        return httpx2.Response(200, json={
            "id": f"msg_{n}", "type": "message", "role": "assistant", "model": "scripted",
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1}})

    def client(self) -> Any:
        return anthropic.Anthropic(
            api_key="test-key", max_retries=0,
            http_client=httpx2.Client(transport=httpx2.MockTransport(self.handler)))

    def async_client(self) -> Any:
        return anthropic.AsyncAnthropic(
            api_key="test-key", max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handler)))

    def run(self, tools: list[Any]) -> None:
        runner = self.client().beta.messages.tool_runner(
            model="claude-scripted", max_tokens=1024, tools=tools,
            messages=[{"role": "user", "content": "Work on the files."}])
        runner.until_done()

    def texts(self) -> list[str]:
        """The content of each tool result, in order."""
        return [r["content"] for turn in self.results for r in turn]

    def errors(self) -> list[bool]:
        return [bool(r.get("is_error")) for turn in self.results for r in turn]


def steps(*items: list[Call] | Callable[[], list[Call]]) -> Policy:
    """A fixed script: each item is the calls of one turn (or a function making them,
    run when the turn comes, e.g. to change a file behind the agent's back first)."""
    queue = list(items)

    def policy(results: list[dict[str, Any]]) -> list[Call] | None:
        if not queue:
            return None
        item = queue.pop(0)
        return item() if callable(item) else item
    return policy


VARIANTS = [(bom, eol, final) for bom in (False, True) for eol in ("\n", "\r\n")
            for final in (True, False)]


def _bytes(lines: list[str], bom: bool, eol: str, final: bool) -> bytes:
    body = eol.join(lines) + (eol if final and lines else "")
    return (b"\xef\xbb\xbf" if bom else b"") + body.encode()


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


HISTORY_PAIRS = 20


"""(before, after) file versions replayed from this repository's own history."""


def _history() -> list[tuple[str, str, str]]:
    """(name, before, after) of recently modified Python files in this repository's git
    history (the newest commits first; files up to 40 kB); empty outside a git checkout."""
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True,
                              check=True, timeout=60).stdout
    try:
        commits = git("log", "--format=%H", "-n", "60", "--diff-filter=M", "--",
                      "src/toolfs").split()
    except (OSError, subprocess.SubprocessError):
        return []
    pairs: list[tuple[str, str, str]] = []
    for commit in commits:
        try:
            changed = git("diff", "--name-only", "--diff-filter=M", f"{commit}^", commit,
                          "--", "src/toolfs").split()
        except subprocess.SubprocessError:
            continue  # the first commit of a shallow clone
        for path in changed:
            if not path.endswith(".py"):
                continue
            before, after = git("show", f"{commit}^:{path}"), git("show", f"{commit}:{path}")
            if len(before) < 40_000 and len(after) < 40_000 and before != after:
                pairs.append((f"{commit[:8]}-{path.replace('/', '_')}", before, after))
            if len(pairs) >= HISTORY_PAIRS:
                return pairs
    return pairs


def _as_commands(before: str, after: str) -> list[dict[str, Any]]:
    """The change from ``before`` to ``after`` as text editor commands, hunk by hunk from
    the bottom up (so each hunk's line numbers still hold): ``insert`` for pure
    additions, ``str_replace`` with just enough context to be unique for the rest."""
    import difflib

    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    current = list(old)
    ops = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    commands: list[dict[str, Any]] = []
    for tag, i1, i2, j1, j2 in reversed(ops):
        if tag == "equal":
            continue
        added = "".join(new[j1:j2])
        if tag == "insert" and (i1 < len(current) or current[-1:] == []
                                or current[-1].endswith("\n")):
            commands.append({"command": "insert", "insert_line": i1, "new_str": added})
        else:
            lo, hi = i1, i2
            if lo == hi:  # an addition after a last line without newline: anchor on it
                lo -= 1
            text = "".join(current)
            while text.count("".join(current[lo:hi])) != 1 or not "".join(current[lo:hi]):
                lo, hi = max(0, lo - 1), min(len(current), hi + 1)
            commands.append({"command": "str_replace",
                             "old_str": "".join(current[lo:hi]),
                             "new_str": "".join(current[lo:i1]) + added
                             + "".join(current[i2:hi])})
        current[i1:i2] = new[j1:j2]
    assert "".join(current) == after
    return commands


HISTORY = _history()


def test_text_editor_loop(store: Backend) -> None:
    store.put("src/app.py", b"x = 1\ny = 2\n")
    ws = store.workspace()
    path = "src/app.py"

    def outside_change() -> list[Call]:
        store.put(path, b"x = 2\ny = 3\n")  # another program, after the agent's edit
        return [(EDITOR, {"command": "str_replace", "path": path, "old_str": "y = 2",
                          "new_str": "y = 4"})]

    model = ScriptedModel(steps(
        [(EDITOR, {"command": "view", "path": path})],
        [(EDITOR, {"command": "str_replace", "path": path, "old_str": "x = 1",
                   "new_str": "x = 2"})],
        outside_change,
        [(EDITOR, {"command": "view", "path": path})],
        [(EDITOR, {"command": "str_replace", "path": path, "old_str": "y = 3",
                   "new_str": "y = 4"})],
    ))
    model.run([TextEditor(ws)])
    texts, errors = model.texts(), model.errors()
    assert errors == [False, False, True, False, False]
    assert texts[0] == ("Here's the result of running `cat -n` on src/app.py:\n"
                        "     1\tx = 1\n     2\ty = 2")
    assert texts[1].startswith("The file src/app.py has been edited. Here's the result of "
                               "running `cat -n` on a snippet of src/app.py:\n     1\tx = 2\n")
    assert texts[2].startswith("Error [stale]: src/app.py changed since you last viewed it")
    assert "-y = 2\n+y = 3\n" in texts[2]  # the change since the view, then the advice
    assert texts[2].endswith("redo your change on the current text; no need to read the "
                             "file again.")
    assert "     2\ty = 3" in texts[3]
    assert store.get(path) == b"x = 2\ny = 4\n"


def test_text_editor_create_needs_a_view_to_replace(mem: Backend) -> None:
    mem.put("a.txt", b"old\n")
    ed = TextEditor(mem.workspace())
    out = ed.execute({"command": "create", "path": "a.txt", "file_text": "new\n"})
    assert out.is_error and out.error is not None and out.error.code == "not_observed"
    assert out.text.startswith("Error [not_observed]: File already exists at: a.txt. Cannot "
                               "overwrite files using command `create`.\n")
    assert mem.get("a.txt") == b"old\n"
    assert not ed.execute({"command": "view", "path": "a.txt"}).is_error
    out = ed.execute({"command": "create", "path": "a.txt", "file_text": "new\n"})
    assert out.text == "File overwritten successfully at: a.txt"
    out = ed.execute({"command": "create", "path": "d/b.txt", "file_text": "b"})
    assert out.text == "File created successfully at: d/b.txt"
    assert mem.get("a.txt") == b"new\n" and mem.get("d/b.txt") == b"b"


def test_view_lists_two_levels_without_hidden_items(store: Backend) -> None:
    for rel in ("a.md", ".secret", "d/b.md", "d/.hidden", "d/e/c.md", "d/e/f/deep.md",
                ".git/config"):
        store.put(rel, b"x")
    ed = TextEditor(store.workspace())
    text = ed.execute({"command": "view", "path": "."}).text
    assert text.splitlines() == [
        "Here's the files and directories up to 2 levels deep in ., excluding hidden "
        "items:", ".", "./a.md", "./d", "./d/b.md", "./d/e"]
    memory = MemoryTool(store.workspace())
    listing = memory.call({"command": "view", "path": "/memories/d"})
    assert listing.splitlines()[1:] == ["4B\t/memories/d", "1B\t/memories/d/b.md",
                                        "2B\t/memories/d/e/", "1B\t/memories/d/e/c.md",
                                        "1B\t/memories/d/e/f/"]


def test_view_range_and_budget(mem: Backend) -> None:
    mem.put("long.txt", "".join(f"line {i}\n" for i in range(1, 2001)).encode())
    ws = mem.workspace()
    ed = TextEditor(ws)
    out = ed.execute({"command": "view", "path": "long.txt", "view_range": [1999, -1]})
    assert out.text.splitlines()[1:] == ["  1999\tline 1999", "  2000\tline 2000"]
    out = ed.execute({"command": "view", "path": "long.txt", "view_range": [5, 6]})
    assert out.text.splitlines()[1:] == ["     5\tline 5", "     6\tline 6"]
    small = TextEditor(ws, max_characters=1000)
    out = small.execute({"command": "view", "path": "long.txt"})
    assert len(out.text) <= 1000
    last = int(out.text.splitlines()[-2].split("\t")[0])
    assert out.text.endswith(f"Use view_range [{last + 1}, -1] to see more.)")
    for bad, why in (([0, 3], "should be at least 1"), ([5, 2], "larger or equal"),
                     ([3000, -1], "[1, 2000]"), ([1], "list of two integers"),
                     (["1", 2], "list of two integers")):
        out = ed.execute({"command": "view", "path": "long.txt", "view_range": bad})
        assert out.is_error and why in out.text, (bad, out.text)
        assert out.text.startswith("Error [invalid_arguments]: ")


def test_bytes_kept_under_str_replace_and_insert(store: Backend) -> None:
    ws = store.workspace()
    ed, memory = TextEditor(ws), MemoryTool(ws.new_context())
    for n, (bom, eol, final) in enumerate(VARIANTS):
        name = f"f{n}.txt"
        store.put(name, _bytes(["a", "b", "c"], bom, eol, final))
        assert not ed.execute({"command": "view", "path": name}).is_error
        out = ed.execute({"command": "str_replace", "path": name, "old_str": "b",
                          "new_str": "B\nB2"})
        assert not out.is_error, out.text
        assert store.get(name) == _bytes(["a", "B", "B2", "c"], bom, eol, final)
        out = ed.execute({"command": "insert", "path": name, "insert_line": 4,
                          "new_str": "end"})
        assert not out.is_error, out.text
        assert store.get(name) == _bytes(["a", "B", "B2", "c", "end"], bom, eol, final)
        out = ed.execute({"command": "insert", "path": name, "insert_line": 0,
                          "insert_text": "top1\ntop2\n"})
        assert store.get(name) == _bytes(["top1", "top2", "a", "B", "B2", "c", "end"],
                                         bom, eol, final)
        # The memory tool shares the engine: the same bytes through its commands.
        mpath = f"/memories/{name}"
        memory.call({"command": "view", "path": mpath})
        memory.call({"command": "insert", "path": mpath, "insert_line": 2,
                     "insert_text": "mid"})
        memory.call({"command": "str_replace", "path": mpath, "old_str": "B\nB2",
                     "new_str": "b"})
        assert store.get(name) == _bytes(["top1", "top2", "mid", "a", "b", "c", "end"],
                                         bom, eol, final)


def test_insert_into_empty_file_and_bounds(mem: Backend) -> None:
    mem.put("e.txt", b"")
    ed = TextEditor(mem.workspace())
    ed.execute({"command": "view", "path": "e.txt"})
    out = ed.execute({"command": "insert", "path": "e.txt", "insert_line": 1,
                      "new_str": "x"})
    assert out.text.startswith("Error [invalid_arguments]: Invalid `insert_line` parameter: "
                               "1. It should be within the range of lines of the file: [0, 0]")
    assert not ed.execute({"command": "insert", "path": "e.txt", "insert_line": 0,
                           "new_str": "x"}).is_error
    assert mem.get("e.txt") == b"x\n"


def test_insert_and_ambiguous_str_replace_are_refused_with_the_reference_words(
        store: Backend) -> None:
    store.put("t.txt", b"a\nb\na\n")
    ed = TextEditor(store.workspace())
    ed.execute({"command": "view", "path": "t.txt"})
    out = ed.execute({"command": "str_replace", "path": "t.txt", "old_str": "a",
                      "new_str": "z"})
    assert out.text.startswith("Error [ambiguous_match]: No replacement was performed. "
                               "Multiple occurrences of old_str `a` in lines [1, 3]. Please "
                               "ensure it is unique\n")
    out = ed.execute({"command": "str_replace", "path": "t.txt", "old_str": "a \n",
                      "new_str": "z"})
    assert out.text.startswith("Error [no_match]: No replacement was performed, old_str "
                               "`a \n` did not appear verbatim in t.txt.")
    store.put("t.txt", b"a\nb\na\nc\n")  # another program
    out = ed.execute({"command": "insert", "path": "t.txt", "insert_line": 1,
                      "new_str": "x"})
    assert out.is_error and out.error is not None and out.error.code == "stale", out.text
    assert store.get("t.txt") == b"a\nb\na\nc\n"
    # The refusal showed the whole change, so it counts as a view: line 9 is now judged
    # against the current file.
    out = ed.execute({"command": "insert", "path": "t.txt", "insert_line": 9,
                      "new_str": "x"})
    assert out.error is not None and out.error.code == "invalid_arguments", out.text
    assert store.get("t.txt") == b"a\nb\na\nc\n"
    ed.execute({"command": "view", "path": "t.txt"})
    out = ed.execute({"command": "insert", "path": "t.txt", "insert_line": 1,
                      "new_str": "x"})
    assert not out.is_error and store.get("t.txt") == b"a\nx\nb\na\nc\n"
    assert out.value is not None and out.to_dict()["ok"] is True


@pytest.mark.skipif(not HISTORY, reason="not a git checkout with history")
def test_history_replayed_as_str_replace_and_insert_is_byte_exact(store: Backend) -> None:
    """Real edits (this repository's commits) through the text editor, in LF, CRLF, BOM
    and no-final-newline variants: the stored bytes are exactly the new version's."""
    ed = TextEditor(store.workspace())
    variants = {
        "lf": lambda t: t.encode(),
        "crlf": lambda t: t.replace("\n", "\r\n").encode(),
        "bom": lambda t: b"\xef\xbb\xbf" + t.encode(),
        "bom-crlf-no-final": lambda t: b"\xef\xbb\xbf" + t.rstrip("\n").replace(
            "\n", "\r\n").encode(),
    }
    replayed: dict[str, int] = {"insert": 0, "str_replace": 0}
    for name, before, after in HISTORY:
        for variant, encode in variants.items():
            trim = variant.endswith("no-final")
            old_text = before.rstrip("\n") if trim else before
            new_text = after.rstrip("\n") if trim else after
            path = f"{variant}/{name}"
            store.put(path, encode(before))
            assert not ed.execute({"command": "view", "path": path}).is_error
            for command in _as_commands(old_text, new_text):
                out = ed.execute({**command, "path": path})
                assert not out.is_error, (path, command, out.text)
                replayed[command["command"]] += 1
            assert store.get(path) == encode(after), path
    assert all(n >= len(HISTORY) // 4 for n in replayed.values()), replayed


def test_editor_texts_are_the_reference_editors(mem: Backend) -> None:
    mem.put("a.txt", b"one\ntwo\nthree\n")
    mem.put("d/x.txt", b"x\n")
    mem.put("d/e/y.txt", b"y\n")
    mem.put("d/e/f/z.txt", b"z\n")
    mem.put("d/.hidden", b"h\n")
    ws = mem.workspace()
    ed = TextEditor(ws)

    def text(**command: Any) -> str:
        return ed.execute(command).text

    created = TextEditor(ws.new_context()).execute(
        {"command": "create", "path": "a.txt", "file_text": "x"}).text
    assert created.startswith("Error [not_observed]: File already exists at: a.txt. "
                              "Cannot overwrite files using command `create`.\n"), created
    assert text(command="view", path="a.txt") == (
        "Here's the result of running `cat -n` on a.txt:\n"
        "     1\tone\n     2\ttwo\n     3\tthree")
    # A directory: `find PATH -maxdepth 2 -not -path '*/\.*'`, the path itself first.
    assert text(command="view", path="d") == (
        "Here's the files and directories up to 2 levels deep in d, excluding hidden "
        "items:\nd\nd/e\nd/e/f\nd/e/y.txt\nd/x.txt")
    for command in ({"command": "create", "path": "d", "file_text": "x"},
                    {"command": "str_replace", "path": "d", "old_str": "x", "new_str": "y"},
                    {"command": "insert", "path": "d", "insert_line": 0, "new_str": "y"}):
        out = ed.execute(command)
        assert out.text.startswith("Error [not_a_file]: The path d is a directory and only "
                                   "the `view` command can be used on directories\n"), out.text
    text(command="view", path="a.txt")
    assert text(command="str_replace", path="a.txt", old_str="t", new_str="T").startswith(
        "Error [ambiguous_match]: No replacement was performed. Multiple occurrences of "
        "old_str `t` in lines [2, 3]. Please ensure it is unique\n")
    assert text(command="insert", path="a.txt", insert_line=9, new_str="x").startswith(
        "Error [invalid_arguments]: Invalid `insert_line` parameter: 9. It should be "
        "within the range of lines of the file: [0, 3]\n")
    assert text(command="undo_edit", path="a.txt").startswith(
        "Error [invalid_arguments]: Unrecognized command undo_edit. The allowed commands "
        "for the str_replace_based_edit_tool tool are: view, create, str_replace, insert\n")
    assert mem.get("a.txt") == b"one\ntwo\nthree\n"


def test_a_view_always_shows_at_least_one_line(mem: Backend) -> None:
    """A first line longer than max_characters used to come back as "showing lines 1-0
    ... use view_range [1, -1]": the same call again, forever."""
    mem.put("long.txt", b"y" * 50_000 + b"\nsecond\n")
    ed = TextEditor(mem.workspace(), max_characters=500)
    out = ed.execute({"command": "view", "path": "long.txt"})
    assert not out.is_error
    assert len(out.text) <= 500, len(out.text)
    assert "     1\tyyy" in out.text, out.text
    assert "lines 1-0" not in out.text
    assert "view_range [2, -1]" in out.text, out.text


def test_the_snippet_of_a_huge_change_stays_within_the_budget(mem: Backend) -> None:
    """The snippet after str_replace/insert shows every changed line; a change of
    thousands of lines used to be echoed whole (cut only by the generic output limit,
    which also cut the closing note)."""
    mem.put("a.txt", b"one\ntwo\n")
    big = "".join(f"new line {i}\n" for i in range(5_000))
    ws = mem.workspace()
    ed = TextEditor(ws, max_characters=2_000)
    memory = MemoryTool(ws)
    ed.execute({"command": "view", "path": "a.txt"})
    for out in (ed.execute({"command": "insert", "path": "a.txt", "insert_line": 1,
                            "insert_text": big}),
                ed.execute({"command": "str_replace", "path": "a.txt", "old_str": "two\n",
                            "new_str": big + "y" * 50_000 + "\n"})):
        assert not out.is_error, out.text
        assert len(out.text) <= 2_000, len(out.text)
        assert "(Snippet truncated: lines " in out.text
        assert out.text.endswith("Edit the file again if necessary.")
    memory.call({"command": "view", "path": "/memories/a.txt"})
    text = memory.call({"command": "str_replace", "path": "/memories/a.txt",
                        "old_str": "one\n", "new_str": big * 10})
    assert len(text) <= ws.max_output_chars and "(Snippet truncated: lines " in text


def test_editor_root_and_slash_paths(tmp_path: Any) -> None:
    """"/" is not the workspace root (an absolute path must lie inside the root), and
    a listing of the root shows paths the model can use as they are."""
    b = LocalBackend(str(tmp_path))
    b.setup()
    b.put("a.txt", b"one\n")
    ed = TextEditor(b.workspace())
    slash = ed.execute({"command": "view", "path": "/"})
    assert slash.is_error and slash.error is not None
    assert slash.error.code == "outside_root", slash.text
    for root in ("", "."):
        listing = ed.execute({"command": "view", "path": root}).text
        names = listing.splitlines()[1:]
        for name in names:
            out = ed.execute({"command": "view", "path": name})
            assert not out.is_error, (root, name, out.text)
    absolute = b.key("").rstrip("/")
    listing = ed.execute({"command": "view", "path": absolute}).text
    assert f"{absolute}/a.txt" in listing.splitlines(), listing


@pytest.mark.parametrize("field", ["old_str", "new_str"])
def test_lone_surrogates_are_invalid_arguments_not_backend_errors(mem: Backend,
                                                                   field: str) -> None:
    mem.put("a.txt", b"one\n")
    ed = TextEditor(mem.workspace())
    ed.execute({"command": "view", "path": "a.txt"})
    args = {"command": "str_replace", "path": "a.txt", "old_str": "one", "new_str": "two"}
    args[field] = "o\ud800"
    out = ed.execute(args)
    assert out.is_error and out.error is not None
    assert out.error.code == "invalid_arguments", out.text
    assert "ValidationError" not in out.text and "UnicodeEncodeError" not in out.text
    assert "retrying later" not in out.text
    assert mem.get("a.txt") == b"one\n"


def test_line_numbers_too_large_to_print_are_invalid(mem: Backend) -> None:
    # Line numbers are echoed in answers; Python refuses to print an int of more than
    # 4,300 digits, which surfaced as backend_error ("retrying later may help").
    mem.put("a.txt", b"one\ntwo\n")
    ws = mem.workspace()
    big = 10**5000
    editor, memory = TextEditor(ws), MemoryTool(ws)
    for out in (editor.execute({"command": "view", "path": "a.txt", "view_range": [big, -1]}),
                editor.execute({"command": "view", "path": "a.txt", "view_range": [-big, 3]}),
                editor.execute({"command": "insert", "path": "a.txt", "insert_line": big,
                                "new_str": "x"}),
                memory.execute_input({"command": "view", "path": "/memories/a.txt",
                                      "view_range": [big, -1]})):
        assert out.error is not None and out.error.code == "invalid_arguments", out.text
    assert mem.get("a.txt") == b"one\ntwo\n"


def test_a_change_over_the_cap_names_the_result_and_advises_a_smaller_change(
        mem: Backend) -> None:
    mem.put("a.txt", b"one\ntwo\n")
    ws = mem.workspace(size_cap=1000)
    editor = TextEditor(ws)
    editor.execute({"command": "view", "path": "a.txt"})
    out = editor.execute({"command": "insert", "path": "a.txt", "insert_line": 1,
                          "new_str": "x" * 5000})
    assert out.error is not None and out.error.code == "too_large", out.text
    assert "would make a.txt" in out.text and "smaller" in out.text, out.text
    assert "view_range" not in out.text  # the file is 8 bytes: nothing to view in windows
    out = editor.execute({"command": "create", "path": "c.txt", "file_text": "y" * 5000})
    assert out.error is not None and out.error.code == "too_large", out.text
    assert "Write less" in out.text and "view_range" not in out.text, out.text
    core = ws.execute("edit", {"file_path": "a.txt", "old_string": "one",
                               "new_string": "z" * 5000})
    assert core.error is not None and "smaller" in core.text and "offset" not in core.text
    assert mem.get("a.txt") == b"one\ntwo\n"
