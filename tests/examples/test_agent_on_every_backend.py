"""An agent test that runs on every storage toolfs supports, with the pytest plugin.

The marker runs the test once per backend: ``memory``, ``local`` (a directory under
``tmp_path``), ``s3`` (a local moto server), ``gcs`` (a local fake-gcs-server) and
``azure`` (a local Azurite). The servers start once per session, on 127.0.0.1; each test
gets a fresh bucket. Without the
marker, ``pytest --toolfs-backend=all`` does the same for every test.
"""

from collections.abc import Callable

import pytest

from toolfs import Workspace


def fix_todos(ws: Workspace) -> list[str]:
    """A stand-in for your agent: find the Python files with a TODO, read, fix each."""
    fixed = []
    for path in ws.grep("TODO", glob="*.py").files:
        if "# TODO: return the sum" in ws.read(path).lines:  # read before editing
            ws.edit(path, "# TODO: return the sum", "# returns the sum")
            fixed.append(path)
    return fixed


@pytest.mark.toolfs_backends("memory", "local", "s3", "gcs", "azure")
def test_agent_fixes_the_todos(toolfs_workspace: Workspace) -> None:
    toolfs_workspace.write("src/calc.py", "def add(a, b):\n# TODO: return the sum\n")
    toolfs_workspace.write("src/notes.md", "TODO: not code\n")
    toolfs_workspace.write("README.md", "calc\n")
    assert fix_todos(toolfs_workspace) == ["src/calc.py"]
    assert toolfs_workspace.read("src/calc.py").lines[1] == "# returns the sum"
    assert [e.name for e in toolfs_workspace.ls().entries] == ["README.md", "src"]


@pytest.mark.toolfs_backends("all")
def test_a_second_agent_cannot_overwrite_unseen_changes(
        toolfs_workspace: Workspace, toolfs_workspaces: Callable[..., Workspace]) -> None:
    toolfs_workspace.write("plan.md", "- step one\n")
    other = toolfs_workspaces()
    other.read("plan.md")
    toolfs_workspace.edit("plan.md", "one", "1")  # the first agent changes it meanwhile
    out = other.execute("write", {"file_path": "plan.md", "content": "- other plan\n"})
    assert out.error is not None and out.error.code == "stale"
    assert toolfs_workspace.read("plan.md").lines == ["- step 1"]
