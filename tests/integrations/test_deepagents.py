"""Deep Agents: the toolfs backend and agents (subagents, summarization, eviction of large
results) with a scripted model, on every backend."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("langchain_core", reason="the langchain extra is not installed")
pytest.importorskip("langchain.agents", reason="LangChain's agent runner is not installed")
pytest.importorskip("deepagents", reason="the deepagents extra is not installed")
pytest.importorskip("agents", reason="the openai-agents extra is not installed")
pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

from deepagents import create_deep_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

import toolfs
from tests.backend_fixtures import Backend
from tests.integrations.test_every_adapter import fresh
from tests.integrations.test_langchain import (
    ScriptedModel,
    Turn,
    _call,
    _markers,
    _tool_messages,
    call,
    closed,
    only,
    results,
    run_graph,
    script,
    workspace,
)
from tests.integrations.test_langchain import ScriptedModel as ScriptedChatModel
from toolfs.errors import STALE_SHOWN_ADVICE
from toolfs.integrations.deepagents import ToolfsBackend
from toolfs.integrations.langchain import tools


def da_backend(backend: Backend, ws: toolfs.Workspace | None = None) -> ToolfsBackend:
    ws = ws or workspace(backend)
    return ToolfsBackend(toolfs.AsyncWorkspace(ws) if backend.use_async else ws)


class Driver:
    """A ``ToolfsBackend`` called the way the backend fixture says: its sync methods, or
    (``-async`` backends) its ``a``-prefixed coroutines on a running event loop."""

    def __init__(self, backend: ToolfsBackend, use_async: bool) -> None:
        self._backend, self._async = backend, use_async

    def __getattr__(self, name: str) -> Any:
        if not self._async:
            return getattr(self._backend, name)
        coroutine = getattr(self._backend, "a" + name)
        return lambda *args, **kwargs: asyncio.run(coroutine(*args, **kwargs))


@pytest.fixture
def mem(backend: Backend) -> tuple[toolfs.Workspace, Any]:
    """A workspace on the backend under test, and a Deep Agents backend over another
    context of it (driven sync or async)."""
    ws = workspace(backend)
    return ws, Driver(da_backend(backend, ws.new_context()), backend.use_async)




class Delegating(ScriptedChatModel):
    """One chat model for a deep agent and its subagents: a conversation that starts
    with a ``task`` description is a subagent's, and follows ``sub``; the rest follow
    ``main``."""

    sub: Callable[[list[BaseMessage]], AIMessage]

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        is_sub = any(isinstance(m, HumanMessage) and str(m.content).startswith("subtask")
                     for m in messages)
        reply = (self.sub if is_sub else self.turn)(messages)
        return ChatResult(generations=[ChatGeneration(message=reply)])






def test_deep_agent_loop_on_every_backend(backend: Backend) -> None:
    """read_file -> edit_file -> refused stale edit -> re-read -> edit_file in a Deep
    Agents graph whose backend is toolfs."""
    backend.put("notes.txt", b"alpha\r\nbeta\r\n")
    seen: dict[str, ToolMessage] = {}

    def step(name: str, **args: Any) -> Turn:
        def turn(messages: list[BaseMessage]) -> AIMessage:
            answers = results(messages)
            if answers:
                seen[f"{len(seen)}"] = only(messages)
            return call(name, **args)
        return turn

    def outside(messages: list[BaseMessage]) -> AIMessage:
        seen[f"{len(seen)}"] = only(messages)
        backend.put("notes.txt", b"alpha\r\ngamma\r\nzeta\r\n")
        return call("edit_file", file_path="/notes.txt", old_string="gamma",
                    new_string="delta")

    def last(messages: list[BaseMessage]) -> AIMessage:
        seen[f"{len(seen)}"] = only(messages)
        return AIMessage("done")

    turn = script(step("read_file", file_path="/notes.txt"),
                  step("edit_file", file_path="/notes.txt", old_string="beta",
                       new_string="gamma"),
                  outside,
                  step("read_file", file_path="/notes.txt"),
                  step("edit_file", file_path="/notes.txt", old_string="gamma",
                       new_string="delta"),
                  last)
    graph = create_deep_agent(model=ScriptedModel(turn=turn), backend=da_backend(backend))
    out = run_graph(graph, backend.use_async)
    assert out["messages"][-1].content == "done"
    texts = [(seen[str(i)].status, seen[str(i)].content) for i in range(len(seen))]
    assert texts == [
        ("success", "@@ lines 1-2 of 2 @@\nalpha\nbeta"),
        ("success", "Successfully replaced 1 instance(s) of the string in '/notes.txt'"),
        ("error", "Error [stale]: /notes.txt changed since you read it\n"
                  "Changes since you read it:\n--- notes.txt (as you read it)\n"
                  "+++ notes.txt (now)\n@@ -1,2 +1,3 @@\n alpha\n gamma\n+zeta\n"
                  + STALE_SHOWN_ADVICE),
        ("success", "@@ lines 1-3 of 3 @@\nalpha\ngamma\nzeta"),
        ("success", "Successfully replaced 1 instance(s) of the string in '/notes.txt'"),
    ]
    assert backend.get("notes.txt") == b"alpha\r\ndelta\r\nzeta\r\n"


def test_deep_agent_write_and_discovery_texts(backend: Backend) -> None:
    backend.put("src/app.py", b"def main():\n    return 42\n")
    backend.put("notes.txt", b"one\n")
    seen: list[list[ToolMessage]] = []

    def record(next_turn: AIMessage) -> Turn:
        def turn(messages: list[BaseMessage]) -> AIMessage:
            if results(messages):
                seen.append(results(messages))
            return next_turn
        return turn

    turn = script(
        record(call("ls", path="/")),
        record(call("glob", pattern="*.py")),
        record(call("grep", pattern="return 4", output_mode="content")),
        record(call("write_file", file_path="/notes.txt", content="two\n")),
        record(call("write_file", file_path="/new/created.txt", content="hello\n")),
        record(call("read_file", file_path="/missing.txt")),
        record(AIMessage("done")))
    graph = create_deep_agent(model=ScriptedModel(turn=turn), backend=da_backend(backend))
    run_graph(graph, backend.use_async)
    texts = [(m.status, m.content) for (m,) in seen]
    assert texts == [
        ("success", "['/notes.txt', '/src/']"),
        ("success", "['/src/app.py']"),
        ("success", "/src/app.py:\n  2:     return 42"),
        ("error", "Error [not_observed]: /notes.txt already exists and was not read in "
                  "this context; read it before replacing it\n"
                  "Read the file first, then retry the change."),
        ("success", "Updated file /new/created.txt"),
        ("error", "Error: File '/missing.txt' not found"),
    ]
    assert backend.get("notes.txt") == b"one\n"
    assert backend.get("new/created.txt") == b"hello\n"


def test_deep_agent_parallel_turn(backend: Backend) -> None:
    """Parallel calls in one turn: edits of different files all land; a second mutation
    of the same path is refused by Deep Agents' middleware; nothing reported lands
    missing."""
    for name in ("a.txt", "b.txt"):
        backend.put(name, b"x\n")
    seen: list[ToolMessage] = []

    def reads(messages: list[BaseMessage]) -> AIMessage:
        return AIMessage("", tool_calls=[
            {"name": "read_file", "args": {"file_path": f"/{n}"}, "id": f"r{n}",
             "type": "tool_call"} for n in ("a.txt", "b.txt")])

    def edits(messages: list[BaseMessage]) -> AIMessage:
        assert [m.status for m in results(messages)] == ["success", "success"]
        return AIMessage("", tool_calls=[
            {"name": "edit_file", "id": i, "type": "tool_call",
             "args": {"file_path": f"/{n}", "old_string": "x", "new_string": new}}
            for i, n, new in (("e1", "a.txt", "A1"), ("e2", "b.txt", "B"),
                              ("e3", "a.txt", "A2"))])

    def finish(messages: list[BaseMessage]) -> AIMessage:
        seen.extend(results(messages))
        return AIMessage("done")

    graph = create_deep_agent(model=ScriptedModel(turn=script(reads, edits, finish)),
                              backend=da_backend(backend))
    run_graph(graph, backend.use_async)
    by_id = {m.tool_call_id: m for m in seen}
    assert by_id["e1"].status == "success" and by_id["e2"].status == "success"
    assert by_id["e3"].status == "error"
    assert by_id["e3"].content == "Error: parallel file mutations to the same path are not allowed."
    assert backend.get("a.txt") == b"A1\n" and backend.get("b.txt") == b"B\n"


def test_backend_parallel_edits_of_one_context_lose_nothing(backend: Backend) -> None:
    """Below the middleware (a subagent, a custom tool, or a middleware-free caller):
    eight edits of one file at once through one backend."""
    backend.put("race.txt", b"START\nEND\n")
    be = da_backend(backend)
    assert be.read("/race.txt").error is None
    markers = _markers(8, "q")

    def edit(m: str) -> Any:
        return be.edit("/race.txt", "END", f"{m}\nEND")

    if backend.use_async:
        async def all_at_once() -> list[Any]:
            return list(await asyncio.gather(*(be.aedit("/race.txt", "END", f"{m}\nEND")
                                               for m in markers)))
        answers = asyncio.run(all_at_once())
    else:
        answers = [None] * len(markers)

        def run(i: int) -> None:
            answers[i] = edit(markers[i])
        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(markers))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    final = backend.get("race.txt").decode()
    wins = [m for m, a in zip(markers, answers, strict=True) if a.error is None]
    assert wins
    for m, a in zip(markers, answers, strict=True):
        if a.error is None:
            assert a.occurrences == 1 and m in final
        else:
            assert a.error.startswith("Error [stale]") and m not in final
    assert final.count("<") == len(wins)


def test_read_windows(backend: Backend, mem: tuple[toolfs.Workspace, Any]) -> None:
    ws, be = mem
    ws.write("ten.txt", "".join(f"l{i}\n" for i in range(1, 11)))
    ws.write("open.txt", "a\nb")
    ws.write("empty.txt", "")
    ws.write("blank.txt", "  \n\n")
    r = be.read("/ten.txt", 2, 3)
    assert r.file_data == {"content": "l3\nl4\nl5\n", "encoding": "utf-8"}
    assert (r.start_line, r.end_line, r.total_lines, r.next_offset) == (3, 5, 10, 5)
    r = be.read("/ten.txt", 8)
    assert r.file_data is not None and r.file_data["content"] == "l9\nl10\n"
    assert (r.start_line, r.end_line, r.next_offset) == (9, 10, None)
    assert be.read("/ten.txt", -3, 1).file_data == {"content": "l1\n", "encoding": "utf-8"}
    assert be.read("/ten.txt", 10).error == "Line offset 10 exceeds file length (10 lines)"
    zero = be.read("/ten.txt", 0, 0)
    assert zero.no_lines_requested and zero.file_data == {"content": "", "encoding": "utf-8"}
    assert be.read("/open.txt").file_data == {"content": "a\nb", "encoding": "utf-8"}
    assert be.read("/empty.txt").file_data == {"content": "", "encoding": "utf-8"}
    blank = be.read("/blank.txt")
    assert blank.file_data == {"content": "  \n\n", "encoding": "utf-8"}
    assert blank.start_line is None
    # toolfs's "did you mean" where a listing is free (memory, local disk)
    hint = ". Did you mean: /open.txt, /ten.txt?" if backend.capabilities.cheap_listing else ""
    assert be.read("/nope.txt").error == f"File '/nope.txt' not found{hint}"
    assert be.read("/zzzzzz").error == "File '/zzzzzz' not found"
    assert be.read("/").error == "File '/' not found"
    assert be.read("/../x").error is not None and "outside_root" in str(be.read("/../x").error)


def test_read_over_the_size_cap_streams_a_window(backend: Backend) -> None:
    body = "".join(f"line {i:04d}\n" for i in range(1, 401))  # 4000 bytes
    backend.put("big.txt", body.encode())
    ws = workspace(backend, size_cap=1024, first_block=256, block_size=256)
    be = Driver(da_backend(backend, ws), backend.use_async)
    r = be.read("/big.txt", 10, 3)
    assert r.file_data == {"content": "line 0011\nline 0012\nline 0013\n", "encoding": "utf-8"}
    assert (r.start_line, r.end_line, r.total_lines, r.next_offset) == (11, 13, None, 13)
    tail = be.read("/big.txt", 398, 5)
    assert tail.file_data is not None and tail.file_data["content"] == "line 0399\nline 0400\n"
    assert (tail.end_line, tail.total_lines, tail.next_offset) == (400, 400, None)


def test_binary_read_upload_download(mem: tuple[toolfs.Workspace, Any]) -> None:
    ws, be = mem
    png = b"\x89PNG\r\n\x1a\n\x00\x01"
    up = be.upload_files([("/img/a.png", png), ("/../out", b"x")])
    assert [(u.path, u.error) for u in up] == [("/img/a.png", None), ("/../out", "invalid_path")]
    r = be.read("/img/a.png")
    assert r.file_data == {"content": "iVBORw0KGgoAAQ==", "encoding": "base64"}
    down = be.download_files(["/img/a.png", "/nope", "/img"])
    assert [(d.content, d.error) for d in down] == [
        (png, None), (None, "file_not_found"), (None, "is_directory")]
    other = ToolfsBackend(ws.new_context())
    refused = other.upload_files([("/img/a.png", b"new")])[0]
    assert refused.error is not None and refused.error.startswith("Error [not_observed]")
    assert ws.fs.cat_file("img/a.png") == png


def test_download_then_edit_is_conditional(mem: tuple[toolfs.Workspace, Any]
                                           ) -> None:
    """Deep Agents' summarization middleware downloads a file, then edits it: the edit
    lands only on the version downloaded."""
    ws, be = mem
    ws.write("history.md", "one\n")
    (got,) = be.download_files(["/history.md"])
    assert got.content == b"one\n"
    outsider = ws.new_context()
    outsider.read("history.md")
    outsider.write("history.md", "one\nappended elsewhere\n")
    lost = be.edit("/history.md", "one\n", "one\ntwo\n")
    assert lost.error is not None and lost.error.startswith("Error [stale]")
    assert ws.fs.cat_file("history.md") == b"one\nappended elsewhere\n"


def test_edit_errors_keep_deep_agents_wording(mem: tuple[toolfs.Workspace, Any]
                                               ) -> None:
    ws, be = mem
    ws.write("a.txt", "x = 1\nx = 1\ny =  2\n")
    be.read("/a.txt")
    assert be.edit("/nope.txt", "a", "b").error == "Error: File '/nope.txt' not found"
    assert be.edit("/a.txt", "", "b").error == (
        "Error: old_string cannot be empty. Provide the exact text to replace.")
    assert be.edit("/a.txt", "x = 1", "x = 2").error == (
        "Error: String 'x = 1' appears 2 times in file. Use replace_all=True to replace all "
        "instances, or provide a more specific string with surrounding context.")
    no_match = be.edit("/a.txt", "y = 2", "y = 3").error
    assert no_match is not None and no_match.startswith(
        "Error: String not found in file: 'y = 2' A match that differs only in whitespace")
    same = be.edit("/a.txt", "y", "y").error
    assert same is not None and same.startswith("Error [invalid_arguments]")
    done = be.edit("/a.txt", "x = 1", "x = 2", replace_all=True)
    assert (done.error, done.path, done.occurrences) == (None, "/a.txt", 2)
    assert ws.fs.cat_file("a.txt") == b"x = 2\nx = 2\ny =  2\n"


def test_ls_glob_grep_conventions(mem: tuple[toolfs.Workspace, Any]) -> None:
    ws, be = mem
    ws.write("src/app.py", "print('a.b')\n")
    ws.write("src/lib/util.py", "a.b = 1\naxb\n")
    ws.write(".github/ci.yml", "on: push\n")
    ws.write("top.py", "x\n")
    ls = be.ls("/src")
    assert ls.entries == [{"path": "/src/app.py", "is_dir": False, "size": 13},
                          {"path": "/src/lib/", "is_dir": True, "size": 0}]
    assert be.ls("/nope").error == "Path '/nope': path_not_found"
    assert be.ls("/top.py").error == "Path '/top.py': not_a_directory"
    names = lambda g: sorted(m["path"] for m in (g.matches or []))  # noqa: E731
    assert names(be.glob("*.py")) == ["/src/app.py", "/src/lib/util.py", "/top.py"]
    assert names(be.glob("/*.py")) == ["/top.py"]
    assert names(be.glob("*.yml")) == [
        "/.github/ci.yml"]  # bare: basename at any depth, also in dot-directories
    assert names(be.glob("**/*.yml")) == []
    assert names(be.glob("*.py", "/src/lib")) == ["/src/lib/util.py"]
    assert be.glob("../*").error is not None
    hits = be.grep("a.b")  # literal: the dot is not a wildcard
    assert hits.matches == [{"path": "/src/app.py", "line": 1, "text": "print('a.b')"},
                            {"path": "/src/lib/util.py", "line": 1, "text": "a.b = 1"}]
    assert [m["path"] for m in be.grep("a.b", "/src", "lib/*.py").matches or []] == [
        "/src/lib/util.py"]
    capped = be.grep("a", max_count=1)
    assert capped.truncated and len(capped.matches or []) == 1
    assert be.grep("nothing here").matches == []
    assert be.grep("x", "/nope").matches == []
    # "" is in every line, as in Deep Agents; hidden files are skipped, as ripgrep does
    assert len(be.grep("").matches or []) == 4


def test_delete_is_conditional(mem: tuple[toolfs.Workspace, Any]) -> None:
    ws, be = mem
    ws.write("a.txt", "a\n")
    ws.write("d/b.txt", "b\n")
    unread = be.delete("/a.txt").error
    assert unread is not None and unread.startswith("Error [not_observed]")
    assert be.delete("/nope.txt").error == "Error: '/nope.txt' not found"
    # A directory goes with its files, each on the version this context read: none
    # read yet, nothing deleted.
    unread_dir = be.delete("/d").error
    assert unread_dir is not None and unread_dir.startswith("Error [not_observed]")
    assert ws.fs.exists("d/b.txt")
    be.read("/d/b.txt")
    assert be.delete("/d/").path == "/d/"
    assert not ws.fs.exists("d/b.txt")
    be.read("/a.txt")
    ws.write("a.txt", "changed\n")  # another context changed it since
    stale = be.delete("/a.txt").error
    assert stale is not None and stale.startswith("Error [stale]")
    be.read("/a.txt")
    assert be.delete("/a.txt").path == "/a.txt"
    assert not ws.fs.exists("a.txt")


def test_backend_takes_a_workspace() -> None:
    with pytest.raises(TypeError, match="Workspace or AsyncWorkspace"):
        ToolfsBackend("memory://x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Workspace or AsyncWorkspace"):
        tools("memory://x")  # type: ignore[arg-type]


def test_deep_agents_async_failures_are_error_results() -> None:
    ws = fresh("da-closed")
    ws.write("a.txt", "hi\n")
    b = ToolfsBackend(closed(ws))
    text = ("[backend_error]: RuntimeError: this AsyncWorkspace is closed\n"
            "The storage backend failed; retrying later may help.")

    async def every_call() -> list[Any]:
        return [await b.aread("/a.txt"), await b.als("/"), await b.aglob("*"),
                await b.agrep("hi"), await b.awrite("/a.txt", "x"),
                await b.aedit("/a.txt", "hi", "ho"), await b.adelete("/a.txt"),
                *(await b.aupload_files([("/b.txt", b"x")])),
                *(await b.adownload_files(["/a.txt"]))]

    results = asyncio.run(every_call())
    for r in results:
        assert r.error is not None and r.error.endswith(text), r
    assert ws.fs.cat_file("a.txt") == b"hi\n"
    assert not ws.fs.exists("b.txt")


def test_a_subagent_and_its_parent_never_lose_an_update(backend: Backend) -> None:
    """The parent reads, delegates an edit of the same file to a subagent, then writes
    what it read plus a line: that write is refused (``stale``), not stored over the
    subagent's edit; after a re-read the parent's write keeps both changes. The subagent
    must read before it edits, though its parent had read the file."""
    backend.put("notes.txt", b"alpha\nbeta\n")
    seen: list[tuple[str, str, str]] = []  # (who, status, text) of every tool result

    def record(who: str, messages: list[BaseMessage]) -> list[ToolMessage]:
        answers = _tool_messages(messages)
        if answers:
            last = answers[-1]
            seen.append((who, last.status, str(last.content)))
        return answers

    def parent(messages: list[BaseMessage]) -> AIMessage:
        n = len(record("parent", messages))
        if n == 0:
            return _call("read_file", "p1", file_path="/notes.txt")
        if n == 1:
            return _call("task", "p2", description="subtask: capitalise alpha",
                         subagent_type="general-purpose")
        if n == 2:  # what it read, plus a line: the subagent's change is not in it
            return _call("write_file", "p3", file_path="/notes.txt",
                         content="alpha\nbeta\nparent\n")
        if n == 3:
            return _call("read_file", "p4", file_path="/notes.txt")
        if n == 4:
            return _call("write_file", "p5", file_path="/notes.txt",
                         content="ALPHA\nbeta\nparent\n")
        return AIMessage("done")

    def sub(messages: list[BaseMessage]) -> AIMessage:
        n = len(record("sub", messages))
        if n == 0:  # straight to the edit: the subagent has read nothing
            return _call("edit_file", "s1", file_path="/notes.txt", old_string="alpha",
                         new_string="ALPHA")
        if n == 1:
            return _call("read_file", "s2", file_path="/notes.txt")
        if n == 2:
            return _call("edit_file", "s3", file_path="/notes.txt", old_string="alpha",
                         new_string="ALPHA")
        return AIMessage("capitalised")

    ws = toolfs.Workspace(backend.fs, root=backend.root)
    da = ToolfsBackend(toolfs.AsyncWorkspace(ws) if backend.use_async else ws)
    graph = create_deep_agent(model=Delegating(turn=parent, sub=sub), backend=da)
    request = {"messages": [{"role": "user", "content": "edit notes"}]}
    if backend.use_async:
        asyncio.run(graph.ainvoke(request, {"recursion_limit": 100}))
    else:
        graph.invoke(request, {"recursion_limit": 100})
    statuses = [(who, status, text.split("\n")[0]) for who, status, text in seen]
    assert statuses == [
        ("parent", "success", "@@ lines 1-2 of 2 @@"),
        ("sub", "error", "Error [not_observed]: /notes.txt exists but was not read in this "
                         "context; read it before changing it"),
        ("sub", "success", "@@ lines 1-2 of 2 @@"),
        ("sub", "success", "Successfully replaced 1 instance(s) of the string in "
                           "'/notes.txt'"),
        ("parent", "success", "capitalised"),
        ("parent", "error", "Error [stale]: /notes.txt changed since you read it"),
        ("parent", "success", "@@ lines 1-2 of 2 @@"),
        ("parent", "success", "Updated file /notes.txt"),
    ]
    assert backend.get("notes.txt") == b"ALPHA\nbeta\nparent\n"
    # the subagent's own context, whose events are in the backend's audit log too
    assert len({e.context_id for e in da.workspace.audit.events}) == 2


def test_parallel_subagents_on_one_file_lose_no_reported_success() -> None:
    """Two subagents started in one turn each read the file and append their own line
    with a write: one wins, the other is refused ``stale`` (never both stored)."""
    ws = fresh("da-parallel-subagents")
    ws.write("log.txt", "start\n")
    outcomes: dict[str, str] = {}
    lock = threading.Lock()

    def parent(messages: list[BaseMessage]) -> AIMessage:
        if not _tool_messages(messages):
            return AIMessage("", tool_calls=[
                {"name": "task", "args": {"description": f"subtask {who}",
                                          "subagent_type": "general-purpose"},
                 "id": f"t-{who}", "type": "tool_call"} for who in ("one", "two")])
        return AIMessage("done")

    def sub(messages: list[BaseMessage]) -> AIMessage:
        who = next(str(m.content).split()[1] for m in messages
                   if isinstance(m, HumanMessage) and str(m.content).startswith("subtask"))
        answers = _tool_messages(messages)
        if not answers:
            return _call("read_file", f"r-{who}", file_path="/log.txt")
        if len(answers) == 1:
            body = str(answers[0].content).split("\n", 1)[1]
            return _call("write_file", f"w-{who}", file_path="/log.txt",
                         content=body + "\n" + who + "\n")
        with lock:
            outcomes[who] = answers[-1].status
        return AIMessage("written" if answers[-1].status == "success" else "refused")

    graph = create_deep_agent(model=Delegating(turn=parent, sub=sub),
                              backend=ToolfsBackend(ws.new_context()))
    graph.invoke({"messages": [{"role": "user", "content": "log"}]}, {"recursion_limit": 100})
    final = ws.fs.cat_file("log.txt").decode()
    assert sorted(outcomes) == ["one", "two"]
    wins = [who for who, status in outcomes.items() if status == "success"]
    assert wins
    for who in ("one", "two"):
        assert (who in final) == (who in wins), (outcomes, final)


def test_summarization_never_replaces_a_history_file_over_the_cap() -> None:
    """The summarization middleware downloads its history file and, if the download
    fails, takes the file for new and writes just the new section. A history file over
    ``size_cap`` must come back whole (as from Deep Agents' own backends), so the append
    is refused ``too_large`` and the history is kept, never replaced by one section."""
    from deepagents.middleware.summarization import create_summarization_middleware

    ws = fresh("da-history", size_cap=4096)
    backend = ToolfsBackend(ws.new_context())
    middleware = create_summarization_middleware(
        ScriptedChatModel(turn=lambda m: AIMessage("summary")), backend)
    path = "/conversation_history/s1.md"
    assert middleware._offload_to_backend(backend, [HumanMessage("first")], "s1") == path
    assert middleware._offload_to_backend(backend, [HumanMessage("second")], "s1") == path
    history = ws.fs.cat_file("conversation_history/s1.md")
    assert history.count(b"## Summarized at") == 2 and b"first" in history
    big = history + b"x" * 5000
    # the history grew past the cap (another writer's; toolfs itself writes up to it)
    ws.fs.fs.pipe_file(ws.fs.resolve("conversation_history/s1.md").backend_path, big)

    (download,) = backend.download_files([path])
    assert download.error is None and download.content == big  # whole, past the cap
    assert middleware._offload_to_backend(backend, [HumanMessage("third")], "s1") is None
    assert ws.fs.cat_file("conversation_history/s1.md") == big


def test_large_tool_results_are_evicted_to_the_workspace_and_read_back() -> None:
    """A custom tool's large result is written to ``/large_tool_results/<call id>``
    through the backend and the model pages through it with ``read_file``."""
    from langchain_core.tools import tool

    @tool
    def dump() -> str:
        """Print a long report."""
        return "".join(f"row {i} " + "y" * 100 + "\n" for i in range(2000))

    ws = fresh("da-evict")
    seen: list[str] = []

    def turn(messages: list[BaseMessage]) -> AIMessage:
        answers = _tool_messages(messages)
        if answers:
            seen.append(str(answers[-1].content))
        if not answers:
            return _call("dump", "big1")
        if len(answers) == 1:
            return _call("read_file", "r1", file_path="/large_tool_results/big1",
                         offset=1998, limit=5)
        return AIMessage("done")

    graph = create_deep_agent(model=ScriptedChatModel(turn=turn), tools=[dump],
                              backend=ToolfsBackend(ws.new_context()))
    graph.invoke({"messages": [{"role": "user", "content": "report"}]})
    assert "/large_tool_results/big1" in seen[0] and len(seen[0]) < 5000
    assert seen[1] == ("@@ lines 1999-2000 of 2000 @@\nrow 1998 " + "y" * 100
                       + "\nrow 1999 " + "y" * 100)
    assert ws.fs.cat_file("large_tool_results/big1") == dump.invoke({}).encode()


def test_conversations_of_one_deep_agent_are_separate_contexts() -> None:
    """A server compiles one deep agent and runs many conversations (threads) at once
    over one backend: two that read the same file and then each write their version
    must not both succeed (one is refused ``stale``), and each conversation keeps its
    own observations across its turns."""
    from langgraph.checkpoint.memory import InMemorySaver

    ws = fresh("da-threads")
    ws.write("plan.txt", "v1\n")
    both_read = threading.Barrier(2, timeout=30)
    outcomes: dict[str, str] = {}

    def turn(messages: list[BaseMessage]) -> AIMessage:
        who = next(str(m.content) for m in messages if isinstance(m, HumanMessage))
        answers = _tool_messages(messages)
        if not answers:
            return _call("read_file", f"r-{who}", file_path="/plan.txt")
        if len(answers) == 1:
            both_read.wait()  # both conversations have read v1
            return _call("write_file", f"w-{who}", file_path="/plan.txt",
                         content=f"v2 by {who}\n")
        outcomes[who] = answers[-1].status
        return AIMessage("ok")

    graph = create_deep_agent(model=ScriptedChatModel(turn=turn),
                              backend=ToolfsBackend(ws.new_context()),
                              checkpointer=InMemorySaver())

    def converse(who: str) -> None:
        graph.invoke({"messages": [{"role": "user", "content": who}]},
                     {"configurable": {"thread_id": who}, "recursion_limit": 50})

    threads = [threading.Thread(target=converse, args=(who,)) for who in ("ann", "bob")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(outcomes.values()) == ["error", "success"], outcomes
    (winner,) = [who for who, status in outcomes.items() if status == "success"]
    assert ws.fs.cat_file("plan.txt") == f"v2 by {winner}\n".encode()
