"""Rich notebook display: Markdown and HTML views of results, errors, audit logs and
workspaces, escaped against hostile names, registered with IPython from above the core."""

from __future__ import annotations

import html.parser
import re
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import toolfs
from toolfs.integrations import display
from toolfs.integrations.display import markdown, md_code, md_text, table_markdown, visible


def _shell() -> Any:
    shell_mod = pytest.importorskip("IPython.core.interactiveshell")
    return shell_mod.InteractiveShell.instance()



@pytest.fixture
def ws() -> Iterator[toolfs.Workspace]:
    from fsspec.implementations.memory import MemoryFileSystem

    name = f"toolfs-display-{uuid.uuid4().hex[:8]}"
    yield toolfs.Workspace(f"memory://{name}", context_id="agent")
    if MemoryFileSystem().exists(f"/{name}"):
        MemoryFileSystem().rm(f"/{name}", recursive=True)


HOSTILE = [
    "<img src=x onerror=alert(1)>.md",
    "<script>alert(1)</script>",
    "a`b``c.md",
    "``",
    "p|i|pe.md",
    "new\nline.md",
    "cr\rtab\tesc\x1b.md",
    "*star* **bold**.md",
    "_under_ __score__.md",
    "[x](javascript:alert(1)).md",
    "![i](javascript:alert(1))",
    "&lt;entity&gt; &amp; &#60;.md",
    "<https://evil.example>",
    "$x^2$ and $$y$$.md",
    "~~struck~~.md",
    "back\\slash\\.md",
    " leading and trailing ",
    "\u202egpj.exe",
]


# Tags the views themselves use; nothing else may appear in the HTML.
ALLOWED_TAGS = {"p", "strong", "em", "code", "pre", "table", "thead", "tbody", "tr", "th",
                "td"}


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def check_html(source: str, *shown: str) -> None:
    """Only the views' own tags, no attribute but a fenced block's language, and each of
    ``shown`` visible as text."""
    parser = _Tags()
    parser.feed(source)
    parser.close()
    for tag, attrs in parser.tags:
        assert tag in ALLOWED_TAGS, (tag, source)
        assert all((k, v) == ("class", "language-text") for k, v in attrs), (tag, attrs)
    text = "".join(parser.text)
    for s in shown:
        assert visible(s) in text, (s, text)


FENCED = re.compile(r"^(`{3,})text\n.*?\n\1$", re.MULTILINE | re.DOTALL)


PLAIN_CODE = re.compile(r"[^\s`|<>&$]([^`|<>&$]*[^\s`|<>&$])?")


def split_markdown(prose: str) -> tuple[list[str], str]:
    """(code span contents, the text outside them with backslash escapes removed)."""
    spans: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(prose):
        if prose[i] == "\\":
            i += 2  # an escaped character is text, whatever it is
        elif prose[i] == "`":
            end = prose.index("`", i + 1)
            spans.append(prose[i + 1:end])
            i = end + 1
        else:
            rest.append(prose[i])
            i += 1
    return spans, "".join(rest)


def check_markdown(md: str) -> None:
    """No markup can come from the data: outside the fenced blocks (literal up to their
    longer fence) there is no raw ``<``/``>``, every backtick opens or closes a code span
    of plain characters, ``[``, ``]``, ``$``, ``~`` are escaped, and table rows gain no
    cell (every pipe in the data is escaped)."""
    prose = FENCED.sub("", md)
    assert "<" not in prose and ">" not in prose, prose
    spans, rest = split_markdown(prose)
    assert all(PLAIN_CODE.fullmatch(s) for s in spans), spans
    assert not set("[]$~") & set(rest), rest
    pipes = {line.count("|") for line in rest.splitlines() if line.startswith("|")}
    assert len(pipes) <= 1, rest
    # Emphasis markers come only from the views: **kind** and the _advice_ line.
    stars = re.sub(r"\*\*(read|write|edit|error |toolfs workspace)\*\*", "", rest)
    assert "*" not in stars, rest


def _markdown_it() -> Any:
    """A CommonMark renderer with GFM tables and raw HTML on (as Jupyter and nbconvert
    render Markdown); markdown-it-py comes with the test extra."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def _hostile_objects(ws: toolfs.Workspace, name: str) -> list[tuple[str, Any]]:
    """Every kind of object with a view, each carrying ``name`` (as path, context id,
    message or reason)."""
    other = ws.new_context(context_id=name)
    objects: list[tuple[str, Any]] = [
        ("error message", toolfs.FsError("denied", f"vetoed: {name}", name)),
        ("empty workspace", other),
    ]
    try:
        wrote = other.write(name, "one\n")
    except toolfs.FsError as err:  # not a path here: it reaches the views as a message
        assert err.code == "outside_root"
        objects.append(("refused path", err))
        objects.append(("refused path output", other.execute("read", {"file_path": name})))
    else:
        objects.append(("write", wrote))
        objects.append(("read", other.read(name)))
        objects.append(("edit", other.edit(name, "one", "two")))
        objects.append(("output", other.execute("read", {"file_path": name})))
        refused = ws.execute("write", {"file_path": name, "content": "x\n"})  # never read
        objects.append(("error output", refused))
        objects.append(("error", refused.error))
    if other.audit.events:
        objects.append(("audit", other.audit))
        objects.extend(("event", event) for event in other.audit.events)
    # Every column of the audit table carrying the name (versions are the backend's).
    log = toolfs.AuditLog()
    version = toolfs.FileVersion(kind="etag", value=f'"{name}"')
    log(toolfs.FsEvent(type="fs/denied", context_id=name, operation="edit", path=name,
                       version_before=version, version_after=version, reason=name))
    objects.append(("synthetic audit", log))
    objects.append(("synthetic event", log.events[0]))
    objects.append(("workspace", other))
    return objects


def _text_of(source: str) -> list[str]:
    parser = _Tags()
    parser.feed(source)
    parser.close()
    return parser.text


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


VIEW_FUNCTIONS: list[Callable[..., str]] = [
    display.result_markdown, display.error_markdown, display.table_markdown,
    display.workspace_markdown, display.output_markdown, display.audit_markdown,
    display.event_markdown, display.result_html, display.error_html, display.table_html,
    display.workspace_html, display.output_html, display.audit_html, display.event_html,
]


def test_notebook_views_of_discovery_results_escape_names() -> None:
    ws = toolfs.Workspace("memory://toolfs-disc-display")
    hostile = "<img src=x onerror=alert(1)>.md"
    ws.write(hostile, "needle\n")
    for value in (ws.glob("*.md"), ws.grep("needle"), ws.ls()):
        assert "<img" not in display.html(value)
        assert "&lt;img" in display.html(value)
        # In Markdown the name appears only inside the fenced block, where it is literal.
        head, fence, _ = markdown(value).partition("```")
        assert fence and "<img" not in head


def test_read_result_shows_path_version_and_numbered_lines(ws: toolfs.Workspace) -> None:
    ws.write("a.py", "x = 1\ny = 2\n")
    result = ws.read("a.py")
    md = markdown(result)
    assert md.startswith(f"**read** `a.py` · version `{result.version.short}`\n\n")
    assert md.endswith("```text\n     1\tx = 1\n     2\ty = 2\n```")
    # The view is the model's text, footer included for a partial read.
    partial = markdown(ws.read("a.py", limit=1))
    assert "(Showing line 1 of 2. Use offset=2 to continue.)" in partial


def test_fences_grow_around_content_with_backticks(ws: toolfs.Workspace) -> None:
    ws.write("README.md", "```python\nprint(1)\n```\n")
    md = markdown(ws.read("README.md"))
    assert "\n````text\n" in md and md.endswith("\n````")


def test_write_and_edit_results(ws: toolfs.Workspace) -> None:
    write = ws.write("a.py", "".join(f"line {i}\n" for i in range(1, 11)))
    assert markdown(write) == (
        f"**write** `a.py` · created · 71 bytes · version `{write.version.short}`")
    edit = ws.edit("a.py", "line 6", "line six")
    md = markdown(edit)
    assert md.startswith(f"**edit** `a.py` · 1 replacement(s) at line(s) 6 · new version "
                         f"`{edit.version.short}`")
    assert "     3\tline 3\n" in md and "     6\tline six\n" in md and "     9\tline 9\n" in md


def test_tool_output_shows_its_value_or_its_error(ws: toolfs.Workspace) -> None:
    ok = ws.execute("write", {"file_path": "b.txt", "content": "b\n"})
    assert ok.value is not None
    assert markdown(ok) == markdown(ok.value)
    failed = ws.new_context().execute("write", {"file_path": "b.txt", "content": "c\n"})
    assert failed.error is not None
    md = markdown(failed)
    assert md == markdown(failed.error)
    assert md.startswith("**error `not_observed`** `b.txt`: ")
    assert md.endswith(f"\n\n_{md_text(failed.error.advice)}_")


def test_error_message_is_one_markdown_line() -> None:
    err = toolfs.FsError("no_match", "a | b\nc", "x.txt")
    assert markdown(err).splitlines()[0] == r"**error `no_match`** `x.txt`: a \| b\\nc"


def test_audit_log_is_a_table_of_events(ws: toolfs.Workspace) -> None:
    assert markdown(toolfs.AuditLog()) == "_no events_"
    ws.write("c.txt", "1\n")
    other = ws.new_context(context_id="other")
    other.read("c.txt")
    other.edit("c.txt", "1", "2")
    ws.execute("edit", {"file_path": "c.txt", "old_string": "1", "new_string": "3"})
    lines = markdown(ws.audit).splitlines()
    assert lines[0] == "| type | context | operation | path | before | after | reason |"
    assert lines[1] == "|---|---|---|---|---|---|---|"
    assert len(lines) == 2 + len(ws.audit.events)
    assert lines[-1].startswith("| fs/denied | agent | edit | c.txt |")
    assert "stale: " in lines[-1]
    # Each workspace logs its own context's events only.
    assert all(row["context"] == "agent" for row in ws.audit.rows())
    # One event is a one-row table.
    assert markdown(ws.audit.events[-1]).splitlines()[2] == lines[-1]


def test_table_cells_escape_pipes_and_newlines() -> None:
    md = table_markdown([{"a": "x|y", "b": "1\n2"}])
    assert md == "| a | b |\n|---|---|\n| x\\|y | 1\\\\n2 |"


def test_workspace_summary(ws: toolfs.Workspace) -> None:
    assert markdown(ws).endswith("_nothing observed yet_")
    ws.write("d.txt", "d\n")
    md = markdown(ws)
    assert "context `agent`" in md and "policy: observed-file / stale-version" in md
    assert md.endswith(f"| d.txt | {ws.read('d.txt').version.short} |")
    loose = ws.new_context(policy=None, read_only=True)
    assert "policy: off · read-only" in markdown(loose)


def test_other_objects_have_no_view() -> None:
    with pytest.raises(TypeError, match="no view of int"):
        markdown(1)


def test_md_text_and_md_code_render_as_the_name_only() -> None:
    mdit = _markdown_it()
    for name in HOSTILE:
        for escaped in (md_text(name), md_code(name)):
            assert "\n" not in escaped and "<" not in escaped and ">" not in escaped
            if mdit is not None:
                rendered = mdit.render(f"x {escaped} x")
                check_html(rendered, f"x {name} x")
                assert rendered.count("<p>") == 1, rendered


@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_names_through_every_view(ws: toolfs.Workspace, name: str) -> None:
    mdit = _markdown_it()
    for kind, obj in _hostile_objects(ws, name):
        md, page = display.markdown(obj), display.html(obj)
        check_markdown(md)
        check_html(page)
        assert visible(name).strip() in "".join(_text_of(page)), (kind, page)
        if mdit is not None:
            check_html(mdit.render(md))
            assert visible(name).strip() in "".join(_text_of(mdit.render(md))), (kind, md)


def test_hostile_content_stays_inside_its_fence(ws: toolfs.Workspace) -> None:
    body = "".join(f"{name}\n" for name in HOSTILE if "\n" not in name and "\r" not in name)
    ws.write("evil.md", body + "````\n```\n")
    md = markdown(ws.read("evil.md"))
    fence = md.split("\n")[2]
    assert fence == "`````text" and md.endswith("\n`````")
    check_markdown(md)
    mdit = _markdown_it()
    if mdit is not None:
        rendered = mdit.render(md)
        check_html(rendered)
        assert rendered.count("<pre>") == 1


def test_ipython_shows_markdown_and_html_once_registered(ws: toolfs.Workspace) -> None:
    shell = _shell()
    assert display.register(shell) is True
    ws.write("e.txt", "e\n")
    for obj in (ws.read("e.txt"), ws.execute("read", {"file_path": "nope.txt"}),
                toolfs.FsError("stale", "s", "e.txt"), ws.audit, ws.audit.events[0], ws):
        data, _ = shell.display_formatter.format(obj)
        assert data["text/markdown"] == display.markdown(obj)
        assert data["text/html"] == display.html(obj)
    hostile = ws.write("<img src=x onerror=alert(1)>.md", "x\n")
    data, _ = shell.display_formatter.format(hostile)
    assert "<img" not in data["text/markdown"] and "<img" not in data["text/html"]


def test_the_core_classes_carry_no_display_code() -> None:
    from toolfs.errors import FsError
    from toolfs.policy.events import AuditLog, FsEvent
    from toolfs.render import ToolOutput
    from toolfs.results import EditResult, ReadResult, WriteResult

    for cls in (FsError, AuditLog, FsEvent, ReadResult, WriteResult, EditResult, ToolOutput):
        assert not any(hasattr(cls, f"_repr_{m}_") for m in ("markdown", "html")), cls


def test_import_toolfs_registers_the_views_in_a_running_shell() -> None:
    pytest.importorskip("IPython")
    out = _run("""
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        import toolfs
        ws = toolfs.Workspace("memory://toolfs-display-auto")
        data, _ = shell.display_formatter.format(ws.write("a.txt", "a\\n"))
        print(sorted(data))
        print(data["text/markdown"].split(" · ")[0])
    """)
    assert out.splitlines() == ["['text/html', 'text/markdown', 'text/plain']",
                                "**write** `a.txt`"]


def test_load_ext_registers_in_a_shell_started_after_the_import() -> None:
    pytest.importorskip("IPython")
    out = _run("""
        import toolfs
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        ws = toolfs.Workspace("memory://toolfs-display-ext")
        result = ws.write("a.txt", "a\\n")
        print("text/markdown" in shell.display_formatter.format(result)[0])
        shell.run_line_magic("load_ext", "toolfs")
        print("text/markdown" in shell.display_formatter.format(result)[0])
    """)
    assert out.splitlines() == ["False", "True"]


def test_import_toolfs_outside_ipython_imports_neither_ipython_nor_display() -> None:
    out = _run("""
        import sys
        import toolfs
        toolfs.Workspace
        print("IPython" in sys.modules, "toolfs.integrations.display" in sys.modules)
    """)
    assert out.split() == ["False", "False"]


def test_every_view_function_is_reached_by_the_dispatch() -> None:
    # Each view function above is what markdown()/html() pick for some type, so the
    # hostile-name test (which goes through the dispatch) covers all of them.
    picked = {view for *_, md_view, html_view in display._VIEWS for view in (md_view,
                                                                              html_view)}
    assert set(VIEW_FUNCTIONS) - picked == {display.table_markdown, display.table_html}
