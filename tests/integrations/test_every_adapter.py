"""What every framework adapter does alike, each through the framework's own machinery:
the same call gives the same text, tools are taken and unknown names refused alike, a
conversation context that cannot be made is an error result, credentials never show,
agent contexts are bounded, and the README's table of adapters matches the modules.
"""

from __future__ import annotations

import asyncio
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
from fsspec.implementations.memory import MemoryFileSystem
from langchain_core.messages import ToolMessage
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import (
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import FunctionModel

import toolfs
from toolfs.integrations import langchain as lc
from toolfs.integrations.deepagents import ToolfsBackend
from toolfs.integrations.openai_agents import function_tools
from toolfs.integrations.pydantic_ai import toolset
from toolfs.policy.events import FsEvent

NO_TRACING = RunConfig(tracing_disabled=True)


def fresh(name: str, **options: Any) -> toolfs.Workspace:
    return toolfs.Workspace(f"memory://{name}-{uuid.uuid4().hex[:8]}", **options)


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


def via_pydantic_ai_with(ts: Any, tool: str, args: dict[str, Any]) -> str:
    turns = [[ToolCallPart(tool, args)], [TextPart("done")]]
    agent = PydanticAgent(FunctionModel(lambda m, i: ModelResponse(parts=turns.pop(0))),
                          toolsets=[ts])
    (out,) = [p.content for m in agent.run_sync("go").all_messages() for p in m.parts
              if isinstance(p, ToolReturnPart)]
    return str(out)


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


def test_the_readme_integrations_table_matches_the_modules() -> None:
    import importlib
    import pathlib
    import re
    import tomllib

    root = pathlib.Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    extras = tomllib.loads((root / "pyproject.toml").read_text())[
        "project"]["optional-dependencies"]
    rows = re.findall(r"^\| `(\w+)` \| `([\w-]+)` \| (.+) \|$", readme, re.M)
    listed = {module for module, _, _ in rows}
    modules = {p.stem for p in (root / "src/toolfs/integrations").glob("*.py")
               if not p.stem.startswith("_")}
    # the command line and the demo are the `toolfs` command (docs/cli.md), and the
    # notebook display registers itself (docs/notebooks.md): not adapters
    assert listed == modules - {"cli", "demo", "display"}
    named = []
    for module, extra, gives in rows:
        assert extra in extras, (module, extra)
        mod = importlib.import_module(f"toolfs.integrations.{module}")
        for name in re.findall(r"`(\w+)\(ws\b", gives):  # what the adapter gives
            assert hasattr(mod, name), (module, name)
            named.append(name)
    assert {"function_tools", "toolset", "tools", "ToolfsBackend"} <= set(named)


MISSING_EXTRAS = [
    # (what is imported or called, the modules missing, the extra that installs them)
    ("toolfs.integrations.mcp_server", "anyio", "mcp"),
    ("toolfs.integrations.mcp_server", "mcp", "mcp"),
    ("toolfs.integrations.mcp_server", "starlette", "mcp"),
    ("toolfs.integrations.anthropic", "anthropic", "anthropic"),
    ("toolfs.integrations.openai_agents", "agents", "openai-agents"),
    ("toolfs.integrations.openai:_result", "agents", "openai-agents"),
    ("toolfs.integrations.pydantic_ai", "pydantic_ai", "pydantic-ai"),
    ("toolfs.integrations.langchain", "langchain_core", "langchain"),
    ("toolfs.integrations.deepagents", "deepagents", "deepagents"),
    ("toolfs.integrations._langgraph", "langchain_core", "langchain"),
    ("Workspace:s3://toolfs-bucket/x", "s3fs", "s3"),
    ("Workspace:gs://toolfs-bucket/x", "gcsfs", "gcs"),
    ("Workspace:abfs://toolfs-container/x", "adlfs", "azure"),
]

_MISSING_EXTRA_PROBE = """
import importlib, json, sys
what, missing = sys.argv[1], sys.argv[2]
sys.modules[missing] = None  # as if the extra were not installed
try:
    if what.startswith("Workspace:"):
        import toolfs
        toolfs.Workspace(what.split(":", 1)[1])
    elif ":" in what:
        module, name = what.split(":")
        getattr(importlib.import_module(module), name)(None)
    else:
        importlib.import_module(what)
except Exception as exc:
    print(json.dumps({"type": type(exc).__name__, "text": str(exc)}))
else:
    print(json.dumps(None))
"""


@pytest.mark.parametrize(("what", "missing", "extra"), MISSING_EXTRAS)
def test_a_missing_extra_names_the_command_that_installs_it(what: str, missing: str,
                                                           extra: str) -> None:
    """Every optional extra: an adapter imported (or a URL opened) without it says which
    module is missing and how to install the extra, released or from a checkout."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _MISSING_EXTRA_PROBE, what, missing],
                          capture_output=True, text=True, timeout=120, check=True)
    failure = json.loads(done.stdout.strip().splitlines()[-1])
    assert failure is not None, f"{what} worked without {missing}"
    assert f"pip install 'toolfs[{extra}]'" in failure["text"], failure
    assert f"pip install -e '.[{extra}]'" in failure["text"], failure
    if not what.startswith("Workspace:"):
        assert failure["type"] == "ImportError", failure
        assert f"{missing} is not installed" in failure["text"], failure


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
