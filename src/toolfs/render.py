"""Projection of canonical results and errors to the text the model reads."""

from __future__ import annotations

from toolfs.errors import FsError
from toolfs.results import EditResult, ReadResult, ToolResult, WriteResult

MAX_LINE_CHARS = 2000


def number_line(n: int, line: str, max_chars: int = MAX_LINE_CHARS) -> str:
    """One ``cat -n`` style line, cut with a visible marker past ``max_chars``."""
    if len(line) > max_chars:
        line = (f"{line[:max_chars]}... [line truncated: {max_chars} of {len(line)} "
                "characters shown]")
    return f"{n:>6}\t{line}"


def render_read(r: ReadResult) -> str:
    if r.size == 0:
        return f"(File {r.path} is empty: 0 lines.)"
    if r.line_count == 0:
        total = f"{r.total_lines} lines" if r.total_lines is not None else "fewer lines"
        return (f"(Offset {r.start_line} is past the end of {r.path}: the file has "
                f"{total}. Use an offset between 1 and {r.total_lines or 1}.)")
    body = "\n".join(number_line(r.start_line + i, line) for i, line in enumerate(r.lines))
    if not r.partial:
        return body
    if r.total_lines is None:
        of = (f"of at least {r.end_line} (the file is {r.size} bytes; its total line count "
              "was not computed)")
    else:
        of = f"of {r.total_lines}"
    more = (f" Use offset={r.end_line + 1} to continue."
            if r.total_lines is None or r.end_line < r.total_lines else "")
    return f"{body}\n\n(Showing lines {r.start_line}-{r.end_line} {of}.{more})"


def render_write(r: WriteResult) -> str:
    verb = "Created" if r.action == "created" else "Updated"
    return f"{verb} {r.path} ({r.size} bytes)."


def render_edit(r: EditResult) -> str:
    if r.replace_all:
        return f"Edited {r.path}: replaced {r.replacements} occurrence" + (
            "s." if r.replacements != 1 else ".")
    return f"Edited {r.path}: replaced 1 occurrence at line {r.lines[0]}."


def render_result(r: ToolResult) -> str:
    """Model text for a result."""
    if isinstance(r, ReadResult):
        return render_read(r)
    if isinstance(r, WriteResult):
        return render_write(r)
    return render_edit(r)


def render_error(e: FsError) -> str:
    """Model text for an error: code, message, what to do next."""
    where = f" ({e.path})" if e.path and e.path not in e.message else ""
    return f"Error [{e.code}]{where}: {e.message}\n{e.advice}"
