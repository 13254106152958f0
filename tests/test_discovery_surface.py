"""glob, grep and ls beyond the Python API: the MCP server, the CLI and notebook views."""

from __future__ import annotations

import io
import pathlib
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

import pytest
from mcp import Client

import toolfs
from toolfs.display import html, markdown
from toolfs.integrations.cli import main
from toolfs.integrations.mcp_server import ToolfsMCP, mcp_tools

DISCOVERY = ("glob", "grep", "ls")


def _text(result: Any) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def test_the_mcp_server_lists_six_tools_with_read_only_hints() -> None:
    tools = {t.name: t for t in mcp_tools()}
    assert list(tools) == ["read", "write", "edit", "glob", "grep", "ls"]
    for name in (*DISCOVERY, "read"):
        assert tools[name].annotations is not None
        assert tools[name].annotations.read_only_hint is True
    for name in ("write", "edit"):
        assert tools[name].annotations is not None
        assert tools[name].annotations.read_only_hint is False


@pytest.mark.anyio
async def test_the_mcp_server_answers_discovery_calls() -> None:
    ws = toolfs.Workspace("memory://toolfs-disc-mcp")
    ws.write("src/app.py", "def main():\n    return 42\n")
    ws.write("README.md", "# hi\n")
    async with Client(ToolfsMCP(ws).server) as client:
        found = await client.call_tool("glob", {"pattern": "**/*.py"})
        hits = await client.call_tool("grep", {"pattern": "return \\d+",
                                               "output_mode": "content"})
        listing = await client.call_tool("ls", {})
    assert not found.is_error and _text(found).splitlines()[0] == "src/app.py"
    assert found.structured_content["result"]["paths"] == ["src/app.py"]
    assert "src/app.py:2:    return 42" in _text(hits)
    assert not listing.is_error and "src/" in _text(listing).splitlines()


@pytest.mark.anyio
async def test_the_mcp_server_offers_only_the_tools_asked_for() -> None:
    ws = toolfs.Workspace("memory://toolfs-disc-mcp-subset")
    server = ToolfsMCP(ws, tools=["read", "grep"])
    async with Client(server.server) as client:
        listed = await client.list_tools()
        assert [t.name for t in listed.tools] == ["read", "grep"]
        with pytest.raises(Exception, match="Unknown tool"):
            await client.call_tool("write", {"file_path": "a.txt", "content": "x"})
    assert not ws.fs.fs.exists("/toolfs-disc-mcp-subset/a.txt")


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_the_cli_finds_searches_and_lists(tmp_path: pathlib.Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("import os\nVALUE = 1\n")
    (tmp_path / "notes.md").write_text("value is one\n")
    code, out, err = _cli("glob", "**/*.py", str(tmp_path))
    assert code == 0 and out.splitlines() == ["pkg/mod.py"], err
    code, out, _ = _cli("grep", "value", str(tmp_path), "-i")
    assert code == 0
    assert set(out.splitlines()) >= {"notes.md:1:value is one", "pkg/mod.py:2:VALUE = 1"}
    code, out, _ = _cli("grep", "value", str(tmp_path), "--mode", "count")
    assert code == 0 and out.splitlines() == ["notes.md:1"]
    code, out, _ = _cli("ls", str(tmp_path))
    assert code == 0 and "pkg/" in out.splitlines()
    code, _, err = _cli("ls", str(tmp_path), "--path", "missing")
    assert code == 1 and err.count("\n") == 1 and "[not_found]" in err
    code, _, err = _cli("serve", str(tmp_path), "--tools", "read,frobnicate")
    assert code == 2 and "unknown tool 'frobnicate'" in err


def test_schema_prints_a_subset(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["schema", "--tools", "glob,ls"]) == 0
    assert [d["name"] for d in json.loads(capsys.readouterr().out)] == ["glob", "ls"]


def test_notebook_views_of_discovery_results_escape_names() -> None:
    ws = toolfs.Workspace("memory://toolfs-disc-display")
    hostile = "<img src=x onerror=alert(1)>.md"
    ws.write(hostile, "needle\n")
    for value in (ws.glob("*.md"), ws.grep("needle"), ws.ls()):
        assert "<img" not in html(value)
        assert "&lt;img" in html(value)
        # In Markdown the name appears only inside the fenced block, where it is literal.
        head, fence, _ = markdown(value).partition("```")
        assert fence and "<img" not in head


def test_leftover_temp_files_are_never_listed(tmp_path: pathlib.Path) -> None:
    (tmp_path / "notes.md").write_text("x\n")
    (tmp_path / ".notes.md.toolfs-tmp-0123456789ab").write_text("half a write")
    ws = toolfs.Workspace(str(tmp_path))
    assert [e.name for e in ws.ls().entries] == ["notes.md"]
    assert ws.glob(".*").paths == []
    assert ws.grep("half", glob=".*").files == []


def test_ls_of_a_file_advises_a_directory() -> None:
    ws = toolfs.Workspace("memory://toolfs-disc-ls-file")
    ws.write("a.txt", "x\n")
    out = ws.execute("ls", {"path": "a.txt"})
    assert out.error is not None and out.error.code == "not_a_file"
    assert out.text.endswith("Give the path of a directory; use read for a file.")


def test_an_invalid_regex_is_explained_in_plain_text() -> None:
    ws = toolfs.Workspace("memory://toolfs-disc-regex")
    out = ws.execute("grep", {"pattern": "(a+"})
    assert out.error is not None and out.error.code == "invalid_arguments"
    assert out.error.message == "invalid regular expression (RE2 syntax): missing ): (a+"
