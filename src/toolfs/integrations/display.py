"""Rich display for notebooks: Markdown and HTML views of results, errors, audit logs,
events and workspaces.

The core classes carry no display code. This module sits above them and teaches IPython
how to show them: :func:`register` adds ``text/markdown`` and ``text/html`` formatters
for the toolfs types to a shell. ``import toolfs`` calls it when an IPython shell is
running, so a notebook shows rich output with no extra step; ``%load_ext toolfs`` (or
``%load_ext toolfs.integrations.display``) does it explicitly, e.g. in a shell started after the
import. Outside IPython, :func:`markdown` and :func:`html` give the same views.

Everything that comes from storage or from a caller (paths, messages, versions, reasons,
context ids) is escaped: a file named ``<img src=x onerror=alert(1)>.md`` shows as that
text, never as a tag, a link or emphasis, in Markdown and in HTML alike. Control
characters (newlines, escape, bidi overrides) are shown as visible escapes (``\\n``).
"""

from __future__ import annotations

import html as _html
import re
import sys
import unicodedata
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from toolfs.errors import FsError
from toolfs.escaping import escape_undecodable
from toolfs.policy.events import AuditLog, FsEvent
from toolfs.render import ToolOutput, number_line, render_read, render_result
from toolfs.results import (
    EditResult,
    GlobResult,
    GrepResult,
    ListResult,
    MediaResult,
    NotebookEditResult,
    NotebookReadResult,
    PatchResult,
    ReadResult,
    ToolResult,
)

if TYPE_CHECKING:
    from toolfs.undo.model import Change, Changes
    from toolfs.workspace import Workspace

__all__ = [
    "change_html", "change_markdown", "changes_html", "changes_markdown",
    "error_markdown", "html", "load_ipython_extension", "markdown", "md_code", "md_text",
    "register", "result_markdown", "table_markdown", "visible", "workspace_markdown",
]

# -- escaping ---------------------------------------------------------------------------

# Bidi controls reorder what is shown around them (a name can spoof its extension).
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Markdown punctuation that can start markup inline: code, emphasis, links and images,
# tables, strikethrough, math ($, in Jupyter), backslash escapes, HTML and entities.
_MD_PUNCT = frozenset("\\`*_[]|$~<>&")
_MD_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
# What may sit between backticks as it is: no backtick, pipe (tables), markup characters
# some renderers treat specially even in code, and no space at either end.
_PLAIN_CODE = re.compile(r"[^\s`|<>&$]([^`|<>&$]*[^\s`|<>&$])?")


def visible(value: object) -> str:
    """``str(value)`` with control, line-separator and bidi characters as visible escapes
    (``\\n``, ``\\x1b``, ``\\u202e``) and lone surrogates as ``\\udcXX``."""
    text = escape_undecodable(str(value))
    if text.isprintable() and not _BIDI.intersection(text):
        return text
    out = []
    for ch in text:
        if ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif ch in _BIDI or unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def md_text(value: object) -> str:
    """Inline Markdown that renders as exactly ``visible(value)``, as plain text.

    Markup characters are backslash-escaped, ``<``, ``>`` and ``&`` become entities (so
    no raw HTML, autolink or entity survives), and spaces at either end are kept.
    An underscore inside a word is left alone: it cannot start emphasis there.
    """
    text = visible(value)
    out = []
    last = len(text) - 1
    for i, ch in enumerate(text):
        if ch in _MD_ENTITIES:
            out.append(_MD_ENTITIES[ch])
        elif ch == "_" and 0 < i < last and text[i - 1].isalnum() and text[i + 1].isalnum():
            out.append(ch)
        elif ch in _MD_PUNCT:
            out.append("\\" + ch)
        elif ch == " " and (i == 0 or i == last):
            out.append("&#32;")  # tables and code spans would trim it
        else:
            out.append(ch)
    return "".join(out)


def md_code(value: object) -> str:
    """``value`` as a Markdown code span when that is safe everywhere (no backtick, pipe,
    ``<``, ``>``, ``&``, ``$`` or space at either end), else as escaped text
    (:func:`md_text`): either way it renders as exactly ``visible(value)``."""
    text = visible(value)
    if _PLAIN_CODE.fullmatch(text):
        return f"`{text}`"
    return md_text(text)


def _fence(text: str) -> str:
    # A fenced block is literal up to a fence at least as long as its opening one.
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}text\n{text}\n{fence}"


def _h(value: object) -> str:
    return _html.escape(visible(value), quote=True)


def _hcode(value: object) -> str:
    return f"<code>{_h(value)}</code>"


def _pre(text: str) -> str:
    # File content: only lone surrogates need escaping, the rest is shown verbatim.
    return f"<pre>{_html.escape(escape_undecodable(text), quote=True)}</pre>"


# -- Markdown views -------------------------------------------------------------------


def table_markdown(rows: list[dict[str, str]]) -> str:
    """A Markdown table of ``rows`` (their keys are the columns), every cell escaped."""
    if not rows:
        return "_no events_"
    cols = list(rows[0])
    head = "| " + " | ".join(map(md_text, cols)) + " |\n|" + "---|" * len(cols)
    body = "\n".join("| " + " | ".join(md_text(r.get(c, "")) for c in cols) + " |"
                     for r in rows)
    return f"{head}\n{body}"


def _edit_snippet(result: EditResult) -> str:
    return "\n".join(number_line(result.snippet_start + i, line)
                     for i, line in enumerate(result.snippet))


def _discovery_summary(result: GlobResult | GrepResult | ListResult) -> tuple[str, str]:
    """(tool name, a plain-text summary) of a glob, grep or ls result."""
    cut = " (truncated)" if result.truncated else ""
    if isinstance(result, GlobResult):
        return "glob", f"{len(result.paths)} file(s){cut}"
    if isinstance(result, GrepResult):
        return "grep", (f"{len(result.files)} matching file(s) of {result.files_searched} "
                        f"searched{cut}")
    return "ls", f"{len(result.entries)} entr(ies){cut}"


def result_markdown(result: ToolResult) -> str:
    """Markdown for a tool result (read, write, edit, glob, grep, ls)."""
    if isinstance(result, GlobResult | GrepResult | ListResult):
        tool, summary = _discovery_summary(result)
        where = f" {md_code(result.path)}" if isinstance(result, ListResult) else ""
        return (f"**{tool}**{where} · {md_text(summary)}\n\n"
                + _fence(escape_undecodable(render_result(result))))
    if isinstance(result, PatchResult):
        return f"**apply_patch** · {md_text(render_result(result))}"
    if isinstance(result, MediaResult):
        return f"**read** · {md_text(render_result(result).splitlines()[0])}"
    path, version = md_code(result.path), md_code(result.version.short)
    if isinstance(result, NotebookReadResult | NotebookEditResult):
        tool = "read" if isinstance(result, NotebookReadResult) else "notebook_edit"
        return (f"**{tool}** {path} · version {version}\n\n"
                + _fence(escape_undecodable(render_result(result))))
    if isinstance(result, ReadResult):
        return f"**read** {path} · version {version}\n\n" + _fence(render_read(result))
    if isinstance(result, EditResult):
        return (f"**edit** {path} · {result.replacements} replacement(s) at "
                f"line(s) {', '.join(map(str, result.lines[:20]))} · new version "
                f"{version}\n\n" + _fence(_edit_snippet(result)))
    return (f"**write** {path} · {md_text(result.action)} · {result.size} bytes · "
            f"version {version}")


def error_markdown(err: FsError) -> str:
    """Markdown for an error: code, path, message and advice."""
    where = f" {md_code(err.path)}" if err.path else ""
    return (f"**error {md_code(err.code)}**{where}: {md_text(err.message)}\n\n"
            f"_{md_text(err.advice)}_")


def output_markdown(output: ToolOutput) -> str:
    """Markdown for :meth:`toolfs.Workspace.execute`'s outcome: its value or its error."""
    if output.error is not None:
        return error_markdown(output.error)
    assert output.value is not None
    return result_markdown(output.value)


def audit_markdown(log: AuditLog) -> str:
    """The audit log as a Markdown table."""
    return table_markdown(log.rows())


def event_markdown(event: FsEvent) -> str:
    """One ``fs/*`` event as a one-row Markdown table."""
    log = AuditLog(max_events=1)
    log(event)
    return audit_markdown(log)


def _workspace_facts(ws: Workspace) -> tuple[list[dict[str, str]], str, str]:
    fs = ws.fs
    rows = [{"path": fs.jail.display_of(k),
             "observed version": o.version.short if o.version else "(absent)"}
            for k, o in sorted(ws.snapshot().observations.items())]
    policy = "off" if fs.policy is None else "observed-file / stale-version"
    flags = "read-only" if fs.read_only else "read-write"
    return rows, policy, flags


def workspace_markdown(ws: Workspace) -> str:
    """Markdown summary of a workspace: root, context, policy, observed files."""
    rows, policy, flags = _workspace_facts(ws)
    fs = ws.fs
    return (f"**toolfs workspace** {md_code(fs.jail.root or '/')} on {md_code(fs.store.name)}"
            f" · context {md_code(ws.context_id)} · policy: {policy} · {flags}\n\n"
            + (table_markdown(rows) if rows else "_nothing observed yet_"))


# -- HTML views -----------------------------------------------------------------------


def table_html(rows: list[dict[str, str]]) -> str:
    """An HTML table of ``rows`` (their keys are the columns), every cell escaped."""
    if not rows:
        return "<p><em>no events</em></p>"
    cols = list(rows[0])
    head = "".join(f"<th>{_h(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{_h(r.get(c, ''))}</td>" for c in cols) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def result_html(result: ToolResult) -> str:
    """HTML for a tool result (read, write, edit, glob, grep, ls)."""
    if isinstance(result, GlobResult | GrepResult | ListResult):
        tool, summary = _discovery_summary(result)
        where = f" {_hcode(result.path)}" if isinstance(result, ListResult) else ""
        return (f"<p><strong>{tool}</strong>{where} · {_h(summary)}</p>"
                + _pre(render_result(result)))
    if isinstance(result, PatchResult):
        return f"<p><strong>apply_patch</strong> · {_h(render_result(result))}</p>"
    if isinstance(result, MediaResult):
        return (f"<p><strong>read</strong> · {_h(render_result(result).splitlines()[0])}"
                "</p>")
    path, version = _hcode(result.path), _hcode(result.version.short)
    if isinstance(result, NotebookReadResult | NotebookEditResult):
        tool = "read" if isinstance(result, NotebookReadResult) else "notebook_edit"
        return (f"<p><strong>{tool}</strong> {path} · version {version}</p>"
                + _pre(render_result(result)))
    if isinstance(result, ReadResult):
        return (f"<p><strong>read</strong> {path} · version {version}</p>"
                + _pre(render_read(result)))
    if isinstance(result, EditResult):
        return (f"<p><strong>edit</strong> {path} · {result.replacements} replacement(s) at "
                f"line(s) {', '.join(map(str, result.lines[:20]))} · new version "
                f"{version}</p>" + _pre(_edit_snippet(result)))
    return (f"<p><strong>write</strong> {path} · {_h(result.action)} · {result.size} bytes "
            f"· version {version}</p>")


def error_html(err: FsError) -> str:
    """HTML for an error: code, path, message and advice."""
    where = f" {_hcode(err.path)}" if err.path else ""
    return (f"<p><strong>error {_hcode(err.code)}</strong>{where}: {_h(err.message)}</p>"
            f"<p><em>{_h(err.advice)}</em></p>")


def output_html(output: ToolOutput) -> str:
    """HTML for :meth:`toolfs.Workspace.execute`'s outcome: its value or its error."""
    if output.error is not None:
        return error_html(output.error)
    assert output.value is not None
    return result_html(output.value)


def audit_html(log: AuditLog) -> str:
    """The audit log as an HTML table."""
    return table_html(log.rows())


def event_html(event: FsEvent) -> str:
    """One ``fs/*`` event as a one-row HTML table."""
    log = AuditLog(max_events=1)
    log(event)
    return audit_html(log)


def workspace_html(ws: Workspace) -> str:
    """HTML summary of a workspace: root, context, policy, observed files."""
    rows, policy, flags = _workspace_facts(ws)
    fs = ws.fs
    return (f"<p><strong>toolfs workspace</strong> {_hcode(fs.jail.root or '/')} on "
            f"{_hcode(fs.store.name)} · context {_hcode(ws.context_id)} · policy: {policy} · "
            f"{flags}</p>"
            + (table_html(rows) if rows else "<p><em>nothing observed yet</em></p>"))


def _change_head(change: Change) -> str:
    where = _hcode(change.path) + (f" → {_hcode(change.to_path)}" if change.to_path else "")
    return (f"<p><strong>{_h(change.kind)}</strong> {where} · {_h(change.tool)} · "
            f"{_h(change.at.isoformat(timespec='seconds'))}</p>")


def _diff_html(diff: str) -> str:
    """A unified diff as preformatted HTML, added lines green and removed ones red."""
    lines = []
    for line in diff.splitlines():
        colour = "#116611" if line.startswith("+") and not line.startswith("+++") else \
            "#aa1111" if line.startswith("-") and not line.startswith("---") else None
        shown = _h(line)
        lines.append(f'<span style="color:{colour}">{shown}</span>' if colour else shown)
    return "<pre>" + "\n".join(lines) + "</pre>"


def change_html(change: Change) -> str:
    """One journaled change: what, where, which tool, and its diff."""
    return _change_head(change) + _diff_html(change.diff())


def changes_html(changes: Changes) -> str:
    """:meth:`toolfs.Workspace.changes` as HTML: each change with its diff."""
    if not changes:
        return "<p><em>no changes</em></p>"
    return "".join(change_html(c) for c in changes)


def change_markdown(change: Change) -> str:
    """One journaled change in Markdown, with its diff in a fenced block."""
    where = md_code(change.path) + (f" → {md_code(change.to_path)}" if change.to_path
                                    else "")
    return (f"**{change.kind}** {where} · {md_text(change.tool)}\n\n"
            + _fence(change.diff()))


def changes_markdown(changes: Changes) -> str:
    """:meth:`toolfs.Workspace.changes` in Markdown."""
    return "\n\n".join(change_markdown(c) for c in changes) if changes else "_no changes_"


# -- dispatch and IPython registration --------------------------------------------------

Views = tuple[str, str, Callable[[Any], str], Callable[[Any], str]]

# (module, class name, Markdown view, HTML view); subclasses are covered (IPython looks
# formatters up along the MRO), so FsError covers Stale, NotFound, ...
_VIEWS: tuple[Views, ...] = (
    ("toolfs.results", "ReadResult", result_markdown, result_html),
    ("toolfs.results", "WriteResult", result_markdown, result_html),
    ("toolfs.results", "EditResult", result_markdown, result_html),
    ("toolfs.results", "GlobResult", result_markdown, result_html),
    ("toolfs.results", "GrepResult", result_markdown, result_html),
    ("toolfs.results", "ListResult", result_markdown, result_html),
    ("toolfs.results", "NotebookReadResult", result_markdown, result_html),
    ("toolfs.results", "NotebookEditResult", result_markdown, result_html),
    ("toolfs.render", "ToolOutput", output_markdown, output_html),
    ("toolfs.errors", "FsError", error_markdown, error_html),
    ("toolfs.policy.events", "AuditLog", audit_markdown, audit_html),
    ("toolfs.policy.events", "FsEvent", event_markdown, event_html),
    ("toolfs.workspace", "Workspace", workspace_markdown, workspace_html),
    ("toolfs.undo.model", "Change", change_markdown, change_html),
    ("toolfs.undo.model", "Changes", changes_markdown, changes_html),
)


def _view(obj: object, index: int) -> str:
    for module, name, *views in _VIEWS:
        cls = getattr(sys.modules.get(module), name, None)
        if cls is not None and isinstance(obj, cls):
            return views[index](obj)
    raise TypeError(f"toolfs.integrations.display has no view of {type(obj).__name__}")


def markdown(obj: object) -> str:
    """The Markdown view of a toolfs result, output, error, audit log, event or workspace
    (what a notebook shows). Raises :class:`TypeError` for anything else."""
    return _view(obj, 0)


def html(obj: object) -> str:
    """The HTML view of a toolfs object (see :func:`markdown`), built with
    :func:`html.escape`."""
    return _view(obj, 1)


def _running_shell() -> Any:
    ipython = sys.modules.get("IPython")  # never import IPython just to look
    get = getattr(ipython, "get_ipython", None)
    return get() if get is not None else None


def register(shell: Any = None) -> bool:
    """Add the Markdown and HTML views to an IPython shell's display formatters.

    ``shell`` defaults to the running one; returns whether there was a shell. Classes not
    imported yet are registered by name, so registering imports nothing more. Calling it
    again is harmless.
    """
    if shell is None:
        shell = _running_shell()
        if shell is None:
            return False
    display_formatter = getattr(shell, "display_formatter", None)
    if display_formatter is None:  # a shell without rich display
        return False
    formatters = display_formatter.formatters
    for module, name, md_view, html_view in _VIEWS:
        for mime, view in (("text/markdown", md_view), ("text/html", html_view)):
            formatter = formatters[mime]
            cls = getattr(sys.modules.get(module), name, None)
            if cls is not None:
                formatter.for_type(cls, view)
            else:
                formatter.for_type_by_name(module, name, view)
    return True


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext toolfs.integrations.display``: register the views with this shell."""
    register(ipython)

