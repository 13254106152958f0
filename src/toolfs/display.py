"""Rich display for notebooks: Markdown views of results, errors, audit logs, workspaces."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolfs.render import number_line, render_read

if TYPE_CHECKING:
    from toolfs.errors import FsError
    from toolfs.workspace import Workspace


def _fence(text: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}text\n{text}\n{fence}"


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def table_markdown(rows: list[dict[str, str]]) -> str:
    """A Markdown table of ``rows`` (their keys are the columns)."""
    if not rows:
        return "_no events_"
    cols = list(rows[0])
    head = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols)
    body = "\n".join("| " + " | ".join(_cell(r.get(c, "")) for c in cols) + " |" for r in rows)
    return f"{head}\n{body}"


def result_markdown(result: Any) -> str:
    """Markdown for a read, write or edit result."""
    from toolfs.results import EditResult, ReadResult

    if isinstance(result, ReadResult):
        return (f"**read** `{result.path}` · version `{result.version.short}`\n\n"
                + _fence(render_read(result)))
    if isinstance(result, EditResult):
        snippet = "\n".join(number_line(result.snippet_start + i, line)
                            for i, line in enumerate(result.snippet))
        return (f"**edit** `{result.path}` · {result.replacements} replacement(s) at "
                f"line(s) {', '.join(map(str, result.lines[:20]))} · new version "
                f"`{result.version.short}`\n\n" + _fence(snippet))
    return (f"**write** `{result.path}` · {result.action} · {result.size} bytes · version "
            f"`{result.version.short}`")


def error_markdown(err: FsError) -> str:
    """Markdown for an error: code, message and advice."""
    where = f" `{err.path}`" if err.path else ""
    return f"**error `{err.code}`**{where}: {_cell(err.message)}\n\n_{err.advice}_"


def workspace_markdown(ws: Workspace) -> str:
    """Markdown summary of a workspace: root, context, policy, observed files."""
    fs = ws.fs
    snap = ws.snapshot()
    rows = [{"path": fs.jail.display_of(k),
             "observed version": o.version.short if o.version else "(absent)"}
            for k, o in sorted(snap.observations.items())]
    policy = "off" if fs.policy is None else "observed-file / stale-version"
    flags = "read-only" if fs.read_only else "read-write"
    return (f"**toolfs workspace** `{fs.jail.root or '/'}` on `{fs.store.name}` · context "
            f"`{ws.context_id}` · policy: {policy} · {flags}\n\n"
            + (table_markdown(rows) if rows else "_nothing observed yet_"))
