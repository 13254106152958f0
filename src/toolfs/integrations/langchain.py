"""The six tools as LangChain ``StructuredTool`` objects (extra ``langchain``).

``tools(ws)`` gives ``read``, ``write``, ``edit``, ``glob``, ``grep`` and ``ls`` over one
workspace (one execution context per conversation: see :func:`tools`), each with a sync
``func`` and an async ``coroutine`` (the coroutine runs on :class:`toolfs.AsyncWorkspace`,
so an agent's event loop is never blocked by storage I/O)::

    from toolfs.integrations.langchain import tools
    agent_tools = tools(toolfs.Workspace("s3://bucket/repo"))

* **The pinned schemas, as JSON Schema dicts.** Each tool's ``args_schema`` is
  :func:`toolfs.schemas.input_schema` -- not toolfs's pydantic argument models. With a
  pydantic model LangChain validates the call itself and raises its own
  ``ValidationError`` (by default into the agent loop, or as pydantic's wording when
  ``handle_validation_error`` is set); with a dict schema the arguments reach
  :meth:`toolfs.Workspace.execute`, which answers a bad call with toolfs's
  ``invalid_arguments`` text (what was wrong, and what to do).
* **toolfs's descriptions** (:data:`toolfs.schemas.DESCRIPTIONS`), which tell the model the
  observation policy.
* **Errors are tool messages.** A tool error (``stale``, ``not_observed``, ``no_match``,
  ``invalid_arguments``, ...) raises ``ToolException`` with toolfs's text
  (``Error [code] ...`` and the advice) and the tools set ``handle_tool_error=True``, so
  LangChain answers the call with a ``ToolMessage`` whose ``status`` is ``"error"`` and
  whose content is that text -- never a traceback and never LangChain's generic handler.
* **Structured content as the artifact.** ``response_format="content_and_artifact"``: a
  successful call's ``ToolMessage.content`` is the model text and ``.artifact`` is
  :meth:`toolfs.ToolOutput.to_dict` (the facts the text shows, for the application).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from toolfs.errors import missing_extra

try:
    from langchain_core.tools import StructuredTool, ToolException
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("langchain", "toolfs.integrations.langchain", exc) from exc

from toolfs.errors import FsError, fs_error
from toolfs.integrations._contexts import AgentContexts
from toolfs.integrations._langgraph import agent_key
from toolfs.render import ToolOutput, render_error
from toolfs.schemas import ARGS_MODELS, DEFAULT_TOOLS, DESCRIPTIONS, input_schema
from toolfs.workspace import AsyncWorkspace, Workspace

__all__ = ["message_content", "tools"]


def tools(ws: Workspace | AsyncWorkspace,
          names: list[str] | tuple[str, ...] | None = None, *,
          tools: list[str] | tuple[str, ...] | None = None) -> list[StructuredTool]:
    """The toolfs tools (all six, or those ``tools`` names, in that order; ``names`` is
    the same, positionally) as LangChain ``StructuredTool`` objects over ``ws``.

    Each conversation is one execution context: what ``read`` observed in it is what
    ``edit`` and ``write`` are conditional on. Run by LangGraph (``create_agent``, a
    ``ToolNode``, a Deep Agents subagent's tools), each ``thread_id``, and each Deep
    Agents subagent run, gets its own ``ws.new_context()`` on its first call (its events
    also go to ``ws``'s subscribers), so one compiled agent serving many conversations
    at once never stores one's update over another's change (it is ``stale``). Calls
    without a ``thread_id`` share ``ws``'s own context: give each agent you build its
    own (``ws.new_context()``). Sync calls run on the :class:`~toolfs.Workspace`, async
    calls on an :class:`~toolfs.AsyncWorkspace` over the same context (``ws`` itself
    when it is one; worker threads made on the first async call otherwise). An unknown
    name is ``invalid_arguments`` (a ``ValueError``), as in the other adapters.
    """
    if isinstance(ws, AsyncWorkspace):
        root = ws
    elif isinstance(ws, Workspace):
        root = AsyncWorkspace(ws)  # its worker threads start with the first async call
    else:
        raise TypeError(f"tools() takes a toolfs Workspace or AsyncWorkspace, not "
                        f"{type(ws).__name__}")
    if names is not None and tools is not None:
        raise fs_error("invalid_arguments", "give the tool names once: names or tools=")
    chosen = tools if tools is not None else names
    wanted = list(DEFAULT_TOOLS) if chosen is None else list(chosen)
    unknown = [n for n in wanted if n not in ARGS_MODELS]
    if unknown:
        raise fs_error("invalid_arguments", f"unknown tool {str(unknown[0])[:50]!r}; the "
                       "tools are " + ", ".join(ARGS_MODELS))
    contexts = AgentContexts(root)

    def context() -> AsyncWorkspace:
        """The context of the conversation making this call (LangChain's config is a
        context variable, set in the caller: the coroutine, or a sync tool's thread)."""
        key = agent_key()
        return root if key is None else contexts.get(key)

    return [_tool(name, context) for name in wanted]


Content = str | list[dict[str, Any]]


def message_content(output: ToolOutput) -> Content:
    """A ``ToolMessage``'s content for ``output``: its text, or, when it shows images (a
    read of an image, a PDF or a notebook's image outputs), a text block then a standard
    image block (``{"type": "image", "base64", "mime_type"}``) per image, which each chat model
    integration turns into its provider's form."""
    if not output.images:
        return output.text
    return [{"type": "text", "text": output.text},
            *({"type": "image", "base64": image.base64(), "mime_type": image.mime_type}
              for image in output.images)]


def _answer(output: ToolOutput) -> tuple[Content, dict[str, Any]]:
    """``(content, artifact)`` of a success; a tool error leaves as ``ToolException``
    carrying toolfs's text, which ``handle_tool_error=True`` turns into the content of a
    ``ToolMessage`` with ``status="error"``."""
    if output.is_error:
        raise ToolException(output.text)
    return message_content(output), output.to_dict()


class _WorkspaceTool(StructuredTool):
    """A ``StructuredTool`` whose calls hand every argument the model sent to toolfs.

    ``StructuredTool._run`` takes ``config`` and ``run_manager`` parameters, so LangChain
    fills them in and a model argument of that name would be dropped without a word;
    these take the arguments only, and toolfs reports an unknown one."""

    # `self` is positional-only: a model argument named "self" is one of the arguments
    # (toolfs reports it as unknown), not a second value for the method's own.
    def _run(self, /, *args: Any, **arguments: Any) -> Any:
        assert self.func is not None
        return self.func(*args, **arguments)

    async def _arun(self, /, *args: Any, **arguments: Any) -> Any:
        assert self.coroutine is not None
        return await self.coroutine(*args, **arguments)


def _of(context: Callable[[], AsyncWorkspace]) -> AsyncWorkspace:
    """The calling conversation's context; one that cannot be made is a tool error."""
    try:
        return context()
    except FsError as err:
        raise ToolException(render_error(err)) from err


def _tool(name: str, context: Callable[[], AsyncWorkspace]) -> StructuredTool:
    # The arguments arrive exactly as the model sent them (a dict schema is not validated
    # by LangChain), and execute validates them against the pinned model.
    def run(**arguments: Any) -> tuple[Content, dict[str, Any]]:
        return _answer(_of(context).sync.execute(name, arguments))

    async def arun(**arguments: Any) -> tuple[Content, dict[str, Any]]:
        # AsyncWorkspace.execute never raises (a closed worker pool is a backend_error
        # result), so nothing but toolfs's text reaches LangChain.
        return _answer(await _of(context).execute(name, arguments))

    coroutine: Callable[..., Coroutine[Any, Any, tuple[Content, dict[str, Any]]]] = arun
    return _WorkspaceTool(
        func=run, coroutine=coroutine, name=name, description=DESCRIPTIONS[name],
        args_schema=input_schema(name), response_format="content_and_artifact",
        handle_tool_error=True)
