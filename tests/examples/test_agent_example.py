"""Testing an agent against toolfs with the pytest plugin (installed with toolfs).

``toolfs_workspace`` is a fresh in-memory workspace for each test, deleted afterwards;
``toolfs_workspaces()`` opens another context on the same files, as a second agent would.
"""

from collections.abc import Callable

from toolfs import ToolOutput, Workspace


def add_todo(ws: Workspace, item: str, think: Callable[[], None] = lambda: None) -> ToolOutput:
    """A stand-in for your agent: read the list, think, append an item; if the list
    changed meanwhile (``stale``), start over from a fresh read."""
    for _attempt in range(3):
        last = ws.read("todo.md").lines[-1]
        think()
        out = ws.execute("edit", {"file_path": "todo.md", "old_string": last,
                                  "new_string": f"{last}\n- {item}"})
        if out.error is None or out.error.code != "stale":
            break
    return out


def test_agent_adds_a_todo(toolfs_workspace: Workspace) -> None:
    toolfs_workspace.write("todo.md", "- write docs\n")
    out = add_todo(toolfs_workspace, "ship it")
    assert not out.is_error, out.text
    assert toolfs_workspace.read("todo.md").lines == ["- write docs", "- ship it"]


def test_agent_survives_a_teammate_editing_at_the_same_time(
        toolfs_workspace: Workspace, toolfs_workspaces: Callable[..., Workspace]) -> None:
    toolfs_workspace.write("todo.md", "- write docs\n")
    teammate = toolfs_workspaces()  # its own context: it must read before it edits
    edits: list[str] = []

    def teammate_edits_once() -> None:
        if not edits:
            teammate.read("todo.md")
            edits.append(teammate.edit("todo.md", "docs", "docs (done)").path)

    out = add_todo(toolfs_workspace, "ship it", think=teammate_edits_once)
    assert not out.is_error, out.text
    # Neither change is lost: the agent's first edit was refused as stale, then redone.
    assert toolfs_workspace.read("todo.md").lines == ["- write docs (done)", "- ship it"]
    refused = [e for e in toolfs_workspace.audit.events if e.type == "fs/denied"]
    assert [e.reason.split(":")[0] for e in refused if e.reason] == ["stale"]
