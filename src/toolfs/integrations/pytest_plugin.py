"""pytest plugin (entry point ``pytest11``): test your agent against toolfs in one line.

* ``toolfs_workspace``: a :class:`~toolfs.Workspace` on a fresh in-memory root
  (``memory://toolfs-test-<uuid>``), deleted after the test.
* ``toolfs_workspaces``: a factory; each call returns another execution context (its own
  ledger, as a second agent would have) over the same root. Keyword arguments override
  the workspace options (``read_only=True``, ``deny=[...]``, ``context_id=...``).

Example::

    def test_my_agent(toolfs_workspace):
        toolfs_workspace.write("notes.md", "# todo\\n")
        my_agent.run(toolfs_workspace)
        assert "done" in toolfs_workspace.read("notes.md").lines[0]

This module is imported by every pytest run in an environment where toolfs is installed:
it defers the workspace machinery to the fixtures and never imports mcp.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from toolfs.workspace import Workspace

WorkspaceFactory = Callable[..., "Workspace"]


@pytest.fixture
def toolfs_workspace() -> Iterator[Workspace]:
    """A workspace on an isolated in-memory root, removed after the test."""
    from fsspec.implementations.memory import MemoryFileSystem

    from toolfs.workspace import Workspace

    name = f"toolfs-test-{uuid.uuid4().hex}"
    workspace = Workspace(f"memory://{name}")
    try:
        yield workspace
    finally:
        # The memory filesystem is one process-wide dict: without this, files would
        # outlive the test and accumulate over a long session.
        fs = MemoryFileSystem()
        if fs.exists(f"/{name}"):
            fs.rm(f"/{name}", recursive=True)


@pytest.fixture
def toolfs_workspaces(toolfs_workspace: Workspace) -> WorkspaceFactory:
    """Call it to get another context (another agent) over ``toolfs_workspace``'s root."""

    def another(**overrides: Any) -> Workspace:
        return toolfs_workspace.new_context(**overrides)

    return another
