"""Tool calls with their outcome checked, shared by the contract modules.

``run`` is the model's door (``Workspace.execute``); ``ok`` and ``err`` check that a call
succeeded or failed with a code (and that the text says so); ``exec_ok`` and ``exec_err``
take any object with ``execute`` (a workspace or a context) and check the outcome only.
"""

from __future__ import annotations

import pathlib
from typing import Any

import toolfs
from tests.backend_fixtures import LocalBackend


def run(ws: toolfs.Workspace, tool: str, **args: object) -> toolfs.ToolOutput:
    return ws.execute(tool, args)


def ok(ws: toolfs.Workspace, tool: str, **args: object) -> toolfs.ToolOutput:
    out = run(ws, tool, **args)
    assert not out.is_error, out.text
    return out


def err(ws: toolfs.Workspace, tool: str, code: str, **args: object) -> toolfs.ToolOutput:
    out = run(ws, tool, **args)
    assert out.is_error, out.text
    assert out.error is not None
    assert out.error.code == code, out.text
    assert f"[{code}]" in out.text
    return out


def exec_ok(ws: Any, tool: str, **args: object) -> toolfs.ToolOutput:
    out = ws.execute(tool, args)
    assert out.error is None, out.text
    return out


def exec_err(ws: Any, tool: str, code: str, **args: object) -> toolfs.ToolOutput:
    out = ws.execute(tool, args)
    assert out.error is not None, out.text
    assert out.error.code == code, out.text
    return out


def local_backend(tmp_path: pathlib.Path) -> LocalBackend:
    b = LocalBackend(str(tmp_path))
    b.setup()
    return b
