"""toolfs.integrations.anthropic through the real anthropic SDK, offline.

The model is scripted: an ``httpx2.MockTransport`` answers the SDK's Messages requests
with ``tool_use`` blocks chosen from the tool results the runner sent back, so the SDK's
own ``tool_runner`` executes the tools and builds the ``tool_result`` blocks. No network.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic", reason="the anthropic extra is not installed")
httpx2 = pytest.importorskip("httpx2", reason="the anthropic SDK's HTTP client is missing")

import toolfs  # noqa: E402
from tests.backends import (  # noqa: E402
    Backend,
    GCSBackend,
    LocalBackend,
    MemoryBackend,
    S3Backend,
)
from toolfs.integrations.anthropic import (  # noqa: E402
    AsyncMemoryTool,
    AsyncTextEditor,
    MemoryTool,
    TextEditor,
    beta_tools,
)

EDITOR = "str_replace_based_edit_tool"
Call = tuple[str, dict[str, Any]]
Policy = Callable[[list[dict[str, Any]]], list[Call] | None]


# -- the scripted model ----------------------------------------------------------------


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


# -- backends --------------------------------------------------------------------------


@pytest.fixture(params=["memory", "local", "s3", "gcs"])
def store(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Backend]:
    """A fresh root on memory, local disk, S3 (moto) and GCS (fake-gcs-server)."""
    b: Backend
    if request.param == "memory":
        b = MemoryBackend()
    elif request.param == "local":
        b = LocalBackend(str(tmp_path))
    elif request.param == "s3":
        b = S3Backend(request.getfixturevalue("s3_emulator"))
    else:
        b = GCSBackend(request.getfixturevalue("gcs_emulator"))
    b.setup()
    try:
        yield b
    finally:
        b.teardown()


@pytest.fixture
def mem() -> Iterator[Backend]:
    b = MemoryBackend()
    b.setup()
    try:
        yield b
    finally:
        b.teardown()


# -- definitions -----------------------------------------------------------------------


def test_definitions_are_the_sdk_params(mem: Backend) -> None:
    ws = mem.workspace()
    from anthropic.types.beta import BetaMemoryTool20250818, BetaToolTextEditor20250728

    assert TextEditor(ws).definition == {"type": "text_editor_20250728", "name": EDITOR}
    capped = TextEditor(ws, max_characters=5000).definition
    assert capped == {"type": "text_editor_20250728", "name": EDITOR,
                      "max_characters": 5000}
    assert BetaToolTextEditor20250728.model_validate(capped).max_characters == 5000
    assert MemoryTool(ws).to_dict() == {"type": "memory_20250818", "name": "memory"}
    BetaMemoryTool20250818.model_validate(MemoryTool(ws).to_dict())
    assert isinstance(MemoryTool(ws), anthropic.lib.tools.BetaAbstractMemoryTool)
    assert isinstance(AsyncMemoryTool(ws), anthropic.lib.tools.BetaAsyncAbstractMemoryTool)
    with pytest.raises(toolfs.FsError):
        TextEditor(ws, max_characters=0)


def test_beta_tools_send_the_pinned_schemas(mem: Backend) -> None:
    ws = mem.workspace()
    model = ScriptedModel(steps())
    model.run(beta_tools(ws))
    sent = model.requests[0]["tools"]
    assert sent == ws.tool_definitions("anthropic")
    assert [t["name"] for t in sent] == ["read", "write", "edit", "glob", "grep", "ls"]
    assert [t.name for t in beta_tools(ws, ["read", "edit"])] == ["read", "edit"]


# -- the loop: view -> change -> refused stale change -> view again -> change ------------


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


def test_memory_tool_loop(store: Backend) -> None:
    store.put("notes.md", b"- likes tea\n- lives in Oslo\n")
    ws = store.workspace()
    path = "/memories/notes.md"

    def outside_change() -> list[Call]:
        store.put("notes.md", b"- likes coffee\n- lives in Oslo\n- has a cat\n")
        return [("memory", {"command": "str_replace", "path": path,
                            "old_str": "lives in Oslo", "new_str": "lives in Bergen"})]

    model = ScriptedModel(steps(
        [("memory", {"command": "view", "path": "/memories"})],
        [("memory", {"command": "view", "path": path})],
        [("memory", {"command": "str_replace", "path": path, "old_str": "likes tea",
                     "new_str": "likes coffee"})],
        outside_change,
        [("memory", {"command": "view", "path": path})],
        [("memory", {"command": "insert", "path": path, "insert_line": 3,
                     "insert_text": "- lives in Bergen\n"})],
        [("memory", {"command": "str_replace", "path": path,
                     "old_str": "- lives in Oslo\n", "new_str": ""})],
    ))
    model.run([MemoryTool(ws)])
    texts, errors = model.texts(), model.errors()
    assert errors == [False, False, False, True, False, False, False]
    assert texts[0].startswith("Here're the files and directories up to 2 levels deep in "
                               "/memories, excluding hidden items and node_modules:\n")
    assert "28B\t/memories/notes.md" in texts[0]
    assert texts[1] == ("Here's the content of /memories/notes.md with line numbers:\n"
                        "     1\t- likes tea\n     2\t- lives in Oslo")
    assert texts[2].startswith("The memory file has been edited. Here is the snippet "
                               "showing the change (with line numbers):\n")
    assert texts[3].startswith("Error [stale]: /memories/notes.md changed since you last "
                               "viewed it")
    assert texts[5] == "The file /memories/notes.md has been edited."
    assert store.get("notes.md") == b"- likes coffee\n- has a cat\n- lives in Bergen\n"


def test_beta_tools_loop(store: Backend) -> None:
    store.put("app.py", b"x = 1\ny = 2\n")
    ws = store.workspace()

    def outside_change() -> list[Call]:
        store.put("app.py", b"x = 2\ny = 3\n")
        return [("edit", {"file_path": "app.py", "old_string": "y = 2",
                          "new_string": "y = 4"})]

    model = ScriptedModel(steps(
        [("read", {"file_path": "app.py"})],
        [("edit", {"file_path": "app.py", "old_string": "x = 1", "new_string": "x = 2"})],
        outside_change,
        [("read", {"file_path": "app.py", "view_range": [2, -1]})],
        [("edit", {"file_path": "app.py", "old_string": "y = 3", "new_string": "y = 4"})],
    ))
    model.run(beta_tools(ws))
    texts, errors = model.texts(), model.errors()
    assert errors == [False, False, True, False, False]
    assert texts[0] == "     1\tx = 1\n     2\ty = 2"  # toolfs's read text
    assert texts[2].startswith("Error [stale]")
    assert "no need to read the file again." in texts[2]  # the diff showed everything
    assert texts[3] == "     2\ty = 3\n\n(Showing line 2 of 2.)"  # view_range [2, -1]
    assert store.get("app.py") == b"x = 2\ny = 4\n"


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


# -- byte fidelity ---------------------------------------------------------------------

VARIANTS = [(bom, eol, final) for bom in (False, True) for eol in ("\n", "\r\n")
            for final in (True, False)]


def _bytes(lines: list[str], bom: bool, eol: str, final: bool) -> bytes:
    body = eol.join(lines) + (eol if final and lines else "")
    return (b"\xef\xbb\xbf" if bom else b"") + body.encode()


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


# -- memory: paths, create, delete, rename ---------------------------------------------


ESCAPES = ["/etc/passwd", "/memoriesX/a.md", "memories/a.md", "/memories/../a.md",
           "/memories/a/../../b.md", "/memories/%2e%2e/x.md", "/memories/a\\..\\..\\b.md",
           "/memories/./../x.md", "../memories/a.md", ""]


@pytest.mark.parametrize("path", ESCAPES)
def test_memory_paths_cannot_leave_memories(tmp_path: Any, path: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "a.md").write_text("outside\n")
    memory = MemoryTool(toolfs.Workspace(str(root)))
    for command in ({"command": "view", "path": path},
                    {"command": "create", "path": path, "file_text": "x"},
                    {"command": "delete", "path": path},
                    {"command": "rename", "old_path": "/memories/in.md", "new_path": path}):
        out = memory.execute_input(command)
        assert out.is_error, (command, out.text)
        assert out.error is not None and out.error.code in ("outside_root", "not_found")
        if path.startswith("/memories/") and "\\" not in path:
            assert "would escape /memories directory" in out.text or \
                "does not exist" in out.text, out.text
        elif not path.startswith("/memories"):
            assert "Path must start with /memories, got: " in out.text
    assert sorted(os.listdir(tmp_path)) == ["a.md", "root"]
    assert (tmp_path / "a.md").read_text() == "outside\n"
    assert os.listdir(root) == []


def test_memory_symlink_out_of_the_root_is_refused(tmp_path: Any) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", root / "link")
    memory = MemoryTool(toolfs.Workspace(str(root)))
    out = memory.execute_input({"command": "create", "path": "/memories/link/x.md",
                                "file_text": "x"})
    assert out.is_error and "would escape /memories directory" in out.text
    assert os.listdir(tmp_path / "outside") == []


def test_memory_create_delete_rename(store: Backend) -> None:
    ws = store.workspace()
    memory = MemoryTool(ws)
    assert memory.call({"command": "create", "path": "/memories/a.md",
                        "file_text": "A\n"}) == "File created successfully at: /memories/a.md"
    other = MemoryTool(ws.new_context())
    with pytest.raises(anthropic.lib.tools.ToolError) as caught:
        other.call({"command": "create", "path": "/memories/a.md", "file_text": "mine\n"})
    assert str(caught.value).startswith("Error [not_observed]: File /memories/a.md already "
                                        "exists\n")
    with pytest.raises(anthropic.lib.tools.ToolError) as caught:
        other.call({"command": "delete", "path": "/memories/a.md"})
    assert "Cannot delete /memories/a.md: view it first" in str(caught.value)
    # Rename needs no view: it moves exactly the bytes it reads.
    assert other.call({"command": "rename", "old_path": "/memories/a.md",
                       "new_path": "/memories/sub/b.md"}) == \
        "Successfully renamed /memories/a.md to /memories/sub/b.md"
    assert store.get("sub/b.md") == b"A\n" and not store.exists("a.md")
    memory.call({"command": "create", "path": "/memories/c.md", "file_text": "C\n"})
    with pytest.raises(anthropic.lib.tools.ToolError) as caught:
        memory.call({"command": "rename", "old_path": "/memories/c.md",
                     "new_path": "/memories/sub/b.md"})
    assert str(caught.value).startswith("Error [invalid_arguments]: The destination "
                                        "/memories/sub/b.md already exists\n")
    assert store.get("c.md") == b"C\n" and store.get("sub/b.md") == b"A\n"
    # Directories: rename moves every file; delete needs every file viewed.
    assert memory.call({"command": "rename", "old_path": "/memories/sub",
                        "new_path": "/memories/moved"}).startswith("Successfully renamed")
    assert store.get("moved/b.md") == b"A\n" and not store.exists("sub/b.md")
    third = MemoryTool(ws.new_context())  # the mover wrote moved/b.md; this one did not
    with pytest.raises(anthropic.lib.tools.ToolError) as caught:
        third.call({"command": "delete", "path": "/memories/moved"})
    assert "view its files first (/memories/moved/b.md not viewed)" in str(caught.value)
    third.call({"command": "view", "path": "/memories/moved/b.md"})
    assert third.call({"command": "delete", "path": "/memories/moved"}) == \
        "Successfully deleted /memories/moved"
    assert not store.exists("moved/b.md")
    with pytest.raises(anthropic.lib.tools.ToolError) as caught:
        memory.call({"command": "delete", "path": "/memories"})
    assert "Cannot delete the /memories directory itself" in str(caught.value)
    with pytest.raises(anthropic.lib.tools.ToolError) as caught:
        memory.call({"command": "view", "path": "/memories/nope.md"})
    assert "The path /memories/nope.md does not exist. Please provide a valid path." in \
        str(caught.value)


def test_memory_delete_is_conditional(store: Backend) -> None:
    store.put("n.md", b"v1\n")
    memory = MemoryTool(store.workspace())
    memory.call({"command": "view", "path": "/memories/n.md"})
    store.put("n.md", b"v2 by another agent\n")
    with pytest.raises(anthropic.lib.tools.ToolError) as caught:
        memory.call({"command": "delete", "path": "/memories/n.md"})
    assert str(caught.value).startswith("Error [stale]: /memories/n.md changed since you "
                                        "last viewed it; it was not deleted")
    assert store.get("n.md") == b"v2 by another agent\n"


def test_rename_never_loses_an_update_made_during_the_move(store: Backend) -> None:
    """An edit that lands between the copy and the delete of a rename: the delete is
    conditional on the copied version, so it fails, the copy is removed, and the edit
    stays (at the old path)."""
    store.put("n.md", b"v1\n")
    ws = store.workspace()
    editor = MemoryTool(ws.new_context())
    editor.call({"command": "view", "path": "/memories/n.md"})
    mover_ws = ws.new_context()
    landed: list[str] = []

    def edit_during_move(event: toolfs.FsEvent) -> None:
        if event.type == "fs/written" and event.path == "m.md" and not landed:
            landed.append(editor.call({"command": "str_replace", "path": "/memories/n.md",
                                       "old_str": "v1", "new_str": "v2"}))
    mover_ws.subscribe(edit_during_move)
    mover = MemoryTool(mover_ws)
    with pytest.raises(anthropic.lib.tools.ToolError) as caught:
        mover.call({"command": "rename", "old_path": "/memories/n.md",
                    "new_path": "/memories/m.md"})
    assert landed and landed[0].startswith("The memory file has been edited.")
    assert str(caught.value).startswith("Error [stale]: /memories/n.md changed while it was "
                                        "being renamed; nothing was renamed")
    assert store.get("n.md") == b"v2\n"
    assert not store.exists("m.md")


# -- races -----------------------------------------------------------------------------

AGENTS = 4
TRIES = 12
SHARED = "shared.txt"


def _shape(kind: str, ws: toolfs.Workspace) -> tuple[list[Any], Callable[[], Call],
                                                     Callable[[str], Call]]:
    """The tools of one shape, its view call and its "add my line" call."""
    if kind == "editor":
        return ([TextEditor(ws)], lambda: (EDITOR, {"command": "view", "path": SHARED}),
                lambda line: (EDITOR, {"command": "str_replace", "path": SHARED,
                                       "old_str": "END", "new_str": f"{line}\nEND"}))
    if kind == "memory":
        path = f"/memories/{SHARED}"
        return ([MemoryTool(ws)], lambda: ("memory", {"command": "view", "path": path}),
                lambda line: ("memory", {"command": "str_replace", "path": path,
                                         "old_str": "END", "new_str": f"{line}\nEND"}))
    return (beta_tools(ws), lambda: ("read", {"file_path": SHARED}),
            lambda line: ("edit", {"file_path": SHARED, "old_string": "END",
                                   "new_string": f"{line}\nEND"}))


def _racing_agent(kind: str, ws: toolfs.Workspace, line: str,
                  start: threading.Barrier) -> tuple[ScriptedModel, list[Any], list[bool]]:
    """An agent that views the file, adds its line, and on any refusal views again and
    retries; ``reported`` records whether its last change was reported as done."""
    tools, view, change = _shape(kind, ws)
    state = {"phase": "start", "tries": 0}
    reported: list[bool] = []

    def policy(results: list[dict[str, Any]]) -> list[Call] | None:
        if state["phase"] == "start":
            start.wait()
            state["phase"] = "viewed"
            return [view()]
        if state["phase"] == "viewed":
            state["phase"] = "changed"
            return [change(line)]
        if not results[0].get("is_error"):
            reported.append(True)
            return None
        state["tries"] += 1
        if state["tries"] >= TRIES:
            return None
        state["phase"] = "viewed"
        return [view()]
    return ScriptedModel(policy), tools, reported


@pytest.mark.parametrize("kind", ["editor", "memory", "beta"])
def test_agents_racing_on_one_file(store: Backend, kind: str) -> None:
    store.put(SHARED, b"START\nEND\n")
    ws = store.workspace()
    start = threading.Barrier(AGENTS)
    agents = [_racing_agent(kind, ws.new_context(), f"agent {i}", start)
              for i in range(AGENTS)]
    with ThreadPoolExecutor(AGENTS) as pool:
        for f in [pool.submit(model.run, tools) for model, tools, _ in agents]:
            f.result()
    final = store.get(SHARED).decode()
    done = [i for i, (_, _, reported) in enumerate(agents) if reported]
    assert done, "no agent's change landed"
    for i in done:
        assert final.count(f"agent {i}\n") == 1, (i, final)
    assert final.count("agent ") == len(done)  # nothing landed that was not reported
    assert final.startswith("START\n") and final.endswith("END\n")
    # The refusals the losers saw were the policy's, in the shape's words.
    for model, _, _ in agents:
        for text, error in zip(model.texts(), model.errors(), strict=True):
            if error:
                assert text.startswith("Error [stale]"), text


def test_parallel_calls_of_one_context(store: Backend) -> None:
    """Several str_replace calls of one agent at once (a model's parallel tool calls),
    all computed from one view: every success is in the final bytes."""
    store.put(SHARED, b"START\nEND\n")
    ed = TextEditor(store.workspace())
    assert not ed.execute({"command": "view", "path": SHARED}).is_error
    with ThreadPoolExecutor(AGENTS) as pool:
        outs = list(pool.map(lambda i: ed.execute({
            "command": "str_replace", "path": SHARED, "old_str": "END",
            "new_str": f"call {i}\nEND"}), range(AGENTS)))
    final = store.get(SHARED).decode()
    landed = [i for i, out in enumerate(outs) if not out.is_error]
    assert landed
    for i, out in enumerate(outs):
        assert (f"call {i}\n" in final) == (not out.is_error), (i, out.text, final)
        if out.is_error:
            assert out.error is not None and out.error.code == "stale"


def test_rename_racing_with_edits(store: Backend) -> None:
    """One agent renames a memory file while others edit it: the file ends up in
    exactly one place, holding every edit that was reported done."""
    store.put("n.md", b"START\nEND\n")
    ws = store.workspace()
    start = threading.Barrier(AGENTS + 1)
    agents = [_racing_agent("memory", ws.new_context(), f"agent {i}", start)
              for i in range(AGENTS)]
    for model, _, _ in agents:  # the editors work on n.md
        original = model.policy

        def policy(results: list[dict[str, Any]], original: Policy = original
                   ) -> list[Call] | None:
            calls = original(results)
            return None if calls is None else [
                (name, {**args, "path": "/memories/n.md"}) for name, args in calls]
        model.policy = policy
    def rename() -> list[Call]:
        start.wait()
        return [("memory", {"command": "rename", "old_path": "/memories/n.md",
                            "new_path": "/memories/m.md"})]
    mover = ScriptedModel(steps(rename))
    with ThreadPoolExecutor(AGENTS + 1) as pool:
        futures = [pool.submit(model.run, tools) for model, tools, _ in agents]
        futures.append(pool.submit(mover.run, [MemoryTool(ws.new_context())]))
        for f in futures:
            f.result()
    where = [p for p in ("n.md", "m.md") if store.exists(p)]
    assert len(where) == 1, where
    final = store.get(where[0]).decode()
    renamed = not mover.errors()[0]
    assert (where[0] == "m.md") == renamed, mover.texts()
    for i, (_, _, reported) in enumerate(agents):
        if reported:
            assert f"agent {i}\n" in final, (i, final)


# -- bad input -------------------------------------------------------------------------

BAD_EDITOR = [
    {}, {"command": "undo_edit", "path": "a.txt"}, {"command": "view"},
    {"command": "view", "path": 3}, {"command": "view", "path": "a.txt", "view_range": "1"},
    {"command": "create", "path": "b.txt"}, {"command": "create", "path": "b.txt",
                                             "file_text": "nul\x00"},
    {"command": "str_replace", "path": "a.txt", "old_str": "", "new_str": "x"},
    {"command": "str_replace", "path": "a.txt", "old_str": "one", "new_str": "one"},
    {"command": "str_replace", "path": "a.txt", "old_str": "one", "new_str": 1},
    {"command": "insert", "path": "a.txt", "insert_line": "1", "new_str": "x"},
    {"command": "insert", "path": "a.txt", "insert_line": True, "new_str": "x"},
    {"command": "insert", "path": "a.txt", "insert_line": 1},
    {"command": "insert", "path": "a.txt", "insert_line": 99, "new_str": "x"},
    {"command": "view", "path": "a.txt", "bogus": 1},
]


def test_bad_input_gets_structured_errors_through_the_runner(mem: Backend) -> None:
    mem.put("a.txt", b"one\ntwo\n")
    ws = mem.workspace()
    TextEditor(ws).execute({"command": "view", "path": "a.txt"})
    bad_memory = [{**b, "path": "/memories/a.txt"} if isinstance(b.get("path"), str) else b
                  for b in BAD_EDITOR] + [
        {"command": "rename", "old_path": "/memories/a.txt"},
        {"command": "delete", "path": ["x"]}]
    bad_beta = [("read", {}), ("read", {"file_path": "a.txt", "view_range": [0, 2]}),
                ("read", {"file_path": "a.txt", "view_range": [1, 2], "offset": 1}),
                ("edit", {"file_path": "a.txt", "old_string": 1, "new_string": "x"}),
                ("write", {"file_path": "../x", "content": "x"}),
                ("grep", {"pattern": "(a"})]
    model = ScriptedModel(steps(
        [(EDITOR, b) for b in BAD_EDITOR],
        [("memory", b) for b in bad_memory],
        bad_beta,
        [("nonexistent_tool", {})],
    ))
    with pytest.warns(UserWarning, match="not found in tool runner"):
        model.run([TextEditor(ws), MemoryTool(ws), *beta_tools(ws)])
    texts, errors = model.texts(), model.errors()
    assert len(texts) == len(BAD_EDITOR) + len(bad_memory) + len(bad_beta) + 1
    for text, error in zip(texts[:-1], errors[:-1], strict=True):
        assert error, text
        assert text.startswith("Error ["), text
        assert "Traceback" not in text and "AttributeError" not in text, text
        code = text[len("Error ["):text.index("]")]
        assert code in toolfs.ERROR_CODES
        assert len(text.splitlines()) >= 2  # the message, then the advice
    assert mem.get("a.txt") == b"one\ntwo\n"
    assert not mem.exists("b.txt") and not mem.exists("x")


def test_unknown_commands_and_non_objects(mem: Backend) -> None:
    mem.put("a.txt", b"one\n")
    ed = TextEditor(mem.workspace())
    ed.execute({"command": "view", "path": "a.txt"})
    for bad in (None, [], "view", {"command": None}, {"command": "delete", "path": "a"},
                {"command": "insert", "path": "a.txt", "insert_line": 1, "new_str": "\ud800"},
                {"command": "create", "path": "\ud800.txt", "file_text": "x"}):
        out = ed.execute(bad)  # type: ignore[arg-type]
        assert out.is_error and out.error is not None
        assert out.error.code == "invalid_arguments", out.text


# -- async twins -----------------------------------------------------------------------


def test_async_tools_through_the_async_runner(store: Backend) -> None:
    store.put("notes.md", b"a\n")
    aws = toolfs.AsyncWorkspace(store.workspace())
    model = ScriptedModel(steps(
        [("memory", {"command": "view", "path": "/memories/notes.md"})],
        [("memory", {"command": "str_replace", "path": "/memories/notes.md",
                     "old_str": "a", "new_str": "b"})],
        [("read", {"file_path": "notes.md"})],
        [("edit", {"file_path": "notes.md", "old_string": "b", "new_string": "c"})],
        [("edit", {"file_path": "notes.md", "old_string": "zzz", "new_string": "c"})],
        [(EDITOR, {"command": "view", "path": "notes.md"})],
    ))

    async def main() -> None:
        runner = model.async_client().beta.messages.tool_runner(
            model="claude-scripted", max_tokens=1024,
            tools=[AsyncMemoryTool(aws), AsyncTextEditor(aws), *beta_tools(aws)],
            messages=[{"role": "user", "content": "go"}])
        await runner.until_done()
        out = await AsyncTextEditor(aws).execute({"command": "view", "path": "notes.md"})
        assert out.text.endswith("     1\tc")
        twin = await TextEditor(aws).aexecute({"command": "view", "path": "notes.md"})
        assert twin.text == out.text
    asyncio.run(main())
    aws.close()
    assert model.errors() == [False, False, False, False, True, False]
    assert model.texts()[4].startswith("Error [no_match]")
    assert store.get("notes.md") == b"c\n"


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


# -- byte-exactness on real history ----------------------------------------------------

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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


def test_rm_file_version_deletes_only_that_version(store: Backend) -> None:
    """The conditional delete a move relies on, whatever the ledger says."""
    store.put("v.txt", b"one\n")
    ws = store.workspace()
    with ws.fs.open("v.txt", "rb") as f:
        seen = f.version
    store.put("v.txt", b"two\n")  # a change after the read
    with pytest.raises(toolfs.FsError) as caught:
        ws.fs.rm_file("v.txt", version=seen)
    assert caught.value.code == "stale" and store.get("v.txt") == b"two\n"
    fresh = ws.new_context()  # never read the file: the version alone is the condition
    with ws.fs.open("v.txt", "rb") as f:
        current = f.version
    fresh.fs.rm_file("v.txt", version=current)
    assert not store.exists("v.txt")
