"""Rich notebook display: Markdown reprs of results, errors, audit logs and workspaces."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import toolfs
from toolfs.display import table_markdown


@pytest.fixture
def ws() -> Iterator[toolfs.Workspace]:
    from fsspec.implementations.memory import MemoryFileSystem

    name = f"toolfs-display-{uuid.uuid4().hex[:8]}"
    yield toolfs.Workspace(f"memory://{name}", context_id="agent")
    MemoryFileSystem().rm(f"/{name}", recursive=True)


def test_read_result_shows_path_version_and_numbered_lines(ws: toolfs.Workspace) -> None:
    ws.write("a.py", "x = 1\ny = 2\n")
    result = ws.read("a.py")
    md = result._repr_markdown_()
    assert md.startswith(f"**read** `a.py` · version `{result.version.short}`\n\n")
    assert md.endswith("```text\n     1\tx = 1\n     2\ty = 2\n```")
    # The view is the model's text, footer included for a partial read.
    partial = ws.read("a.py", limit=1)._repr_markdown_()
    assert "(Showing line 1 of 2. Use offset=2 to continue.)" in partial


def test_fences_grow_around_content_with_backticks(ws: toolfs.Workspace) -> None:
    ws.write("README.md", "```python\nprint(1)\n```\n")
    md = ws.read("README.md")._repr_markdown_()
    assert "\n````text\n" in md and md.endswith("\n````")


def test_write_and_edit_results(ws: toolfs.Workspace) -> None:
    write = ws.write("a.py", "".join(f"line {i}\n" for i in range(1, 11)))
    assert write._repr_markdown_() == (
        f"**write** `a.py` · created · 71 bytes · version `{write.version.short}`")
    edit = ws.edit("a.py", "line 6", "line six")
    md = edit._repr_markdown_()
    assert md.startswith(f"**edit** `a.py` · 1 replacement(s) at line(s) 6 · new version "
                         f"`{edit.version.short}`")
    assert "     3\tline 3\n" in md and "     6\tline six\n" in md and "     9\tline 9\n" in md


def test_tool_output_shows_its_value_or_its_error(ws: toolfs.Workspace) -> None:
    ok = ws.execute("write", {"file_path": "b.txt", "content": "b\n"})
    assert ok.value is not None
    assert ok._repr_markdown_() == ok.value._repr_markdown_()
    failed = ws.new_context().execute("write", {"file_path": "b.txt", "content": "c\n"})
    assert failed.error is not None
    md = failed._repr_markdown_()
    assert md == failed.error._repr_markdown_()
    assert md.startswith("**error `not_observed`** `b.txt`: ")
    assert md.endswith(f"\n\n_{failed.error.advice}_")


def test_error_message_is_one_markdown_line() -> None:
    err = toolfs.FsError("a | b\nc", code="no_match", path="x.txt")
    assert err._repr_markdown_().splitlines()[0] == r"**error `no_match`** `x.txt`: a \| b c"


def test_audit_log_is_a_table_of_events(ws: toolfs.Workspace) -> None:
    assert toolfs.AuditLog()._repr_markdown_() == "_no events_"
    ws.write("c.txt", "1\n")
    other = ws.new_context(context_id="other")
    other.read("c.txt")
    other.edit("c.txt", "1", "2")
    ws.execute("edit", {"file_path": "c.txt", "old_string": "1", "new_string": "3"})
    lines = ws.audit._repr_markdown_().splitlines()
    assert lines[0] == "| type | context | operation | path | before | after | reason |"
    assert lines[1] == "|---|---|---|---|---|---|---|"
    assert len(lines) == 2 + len(ws.audit.events)
    assert lines[-1].startswith("| fs/denied | agent | edit | c.txt |")
    assert "stale: " in lines[-1]
    # Each workspace logs its own context's events only.
    assert all(row["context"] == "agent" for row in ws.audit.rows())


def test_table_cells_escape_pipes_and_newlines() -> None:
    md = table_markdown([{"a": "x|y", "b": "1\n2"}])
    assert md == "| a | b |\n|---|---|\n| x\\|y | 1 2 |"


def test_workspace_summary(ws: toolfs.Workspace) -> None:
    assert ws._repr_markdown_().endswith("_nothing observed yet_")
    ws.write("d.txt", "d\n")
    md = ws._repr_markdown_()
    assert "context `agent`" in md and "policy: observed-file / stale-version" in md
    assert md.endswith(f"| d.txt | {ws.read('d.txt').version.short} |")
    loose = ws.new_context(policy=None, read_only=True)
    assert "policy: off · read-only" in loose._repr_markdown_()


def test_ipython_displays_them_as_markdown(ws: toolfs.Workspace) -> None:
    shell_mod = pytest.importorskip("IPython.core.interactiveshell")
    shell = shell_mod.InteractiveShell.instance()
    ws.write("e.txt", "e\n")
    for obj in (ws.read("e.txt"), ws.execute("read", {"file_path": "nope.txt"}), ws.audit, ws):
        data, _ = shell.display_formatter.format(obj)
        assert data["text/markdown"] == obj._repr_markdown_()
