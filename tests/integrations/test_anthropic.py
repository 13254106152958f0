"""Anthropic: the tool definitions, the beta tools and the SDK's tool runner driving the
text editor and the memory tool with a scripted model."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic", reason="the anthropic extra is not installed")
httpx2 = pytest.importorskip("httpx2", reason="the anthropic SDK's HTTP client is missing")

import toolfs  # noqa: E402
from tests.backend_fixtures import (  # noqa: E402
    Backend,
)
from tests.integrations.test_anthropic_text_editor import EDITOR, Call, ScriptedModel, steps  # noqa: E402
from toolfs.integrations.anthropic import (  # noqa: E402
    AsyncMemoryTool,
    AsyncTextEditor,
    MemoryTool,
    TextEditor,
    beta_tools,
)

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


"""(before, after) file versions replayed from this repository's own history."""


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


def test_beta_tools_answer_a_non_object_input_with_toolfs_text(mem: Backend) -> None:
    """The SDK's function tools raise TypeError on a non-object input; the runner would
    hand the model that repr, with no code and no advice."""
    ws = mem.workspace()
    for tool in beta_tools(ws):
        with pytest.raises(anthropic.lib.tools.ToolError) as caught:
            tool.call(["x"])
        assert str(caught.value).startswith("Error [invalid_arguments]: "), caught.value
    aws = toolfs.AsyncWorkspace(ws)
    try:
        for atool in beta_tools(aws):
            with pytest.raises(anthropic.lib.tools.ToolError) as caught:
                asyncio.run(atool.call(["x"]))
            assert str(caught.value).startswith("Error [invalid_arguments]: ")
    finally:
        aws.close()


def test_async_tools_run_on_the_async_workspaces_threads(mem: Backend) -> None:
    """With an AsyncWorkspace, the async editor and memory tool run their commands on its
    bounded worker pool (not on the event loop's default executor)."""
    import threading

    from toolfs.integrations.anthropic import AsyncMemoryTool, AsyncTextEditor

    mem.put("a.md", b"a\n")
    aws = toolfs.AsyncWorkspace(mem.workspace())
    seen: list[str] = []
    aws.sync.subscribe(lambda event: seen.append(threading.current_thread().name))

    async def main() -> None:
        await AsyncTextEditor(aws).execute({"command": "view", "path": "a.md"})
        await AsyncMemoryTool(aws).call({"command": "view", "path": "/memories/a.md"})
    try:
        asyncio.run(main())
    finally:
        aws.close()
    assert seen and all(name.startswith("toolfs") for name in seen), seen


def test_runner_results_for_adversarial_paths(mem: Backend) -> None:
    mem.put("a.md", b"one\n")
    ws = mem.workspace()
    # (Lone surrogates and non-object inputs cannot travel: the SDK cannot encode the
    # request that echoes them; the tests above cover them without the transport.)
    hostile = ["/memories/../etc/passwd", "/memories/%2e%2e/x", "/memories/..%2f..%2fx",
               "/memories/d\\..\\..\\x", "/memories/a\x00.md", "/memoriesX/a.md",
               "memories/a.md", "/etc/passwd"]
    model = ScriptedModel(steps(
        [("memory", {"command": "view", "path": p}) for p in hostile],
        [(EDITOR, {"command": "view", "path": p}) for p in ("../x", "/", "a\\b", "a\x00")],
    ))
    model.run([MemoryTool(ws), TextEditor(ws), *beta_tools(ws)])
    for text, error in zip(model.texts(), model.errors(), strict=True):
        assert error, text
        assert text.startswith("Error ["), text
        code = text[len("Error ["):text.index("]")]
        assert code in toolfs.ERROR_CODES and code != "backend_error", text
