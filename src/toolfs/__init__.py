"""toolfs: file tools for AI agents over any fsspec filesystem.

Six tools, ``read``, ``write`` and ``edit`` to view and change files and ``glob``, ``grep``
and ``ls`` to find them, plus the opt-in ``notebook_edit`` for Jupyter notebook cells::

    ws = toolfs.Workspace("memory://proj")
    ws.write("a.py", "x = 1\n")
    ws.edit("a.py", "x = 1", "x = 2")

Names are loaded on first use: the pytest plugin lives in this package, so every pytest
run in an environment with toolfs installed imports it, and should not pay for pydantic
models and fsspec it does not use.

In IPython (a Jupyter kernel), importing toolfs registers the notebook views of
:mod:`toolfs.integrations.display`; ``%load_ext toolfs`` does the same for a shell started later.
The core modules know nothing of notebooks: display sits above them.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolfs.errors import ERROR_CODES, FsError
    from toolfs.policy import (
        AuditLog,
        FsEvent,
        LedgerSnapshot,
        Policy,
        PolicyFileSystem,
        Veto,
    )
    from toolfs.render import ToolOutput
    from toolfs.results import EditResult, MediaResult, ReadResult, ToolImage, WriteResult
    from toolfs.schemas import (
        ALL_TOOLS,
        DEFAULT_TOOLS,
        EditArgs,
        ReadArgs,
        WriteArgs,
        tool_definitions,
    )
    from toolfs.undo.model import Change, Checkpoint, CommitResult, RewindResult
    from toolfs.versions import FileVersion
    from toolfs.workspace import AsyncWorkspace, Workspace

__version__ = "0.2.0"

_EXPORTS: dict[str, str] = {
    "ERROR_CODES": "toolfs.errors", "FsError": "toolfs.errors",
    "AuditLog": "toolfs.policy", "FsEvent": "toolfs.policy", "LedgerSnapshot": "toolfs.policy",
    "Policy": "toolfs.policy", "PolicyFileSystem": "toolfs.policy", "Veto": "toolfs.policy",
    "EditResult": "toolfs.results", "ReadResult": "toolfs.results",
    "MediaResult": "toolfs.results", "ToolImage": "toolfs.results",
    "ToolOutput": "toolfs.render", "WriteResult": "toolfs.results",
    "EditArgs": "toolfs.schemas", "ReadArgs": "toolfs.schemas", "WriteArgs": "toolfs.schemas",
    "tool_definitions": "toolfs.schemas", "ALL_TOOLS": "toolfs.schemas",
    "DEFAULT_TOOLS": "toolfs.schemas",
    "FileVersion": "toolfs.versions",
    "Change": "toolfs.undo.model", "Checkpoint": "toolfs.undo.model",
    "CommitResult": "toolfs.undo.model", "RewindResult": "toolfs.undo.model",
    "AsyncWorkspace": "toolfs.workspace", "Workspace": "toolfs.workspace",
}

__all__ = [
    "ALL_TOOLS", "DEFAULT_TOOLS", "ERROR_CODES", "AsyncWorkspace", "AuditLog", "Change",
    "Checkpoint", "CommitResult", "EditArgs", "EditResult", "FileVersion", "FsError",
    "FsEvent", "LedgerSnapshot", "MediaResult", "Policy", "PolicyFileSystem", "ReadArgs",
    "ReadResult", "RewindResult", "ToolImage", "ToolOutput", "Veto", "Workspace",
    "WriteArgs", "WriteResult", "tool_definitions",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'toolfs' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return [*__all__, "__version__"]


_MOVED: dict[str, str] = {
    "toolfs.text": "toolfs.formats.text", "toolfs.diff": "toolfs.formats.diff",
    "toolfs.merge": "toolfs.formats.merge", "toolfs.notebook": "toolfs.formats.notebook",
    "toolfs.media": "toolfs.formats.media", "toolfs.media_render": "toolfs.render.media",
    "toolfs.notebook_render": "toolfs.render.notebook",
    "toolfs.content_cache": "toolfs.policy.content_cache",
    "toolfs.discovery": "toolfs.search.discovery",
    "toolfs.line_regex": "toolfs.search.line_regex",
    "toolfs.grep_workers": "toolfs.search.grep_workers",
    "toolfs.ripgrep": "toolfs.search.ripgrep",
    "toolfs.tools_discovery": "toolfs.tools.search",
    "toolfs.notebook_tools": "toolfs.tools.notebook",
    "toolfs.v4a": "toolfs.integrations.v4a", "toolfs.v4a.apply": "toolfs.integrations.v4a.apply",
    "toolfs.v4a.mismatch": "toolfs.integrations.v4a.mismatch",
    "toolfs.v4a.parse": "toolfs.integrations.v4a.parse",
    "toolfs.v4a.search": "toolfs.integrations.v4a.search",
    "toolfs.display": "toolfs.integrations.display",
}
"""Module paths of before the regroup by concept (docs/architecture.md) and where each
module lives now: ``import toolfs.text`` still works and gives ``toolfs.formats.text``
itself (the same module object, so patches and ``isinstance`` agree)."""


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module path (``_MOVED``) as the module at its new path."""

    def find_spec(self, fullname: str, path: Any = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(_MOVED[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        """The module ran when it was imported at its new path."""


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.insert(0, _MovedModules())  # before the path finders: one module, not two


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext toolfs``: show toolfs objects as Markdown and HTML in this shell."""
    from toolfs.integrations.display import register

    register(ipython)


def _register_display() -> None:
    """Register the notebook views when an IPython shell is running (never imports it)."""
    ipython = sys.modules.get("IPython")
    get_ipython = getattr(ipython, "get_ipython", None)
    if get_ipython is not None and get_ipython() is not None:
        from toolfs.integrations.display import register

        register()


_register_display()
