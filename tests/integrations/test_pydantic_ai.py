"""toolfs.integrations.pydantic_ai, driven by pydantic-ai's own agent loop with a
``FunctionModel`` that plays a script of tool calls (no network).

The script is a generator: it yields the calls of one model turn (several calls make one
parallel turn) and receives what the tools returned, in the order of the calls, so it
can react as a model would (re-read after ``stale``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")
pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")
pytest.importorskip("langchain.agents", reason="LangChain's agent runner is not installed")
pytest.importorskip("deepagents", reason="the deepagents extra is not installed")

from pydantic_ai import Agent, FunctionToolset
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

import toolfs
from tests.backend_fixtures import Backend, MemoryBackend
from tests.integrations.test_every_adapter import fresh
from tests.integrations.test_openai_agents import (
    TIMED_OUT,
    _cancelled_mid_write,
    _held_workspace,
    _released,
)
from toolfs.integrations.pydantic_ai import toolset
from toolfs.schemas import DEFAULT_TOOLS, DESCRIPTIONS, input_schema

Call = tuple[str, dict[str, Any] | str]


Script = Generator[list[Call], list[str], str | None]


@dataclass
class Played:
    """What the scripted model was sent: each tool result's text and outcome."""

    outputs: list[str] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)
    tools: list[Any] = field(default_factory=list)  # the tool definitions it was given


def script_model(script: Script, played: Played) -> FunctionModel:
    """A ``FunctionModel`` answering each turn with the next calls of ``script``."""
    pending: list[str] = []  # the call ids of the last turn, in order
    ids = iter(range(1, 1_000_000))
    started = False

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal started
        played.tools = list(info.function_tools)
        last = messages[-1]
        returned: dict[str, ToolReturnPart] = {}
        if isinstance(last, ModelRequest):
            for part in last.parts:
                # toolfs answers every call itself: pydantic-ai never asks for a retry.
                assert not isinstance(part, RetryPromptPart), part
                if isinstance(part, ToolReturnPart):
                    assert part.outcome != "retried", part
                    returned[part.tool_call_id] = part
        results = [returned[c] for c in pending]
        played.outputs.extend(str(r.content) for r in results)
        played.outcomes.extend(r.outcome for r in results)
        try:
            calls = script.send([str(r.content) for r in results]) if started else next(script)
            started = True
        except StopIteration as stop:
            return ModelResponse(parts=[TextPart(stop.value or "done")])
        pending.clear()
        parts = []
        for name, arguments in calls:
            pending.append(f"call_{next(ids)}")
            parts.append(ToolCallPart(name, arguments, tool_call_id=pending[-1]))
        return ModelResponse(parts=parts)

    return FunctionModel(respond)


def run_agent(ws: toolfs.Workspace | toolfs.AsyncWorkspace, script: Script) -> Played:
    played = Played()
    Agent(script_model(script, played), toolsets=[toolset(ws)]).run_sync("work")
    return played


def turns(*calls: list[Call]) -> Script:
    """A script that ignores the outputs: one turn per list of calls."""
    for turn in calls:
        _ = yield turn  # not `yield from`: the model sends the outputs in
    return None


def read(path: str) -> Call:
    return ("read", {"file_path": path})


def edit(path: str, old: str, new: str) -> Call:
    return ("edit", {"file_path": path, "old_string": old, "new_string": new})


STALE = ("Error [stale]: a.py changed since you read it\nChanges since you read it:\n"
         "--- a.py (as you read it)\n+++ a.py (now)\n@@ -1,2 +1,3 @@\n x = 2\n y = 1\n"
         "+z = 0\nEvery change since your read is shown above, and this counts as reading "
         "it: redo your change on the current text; no need to read the file again.")


@pytest.fixture
def memory() -> Iterator[Backend]:
    b = MemoryBackend()
    b.setup()
    try:
        yield b
    finally:
        b.teardown()


def workspace(b: Backend) -> toolfs.Workspace:
    return toolfs.Workspace(b.fs, root=b.root)


def _loop(b: Backend) -> Script:
    first = yield [read("a.py")]
    assert first == ["     1\tx = 1\n     2\ty = 1"]
    yield [edit("a.py", "x = 1", "x = 2")]
    b.put("a.py", b"x = 2\ny = 1\nz = 0\n")  # another program changes the file
    refused = yield [edit("a.py", "y = 1", "y = 2")]
    assert refused == [STALE]
    yield [read("a.py")]
    yield [edit("a.py", "y = 1", "y = 2")]
    return "done"


def hold_first_commits(parties: int, *contexts: toolfs.Workspace) -> None:
    """Make the first ``parties`` changes made through ``contexts`` wait for each other
    just before they commit: they pass only if they run at the same time, and then all of
    them were computed from the same version of the file."""
    barrier = threading.Barrier(parties, timeout=60)
    state = {"armed": True}

    def hold(event: toolfs.FsEvent) -> None:
        if event.type == "fs/write-intent" and state["armed"]:
            barrier.wait()  # broken (a refusal, then a failed assertion) if run one by one
            state["armed"] = False

    for ws in contexts:
        ws.subscribe(hold)


def _appender(tag: str, count: int, outcomes: list[tuple[str, str]]) -> Script:
    """Append ``count`` lines before END, re-reading after each refused (stale) edit."""
    yield [read("log.txt")]
    done = attempts = 0
    while done < count:
        attempts += 1
        assert attempts < 200, "no progress"
        line = f"{tag}{done}"
        [out] = yield [edit("log.txt", "END", f"{line}\nEND")]
        outcomes.append((line, out))
        if out.startswith("Edited"):
            done += 1
        else:
            assert out.startswith("Error [stale]"), out
            yield [read("log.txt")]
    return "done"


def _parallel_editor(count: int, outcomes: list[tuple[int, str]], b: Backend) -> Script:
    """One turn of ``count`` parallel edits of one file, then redo the refused ones;
    after each turn the file holds every edit reported so far."""
    yield [read("m.txt")]
    todo = list(range(count))
    rounds = 0
    while todo:
        rounds += 1
        assert rounds < 50, "no progress"
        outs = yield [edit("m.txt", f"m{i}\n", f"M{i}\n") for i in todo]
        outcomes.extend(zip(todo, outs, strict=True))
        for out in outs:
            assert out.startswith(("Edited", "Error [stale]")), out
        data = b.get("m.txt").decode()
        assert all(f"M{i}\n" in data for i, out in outcomes if out.startswith("Edited"))
        todo = [i for i, out in zip(todo, outs, strict=True) if not out.startswith("Edited")]
        if todo:
            yield [read("m.txt")]
    return "done"


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


@pytest.mark.parametrize("as_async", [False, True], ids=["Workspace", "AsyncWorkspace"])
def test_loop_read_edit_stale_reread_edit(store: Backend, as_async: bool) -> None:
    store.put("a.py", b"x = 1\ny = 1\n")
    ws = workspace(store)
    played = run_agent(toolfs.AsyncWorkspace(ws) if as_async else ws, _loop(store))
    assert played.outputs == [
        "     1\tx = 1\n     2\ty = 1",
        "Edited a.py: replaced 1 occurrence at line 1.\nLines 1-2 of the edited file:\n"
        "     1\tx = 2\n     2\ty = 1",
        STALE,
        "     1\tx = 2\n     2\ty = 1\n     3\tz = 0",
        "Edited a.py: replaced 1 occurrence at line 2.\nLines 1-3 of the edited file:\n"
        "     1\tx = 2\n     2\ty = 2\n     3\tz = 0",
    ]
    # The refusal is a failed tool result (the provider's error channel), not a retry.
    assert played.outcomes == ["success", "success", "failed", "success", "success"]
    assert store.get("a.py") == b"x = 2\ny = 2\nz = 0\n"


def test_the_model_gets_the_pinned_schemas_and_descriptions(memory: Backend) -> None:
    played = run_agent(workspace(memory), turns())
    assert [t.name for t in played.tools] == list(DEFAULT_TOOLS)
    for tool in played.tools:
        assert tool.parameters_json_schema == input_schema(tool.name)
        assert tool.description == DESCRIPTIONS[tool.name]


def test_toolset_is_a_function_toolset_and_takes_a_subset(memory: Backend) -> None:
    ts = toolset(workspace(memory), tools=["read", "grep"], id="files")
    assert isinstance(ts, FunctionToolset)
    assert list(ts.tools) == ["read", "grep"]
    assert ts.id == "files"
    with pytest.raises(toolfs.FsError, match="unknown tool 'rm'"):
        toolset(workspace(memory), tools=["rm"])


def test_refusals_never_exhaust_the_retry_budget(memory: Backend) -> None:
    """Refusals are failed results, not ModelRetry: more of them in a row than the
    default retry budget (1) leave the run going, and the model reads each one."""
    memory.put("a.py", b"x = 1\r\n")

    def script() -> Script:
        for _ in range(3):
            [out] = yield [edit("a.py", "x = 1", "x = 2")]
            assert out.startswith("Error [not_observed]")
        yield [read("a.py")]
        for _ in range(3):
            [out] = yield [edit("a.py", "x = 9", "x = 2")]
            assert out == ("Error [no_match] (a.py): old_string was not found in the file.\n"
                           "Read the file and copy old_string exactly, including whitespace.")
        [out] = yield [edit("a.py", "x = 1", "x = 2")]
        assert out.startswith("Edited a.py")
        return None

    played = run_agent(workspace(memory), script())
    assert played.outcomes == ["failed"] * 3 + ["success"] + ["failed"] * 3 + ["success"]
    assert memory.get("a.py") == b"x = 2\r\n"  # CRLF kept


def test_tools_added_to_the_toolset_keep_pydantic_ai_validation(memory: Backend) -> None:
    """Only toolfs's tools bypass pydantic-ai's validation; a tool the user adds to the
    same toolset still gets pydantic-ai's retry prompt for a bad argument."""
    ts = toolset(workspace(memory))

    @ts.tool_plain
    def double(x: int) -> int:
        return 2 * x

    sent: list[Any] = []
    turns_ = [[ToolCallPart("double", {"x": "not a number"}, tool_call_id="1"),
               ToolCallPart("read", {"file_path": 3}, tool_call_id="2")],
              [TextPart("done")]]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.extend(messages[-1].parts)
        return ModelResponse(parts=turns_.pop(0))

    Agent(FunctionModel(respond), toolsets=[ts]).run_sync("work")
    results = {p.tool_name: p for p in sent if isinstance(p, ToolReturnPart)}
    assert results["double"].outcome == "retried"  # pydantic-ai's own validation
    assert results["read"].outcome == "failed"
    assert str(results["read"].content).startswith("Error [invalid_arguments]: ")


@pytest.mark.parametrize(("arguments", "problem"), [
    ('{"file_path": ', "arguments are not valid JSON"),
    ('["a.py"]', "arguments must be a JSON object"),
    ("[" * 50_000, "arguments are not valid JSON: nested too deeply"),
    ({"file_path": 3}, "file_path: Input should be a valid string"),
    ({"file_path": "a.py", "offset": 0}, "offset: Input should be greater"),
    ({"path": "a.py"}, "unknown argument 'path'"),
    ({"file_path": "a.py", "__toolfs_unparsed_arguments__": "{}"},
     "unknown argument '__toolfs_unparsed_arguments__'"),
    ({}, "missing required argument 'file_path'"),
    ("", "missing required argument 'file_path'"),
], ids=["truncated-json", "not-an-object", "deep-nesting", "wrong-type", "out-of-range",
        "unknown-name", "forged-marker", "missing", "empty"])
def test_invalid_arguments_get_toolfs_text(memory: Backend, arguments: Any,
                                           problem: str) -> None:
    memory.put("a.py", b"x = 1\n")
    played = run_agent(workspace(memory), turns([("read", arguments)]))
    [out] = played.outputs
    assert out.startswith("Error [invalid_arguments]: ")
    assert problem in out
    assert out.endswith("\nFix the arguments and call the tool again.")
    assert played.outcomes == ["failed"]


def test_null_arguments_mean_the_defaults(memory: Backend) -> None:
    memory.put("a.py", b"x = 1\n")
    calls: list[Call] = [
        ("read", {"file_path": "a.py", "offset": None, "limit": None}),
        ("grep", {"pattern": "x", "path": None, "glob": None, "output_mode": None,
                  "ignore_case": None, "context": None, "head_limit": None}),
    ]
    played = run_agent(workspace(memory), turns(calls))
    reference = workspace(memory)
    assert played.outputs == [reference.execute("read", {"file_path": "a.py"}).text,
                              reference.execute("grep", {"pattern": "x"}).text]


def test_two_agents_racing_on_s3_lose_no_reported_success(s3_backend: Backend) -> None:
    b = s3_backend
    b.setup()
    b.put("log.txt", b"START\nEND\n")
    ws = workspace(b)
    other = ws.new_context()
    hold_first_commits(2, ws, other)  # the two first edits race from one version
    outcomes: dict[str, list[tuple[str, str]]] = {"a": [], "b": []}

    async def agent(context: toolfs.Workspace, tag: str) -> None:
        model = script_model(_appender(tag, 4, outcomes[tag]), Played())
        await Agent(model, toolsets=[toolset(context)]).run("work")

    async def race() -> None:
        await asyncio.gather(agent(ws, "a"), agent(other, "b"))

    asyncio.run(race())
    lines = b.get("log.txt").decode().splitlines()
    wins = [line for results in outcomes.values() for line, out in results
            if out.startswith("Edited")]
    assert sorted(wins) == ["a0", "a1", "a2", "a3", "b0", "b1", "b2", "b3"]
    # Every reported success is in the file, and nothing else was added.
    assert lines[0] == "START" and lines[-1] == "END"
    assert sorted(lines[1:-1]) == sorted(wins)
    # The first edits, held until both were ready, were made from one version: one won.
    assert sorted(outcomes[tag][0][1].split(" ")[0] for tag in outcomes) == ["Edited", "Error"]


def test_parallel_calls_in_one_turn_lose_no_reported_success(store: Backend) -> None:
    count = 6
    store.put("m.txt", "".join(f"m{i}\n" for i in range(count)).encode())
    outcomes: list[tuple[int, str]] = []
    ws = workspace(store)
    hold_first_commits(count, ws)
    run_agent(ws, _parallel_editor(count, outcomes, store))
    # The first turn's six edits ran together, all from one version: one commit wins,
    # the five others are refused as stale and redone after a re-read.
    first = [out for _, out in outcomes[:count]]
    assert sum(out.startswith("Edited") for out in first) == 1
    assert sum(out.startswith("Error [stale]") for out in first) == count - 1
    assert store.get("m.txt") == "".join(f"M{i}\n" for i in range(count)).encode()
    assert sorted(i for i, out in outcomes if out.startswith("Edited")) == list(range(count))


def test_parallel_writes_of_distinct_files_all_land(store: Backend) -> None:
    names = [f"f{i}.txt" for i in range(5)]
    played = run_agent(workspace(store), turns(
        [("write", {"file_path": n, "content": f"{n}\n"}) for n in names]))
    assert played.outputs == [f"Created {n} ({len(n) + 1} bytes)." for n in names]
    for n in names:
        assert store.get(n) == f"{n}\n".encode()
