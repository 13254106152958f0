"""Anthropic's file tools, backed by a toolfs workspace (extra ``anthropic``).

Three shapes, each a thin layer over one :class:`toolfs.Workspace` (or
:class:`toolfs.AsyncWorkspace`), with its policy, conditional writes, confinement and
byte fidelity on every backend:

* :class:`TextEditor` -- the text editor tool Claude is trained on
  (``text_editor_20250728``, named ``str_replace_based_edit_tool``): ``view``,
  ``create``, ``str_replace``, ``insert``. ``.definition`` is the tool param to send;
  ``.execute(input)`` answers a ``tool_use`` block with a :class:`toolfs.ToolOutput`.
  It is also a runnable tool of the SDK's ``client.beta.messages.tool_runner``.
* :class:`MemoryTool` -- the memory tool (``memory_20250818``) as a subclass of the SDK's
  ``BetaAbstractMemoryTool``: ``/memories/...`` is the workspace root.
* :func:`beta_tools` -- toolfs's six tools (read, write, edit, glob, grep, ls) as the
  SDK's beta function tools, with the pinned input schemas.

Where each lives: the editor in :mod:`toolfs.integrations._anthropic_editor`, the memory
tool in :mod:`toolfs.integrations._anthropic_memory`, the commands both run (and the
reference wording they answer in) in :mod:`toolfs.integrations._anthropic_commands`, and
:func:`beta_tools` here. Import all of them from this module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from toolfs.errors import FsError, fs_error, missing_extra

try:
    from anthropic.lib.tools import BetaAsyncFunctionTool, BetaFunctionTool, ToolError
except ImportError as exc:
    raise missing_extra("anthropic", "toolfs.integrations.anthropic", exc) from exc

from toolfs.integrations._anthropic_editor import AsyncTextEditor, TextEditor
from toolfs.integrations._anthropic_input import _line_number
from toolfs.integrations._anthropic_memory import AsyncMemoryTool, MemoryTool
from toolfs.render import ToolOutput, render_output
from toolfs.tools import MAX_OFFSET
from toolfs.workspace import AsyncWorkspace, Workspace

__all__ = ["AsyncMemoryTool", "AsyncTextEditor", "MemoryTool", "TextEditor", "beta_tools",
           "tool_result_content"]


# -- toolfs's six tools for the tool runner ---------------------------------------------


def _read_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """``agent_toolset_20260401``'s ``read`` takes ``view_range`` ``[start, end]``
    (1-based, inclusive; an end of 0 or less: to the end of the file); it becomes
    offset/limit. Only this adapter accepts it (the pinned schema does not list it)."""
    if "view_range" not in arguments:
        return arguments
    view_range = arguments.pop("view_range")
    if view_range is None:
        return arguments
    if "offset" in arguments or "limit" in arguments:
        raise fs_error("invalid_arguments", "give view_range or offset/limit, not both")
    if not (isinstance(view_range, list | tuple) and len(view_range) == 2
            and all(_line_number(n) for n in view_range)):
        raise fs_error("invalid_arguments",
                       "view_range must be [start_line, end_line] (two integers from "
                       f"{-MAX_OFFSET} to {MAX_OFFSET})")
    start, end = view_range
    if start < 1:
        raise fs_error("invalid_arguments", "view_range: start_line must be at least 1")
    if end > 0 and end < start:
        raise fs_error("invalid_arguments",
                       "view_range: end_line must be at least start_line (or 0 or less "
                       "for the end of the file)")
    arguments["offset"] = start
    if end > 0:
        arguments["limit"] = end - start + 1
    return arguments


def _arguments(ws: Workspace, name: str, arguments: dict[str, Any]
               ) -> dict[str, Any] | ToolOutput:
    """The arguments for ``Workspace.execute``, or the error output of a bad view_range."""
    if name != "read":
        return arguments
    try:
        return _read_arguments(dict(arguments))
    except FsError as err:
        return render_output(err, ws.max_output_chars)


def tool_result_content(output: ToolOutput) -> str | list[dict[str, Any]]:
    """A successful output as a ``tool_result``'s content: its text, or, when it shows
    images (a read of an image, a PDF or a notebook's image outputs), a text block then an
    image block (base64 source) per image."""
    if not output.images:
        return output.text
    return [{"type": "text", "text": output.text},
            *({"type": "image", "source": {"type": "base64", "media_type": image.mime_type,
                                           "data": image.base64()}}
              for image in output.images)]


def _tool_result(output: ToolOutput) -> str | list[dict[str, Any]]:
    """:func:`_result` with images (beta_tools: the editor's results are text)."""
    if output.is_error:
        raise ToolError(output.text)
    return tool_result_content(output)


def _sync_tool(ws: Workspace, name: str) -> Callable[..., str | list[dict[str, Any]]]:
    def run(**arguments: Any) -> str | list[dict[str, Any]]:
        given = _arguments(ws, name, arguments)
        return _tool_result(given if isinstance(given, ToolOutput)
                            else ws.execute(name, given))
    run.__name__ = name
    return run


def _async_tool(ws: AsyncWorkspace, name: str) -> Callable[..., Any]:
    async def run(**arguments: Any) -> str | list[dict[str, Any]]:
        given = _arguments(ws.sync, name, arguments)
        if isinstance(given, ToolOutput):
            return _tool_result(given)
        return _tool_result(await ws.execute(name, given))
    run.__name__ = name
    return run


def _not_an_object(ws: Workspace) -> str:
    err = fs_error("invalid_arguments", "the input must be a JSON object of the tool's "
                   "parameters")
    return render_output(err, ws.max_output_chars).text


class _FunctionTool(BetaFunctionTool[Any]):
    """The SDK's function tool, answering a non-object input with toolfs's error (the
    SDK raises ``TypeError``, which the runner would hand the model as its repr)."""

    def __init__(self, ws: Workspace, func: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(func, **kwargs)
        self._ws = ws

    def call(self, input: object) -> Any:
        if not isinstance(input, Mapping):
            raise ToolError(_not_an_object(self._ws))
        return super().call(input)


class _AsyncFunctionTool(BetaAsyncFunctionTool[Any]):
    """:class:`_FunctionTool` for ``AsyncAnthropic``."""

    def __init__(self, ws: Workspace, func: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(func, **kwargs)
        self._ws = ws

    async def call(self, input: object) -> Any:
        if not isinstance(input, Mapping):
            raise ToolError(_not_an_object(self._ws))
        return await super().call(input)


def beta_tools(ws: Workspace | AsyncWorkspace, tools: list[str] | tuple[str, ...] | None = None
               ) -> list[Any]:
    """toolfs's tools (read, write, edit, glob, grep, ls, or the subset ``tools``) for
    ``client.beta.messages.tool_runner(tools=beta_tools(ws))``.

    Each is the SDK's ``BetaFunctionTool`` (``BetaAsyncFunctionTool`` for an
    :class:`~toolfs.AsyncWorkspace`, for ``AsyncAnthropic``) with toolfs's pinned input
    schema and description; the result is toolfs's text, and an error is raised as the
    SDK's ``ToolError`` so the tool result carries ``is_error`` and toolfs's text (code
    and advice). ``read`` also takes ``view_range`` (``agent_toolset_20260401``).
    """
    sync_ws = ws.sync if isinstance(ws, AsyncWorkspace) else ws
    out: list[Any] = []
    for definition in sync_ws.tool_definitions("anthropic", tools):
        name = definition["name"]
        if isinstance(ws, AsyncWorkspace):
            out.append(_AsyncFunctionTool(
                sync_ws, _async_tool(ws, name), name=name,
                description=definition["description"],
                input_schema=definition["input_schema"]))
        else:
            out.append(_FunctionTool(
                sync_ws, _sync_tool(ws, name), name=name,
                description=definition["description"],
                input_schema=definition["input_schema"]))
    return out

