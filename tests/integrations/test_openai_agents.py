"""toolfs.integrations.openai_agents, driven by the Agents SDK's own ``Runner`` with a fake
``Model`` that plays a script of function calls (no network).

The script is a generator: it yields the calls of one model turn (several calls make one
parallel turn) and receives the tool outputs the SDK sends back, in the order of the
calls, so it can react as a model would (re-read after ``stale``).
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from collections.abc import Callable, Generator
from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")
pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")
pytest.importorskip("langchain.agents", reason="LangChain's agent runner is not installed")
pytest.importorskip("deepagents", reason="the deepagents extra is not installed")

import jsonschema
from agents import Agent, FunctionTool, RunConfig, Runner
from agents.items import ModelResponse, ToolCallOutputItem
from agents.models.interface import Model
from agents.strict_schema import ensure_strict_json_schema
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.usage import Usage

import toolfs
from tests.backend_fixtures import Backend, MemoryBackend
from tests.integrations.test_every_adapter import NO_TRACING, fresh
from toolfs.errors import STALE_SHOWN_ADVICE
from toolfs.integrations.openai_agents import function_tools, strict_schema
from toolfs.policy.events import FsEvent
from toolfs.schemas import ARGS_MODELS, DESCRIPTIONS, input_schema


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


Call = tuple[str, dict[str, Any] | str]


Script = Generator[list[Call], list[str], str | None]


GENERIC = "An error occurred while running the tool"


NO_CONFIG = RunConfig(tracing_disabled=True)


class ScriptModel(Model):
    """A ``Model`` that answers each turn with the next calls of a generator script."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.started = False
        self.pending: list[str] = []  # call ids of the last turn, in order
        self.outputs: list[str] = []  # every tool output the model was sent, in order
        self.counter = 0

    async def get_response(self, system_instructions: str | None, input: Any,
                           *args: Any, **kwargs: Any) -> ModelResponse:
        sent = {item["call_id"]: item["output"] for item in input
                if isinstance(item, dict) and item.get("type") == "function_call_output"}
        results = [str(sent[c]) for c in self.pending]
        self.outputs.extend(results)
        try:
            calls = self.script.send(results) if self.started else next(self.script)
            self.started = True
        except StopIteration as stop:
            self.pending = []
            return ModelResponse(output=[assistant_message(stop.value or "done")],
                                 usage=Usage(), response_id=None)
        self.pending = []
        output = []
        for name, arguments in calls:
            self.counter += 1
            call_id = f"call_{self.counter}"
            self.pending.append(call_id)
            output.append(function_call(name, arguments, call_id=call_id))
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the tests run without streaming")


def run_agent(ws: toolfs.Workspace | toolfs.AsyncWorkspace, script: Script,
              **tool_options: Any) -> ScriptModel:
    """Run one agent on ``ws`` until the script ends; the model, with what it was sent."""
    model = ScriptModel(script)
    agent = Agent(name="coder", model=model, tools=function_tools(ws, **tool_options))
    asyncio.run(Runner.run(agent, "work", max_turns=200, run_config=NO_CONFIG))
    return model


def turns(*calls: list[Call]) -> Script:
    """A script that ignores the outputs: one turn per list of calls."""
    for turn in calls:
        _ = yield turn  # not `yield from`: the model sends the outputs in
    return None


def read(path: str) -> Call:
    # A strict-mode model sends every property: the optional ones as null.
    return ("read", {"file_path": path, "offset": None, "limit": None})


def edit(path: str, old: str, new: str) -> Call:
    return ("edit", {"file_path": path, "old_string": old, "new_string": new,
                     "replace_all": None})


def workspace(b: Backend) -> toolfs.Workspace:
    return toolfs.Workspace(b.fs, root=b.root)


def _loop(b: Backend) -> Script:
    first = yield [read("a.py")]
    assert first == ["     1\tx = 1\n     2\ty = 1"]
    yield [edit("a.py", "x = 1", "x = 2")]
    b.put("a.py", b"x = 2\ny = 1\nz = 0\n")  # another program changes the file
    yield [edit("a.py", "y = 1", "y = 2")]
    again = yield [read("a.py")]
    assert again == ["     1\tx = 2\n     2\ty = 1\n     3\tz = 0"]
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


def _parallel_editor(count: int, outcomes: list[tuple[int, str]]) -> Script:
    """One turn of ``count`` parallel edits of one file, then redo the refused ones."""
    yield [read("m.txt")]
    todo = list(range(count))
    rounds = 0
    while todo:
        rounds += 1
        assert rounds < 50, "no progress"
        outs = yield [edit("m.txt", f"m{i}\n", f"M{i}\n") for i in todo]
        outcomes.extend(zip(todo, outs, strict=True))
        todo = [i for i, out in zip(todo, outs, strict=True) if not out.startswith("Edited")]
        for out in outs:
            assert out.startswith(("Edited", "Error [stale]")), out
        if todo:
            yield [read("m.txt")]
    return "done"


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


@pytest.mark.parametrize("as_async", [False, True], ids=["Workspace", "AsyncWorkspace"])
def test_loop_read_edit_stale_reread_edit(store: Backend, as_async: bool) -> None:
    store.put("a.py", b"x = 1\ny = 1\n")
    ws = workspace(store)
    model = run_agent(toolfs.AsyncWorkspace(ws) if as_async else ws, _loop(store))
    assert model.outputs == [
        "     1\tx = 1\n     2\ty = 1",
        "Edited a.py: replaced 1 occurrence at line 1.\nLines 1-2 of the edited file:\n"
        "     1\tx = 2\n     2\ty = 1",
        "Error [stale]: a.py changed since you read it\nChanges since you read it:\n"
        "--- a.py (as you read it)\n+++ a.py (now)\n@@ -1,2 +1,3 @@\n x = 2\n y = 1\n+z = 0\n"
        + STALE_SHOWN_ADVICE,
        "     1\tx = 2\n     2\ty = 1\n     3\tz = 0",
        "Edited a.py: replaced 1 occurrence at line 2.\nLines 1-3 of the edited file:\n"
        "     1\tx = 2\n     2\ty = 2\n     3\tz = 0",
    ]
    assert store.get("a.py") == b"x = 2\ny = 2\nz = 0\n"


def test_refusals_are_tool_outputs_with_code_and_advice() -> None:
    """not_observed, no_match and not_found come back as toolfs's text, never the SDK's
    generic error message; nothing is written."""
    b = MemoryBackend()
    b.setup()
    b.put("a.py", b"x = 1\r\n")

    def script() -> Script:
        yield [edit("a.py", "x = 1", "x = 2")]
        yield [read("a.py")]
        yield [edit("a.py", "x = 9", "x = 2"), read("missing.py")]
        return None

    model = run_agent(workspace(b), script())
    assert model.outputs[0] == (
        "Error [not_observed]: a.py exists but was not read in this context; read it "
        "before changing it\nRead the file first, then retry the change.")
    assert model.outputs[2] == (
        "Error [no_match] (a.py): old_string was not found in the file.\n"
        "Read the file and copy old_string exactly, including whitespace.")
    assert model.outputs[3].startswith("Error [not_found]")
    assert not any(GENERIC in out for out in model.outputs)
    assert b.get("a.py") == b"x = 1\r\n"
    b.teardown()


@pytest.mark.parametrize(("arguments", "problem"), [
    ('{"file_path": ', "arguments are not valid JSON"),
    ('["a.py"]', "arguments must be a JSON object"),
    ('{"file_path": 3, "offset": null, "limit": null}', "file_path: Input should be a valid"),
    ('{"file_path": "a.py", "offset": 0, "limit": null}', "offset: Input should be greater"),
    ('{"path": "a.py"}', "unknown argument 'path'"),
    # A null is "not given" only for an optional argument (as in Workspace.execute and
    # every other adapter): for a required one it is a wrong type.
    ('{"file_path": null, "offset": null, "limit": null}',
     "file_path: Input should be a valid string"),
    ("", "missing required argument 'file_path'"),
], ids=["truncated-json", "not-an-object", "wrong-type", "out-of-range",
        "unknown-name", "null-required", "empty"])
def test_invalid_arguments_get_toolfs_text(arguments: str, problem: str) -> None:
    b = MemoryBackend()
    b.setup()
    b.put("a.py", b"x = 1\n")

    def script() -> Script:
        yield [("read", arguments)]
        return None

    [out] = run_agent(workspace(b), script()).outputs
    assert out.startswith("Error [invalid_arguments]: ")
    assert problem in out
    assert out.endswith("\nFix the arguments and call the tool again.")
    b.teardown()


@pytest.mark.parametrize("name", list(ARGS_MODELS))
def test_strict_schema_of_every_tool(name: str) -> None:
    [tool] = function_tools(toolfs.Workspace("memory://strict"), tools=[name])
    assert isinstance(tool, FunctionTool)
    assert tool.strict_json_schema is True
    assert tool.description == DESCRIPTIONS[name]
    schema = tool.params_json_schema
    # The SDK's own strict conversion has nothing left to change.
    assert ensure_strict_json_schema(copy.deepcopy(schema)) == schema == strict_schema(name)
    pinned = input_schema(name)
    assert list(schema["properties"]) == list(pinned["properties"])
    assert schema["required"] == list(pinned["properties"])
    assert schema["additionalProperties"] is False
    assert '"default":' not in json.dumps(schema)  # strict mode rejects the keyword
    for key, prop in schema["properties"].items():
        original = {k: v for k, v in pinned["properties"][key].items()
                    if k not in ("description", "default")}
        if key in pinned.get("required", []):
            assert prop == pinned["properties"][key]
        else:  # optional: nullable, the pinned constraints kept
            assert prop["anyOf"] == [original, {"type": "null"}]
            assert prop["description"].startswith(pinned["properties"][key]["description"])
    validator = jsonschema.Draft202012Validator(schema)
    nulls = {k: None for k in schema["properties"] if k not in pinned.get("required", [])}
    required = {"file_path": "a.py", "content": "c", "old_string": "a", "new_string": "b",
                "pattern": "x", "cell_id": "c1", "new_source": "s"}
    call = {**{k: v for k, v in required.items() if k in schema["properties"]}, **nulls}
    validator.validate(call)
    if nulls:  # strict mode: leaving an optional argument out is not a valid call
        with pytest.raises(jsonschema.ValidationError):
            validator.validate({k: v for k, v in call.items() if k != next(iter(nulls))})


def test_null_arguments_mean_the_defaults() -> None:
    """A strict-mode model's call (optional arguments null) gets what the same call with
    those arguments omitted gets from Workspace.execute."""
    b = MemoryBackend()
    b.setup()
    b.put("src/a.py", b"x = 1\nX = 2\n")
    calls: list[Call] = [
        read("src/a.py"),
        ("glob", {"pattern": "**/*.py", "path": None}),
        ("grep", {"pattern": "x", "path": None, "glob": None, "output_mode": None,
                  "ignore_case": None, "context": None, "head_limit": None}),
        ("ls", {"path": None}),
    ]

    def script() -> Script:
        yield calls
        return None

    outputs = run_agent(workspace(b), script()).outputs
    reference = workspace(b)
    for (name, arguments), out in zip(calls, outputs, strict=True):
        assert isinstance(arguments, dict)
        given = {k: v for k, v in arguments.items() if v is not None}
        assert out == reference.execute(name, given).text
        assert not out.startswith("Error")
    b.teardown()


def test_needs_approval_applies_to_write_and_edit() -> None:
    async def policy(context: Any, arguments: dict[str, Any], call_id: str) -> bool:
        return True

    ws = toolfs.Workspace("memory://approval")
    for setting in (True, policy):
        tools = {t.name: t for t in function_tools(ws, needs_approval=setting)}
        assert tools["write"].needs_approval is setting
        assert tools["edit"].needs_approval is setting
        assert all(tools[n].needs_approval is False for n in ("read", "glob", "grep", "ls"))


def test_write_waits_for_approval_then_runs() -> None:
    b = MemoryBackend()
    b.setup()
    seen: list[dict[str, Any]] = []

    async def docs_need_approval(context: Any, arguments: dict[str, Any], call_id: str) -> bool:
        seen.append(arguments)
        return str(arguments.get("file_path", "")).startswith("docs/")

    def script() -> Script:
        out = yield [("write", {"file_path": "docs/a.md", "content": "A\n"}),
                     ("write", {"file_path": "src/b.py", "content": "B\n"})]
        assert out[0] == "Created docs/a.md (2 bytes)."
        return None

    model = ScriptModel(script())
    agent = Agent(name="coder", model=model,
                  tools=function_tools(workspace(b), needs_approval=docs_need_approval))

    async def go() -> None:
        result = await Runner.run(agent, "work", run_config=NO_CONFIG)
        [pending] = result.interruptions
        assert pending.name == "write"
        assert not b.exists("docs/a.md")  # nothing written before the approval
        assert b.get("src/b.py") == b"B\n"  # the call that needs none ran
        state = result.to_state()
        state.approve(pending)
        await Runner.run(agent, state, run_config=NO_CONFIG)

    asyncio.run(go())
    assert b.get("docs/a.md") == b"A\n"
    assert b.get("src/b.py") == b"B\n"
    assert {a["file_path"] for a in seen} == {"docs/a.md", "src/b.py"}
    assert model.outputs == ["Created docs/a.md (2 bytes).", "Created src/b.py (2 bytes)."]
    b.teardown()


def test_unknown_tool_name_is_refused() -> None:
    with pytest.raises(toolfs.FsError, match="unknown tool 'delete'"):
        function_tools(toolfs.Workspace("memory://x"), tools=["read", "delete"])


def test_two_agents_racing_on_s3_lose_no_reported_success(s3_backend: Backend) -> None:
    b = s3_backend
    b.setup()
    b.put("log.txt", b"START\nEND\n")
    ws = workspace(b)
    other = ws.new_context()
    hold_first_commits(2, ws, other)  # the two first edits race from one version
    outcomes: dict[str, list[tuple[str, str]]] = {"a": [], "b": []}

    async def agent(context: toolfs.Workspace, tag: str) -> None:
        model = ScriptModel(_appender(tag, 4, outcomes[tag]))
        runner = Agent(name=tag, model=model, tools=function_tools(context))
        await Runner.run(runner, "work", max_turns=400, run_config=NO_CONFIG)

    async def race() -> None:
        await asyncio.gather(agent(ws, "a"), agent(other, "b"))

    asyncio.run(race())
    lines = b.get("log.txt").decode().splitlines()
    wins = [line for results in outcomes.values() for line, out in results
            if out.startswith("Edited")]
    assert sorted(wins) == ["a0", "a1", "a2", "a3", "b0", "b1", "b2", "b3"]
    # The first edits, held until both were ready, were made from one version: one won.
    firsts = sorted(outcomes[tag][0][1].split(" ")[0] for tag in outcomes)
    assert firsts == ["Edited", "Error"]
    # Every reported success is in the file, and nothing else was added.
    assert lines[0] == "START" and lines[-1] == "END"
    assert sorted(lines[1:-1]) == sorted(wins)


def test_parallel_calls_in_one_turn_lose_no_reported_success(store: Backend) -> None:
    count = 6
    store.put("m.txt", "".join(f"m{i}\n" for i in range(count)).encode())
    outcomes: list[tuple[int, str]] = []
    ws = workspace(store)
    hold_first_commits(count, ws)

    def checked() -> Script:
        script = _parallel_editor(count, outcomes)
        results: list[str] | None = None
        while True:
            try:
                calls = script.send(results) if results is not None else next(script)
            except StopIteration as stop:
                return stop.value
            # After each turn the file holds every edit reported so far.
            results = yield calls
            data = store.get("m.txt").decode()
            for i, out in outcomes:
                if out.startswith("Edited"):
                    assert f"M{i}\n" in data

    run_agent(ws, checked())
    # The first turn's six edits ran together, all from one version: one commit wins,
    # the five others are refused as stale and redone after a re-read.
    first = [out for _, out in outcomes[:count]]
    assert sum(out.startswith("Edited") for out in first) == 1
    assert sum(out.startswith("Error [stale]") for out in first) == count - 1
    assert store.get("m.txt") == "".join(f"M{i}\n" for i in range(count)).encode()
    assert sorted(i for i, out in outcomes if out.startswith("Edited")) == list(range(count))


def test_parallel_writes_of_distinct_files_all_land(store: Backend) -> None:
    names = [f"f{i}.txt" for i in range(5)]

    def script() -> Script:
        outs = yield [("write", {"file_path": n, "content": f"{n}\n"}) for n in names]
        assert all(o.startswith("Created") for o in outs), outs
        return None

    run_agent(workspace(store), script())
    for n in names:
        assert store.get(n) == f"{n}\n".encode()


def test_one_context_across_tool_lists() -> None:
    """Two tool lists over one Workspace share its observations: a read through one lets
    the other edit (the context is the Workspace, not the list)."""
    b = MemoryBackend()
    b.setup()
    b.put("a.py", b"x = 1\n")
    ws = workspace(b)
    run_agent(ws, turns([read("a.py")]))
    model = run_agent(ws, turns([edit("a.py", "x = 1", "x = 2")]))
    assert model.outputs[0].startswith("Edited a.py")
    assert b.get("a.py") == b"x = 2\n"
    b.teardown()
