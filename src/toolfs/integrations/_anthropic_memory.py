"""Anthropic's memory tool (``memory_20250818``) over a toolfs workspace.

:class:`MemoryTool` (and :class:`AsyncMemoryTool` for ``AsyncAnthropic``) subclasses the
SDK's ``BetaAbstractMemoryTool``: ``/memories/...`` is the workspace root, and every
change is conditional, so agents sharing one memory directory never lose each other's
updates. The commands themselves are :mod:`toolfs.integrations._anthropic_commands`;
import the classes from :mod:`toolfs.integrations.anthropic`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from toolfs.integrations._anthropic_commands import _MEMORY_COMMANDS, _Engine, _result
from toolfs.render import ToolOutput
from toolfs.workspace import AsyncWorkspace, Workspace


def _command_input(command: Any) -> dict[str, Any]:
    """A memory command object (or a plain mapping) back to the model's input."""
    if isinstance(command, Mapping):
        return dict(command)
    dump = getattr(command, "model_dump", None)
    if dump is not None:
        data = dump(exclude_none=True)
        return dict(data) if isinstance(data, Mapping) else {}
    return {}


class MemoryTool(BetaAbstractMemoryTool):
    """The memory tool (``memory_20250818``) over a workspace: ``/memories/...`` is the
    workspace root. ``client.beta.messages.tool_runner(tools=[MemoryTool(ws)])``.

    Commands: view, create, str_replace, insert, delete, rename; each returns the SDK's
    reference text or raises ``ToolError`` (so the result carries ``is_error``) with
    the reference wording plus toolfs's code and advice. Changes are conditional, so
    many agents sharing one memory directory never lose each other's updates:

    * ``create`` of a new file always works; over an existing file it replaces it only
      when this agent has viewed the current version (toolfs's ``write`` rule), else it
      is refused (``File ... already exists``, ``not_observed``);
    * ``str_replace``/``insert`` need a view and are ``stale`` after another change;
    * ``delete`` needs a view of the file (of every file, for a directory);
    * ``rename`` moves the bytes of one version and deletes only that version, so an
      update made meanwhile makes it ``stale`` and nothing moves.

    :meth:`execute_input` returns the full :class:`toolfs.ToolOutput` for a raw input.
    """

    def __init__(self, ws: Workspace | AsyncWorkspace, *,
                 cache_control: Any = None) -> None:
        super().__init__(cache_control=cache_control)
        self._engine = _Engine(ws, memory=True)

    def execute_input(self, input: Mapping[str, Any]) -> ToolOutput:
        """Run one command from the model's raw input; never raises."""
        return self._engine.run(input, _MEMORY_COMMANDS)

    def call(self, input: object) -> str:
        """The tool runner's entry point (the input is checked here, so malformed input
        gets a structured error instead of the SDK's attribute errors)."""
        return _result(self.execute_input(cast(Mapping[str, Any], input)))

    def _run(self, command: Any) -> str:
        return _result(self.execute_input(_command_input(command)))

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return self._run(command)

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return self._run(command)

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return self._run(command)

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return self._run(command)

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return self._run(command)

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return self._run(command)


class AsyncMemoryTool(BetaAsyncAbstractMemoryTool):
    """:class:`MemoryTool` for ``AsyncAnthropic``'s tool runner (each command runs on a
    worker thread)."""

    def __init__(self, ws: Workspace | AsyncWorkspace, *,
                 cache_control: Any = None) -> None:
        super().__init__(cache_control=cache_control)
        self._engine = _Engine(ws, memory=True)

    async def execute_input(self, input: Mapping[str, Any]) -> ToolOutput:
        """Run one command from the model's raw input; never raises."""
        return await self._engine.arun(input, _MEMORY_COMMANDS)

    async def call(self, input: object) -> str:
        return _result(await self.execute_input(cast(Mapping[str, Any], input)))

    async def _run(self, command: Any) -> str:
        return _result(await self.execute_input(_command_input(command)))

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await self._run(command)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await self._run(command)

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await self._run(command)

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await self._run(command)

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await self._run(command)

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await self._run(command)
