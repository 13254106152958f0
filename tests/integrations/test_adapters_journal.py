"""Every adapter's changes are journaled (they all commit through the policy): the
Anthropic text editor and memory tool, apply_patch, Deep Agents, MCP and the
``toolfs::`` URLs of the data-platform face; and a rewind undoes them."""

from __future__ import annotations

import asyncio
import os

import fsspec
import pytest

import toolfs
from toolfs.undo.journal import Journal
from toolfs.undo.rewind import rewind

os.environ.setdefault("ANTHROPIC_API_KEY", "test-key-not-used")


def _kinds(ws: toolfs.Workspace) -> list[tuple[str, str, str | None]]:
    return [(c.kind, c.path, c.to_path) for c in ws.changes()]


def test_the_anthropic_text_editor_and_memory_tool_are_journaled() -> None:
    pytest.importorskip("anthropic")
    from toolfs.integrations.anthropic import MemoryTool, TextEditor

    ws = toolfs.Workspace("memory://journal-anthropic")
    cp = ws.checkpoint()
    ed = TextEditor(ws)
    assert not ed.execute({"command": "create", "path": "a.txt", "file_text": "one\n"}
                          ).is_error
    assert not ed.execute({"command": "str_replace", "path": "a.txt", "old_str": "one",
                           "new_str": "two"}).is_error
    memory = MemoryTool(ws)
    memory.execute_input({"command": "create", "path": "/memories/m.md", "file_text": "m\n"})
    memory.execute_input({"command": "rename", "old_path": "/memories/m.md",
                          "new_path": "/memories/n.md"})
    assert _kinds(ws) == [("created", "a.txt", None), ("updated", "a.txt", None),
                          ("created", "m.md", None),
                          ("moved", "m.md", "n.md")]
    assert not ws.rewind(cp).refused
    assert ws.fs.find("") == []


def test_apply_patch_and_deep_agents_are_journaled() -> None:
    from toolfs.integrations.deepagents import ToolfsBackend
    from toolfs.integrations.openai import apply_patch

    ws = toolfs.Workspace("memory://journal-patch")
    ws.write("a.txt", "a\n")
    cp = ws.checkpoint()
    out = apply_patch(ws, [{"type": "update_file", "path": "a.txt", "diff": "@@\n-a\n+A\n"},
                           {"type": "create_file", "path": "b.txt", "diff": "+b\n"}])
    assert not out.is_error, out.text
    agent = ToolfsBackend(ws)
    assert agent.write("/c.txt", "c\n").error is None
    assert agent.edit("/c.txt", "c", "C").error is None
    assert [(c.kind, c.path, c.tool) for c in ws.changes(since=cp)] == [
        ("created", "b.txt", "apply_patch"), ("updated", "a.txt", "apply_patch"),
        ("created", "c.txt", "write"), ("updated", "c.txt", "edit")]
    assert not ws.rewind(cp).refused
    assert ws.fs.cat_file("a.txt") == b"a\n" and not ws.fs.exists("c.txt")


def test_mcp_sessions_are_journaled() -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from toolfs.integrations.mcp_server import ToolfsMCP

    server = ToolfsMCP(toolfs.Workspace("memory://journal-mcp"))

    async def run() -> None:
        async with Client(server.server) as client:
            await client.call_tool("write", {"file_path": "s.txt", "content": "x\n"})
            await client.call_tool("edit", {"file_path": "s.txt", "old_string": "x",
                                            "new_string": "y"})

    asyncio.run(run())
    context = server._stream_context
    assert context is not None
    assert [(c.kind, c.path, c.tool) for c in context.sync.changes()] == [
        ("created", "s.txt", "write"), ("updated", "s.txt", "edit")]


def test_toolfs_urls_are_journaled_when_given_a_journal() -> None:
    journal = Journal()
    options = {"toolfs": {"journal": journal, "context_id": "frames"}}
    with fsspec.open("toolfs::memory://journal-frames/t.csv", "wb", **options) as f:
        f.write(b"a,b\n1,2\n")
    with fsspec.open("toolfs::memory://journal-frames/t.csv", "wb", **options) as f:
        f.write(b"a,b\n3,4\n")
    changes = journal.changes()
    assert [c.kind for c in changes] == ["created", "updated"]
    assert "+3,4" in changes[1].diff()
    fs = fsspec.filesystem("toolfs", target_protocol="memory", journal=journal,
                           context_id="frames")
    assert not rewind(fs, journal, 1).refused
    assert fsspec.filesystem("memory").cat_file("/journal-frames/t.csv") == b"a,b\n1,2\n"
