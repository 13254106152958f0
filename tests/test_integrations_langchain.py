"""The LangChain tools and the Deep Agents backend, driven by the frameworks themselves.

A scripted chat model (a ``FakeMessagesListChatModel`` whose every turn is decided by a
function of the conversation; no network) runs LangChain's ``create_agent`` loop and a
Deep Agents graph (``create_deep_agent(..., backend=ToolfsBackend(ws))``) on every
backend: read -> edit -> a refused stale edit after an outside change -> re-read ->
edit, asserting the bytes and the texts the model reads. Then races: two agents of each
framework on one S3 object, and parallel tool calls of one context; every reported
success must be in the final bytes.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("langchain_core", reason="the langchain extra is not installed")
pytest.importorskip("langchain.agents", reason="LangChain's agent runner is not installed")
pytest.importorskip("deepagents", reason="the deepagents extra is not installed")

from deepagents import create_deep_agent
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import (
    FakeMessagesListChatModel,
)
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool
from pydantic import Field, ValidationError

import toolfs
from tests.backends import Backend, S3Backend
from toolfs.errors import STALE_SHOWN_ADVICE
from toolfs.integrations.deepagents import ToolfsBackend
from toolfs.integrations.langchain import tools
from toolfs.schemas import DESCRIPTIONS, ReadArgs, input_schema

Turn = Callable[[list[BaseMessage]], AIMessage]


class ScriptedModel(FakeMessagesListChatModel):
    """A chat model whose every reply is ``turn(conversation)``; tools are accepted and
    ignored (the script knows them)."""

    responses: list[BaseMessage] = Field(default_factory=list)
    turn: Turn

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.turn(messages))])

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self


def script(*steps: Turn) -> Turn:
    """A turn function playing ``steps`` in order, then answering "done"."""
    pending: Iterator[Turn] = iter(steps)

    def turn(messages: list[BaseMessage]) -> AIMessage:
        step = next(pending, None)
        return AIMessage("done") if step is None else step(messages)
    return turn


_ids = iter(range(10**9))


def call(name: str, **args: Any) -> AIMessage:
    """A model turn asking for one tool call."""
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"c{next(_ids)}",
                                      "type": "tool_call"}])


def results(messages: list[BaseMessage]) -> list[ToolMessage]:
    """The tool messages answering the model's last turn."""
    out: list[ToolMessage] = []
    for m in reversed(messages):
        if not isinstance(m, ToolMessage):
            break
        out.insert(0, m)
    return out


def only(messages: list[BaseMessage]) -> ToolMessage:
    (answer,) = results(messages)
    return answer


def run_graph(graph: Any, use_async: bool) -> dict[str, Any]:
    request = {"messages": [{"role": "user", "content": "edit notes.txt"}]}
    config = {"recursion_limit": 200}
    if use_async:
        return asyncio.run(graph.ainvoke(request, config))  # type: ignore[no-any-return]
    return graph.invoke(request, config)  # type: ignore[no-any-return]


def fresh(name: str, **options: Any) -> toolfs.Workspace:
    """A workspace on a memory root no other test uses."""
    return toolfs.Workspace(f"memory://{name}-{uuid.uuid4().hex[:8]}", **options)


def workspace(backend: Backend, **options: Any) -> toolfs.Workspace:
    return toolfs.Workspace(backend.fs, root=backend.root, **options)


# -- LangChain: the tools ---------------------------------------------------------------


def invoke(tool: StructuredTool, args: dict[str, Any], use_async: bool) -> ToolMessage:
    tool_call = {"type": "tool_call", "name": tool.name, "args": args, "id": f"c{next(_ids)}"}
    out = asyncio.run(tool.ainvoke(tool_call)) if use_async else tool.invoke(tool_call)
    assert isinstance(out, ToolMessage)
    return out


def test_tools_carry_the_pinned_schemas_and_descriptions() -> None:
    ws = fresh("lc-schemas")
    made = tools(ws)
    assert [t.name for t in made] == ["read", "write", "edit", "glob", "grep", "ls"]
    for t in made:
        assert t.args_schema == input_schema(t.name)
        assert t.description == DESCRIPTIONS[t.name]
        assert t.coroutine is not None and t.func is not None
    assert [t.name for t in tools(toolfs.AsyncWorkspace(ws), ["read", "edit"])] == [
        "read", "edit"]
    with pytest.raises(ValueError, match="unknown tool 'cat'"):
        tools(ws, ["cat"])


def test_pydantic_args_schema_would_hide_invalid_arguments() -> None:
    """Why the tools take dict schemas: with toolfs's pydantic model as ``args_schema``
    LangChain validates first and raises its own error, so the model never gets
    toolfs's ``invalid_arguments`` text."""
    ws = fresh("lc-pydantic")
    naive = StructuredTool.from_function(
        func=lambda **kw: ws.execute("read", kw).text, name="read",
        description=DESCRIPTIONS["read"], args_schema=ReadArgs)
    bad = {"type": "tool_call", "name": "read", "id": "x",
           "args": {"file_path": "a.txt", "offset": "2"}}
    with pytest.raises(ValidationError):
        naive.invoke(bad)
    answer = tools(ws, ["read"])[0].invoke(bad)
    assert isinstance(answer, ToolMessage) and answer.status == "error"
    assert answer.content == (
        "Error [invalid_arguments]: invalid arguments: offset: Input should be a valid "
        "integer\nFix the arguments and call the tool again.")


@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
def test_invalid_arguments_reach_the_model_as_toolfs_text(use_async: bool) -> None:
    ws = fresh("lc-invalid")
    ws.write("a.txt", "one\n")
    edit = {t.name: t for t in tools(ws)}["edit"]
    cases = [
        ({"file_path": "a.txt", "old_string": 1, "new_string": "x"},
         "old_string: Input should be a valid string"),
        ({"file_path": "a.txt", "old_string": "one"}, "missing required argument 'new_string'"),
        ({"file_path": "a.txt", "old_string": "one", "new_string": "two", "mode": "w"},
         "unknown argument 'mode'"),
        ({"file_path": "a.txt", "old_string": "one", "new_string": "one"},
         "old_string and new_string must differ"),
        # Names LangChain itself passes to a StructuredTool's _run: still the model's.
        ({"file_path": "a.txt", "old_string": "one", "new_string": "two", "config": {}},
         "unknown argument 'config'"),
        ({"file_path": "a.txt", "old_string": "one", "new_string": "two", "run_manager": 1},
         "unknown argument 'run_manager'"),
    ]
    for args, problem in cases:
        answer = invoke(edit, args, use_async)
        assert answer.status == "error", args
        assert isinstance(answer.content, str)
        assert answer.content.startswith("Error [invalid_arguments]: invalid arguments: ")
        assert problem in answer.content
        assert answer.content.endswith("\nFix the arguments and call the tool again.")
    assert ws.fs.cat_file("a.txt") == b"one\n"


def test_plain_invoke_returns_the_text() -> None:
    ws = fresh("lc-plain")
    ws.write("a.txt", "one\n")
    read = tools(ws, ["read"])[0]
    assert read.invoke({"file_path": "a.txt"}) == "     1\tone"
    assert read.invoke({"file_path": "b.txt"}).startswith("Error [not_found]: b.txt does not")


def test_tool_loop_on_every_backend(backend: Backend) -> None:
    """read -> edit -> stale edit refused after an outside change -> re-read -> edit,
    through tool.invoke (sync) or tool.ainvoke (the ``-async`` backends)."""
    backend.put("notes.txt", b"alpha\r\nbeta\r\n")
    by_name = {t.name: t for t in tools(workspace(backend))}

    def use(name: str, **args: Any) -> ToolMessage:
        return invoke(by_name[name], args, backend.use_async)

    first = use("read", file_path="notes.txt")
    assert (first.status, first.content) == ("success", "     1\talpha\n     2\tbeta")
    assert first.artifact["ok"] is True and first.artifact["result"]["lines"] == ["alpha",
                                                                                   "beta"]
    edited = use("edit", file_path="notes.txt", old_string="beta", new_string="gamma")
    assert edited.status == "success"
    assert edited.content == ("Edited notes.txt: replaced 1 occurrence at line 2.\n"
                              "Lines 1-2 of the edited file:\n     1\talpha\n     2\tgamma")
    assert backend.get("notes.txt") == b"alpha\r\ngamma\r\n"

    backend.put("notes.txt", b"alpha\r\ngamma\r\nzeta\r\n")  # someone else
    refused = use("edit", file_path="notes.txt", old_string="gamma", new_string="delta")
    assert refused.status == "error"
    assert refused.content == (
        "Error [stale]: notes.txt changed since you read it\n"
        "Changes since you read it:\n--- notes.txt (as you read it)\n+++ notes.txt (now)\n"
        "@@ -1,2 +1,3 @@\n alpha\n gamma\n+zeta\n" + STALE_SHOWN_ADVICE)
    assert backend.get("notes.txt") == b"alpha\r\ngamma\r\nzeta\r\n"

    again = use("read", file_path="notes.txt")
    assert again.content == "     1\talpha\n     2\tgamma\n     3\tzeta"
    done = use("edit", file_path="notes.txt", old_string="gamma", new_string="delta")
    assert done.status == "success"
    assert backend.get("notes.txt") == b"alpha\r\ndelta\r\nzeta\r\n"

    listing = use("ls")
    assert (listing.status, listing.content) == ("success", "notes.txt  (20 bytes)")
    found = use("grep", pattern="del+ta", output_mode="content")
    assert found.content == "notes.txt:2:delta"
    assert use("glob", pattern="*.txt").content == "notes.txt"


def test_langchain_agent_loop_on_every_backend(backend: Backend) -> None:
    """The same loop run by LangChain's own agent (``create_agent``) and scripted model."""
    backend.put("notes.txt", b"alpha\nbeta\n")
    seen: dict[str, str] = {}

    def outside_then_edit(messages: list[BaseMessage]) -> AIMessage:
        assert only(messages).status == "success"
        backend.put("notes.txt", b"alpha\ngamma\nzeta\n")
        return call("edit", file_path="notes.txt", old_string="gamma", new_string="delta")

    def after_refusal(messages: list[BaseMessage]) -> AIMessage:
        refused = only(messages)
        seen["refused"] = str(refused.content)
        assert refused.status == "error"
        assert backend.get("notes.txt") == b"alpha\ngamma\nzeta\n"
        return call("read", file_path="notes.txt")

    def after_reread(messages: list[BaseMessage]) -> AIMessage:
        seen["reread"] = str(only(messages).content)
        return call("edit", file_path="notes.txt", old_string="gamma", new_string="delta")

    def finish(messages: list[BaseMessage]) -> AIMessage:
        seen["final"] = str(only(messages).content)
        return AIMessage("done")

    turn = script(
        lambda m: call("read", file_path="notes.txt"),
        lambda m: call("edit", file_path="notes.txt", old_string="beta", new_string="gamma"),
        outside_then_edit, after_refusal, after_reread, finish)
    ws = workspace(backend)
    agent = create_agent(ScriptedModel(turn=turn),
                         tools=tools(toolfs.AsyncWorkspace(ws) if backend.use_async else ws))
    out = run_graph(agent, backend.use_async)
    assert out["messages"][-1].content == "done"
    assert seen["refused"].startswith("Error [stale]: notes.txt changed since you read it")
    assert seen["reread"] == "     1\talpha\n     2\tgamma\n     3\tzeta"
    assert seen["final"].startswith("Edited notes.txt: replaced 1 occurrence at line 2.")
    assert backend.get("notes.txt") == b"alpha\ndelta\nzeta\n"


def _markers(n: int, tag: str) -> list[str]:
    return [f"<{tag}{i}>" for i in range(n)]


def test_parallel_tool_calls_of_one_context_lose_nothing(backend: Backend) -> None:
    """One model turn with eight edits of one file; LangChain's agent runs them at once
    (threads for invoke, tasks for ainvoke): each is either in the file or answered
    ``stale``."""
    backend.put("race.txt", b"START\nEND\n")
    markers = _markers(8, "p")
    answers: dict[str, ToolMessage] = {}

    def edits(messages: list[BaseMessage]) -> AIMessage:
        assert only(messages).status == "success"
        return AIMessage("", tool_calls=[
            {"name": "edit", "id": m, "type": "tool_call",
             "args": {"file_path": "race.txt", "old_string": "END", "new_string": f"{m}\nEND"}}
            for m in markers])

    def finish(messages: list[BaseMessage]) -> AIMessage:
        answers.update({str(m.tool_call_id): m for m in results(messages)})
        return AIMessage("done")

    ws = workspace(backend)
    agent = create_agent(
        ScriptedModel(turn=script(lambda m: call("read", file_path="race.txt"), edits, finish)),
        tools=tools(toolfs.AsyncWorkspace(ws) if backend.use_async else ws))
    run_graph(agent, backend.use_async)
    final = backend.get("race.txt").decode()
    assert sorted(answers) == sorted(markers)
    wins = [m for m in markers if answers[m].status == "success"]
    assert wins
    for m in markers:
        if m in wins:
            assert m in final
        else:
            assert str(answers[m].content).startswith("Error [stale]")
            assert m not in final
    assert final.count("<") == len(wins)


# -- Deep Agents: the backend -------------------------------------------------------------


def da_backend(backend: Backend, ws: toolfs.Workspace | None = None) -> ToolfsBackend:
    ws = ws or workspace(backend)
    return ToolfsBackend(toolfs.AsyncWorkspace(ws) if backend.use_async else ws)


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


def _racer(framework: str, ws: toolfs.Workspace, name: str, wanted: int, wins: list[str],
           refusals: list[str], first_reads: threading.Barrier) -> Any:
    """An agent (LangChain's or Deep Agents') that appends ``wanted`` markers to
    race.txt, re-reading whenever an edit is refused as stale. Its first edit waits until
    every racer has read the file, so the first edits all start from one version: all
    but one must be refused."""
    read, edit, path = (("read_file", "edit_file", "/race.txt") if framework == "deepagents"
                        else ("read", "edit", "race.txt"))
    state = {"attempt": 0, "done": 0}

    def turn(messages: list[BaseMessage]) -> AIMessage:
        answers = results(messages)
        last = answers[-1] if answers else None
        if last is not None and last.name == edit:
            marker = f"<{name}:{state['attempt']}>"
            if last.status == "success":
                wins.append(marker)
                state["done"] += 1
            else:
                refusals.append(str(last.content))
        if state["done"] >= wanted:
            return AIMessage("done")
        if last is None or last.name == edit:
            return call(read, file_path=path)
        state["attempt"] += 1
        if state["attempt"] == 1:
            first_reads.wait(timeout=60)
        return call(edit, file_path=path, old_string="END",
                    new_string=f"<{name}:{state['attempt']}>\nEND")

    model = ScriptedModel(turn=turn)
    if framework == "deepagents":
        return create_deep_agent(model=model, backend=ToolfsBackend(ws))
    return create_agent(model, tools=tools(ws))


@pytest.mark.parametrize("framework", ["langchain", "deepagents"])
def test_two_agents_race_on_s3(s3_backend: S3Backend, framework: str) -> None:
    """Two agents, each its own context, append to one S3 object at once (moto over
    HTTP, conditional PUTs): every reported success is in the final bytes."""
    s3_backend.setup()
    try:
        s3_backend.put("race.txt", b"START\nEND\n")
        ws = workspace(s3_backend)
        wins: list[str] = []
        refusals: list[str] = []
        barrier = threading.Barrier(2)
        agents = [_racer(framework, ws.new_context(), f"a{i}", 6, wins, refusals, barrier)
                  for i in range(2)]
        errors: list[BaseException] = []

        def run(agent: Any) -> None:
            try:
                run_graph(agent, use_async=False)
            except BaseException as exc:  # surfaced below
                errors.append(exc)
        threads = [threading.Thread(target=run, args=(a,)) for a in agents]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        final = s3_backend.get("race.txt").decode()
        assert len(wins) == 12
        assert all(w in final for w in wins), (wins, final)
        assert final.count("<") == 12
        assert refusals  # the first edits raced from one version
        shown = "/race.txt" if framework == "deepagents" else "race.txt"
        assert all(r.startswith(f"Error [stale]: {shown} changed since you read it")
                   for r in refusals), refusals
    finally:
        s3_backend.teardown()


# -- Deep Agents' conventions ---------------------------------------------------------------


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
    is_dir = be.delete("/d").error
    assert is_dir is not None and is_dir.startswith("Error [not_a_file]: /d is a directory")
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
