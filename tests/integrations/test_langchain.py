"""The LangChain tools, driven by LangChain itself (the Deep Agents backend, built on
these, is in test_deepagents.py).

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
pytest.importorskip("agents", reason="the openai-agents extra is not installed")
pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

from deepagents import create_deep_agent
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import (
    FakeMessagesListChatModel,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool
from pydantic import Field, ValidationError

import toolfs
from tests.backend_fixtures import Backend, S3Backend
from toolfs.errors import STALE_SHOWN_ADVICE
from toolfs.integrations import langchain as lc
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


def invoke(tool: StructuredTool, args: dict[str, Any], use_async: bool) -> ToolMessage:
    tool_call = {"type": "tool_call", "name": tool.name, "args": args, "id": f"c{next(_ids)}"}
    out = asyncio.run(tool.ainvoke(tool_call)) if use_async else tool.invoke(tool_call)
    assert isinstance(out, ToolMessage)
    return out


def _markers(n: int, tag: str) -> list[str]:
    return [f"<{tag}{i}>" for i in range(n)]


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

    agent = create_agent(ScriptedModel(turn=turn), tools=lc.tools(ws.new_context()),
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


def closed(ws: toolfs.Workspace) -> toolfs.AsyncWorkspace:
    aws = toolfs.AsyncWorkspace(ws)
    aws.close()
    return aws


def _call(name: str, id: str, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": id,
                                      "type": "tool_call"}])


def _tool_messages(messages: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]
