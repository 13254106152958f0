"""toolfs's six tools as OpenAI Agents SDK function tools.

    from agents import Agent
    from toolfs.integrations.openai_agents import function_tools

    agent = Agent(name="coder", tools=function_tools(toolfs.Workspace("s3://bucket/repo")))

Each tool is an ``agents.FunctionTool`` running over a :class:`toolfs.AsyncWorkspace`, so
the run's event loop is never blocked and the SDK's parallel tool calls run concurrently,
each under the same policy and conditional writes as ``Workspace.execute``.

Strict mode: the SDK marks every property required (``ensure_strict_json_schema``), so a
model in strict mode sends every argument. The schemas here are the pinned ones
(:func:`toolfs.schemas.input_schema`) with each optional argument made nullable and its
``default`` removed (strict mode rejects ``default``); a ``null`` argument means "not
given", so the tool's default applies.

Errors never reach the SDK's generic handler ("An error occurred while running the
tool..."): a refused or failed call returns toolfs's text (``Error [code]: ...`` and what
to do next) as the tool's output, and so do invalid arguments, malformed JSON included,
and a call that outlives ``timeout_seconds``.

One list of tools is one execution context. The SDK tells a tool nothing about which
conversation calls it, so an ``Agent`` serving several at once either gets its tools per
conversation (``agent.clone(tools=function_tools(ws.new_context()))``) or names the
conversation from the run's context (``function_tools(ws, conversation=...)``).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any

from toolfs.errors import fs_error, missing_extra

try:
    from agents import (
        FunctionTool,
        RunContextWrapper,
        ToolOutputImage,
        ToolOutputText,
        ToolTimeoutError,
    )
    from agents.tool_context import ToolContext
except ImportError as exc:
    raise missing_extra("openai-agents", "toolfs.integrations.openai_agents", exc) from exc

from toolfs.integrations._contexts import AgentContexts
from toolfs.integrations._timeouts import timed_out
from toolfs.render import ToolOutput, render_output
from toolfs.schemas import ARGS_MODELS, DEFAULT_TOOLS, DESCRIPTIONS, strict_input_schema
from toolfs.workspace import AsyncWorkspace, Workspace

__all__ = ["ApprovalFunction", "function_tools", "strict_schema", "tool_output"]

ApprovalFunction = Callable[[RunContextWrapper[Any], dict[str, Any], str], Awaitable[bool]]
"""The SDK's per-call approval policy: ``(run_context, arguments, call_id) -> bool``."""

# The tools that change files: the only ones `needs_approval` applies to.
_CHANGING = frozenset({"write", "edit", "notebook_edit"})


def function_tools(
    ws: Workspace | AsyncWorkspace,
    *,
    needs_approval: bool | ApprovalFunction = False,
    tools: Sequence[str] | None = None,
    timeout_seconds: float | None = None,
    conversation: Callable[[RunContextWrapper[Any]], Hashable | None] | None = None,
) -> list[FunctionTool]:
    """The tools (all six, or those ``tools`` names, in that order) as ``FunctionTool`` s.

    ``ws`` is one execution context: every tool of the list records into, and is checked
    against, its observations. Give each agent its own (``ws.new_context()``). An
    ``Agent`` that serves several conversations at once must not share one: the SDK
    tells a tool nothing about which conversation calls it, so either build the tools
    per conversation (``agent.clone(tools=function_tools(ws.new_context()))``) or pass
    ``conversation``, which names it from the run's context (e.g.
    ``lambda run: run.context.session_id``): each name gets its own
    ``ws.new_context()`` on its first call (its events also go to ``ws``'s
    subscribers); ``None`` means ``ws``'s own context.
    ``needs_approval`` is passed to the SDK for ``write`` and ``edit`` (a bool, or the SDK's
    ``async (run_context, arguments, call_id) -> bool``); reading tools never need it.
    ``timeout_seconds`` is the SDK's per-call timeout. A call that outlives it (now, or
    one set on a tool later) is answered with toolfs's text, which says the change may
    still be stored (the storage call cannot be taken back mid-way; it commits whole or
    not at all) and to read before changing the file again, where the SDK's own text
    would only say it timed out.
    """
    aws = ws if isinstance(ws, AsyncWorkspace) else AsyncWorkspace(ws)
    contexts = _Conversations(aws, conversation)
    names = list(DEFAULT_TOOLS) if tools is None else list(tools)
    unknown = [n for n in names if n not in ARGS_MODELS]
    if unknown:
        raise fs_error("invalid_arguments", f"unknown tool {str(unknown[0])[:50]!r}; the "
                       "tools are " + ", ".join(ARGS_MODELS))
    return [
        FunctionTool(
            name=name,
            description=DESCRIPTIONS[name],
            params_json_schema=strict_schema(name),
            on_invoke_tool=_invoker(contexts, name),
            strict_json_schema=True,
            needs_approval=needs_approval if name in _CHANGING else False,
            timeout_seconds=timeout_seconds,
            timeout_error_function=functools.partial(_timed_out, aws),
        )
        for name in names
    ]


def strict_schema(tool: str) -> dict[str, Any]:
    """The pinned input schema of ``tool`` in the form strict mode needs
    (:func:`toolfs.schemas.strict_input_schema`): every property required, each optional
    one nullable (``null`` means "use the default"), no ``default`` keywords. The SDK's
    ``ensure_strict_json_schema`` leaves it unchanged."""
    return strict_input_schema(tool)


def _timed_out(aws: AsyncWorkspace, context: RunContextWrapper[Any], error: Exception) -> str:
    """toolfs's text for a call that outlived the SDK's ``timeout_seconds``."""
    err = (timed_out(error.tool_name, error.timeout_seconds)
           if isinstance(error, ToolTimeoutError)  # the SDK passes only timeouts here
           else fs_error("backend_error", f"{type(error).__name__}: {error}"))
    return render_output(aws.sync.masked(err), aws.sync.max_output_chars).text


class _Conversations:
    """The context of each conversation (one, ``aws``, without a ``conversation`` key)."""

    def __init__(self, aws: AsyncWorkspace,
                 key: Callable[[RunContextWrapper[Any]], Hashable | None] | None) -> None:
        self.root, self.key = aws, key
        self._contexts = AgentContexts(aws)

    def of(self, run: RunContextWrapper[Any]) -> AsyncWorkspace:
        name = None if self.key is None else self.key(run)
        return self.root if name is None else self._contexts.get(name)


def tool_output(output: ToolOutput) -> str | list[ToolOutputText | ToolOutputImage]:
    """What a tool returns to the SDK: the text, or, when the output shows images (a
    read of an image, a PDF or a notebook's image outputs), ``ToolOutputText`` then a
    ``ToolOutputImage`` (a data URL) per image, which the SDK sends as ``input_text`` and
    ``input_image`` items."""
    if not output.images:
        return output.text
    return [ToolOutputText(text=output.text),
            *(ToolOutputImage(image_url=image.data_url()) for image in output.images)]


def _invoker(contexts: _Conversations, name: str
             ) -> Callable[[ToolContext[Any], str], Awaitable[Any]]:
    async def invoke(context: ToolContext[Any], arguments: str) -> Any:
        # The model's JSON goes to execute as it came: execute parses it, takes a strict
        # call's nulls for optional arguments as "not given" and names every problem
        # (a null for a required one, malformed JSON, ...) exactly as for every other
        # adapter. It never raises, so the SDK's generic handler is never reached.
        try:
            aws = contexts.of(context)
        except Exception as exc:  # the application's key function failed
            err = fs_error("backend_error", f"the conversation key failed: "
                           f"{type(exc).__name__}: {exc}")
            return render_output(contexts.root.sync.masked(err),
                                 contexts.root.sync.max_output_chars).text
        empty = not arguments or (isinstance(arguments, str) and not arguments.strip())
        given: Any = {} if empty else arguments  # a call with no arguments is {}
        return tool_output(await aws.execute(name, given))

    invoke.__name__ = f"toolfs_{name}"
    return invoke
