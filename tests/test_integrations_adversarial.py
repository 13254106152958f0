"""An agent builder's probes of the framework adapters, each through the framework's own
machinery: subagents sharing a Deep Agents backend, argument names the adapters' own
signatures used to swallow, the same call giving the same text in every adapter, worker
threads that are gone, streamed runs, and runs cancelled in the middle of a write.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")
pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")
pytest.importorskip("langchain.agents", reason="LangChain's agent runner is not installed")
pytest.importorskip("deepagents", reason="the deepagents extra is not installed")

from agents import Agent, RunConfig, Runner
from agents.items import ToolCallOutputItem
from agents.testing import ScriptedModel, assistant_message, function_call
from deepagents import create_deep_agent
from fsspec.implementations.memory import MemoryFileSystem
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import (
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import FunctionModel

import toolfs
from tests.backends import Backend
from tests.test_integrations_langchain import ScriptedModel as ScriptedChatModel
from toolfs.integrations import langchain as lc
from toolfs.integrations.deepagents import ToolfsBackend
from toolfs.integrations.openai_agents import function_tools
from toolfs.integrations.pydantic_ai import toolset
from toolfs.policy.events import FsEvent

NO_TRACING = RunConfig(tracing_disabled=True)


def fresh(name: str, **options: Any) -> toolfs.Workspace:
    return toolfs.Workspace(f"memory://{name}-{uuid.uuid4().hex[:8]}", **options)


# -- the same call, the same text, in every adapter ------------------------------------


def via_agents_sdk(ws: toolfs.Workspace, tool: str, args: dict[str, Any]) -> str:
    model = ScriptedModel([[function_call(tool, args, call_id="c1")],
                           [assistant_message("done")]])
    agent = Agent(name="a", model=model, tools=function_tools(ws))
    result = asyncio.run(Runner.run(agent, "go", run_config=NO_TRACING))
    (out,) = [i.output for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    return str(out)


def via_pydantic_ai(ws: toolfs.Workspace, tool: str, args: dict[str, Any]) -> str:
    turns = [[ToolCallPart(tool, args)], [TextPart("done")]]
    agent = PydanticAgent(FunctionModel(lambda m, i: ModelResponse(parts=turns.pop(0))),
                          toolsets=[toolset(ws)])
    result = agent.run_sync("go")
    (out,) = [p.content for m in result.all_messages() for p in m.parts
              if isinstance(p, ToolReturnPart)]
    return str(out)


def via_langchain(ws: toolfs.Workspace, tool: str, args: dict[str, Any]) -> str:
    (t,) = lc.tools(ws, [tool])
    message = t.invoke({"type": "tool_call", "id": "c1", "name": tool, "args": args})
    assert isinstance(message, ToolMessage)
    return str(message.content)


def via_langchain_async(ws: toolfs.Workspace, tool: str, args: dict[str, Any]) -> str:
    (t,) = lc.tools(toolfs.AsyncWorkspace(ws), [tool])
    message = asyncio.run(t.ainvoke({"type": "tool_call", "id": "c1", "name": tool,
                                     "args": args}))
    assert isinstance(message, ToolMessage)
    return str(message.content)


ADAPTERS: dict[str, Callable[[toolfs.Workspace, str, dict[str, Any]], str]] = {
    "openai_agents": via_agents_sdk, "pydantic_ai": via_pydantic_ai,
    "langchain": via_langchain, "langchain_async": via_langchain_async,
}

# Calls whose text once differed between adapters, or that an adapter's own signature
# took for itself (`self`) and raised into the framework.
CALLS = [
    ("read", {"file_path": None}),
    ("write", {"file_path": "new.txt", "content": None}),
    ("edit", {"file_path": "a.txt", "old_string": None, "new_string": "x"}),
    ("read", {"file_path": "a.txt", "self": 1}),
    ("read", {"file_path": "a.txt", "args": 1, "kwargs": 2}),
    ("read", {"file_path": "a.txt", "ctx": 1, "context": 2}),
    ("read", {"file_path": "a.txt", "offset": None, "limit": None}),
    ("grep", {"pattern": "b", "output_mode": "content", "head_limit": None}),
    ("ls", {"path": None}),
    ("edit", {"file_path": "a.txt", "old_string": "alpha", "new_string": "x"}),  # unread
    ("read", {"file_path": "b.txt"}),  # missing: not_found, with "did you mean"
    ("glob", {"pattern": "**/*.txt", "path": None}),
]


@pytest.mark.parametrize("adapter", list(ADAPTERS))
@pytest.mark.parametrize(("tool", "args"), CALLS,
                         ids=[f"{i}-{t}" for i, (t, _) in enumerate(CALLS)])
def test_the_same_call_gives_the_text_of_execute(adapter: str, tool: str,
                                                 args: dict[str, Any]) -> None:
    ws = fresh("same-text")
    ws.write("a.txt", "alpha\nbeta\n")
    expected = ws.new_context().execute(tool, args).text
    assert ADAPTERS[adapter](ws.new_context(), tool, args) == expected
    assert ws.fs.cat_file("a.txt") == b"alpha\nbeta\n"


# -- worker threads that are gone ------------------------------------------------------


def closed(ws: toolfs.Workspace) -> toolfs.AsyncWorkspace:
    aws = toolfs.AsyncWorkspace(ws)
    aws.close()
    return aws


def test_langchain_async_failure_is_an_error_tool_message() -> None:
    ws = fresh("lc-closed")
    ws.write("a.txt", "hi\n")
    (read,) = lc.tools(closed(ws), ["read"])
    message = asyncio.run(read.ainvoke({"type": "tool_call", "id": "c1", "name": "read",
                                        "args": {"file_path": "a.txt"}}))
    assert isinstance(message, ToolMessage)
    assert message.status == "error"
    assert message.content == ("Error [backend_error]: RuntimeError: this AsyncWorkspace "
                               "is closed\nThe storage backend failed; retrying later may "
                               "help.")


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


# -- Deep Agents: a subagent is another agent --------------------------------------------


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


def _call(name: str, id: str, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": id,
                                      "type": "tool_call"}])


def _tool_messages(messages: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


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


# -- the Agents SDK: streamed runs --------------------------------------------------------


def test_agents_sdk_streamed_run_sends_the_same_texts() -> None:
    ws = fresh("oa-stream")
    ws.write("a.txt", "x = 1\n")
    other = ws.new_context()

    def edit(call_id: str) -> Any:
        return function_call("edit", {"file_path": "a.txt", "old_string": "x = 1",
                                      "new_string": "x = 2", "replace_all": None},
                             call_id=call_id)

    def outside_then_edit(_call: Any) -> Any:
        other.read("a.txt")
        other.write("a.txt", "x = 1\ny = 0\n")
        return [edit("c2")]

    from agents.testing import ModelStep
    model = ScriptedModel([
        [function_call("read", {"file_path": "a.txt"}, call_id="c1")],
        ModelStep.respond(outside_then_edit),
        [function_call("read", {"file_path": "a.txt"}, call_id="c3")],
        [edit("c4")],
        [assistant_message("done")],
    ])
    agent = Agent(name="a", model=model, tools=function_tools(ws.new_context()))

    async def streamed() -> list[str]:
        run = Runner.run_streamed(agent, "go", run_config=NO_TRACING)
        outputs = []
        async for event in run.stream_events():
            item = getattr(event, "item", None)
            if isinstance(item, ToolCallOutputItem):
                outputs.append(str(item.output))
        return outputs

    outputs = asyncio.run(streamed())
    assert [o.split("\n")[0] for o in outputs] == [
        "     1\tx = 1",
        "Error [stale]: a.txt changed since you read it",
        "     1\tx = 1",
        "Edited a.txt: replaced 1 occurrence at line 1.",
    ]
    assert ws.fs.cat_file("a.txt") == b"x = 2\ny = 0\n"


# -- a run cancelled in the middle of a write ------------------------------------------------


class HeldWrite:
    """A subscriber holding the first commit at ``fs/write-intent`` until released."""

    def __init__(self) -> None:
        self.entered, self.release = threading.Event(), threading.Event()

    def __call__(self, event: FsEvent) -> None:
        if event.type == "fs/write-intent" and not self.entered.is_set():
            self.entered.set()
            assert self.release.wait(30)


def _cancelled_mid_write(start: Callable[[toolfs.Workspace], Any], tmp_path: Any) -> None:
    held = HeldWrite()
    ws = toolfs.Workspace(str(tmp_path))
    ws.write("a.txt", "one\ntwo\n")
    ws.subscribe(held)  # hold the agent's edit, not the setup write

    async def cancel() -> None:
        task = asyncio.ensure_future(start(ws))
        assert await asyncio.to_thread(held.entered.wait, 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel())
    held.release.set()
    # The worker thread finishes the commit it started, or not at all; never a part.
    for _ in range(300):
        if len(ws.audit.events) and ws.audit.events[-1].type == "fs/written":
            break
        threading.Event().wait(0.05)
    assert (tmp_path / "a.txt").read_bytes() in (b"one\ntwo\n", b"ONE\ntwo\n")
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]  # no temporary file left


def test_agents_sdk_run_cancelled_mid_edit(tmp_path: Any) -> None:
    def start(ws: toolfs.Workspace) -> Any:
        model = ScriptedModel([
            [function_call("read", {"file_path": "a.txt"}, call_id="c1")],
            [function_call("edit", {"file_path": "a.txt", "old_string": "one",
                                    "new_string": "ONE"}, call_id="c2")],
            [assistant_message("done")]])
        agent = Agent(name="a", model=model, tools=function_tools(ws))
        return Runner.run(agent, "go", run_config=NO_TRACING)
    _cancelled_mid_write(start, tmp_path)


def test_pydantic_ai_run_cancelled_mid_edit(tmp_path: Any) -> None:
    def start(ws: toolfs.Workspace) -> Any:
        turns = [[ToolCallPart("read", {"file_path": "a.txt"})],
                 [ToolCallPart("edit", {"file_path": "a.txt", "old_string": "one",
                                        "new_string": "ONE"})],
                 [TextPart("done")]]
        agent = PydanticAgent(FunctionModel(lambda m, i: ModelResponse(parts=turns.pop(0))),
                              toolsets=[toolset(ws)])
        return agent.run("go")
    _cancelled_mid_write(start, tmp_path)


# -- Deep Agents' own middleware writing through the backend ----------------------------


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


# -- one way to ask for a subset -------------------------------------------------------------


def test_every_adapter_takes_tools_and_refuses_an_unknown_name_alike() -> None:
    ws = fresh("subset")
    makers: list[Callable[..., list[Any]]] = [
        function_tools, lambda w, **k: list(toolset(w, **k).tools.values()), lc.tools]
    for make in makers:
        assert [t.name for t in make(ws, tools=["grep", "read"])] == ["grep", "read"]
        with pytest.raises(toolfs.FsError, match="unknown tool 'cat'") as caught:
            make(ws, tools=["read", "cat"])
        assert caught.value.code == "invalid_arguments"
    assert [t.name for t in lc.tools(ws, ["ls"])] == ["ls"]  # positional, as before


# -- a call that outlives its timeout --------------------------------------------------------

TIMED_OUT = ("Error [backend_error]: edit did not finish within 0.2 seconds; it may still "
             "complete, so read the file before changing it again\n"
             "The storage backend failed; retrying later may help.")


def _held_workspace(tmp_path: Any) -> tuple[toolfs.Workspace, HeldWrite]:
    held = HeldWrite()
    ws = toolfs.Workspace(str(tmp_path))
    ws.write("a.txt", "one\ntwo\n")
    ws.subscribe(held)
    return ws, held


def _released(ws: toolfs.Workspace, held: HeldWrite, tmp_path: Any) -> None:
    seen = len(ws.audit.events)
    held.release.set()
    for _ in range(300):  # the held commit ends, stored or refused
        if len(ws.audit.events) > seen:
            break
        threading.Event().wait(0.05)
    assert (tmp_path / "a.txt").read_bytes() == b"ONE\ntwo\n"


def test_agents_sdk_timeout_is_toolfs_text(tmp_path: Any) -> None:
    ws, held = _held_workspace(tmp_path)
    model = ScriptedModel([
        [function_call("read", {"file_path": "a.txt"}, call_id="c1")],
        [function_call("edit", {"file_path": "a.txt", "old_string": "one",
                                "new_string": "ONE"}, call_id="c2")],
        [assistant_message("done")]])
    agent = Agent(name="a", model=model, tools=function_tools(ws, timeout_seconds=0.2))
    result = asyncio.run(Runner.run(agent, "go", run_config=NO_TRACING))
    outputs = [str(i.output) for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    assert outputs[1] == TIMED_OUT
    _released(ws, held, tmp_path)


def test_agents_sdk_timeout_set_on_the_tool_later_is_toolfs_text(tmp_path: Any) -> None:
    ws, held = _held_workspace(tmp_path)
    tools = function_tools(ws)
    for t in tools:
        t.timeout_seconds = 0.2
    model = ScriptedModel([
        [function_call("read", {"file_path": "a.txt"}, call_id="c1")],
        [function_call("edit", {"file_path": "a.txt", "old_string": "one",
                                "new_string": "ONE"}, call_id="c2")],
        [assistant_message("done")]])
    result = asyncio.run(Runner.run(Agent(name="a", model=model, tools=tools), "go",
                                    run_config=NO_TRACING))
    outputs = [str(i.output) for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    assert outputs[1] == TIMED_OUT
    _released(ws, held, tmp_path)


def test_pydantic_ai_timeout_is_a_failed_result_not_a_retry(tmp_path: Any) -> None:
    """pydantic-ai's own timeout answers with a retry prompt, which spends the retry
    budget; the toolset's is a failed result with toolfs's text."""
    ws, held = _held_workspace(tmp_path)
    edit = ToolCallPart("edit", {"file_path": "a.txt", "old_string": "one",
                                 "new_string": "ONE"})
    turns = [[ToolCallPart("read", {"file_path": "a.txt"})], [edit], [edit], [edit],
             [TextPart("done")]]
    agent = PydanticAgent(FunctionModel(lambda m, i: ModelResponse(parts=turns.pop(0))),
                          toolsets=[toolset(ws, timeout=0.2)])
    result = agent.run_sync("go")
    failed = [p for m in result.all_messages() for p in m.parts
              if isinstance(p, ToolReturnPart) and p.outcome == "failed"]
    assert failed and failed[0].content == TIMED_OUT
    _released(ws, held, tmp_path)


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


def test_conversations_of_one_pydantic_ai_agent_are_separate_contexts() -> None:
    """One ``Agent`` with one toolset serves two conversations at once: both read the
    file, then each writes its version; one write is refused ``stale``. A conversation
    continued with its message history keeps what it read."""
    ws = fresh("pa-conversations")
    ws.write("plan.txt", "v1\n")
    read_count = 0
    gate = asyncio.Event()

    async def model(messages: list[Any], info: Any) -> ModelResponse:
        nonlocal read_count
        prompts = [p.content for m in messages for p in m.parts
                   if isinstance(p, UserPromptPart)]
        who = str(prompts[0])
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if prompts[-1] == "again":
            if len(returns) == 1:  # the history's read; now this run's edit
                return ModelResponse(parts=[ToolCallPart("edit", {
                    "file_path": "plan.txt", "old_string": "v2", "new_string": "v3"})])
            return ModelResponse(parts=[TextPart(returns[-1].outcome)])
        if not returns:
            return ModelResponse(parts=[ToolCallPart("read", {"file_path": "plan.txt"})])
        if len(returns) == 1:
            read_count += 1
            if read_count == 2:
                gate.set()
            await gate.wait()  # both conversations have read v1
            return ModelResponse(parts=[ToolCallPart("write", {
                "file_path": "plan.txt", "content": f"v2 by {who}\n"})])
        return ModelResponse(parts=[TextPart(returns[-1].outcome)])

    agent = PydanticAgent(FunctionModel(model), toolsets=[toolset(ws.new_context())])

    async def both() -> list[Any]:
        return list(await asyncio.gather(agent.run("ann"), agent.run("bob")))

    ann, bob = asyncio.run(both())
    assert sorted([ann.output, bob.output]) == ["failed", "success"]
    winner = ann if ann.output == "success" else bob
    who = "ann" if winner is ann else "bob"
    assert ws.fs.cat_file("plan.txt") == f"v2 by {who}\n".encode()
    # The winner's conversation, continued: the file is as it read (wrote) it.
    history = winner.all_messages()[:3]  # its request, its read call, the read's result
    later = agent.run_sync("again", message_history=history)
    assert later.output == "success", later.all_messages()
    assert ws.fs.cat_file("plan.txt") == f"v3 by {who}\n".encode()


@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
def test_conversations_of_one_langchain_agent_are_separate_contexts(use_async: bool) -> None:
    """LangChain's ``create_agent`` compiled once with the tools serves two
    conversations (threads) at once: both read, then each writes; one is refused
    ``stale``. A conversation's next turn keeps what it read."""
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    ws = fresh("lc-threads")
    ws.write("plan.txt", "v1\n")
    both_read = threading.Barrier(2, timeout=30)
    outcomes: dict[str, str] = {}

    def turn(messages: list[BaseMessage]) -> AIMessage:
        asks = [str(m.content) for m in messages if isinstance(m, HumanMessage)]
        who, answers = asks[0], _tool_messages(messages)
        if asks[-1] == "again":  # the next turn of a conversation: edit what it wrote
            if len(answers) == 2:
                return _call("edit", f"e-{who}", file_path="plan.txt", old_string="v2",
                             new_string="v3")
            return AIMessage(answers[-1].status)
        if not answers:
            return _call("read", f"r-{who}", file_path="plan.txt")
        if len(answers) == 1:
            both_read.wait()
            return _call("write", f"w-{who}", file_path="plan.txt", content=f"v2 by {who}\n")
        outcomes[who] = answers[-1].status
        return AIMessage(answers[-1].status)

    agent = create_agent(ScriptedChatModel(turn=turn), tools=lc.tools(ws.new_context()),
                         checkpointer=InMemorySaver())

    def converse(who: str, text: str) -> Any:
        request = {"messages": [{"role": "user", "content": text}]}
        config = {"configurable": {"thread_id": who}}
        if use_async:
            return asyncio.run(agent.ainvoke(request, config))
        return agent.invoke(request, config)

    threads = [threading.Thread(target=converse, args=(w, w)) for w in ("ann", "bob")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(outcomes.values()) == ["error", "success"], outcomes
    (winner,) = [who for who, status in outcomes.items() if status == "success"]
    assert ws.fs.cat_file("plan.txt") == f"v2 by {winner}\n".encode()
    later = converse(winner, "again")
    assert later["messages"][-1].content == "success"
    assert ws.fs.cat_file("plan.txt") == f"v3 by {winner}\n".encode()


def _two_sdk_conversations(ws: toolfs.Workspace,
                           agent_for: Callable[[str], tuple[Any, Any]]) -> dict[str, str]:
    """Two Agents SDK runs at once that both read plan.txt, then each write it: the first
    line of each write's output, by conversation."""
    from agents.testing import ModelStep

    gate, reads = asyncio.Event(), []

    def model(who: str) -> Any:
        async def after_read(_call: Any) -> Any:
            reads.append(who)
            if len(reads) == 2:
                gate.set()
            await gate.wait()  # both conversations have read v1
            return [function_call("write", {"file_path": "plan.txt",
                                            "content": f"v2 by {who}\n"}, call_id=f"w-{who}")]

        return ScriptedModel([
            [function_call("read", {"file_path": "plan.txt"}, call_id=f"r-{who}")],
            ModelStep.respond(after_read), [assistant_message("done")]])

    async def both() -> list[Any]:
        runs = []
        for who in ("ann", "bob"):
            agent, context = agent_for(who)
            runs.append(Runner.run(agent.clone(model=model(who)), who, context=context,
                                   run_config=NO_TRACING))
        return list(await asyncio.gather(*runs))

    outcome = {}
    for who, result in zip(("ann", "bob"), asyncio.run(both()), strict=True):
        outputs = [str(i.output) for i in result.new_items if isinstance(i, ToolCallOutputItem)]
        outcome[who] = outputs[-1].split("\n")[0].split(":")[0].split(" (")[0]
    return outcome


def _one_write_won(ws: toolfs.Workspace, outcome: dict[str, str]) -> None:
    assert sorted(outcome.values()) == ["Error [stale]", "Updated plan.txt"], outcome
    (winner,) = [who for who, text in outcome.items() if text == "Updated plan.txt"]
    assert ws.fs.cat_file("plan.txt") == f"v2 by {winner}\n".encode()


def test_agents_sdk_conversation_key_gives_each_its_own_context() -> None:
    """``function_tools(ws, conversation=...)`` names a run's conversation from its
    context: one ``Agent`` serves two at once and one write is refused ``stale``."""
    ws = fresh("oa-conversation-key")
    ws.write("plan.txt", "v1\n")
    shared = Agent(name="a", tools=function_tools(
        ws.new_context(), conversation=lambda run: run.context["conversation"]))
    _one_write_won(ws, _two_sdk_conversations(
        ws, lambda who: (shared, {"conversation": who})))


def test_agents_sdk_tools_per_conversation_by_clone() -> None:
    """The documented alternative: an agent clone with its own tools per conversation."""
    ws = fresh("oa-clone")
    ws.write("plan.txt", "v1\n")
    base = Agent(name="a")
    _one_write_won(ws, _two_sdk_conversations(
        ws, lambda who: (base.clone(tools=function_tools(ws.new_context())), None)))


def test_a_conversation_context_that_cannot_be_made_is_an_error_result(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_core.runnables.config import var_child_runnable_config

    ws = fresh("unmade")
    ws.write("a.txt", "hi\n")
    tools_lc, pa_toolset = lc.tools(ws), toolset(ws)
    backend = ToolfsBackend(toolfs.AsyncWorkspace(ws))

    def refuse(self: Any, **overrides: Any) -> Any:
        raise toolfs.errors.fs_error("backend_error", "cannot open the store")

    monkeypatch.setattr(toolfs.Workspace, "new_context", refuse)
    text = "Error [backend_error]: cannot open the store\nThe storage backend failed; " \
           "retrying later may help."
    (read,) = [t for t in tools_lc if t.name == "read"]
    message = read.invoke({"type": "tool_call", "id": "c1", "name": "read",
                           "args": {"file_path": "a.txt"}},
                          {"configurable": {"thread_id": "t1"}})
    assert (message.status, message.content) == ("error", text)
    assert via_pydantic_ai_with(pa_toolset, "read", {"file_path": "a.txt"}) == text

    async def in_a_thread() -> Any:
        var_child_runnable_config.set({"configurable": {"thread_id": "t1"}})
        return await backend.aread("/a.txt")

    assert asyncio.run(in_a_thread()).error == text.removeprefix("Error ")


def via_pydantic_ai_with(ts: Any, tool: str, args: dict[str, Any]) -> str:
    turns = [[ToolCallPart(tool, args)], [TextPart("done")]]
    agent = PydanticAgent(FunctionModel(lambda m, i: ModelResponse(parts=turns.pop(0))),
                          toolsets=[ts])
    (out,) = [p.content for m in agent.run_sync("go").all_messages() for p in m.parts
              if isinstance(p, ToolReturnPart)]
    return str(out)


# -- credentials never reach the model, from any context -------------------------------------

SECRET = "AKIA-very-secret-0123456789"


class _LeakyMemory(MemoryFileSystem):  # type: ignore[misc]
    """A memory filesystem with credentials that quotes them when a write fails."""

    protocol = "toolfsleakymemory"
    cachable = False

    def pipe_file(self, path: str, *args: Any, **kwargs: Any) -> Any:
        if "boom" in path:
            raise PermissionError(f"signature mismatch for key {SECRET} on {path}")
        return super().pipe_file(path, *args, **kwargs)

    def _open(self, path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        if "boom" in path and "w" in mode:
            raise PermissionError(f"signature mismatch for key {SECRET} on {path}")
        return super()._open(path, mode, *args, **kwargs)


def test_backend_errors_never_show_credentials_in_any_adapter_or_context() -> None:
    fs = _LeakyMemory(key=SECRET)
    ws = toolfs.Workspace(fs, root=f"/leaky-{uuid.uuid4().hex[:8]}")
    args = {"file_path": "boom.txt", "content": "x"}
    assert SECRET not in ws.execute("write", args).text  # the workspace itself masks

    texts = [via_agents_sdk(ws, "write", args), via_pydantic_ai(ws, "write", args)]
    (write,) = lc.tools(ws, ["write"])
    message = write.invoke({"type": "tool_call", "id": "c1", "name": "write", "args": args},
                           {"configurable": {"thread_id": "t1"}})
    texts.append(str(message.content))
    oa = function_tools(ws, tools=["write"], conversation=lambda run: "c1")[0]
    texts.append(asyncio.run(oa.on_invoke_tool(None, '{"file_path": "boom.txt", '  # type: ignore[arg-type]
                                                     '"content": "x"}')))
    texts.append(str(ToolfsBackend(ws).write("/boom.txt", "x").error))
    for text in texts:
        assert text.startswith("Error [backend_error]") and "***" in text, text
        assert SECRET not in text


# -- the README's integrations table ---------------------------------------------------------


def test_the_readme_integrations_table_matches_the_modules() -> None:
    import importlib
    import pathlib
    import re
    import tomllib

    root = pathlib.Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    extras = tomllib.loads((root / "pyproject.toml").read_text())[
        "project"]["optional-dependencies"]
    rows = re.findall(r"^\| `(\w+)` \| `([\w-]+)` \| (.+) \|$", readme, re.M)
    listed = {module for module, _, _ in rows}
    modules = {p.stem for p in (root / "src/toolfs/integrations").glob("*.py")
               if not p.stem.startswith("_")}
    # the command line and the demo are the `toolfs` command (docs/cli.md), not adapters
    assert listed == modules - {"cli", "demo"}
    named = []
    for module, extra, gives in rows:
        assert extra in extras, (module, extra)
        mod = importlib.import_module(f"toolfs.integrations.{module}")
        for name in re.findall(r"`(\w+)\(ws\b", gives):  # what the adapter gives
            assert hasattr(mod, name), (module, name)
            named.append(name)
    assert {"function_tools", "toolset", "tools", "ToolfsBackend"} <= set(named)


def test_agent_contexts_are_bounded_and_keep_the_roots_hooks() -> None:
    from toolfs.integrations._contexts import AgentContexts
    from toolfs.policy.events import Veto

    ws = fresh("contexts")
    ws.write("a.txt", "one\n")
    contexts = AgentContexts(ws, limit=2)
    first = contexts.get("c1")
    first.read("a.txt")
    assert first.fs.ledger.cache_bytes <= 1024 * 1024
    assert contexts.get("c1") is first
    contexts.get("c2"), contexts.get("c3")  # c1 is the least recently used: dropped
    assert len(contexts) == 2
    again = contexts.get("c1")
    assert again is not first
    assert again.execute("edit", {"file_path": "a.txt", "old_string": "one",
                                  "new_string": "two"}).text.startswith(
        "Error [not_observed]")  # a dropped conversation starts afresh, never blind

    def no_writes(event: FsEvent) -> None:
        if event.type == "fs/write-intent":
            raise Veto("frozen")

    ws.subscribe(no_writes)  # after the contexts were made: it holds for them too
    again.read("a.txt")
    refused = again.execute("edit", {"file_path": "a.txt", "old_string": "one",
                                     "new_string": "two"})
    assert refused.text.startswith("Error [denied] (a.txt): vetoed: frozen")
    assert ws.fs.cat_file("a.txt") == b"one\n"
    assert {e.context_id for e in ws.audit.events} >= {ws.context_id, again.context_id}
