"""toolfs's six tools as a pydantic-ai toolset.

    from pydantic_ai import Agent
    from toolfs.integrations.pydantic_ai import toolset

    agent = Agent("openai:gpt-5", toolsets=[toolset(toolfs.Workspace("s3://bucket/repo"))])

The tools' JSON schemas are toolfs's pinned ones (:func:`toolfs.schemas.input_schema`,
given to pydantic-ai with ``Tool.from_schema``), not schemas re-derived from Python
signatures, and their descriptions are toolfs's. Each call runs on a
:class:`toolfs.AsyncWorkspace`, so pydantic-ai's parallel tool calls run concurrently,
each under the same policy and conditional writes as ``Workspace.execute``. One
``Agent`` serves many conversations: each (``RunContext.conversation_id``) is its own
execution context, so one conversation's update is never stored over another's change.

Errors: a refused or failed call (``stale``, ``not_observed``, ``no_match``, ...) is
raised as pydantic-ai's ``ToolFailed`` with toolfs's text (``Error [code]: ...`` and what
to do next). The model gets it as a failed tool result (the provider's error channel,
e.g. Anthropic's ``is_error``) and acts on it: read again, then redo the change. It is
not a ``ModelRetry``, which would count against the tool's retry budget (one by default):
two refusals in a row would end the run with ``UnexpectedModelBehavior``, though they are
ordinary events when several agents share files. Invalid arguments, malformed JSON
included, get toolfs's ``invalid_arguments`` text the same way: the toolset validates
arguments with toolfs's own models, so pydantic-ai's validation never rejects a call
first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Sequence
from typing import Any, Literal, TypeVar

from toolfs.errors import FsError, fs_error, missing_extra

try:
    from pydantic_ai import (
        BinaryContent,
        FunctionToolset,
        RunContext,
        Tool,
        ToolFailed,
        ToolReturn,
    )
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.toolsets import ToolsetTool
    from pydantic_ai.toolsets.function import FunctionToolsetTool
except ImportError as exc:
    raise missing_extra("pydantic-ai", "toolfs.integrations.pydantic_ai", exc) from exc

from toolfs.integrations._contexts import AgentContexts
from toolfs.integrations._timeouts import timed_out
from toolfs.render import ToolOutput, render_output
from toolfs.schemas import ARGS_MODELS, DEFAULT_TOOLS, DESCRIPTIONS, input_schema
from toolfs.workspace import AsyncWorkspace, Workspace

__all__ = ["ToolfsToolset", "tool_return", "toolset"]

_ToolT = TypeVar("_ToolT", bound=ToolsetTool[Any])

# The key under which the validator hands over arguments that are not a JSON object.
_UNPARSED = "__toolfs_unparsed_arguments__"


class _Unparsed:
    """The model's arguments as they came, when they are not a JSON object. A model's
    JSON can never produce an instance of this class, so it cannot be forged."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw


class _PassThrough:
    """The argument validator of the toolfs tools: never rejects, so every call reaches
    ``Workspace.execute``, whose validation answers with toolfs's text. pydantic-ai's own
    would answer malformed JSON with a retry prompt and end the run when retries run out.
    """

    def validate_json(self, input: str | bytes | bytearray, *,
                      allow_partial: bool | Literal["off", "on", "trailing-strings"] = False,
                      **kwargs: Any) -> Any:
        try:
            parsed = json.loads(input) if input else {}
        except (ValueError, TypeError, RecursionError):
            return {_UNPARSED: _Unparsed(input)}
        return self.validate_python(parsed)

    def validate_python(self, input: Any, *,
                        allow_partial: bool | Literal["off", "on", "trailing-strings"] = False,
                        **kwargs: Any) -> Any:
        if isinstance(input, dict) and all(isinstance(k, str) for k in input):
            return dict(input)
        return {_UNPARSED: _Unparsed(input)}


class ToolfsToolset(FunctionToolset[Any]):
    """A ``FunctionToolset`` of toolfs tools whose arguments toolfs validates.

    Build it with :func:`toolset`. It is an ordinary ``FunctionToolset`` (filter, prefix,
    wrap it, add your own tools to it); only the argument validation of its toolfs tools
    differs. Tools you add keep pydantic-ai's validation.
    """

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await super().get_tools(ctx)
        return {name: self._validated_by_toolfs(tool) for name, tool in tools.items()}

    def tool_for_tool_def(self, tool_def: ToolDefinition, *, ctx: RunContext[Any],
                          original_name: str | None = None) -> FunctionToolsetTool[Any]:
        tool = super().tool_for_tool_def(tool_def, ctx=ctx, original_name=original_name)
        return self._validated_by_toolfs(tool)

    def _validated_by_toolfs(self, tool: _ToolT) -> _ToolT:
        """``tool`` with the pass-through validator if it is one of toolfs's."""
        if not isinstance(tool, FunctionToolsetTool):
            return tool
        own = self.tools.get(tool.original_name or tool.tool_def.name)
        if own is None or not isinstance(own.function, _Runner):
            return tool
        return dataclasses.replace(tool, args_validator=_PassThrough())


def toolset(ws: Workspace | AsyncWorkspace, *, tools: Sequence[str] | None = None,
            id: str | None = None, timeout: float | None = None) -> ToolfsToolset:
    """The tools (all six, or those ``tools`` names, in that order) as a pydantic-ai
    ``FunctionToolset``.

    Each conversation is one execution context: a run's ``RunContext.conversation_id``
    (shared by runs continued with their ``message_history``) gets its own
    ``ws.new_context()`` on its first call, so one ``Agent`` serving many conversations
    at once never stores one conversation's update over another's change (it is
    ``stale``), and a conversation's tools record into, and are checked against, its
    own observations. Their events also go to ``ws``'s subscribers (its audit log and
    hooks). ``id`` is the toolset's id (durable execution needs one). ``timeout``
    (seconds) bounds each call: one that outlives it is a failed result with toolfs's text (the
    change may still be stored; read before changing the file again), not pydantic-ai's
    own timeout, which is a retry prompt and spends the tool's retry budget.
    """
    aws = ws if isinstance(ws, AsyncWorkspace) else AsyncWorkspace(ws)
    names = list(DEFAULT_TOOLS) if tools is None else list(tools)
    unknown = [n for n in names if n not in ARGS_MODELS]
    if unknown:
        raise fs_error("invalid_arguments", f"unknown tool {str(unknown[0])[:50]!r}; the "
                       "tools are " + ", ".join(ARGS_MODELS))
    conversations = _Conversations(aws)
    return ToolfsToolset(
        [Tool.from_schema(_Runner(conversations, name, timeout), name=name,
                          description=DESCRIPTIONS[name], json_schema=input_schema(name),
                          takes_ctx=True)
         for name in names],
        id=id)


class _Conversations:
    """The execution context of each conversation of one toolset."""

    def __init__(self, aws: AsyncWorkspace) -> None:
        self.root = aws
        self._contexts = AgentContexts(aws)

    def of(self, ctx: RunContext[Any]) -> AsyncWorkspace:
        key = ctx.conversation_id or ctx.run_id
        return self.root if key is None else self._contexts.get(key)


class _Runner:
    """One toolfs tool as pydantic-ai calls it: the run's context and keyword arguments
    in, text out, toolfs's errors raised as ``ToolFailed``."""

    def __init__(self, conversations: _Conversations, name: str,
                 timeout: float | None) -> None:
        self.conversations, self.name, self.timeout = conversations, name, timeout
        self.__name__ = f"toolfs_{name}"

    async def __call__(self, ctx: RunContext[Any], /, **arguments: Any) -> str | ToolReturn:
        # `self` is positional-only so that a model argument named "self" reaches
        # execute (and is reported there) instead of breaking the call. The arguments
        # go as they came: execute takes nulls for optional arguments as "not given" and
        # words every problem as for the other adapters. It never raises.
        unparsed = arguments.get(_UNPARSED)
        given = unparsed.raw if isinstance(unparsed, _Unparsed) else arguments
        try:
            aws = self.conversations.of(ctx)
        except FsError as unmade:  # a context that cannot be made: a failed result
            root = self.conversations.root.sync
            raise ToolFailed(render_output(root.masked(unmade), root.max_output_chars).text
                             ) from None
        try:
            output = await asyncio.wait_for(aws.execute(self.name, given), self.timeout)
        except TimeoutError:
            err = aws.sync.masked(timed_out(self.name, self.timeout or 0))
            raise ToolFailed(render_output(err, aws.sync.max_output_chars).text) from None
        if output.is_error:
            raise ToolFailed(output.text)
        return tool_return(output)


def tool_return(output: ToolOutput) -> str | ToolReturn:
    """A successful output as a tool's return: its text, or, when it shows images (a
    read of an image, a PDF or a notebook's image outputs), a ``ToolReturn`` of the text
    with each image as ``BinaryContent`` (pydantic-ai sends them to the model beside the
    tool result)."""
    if not output.images:
        return output.text
    return ToolReturn(return_value=output.text,
                      content=[BinaryContent(data=image.data, media_type=image.mime_type)
                               for image in output.images])
