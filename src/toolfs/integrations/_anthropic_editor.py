"""Anthropic's text editor tool (``text_editor_20250728``) over a toolfs workspace.

:class:`TextEditor` (and :class:`AsyncTextEditor`) is the tool Claude is trained on,
named ``str_replace_based_edit_tool``: ``view``, ``create``, ``str_replace``, ``insert``.
``.definition`` is the tool param to send; ``.execute(input)`` answers a ``tool_use``
block with a :class:`toolfs.ToolOutput`. It is also a runnable tool of the SDK's
``client.beta.messages.tool_runner``. The commands themselves are
:mod:`toolfs.integrations._anthropic_commands`; import the classes from
:mod:`toolfs.integrations.anthropic`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from anthropic.lib.tools import BetaAsyncBuiltinFunctionTool, BetaBuiltinFunctionTool

from toolfs.errors import fs_error
from toolfs.integrations._anthropic_commands import _EDITOR_COMMANDS, _Engine, _result
from toolfs.integrations._anthropic_input import TEXT_EDITOR_NAME, TEXT_EDITOR_TYPE
from toolfs.render import ToolOutput
from toolfs.workspace import AsyncWorkspace, Workspace


def _editor_definition(max_characters: int | None) -> dict[str, Any]:
    definition: dict[str, Any] = {"type": TEXT_EDITOR_TYPE, "name": TEXT_EDITOR_NAME}
    if max_characters is not None:
        definition["max_characters"] = max_characters
    return definition


def _check_max_characters(max_characters: int | None) -> int | None:
    if max_characters is not None and (isinstance(max_characters, bool)
                                       or not isinstance(max_characters, int)
                                       or max_characters < 1):
        raise fs_error("invalid_arguments", "max_characters must be a positive integer")
    return max_characters



class TextEditor(BetaBuiltinFunctionTool):
    """The ``str_replace_based_edit_tool`` (``text_editor_20250728``) over a workspace.

    Send :attr:`definition` in ``tools=[...]`` and answer each ``tool_use`` block with
    :meth:`execute` (``.text`` is the ``tool_result`` content, ``.is_error`` its flag);
    or hand the editor itself to ``client.beta.messages.tool_runner(tools=[editor])``.
    Paths are relative to the workspace root (an absolute path must lie inside it).
    ``max_characters`` (sent in the definition) also bounds what ``view`` returns.
    """

    def __init__(self, ws: Workspace | AsyncWorkspace, max_characters: int | None = None
                 ) -> None:
        super().__init__()
        self.max_characters = _check_max_characters(max_characters)
        self._engine = _Engine(ws, memory=False, max_characters=self.max_characters)

    @property
    def definition(self) -> dict[str, Any]:
        """The tool param: ``{"type": "text_editor_20250728", "name":
        "str_replace_based_edit_tool"}`` (+ ``max_characters`` when set)."""
        return _editor_definition(self.max_characters)

    def to_dict(self) -> Any:
        return self.definition

    def execute(self, input: Mapping[str, Any]) -> ToolOutput:
        """Run one command (``view``, ``create``, ``str_replace``, ``insert``); never
        raises."""
        return self._engine.run(input, _EDITOR_COMMANDS)

    async def aexecute(self, input: Mapping[str, Any]) -> ToolOutput:
        """:meth:`execute` as a coroutine (the command runs on a worker thread)."""
        return await self._engine.arun(input, _EDITOR_COMMANDS)

    def call(self, input: object) -> str:
        """The tool runner's entry point: the text, or ``ToolError`` on an error."""
        return _result(self.execute(cast(Mapping[str, Any], input)))


class AsyncTextEditor(BetaAsyncBuiltinFunctionTool):
    """:class:`TextEditor` with a coroutine :meth:`execute` (and runnable by the async
    tool runner); each command runs on a worker thread."""

    def __init__(self, ws: Workspace | AsyncWorkspace, max_characters: int | None = None
                 ) -> None:
        super().__init__()
        self.max_characters = _check_max_characters(max_characters)
        self._engine = _Engine(ws, memory=False, max_characters=self.max_characters)

    @property
    def definition(self) -> dict[str, Any]:
        """The same tool param as :attr:`TextEditor.definition`."""
        return _editor_definition(self.max_characters)

    def to_dict(self) -> Any:
        return self.definition

    async def execute(self, input: Mapping[str, Any]) -> ToolOutput:
        """Run one command on a worker thread; never raises."""
        return await self._engine.arun(input, _EDITOR_COMMANDS)

    async def call(self, input: object) -> str:
        return _result(await self.execute(cast(Mapping[str, Any], input)))
