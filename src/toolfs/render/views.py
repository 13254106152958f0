"""The model text of each result and error: what a read, a write, an edit, a glob, a
grep, an ls, an apply_patch and a refusal say.

Each ``_X_view`` returns the text together with the part of the result it shows (the
lines, paths or entries that fit), so that the structured content
(:mod:`toolfs.render.structured`) carries no more than the text; ``render_X`` is the text
alone. A read shows whole lines only and ends, when cut, with the offset to continue at;
a ``stale`` refusal shows the diff since the observed version between its message and
its advice. The parts they are built from are in :mod:`toolfs.render.lines`; the
:class:`~toolfs.render.ToolOutput` that carries them is in :mod:`toolfs.render`.
"""

from __future__ import annotations

from toolfs.errors import FsError
from toolfs.render.lines import (
    _FOOTER_ROOM,
    _PREFIX_WIDTH,
    _clip,
    _clip_line,
    _clip_message,
    _fit,
    _has_run_over,
    _Limits,
    _narrow_numbers,
    _numbered_lines,
    _plain_cut,
    _plain_widths,
    _plural,
    _span,
)
from toolfs.results import (
    MAX_OUTPUT_CHARS,
    EditResult,
    GlobResult,
    GrepMatch,
    GrepResult,
    ListResult,
    MediaResult,
    NotebookEditResult,
    NotebookReadResult,
    PatchResult,
    ReadResult,
    ToolResult,
    WriteResult,
)
from toolfs.schemas import MAX_IGNORE_PATTERNS

# -- read ---------------------------------------------------------------------------


def _read_view(r: ReadResult, max_chars: int) -> tuple[str, list[str], bool]:
    """The text of a read, the lines it shows (as shown) and whether the budget cut it."""
    limits = _Limits(max_chars)
    path = _clip(r.path, limits.path)
    if r.total_lines == 0 or r.size == 0:
        return f"(File {path} is empty: 0 lines.)", [], False
    if r.line_count == 0:
        if r.total_lines is None:
            return (f"(Offset {r.start_line} is past the end of {path}: the file has fewer "
                    "lines.)"), [], False
        use = ("Use offset=1." if r.total_lines == 1
               else f"Use an offset between 1 and {r.total_lines}.")
        return (f"(Offset {r.start_line} is past the end of {path}: the file has "
                f"{_plural(r.total_lines, 'line')}. {use})"), [], False
    # The lines hold no more characters than the file has bytes, so ``size`` bounds the
    # numbered text of the window.
    if _narrow_numbers(r.start_line, r.lines, r.cut_lines) \
            and r.size + 8 * len(r.lines) <= 2 * max_chars:
        plain = _plain_read_view(r, max_chars, limits.line)
        if plain is not None:
            return plain
    widths = _plain_widths(r.start_line, r.lines, limits, r.cut_lines)
    shown = _fit(r.start_line, r.lines, limits, max_chars, r.cut_lines, widths, r.size)
    if len(shown) == len(r.lines):  # a cut body is never built: it is cut again below
        footer = _read_footer(r, r.start_line + len(shown) - 1, cut=False,
                              max_chars=max_chars)
        body = _numbered_lines(r.start_line, shown)
        text = f"{body}\n\n{footer}" if footer else body
        if len(text) <= max_chars:
            return text, shown, False
    # Cut: by the lengths themselves, not the size (a hand-made one may be off).
    shown = _fit(r.start_line, r.lines, limits, max_chars - _FOOTER_ROOM, r.cut_lines,
                 widths)
    body = _numbered_lines(r.start_line, shown)
    footer = _read_footer(r, r.start_line + len(shown) - 1, cut=True, max_chars=max_chars)
    return f"{body}\n\n{footer}", shown, True


def _plain_read_view(r: ReadResult, max_chars: int, max_line: int
                     ) -> tuple[str, list[str], bool] | None:
    """:func:`_read_view` of lines with narrow numbers whose numbered text is at most
    about twice the budget: it is built once, whole, and cut where it exceeds the
    budget; ``None`` if a line is longer than ``max_line`` (the caller then takes each
    line in hand). That is told from the text itself, by a run between newlines longer
    than a line and its prefix: a search per line's worth of characters, where the
    lines' lengths would cost a call each."""
    start, lines = r.start_line, r.lines
    body = _numbered_lines(start, lines)
    if _has_run_over(body, _PREFIX_WIDTH + max_line):
        return None
    if len(body) <= max_chars:
        footer = _read_footer(r, start + len(lines) - 1, cut=False, max_chars=max_chars)
        text = f"{body}\n\n{footer}" if footer else body
        if len(text) <= max_chars:
            return text, lines, False
    count, end = _plain_cut(body, start, len(lines), max_chars - _FOOTER_ROOM)
    text = body[:end]
    del body  # so that the footer is appended in place (one large string at a time)
    text += "\n\n" + _read_footer(r, start + count - 1, cut=True, max_chars=max_chars)
    return text, lines[:count], True


def _read_footer(r: ReadResult, end: int, *, cut: bool, max_chars: int) -> str:
    """What was shown and where to continue; empty when the whole file was shown."""
    span = _span(r.start_line, end)
    if r.total_lines is None:
        # The scan of a file over the whole-file cap stopped before the end.
        of = (f"; more lines follow: the file is {r.size} bytes, over the whole-file cap, "
              "so they were not counted")
        more = True
    else:
        if not cut and r.start_line == 1 and end >= r.total_lines:
            return ""
        of = f" of {r.total_lines}"
        more = end < r.total_lines
    then = f" Use offset={end + 1} to continue." if more else ""
    if cut:
        return f"(Output truncated at {max_chars} characters: showing {span}{of}.{then})"
    return f"(Showing {span}{of}.{then})"


def render_read(r: ReadResult, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    return _read_view(r, max_chars)[0]


# -- write and edit -----------------------------------------------------------------


def render_write(r: WriteResult, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    verb = "Created" if r.action == "created" else "Updated"
    text = f"{verb} {_clip(r.path, _Limits(max_chars).path)} ({r.size} bytes)."
    if r.merged:
        text += "\n" + _merged_note(r.merged_lines or [], _Limits(max_chars))
    return text


def _merged_note(ranges: list[tuple[int, int]], limits: _Limits) -> str:
    """The line that says a change was merged, naming the other writer's lines."""
    parts = [f"lines removed after line {last}" if first > last
             else f"line {first}" if first == last else f"lines {first}-{last}"
             for first, last in ranges[:limits.listed]]
    if len(ranges) > limits.listed:
        parts.append(f"... ({len(ranges) - limits.listed} more)")
    where = ", ".join(parts) if parts else "no line (only line endings or the BOM)"
    return f"Merged with a change made since you read it: {where}."


def _edit_view(r: EditResult, max_chars: int) -> tuple[str, list[int], list[str]]:
    """The text of an edit, the line numbers it lists and the snippet lines it shows."""
    limits = _Limits(max_chars)
    path = _clip(r.path, limits.path)
    listed = r.lines[:limits.listed]
    where = ", ".join(map(str, listed))
    if len(r.lines) > len(listed):
        where += f", ... ({len(r.lines) - len(listed)} more)"
    head = (f"Edited {path}: replaced {_plural(r.replacements, 'occurrence')} at "
            f"{'line' if len(r.lines) == 1 else 'lines'} {where}.")
    if r.merged:
        head += "\n" + _merged_note(r.merged_lines or [], limits)
    if not r.snippet:
        return f"{head}\n(The file is now empty.)", listed, []
    around = ", around the first change" if r.replacements > 1 else ""
    # Room for the intro line and a possible cut note.
    room = max_chars - len(head) - 60 - len(around)
    shown = _fit(r.snippet_start, r.snippet, limits, room)
    if len(shown) < len(r.snippet):
        shown = _fit(r.snippet_start, r.snippet, limits, room - _FOOTER_ROOM)
    end = r.snippet_start + len(shown) - 1
    text = (f"{head}\n{_span(r.snippet_start, end).capitalize()} of the edited file"
            f"{around}:\n"
            + _numbered_lines(r.snippet_start, shown))
    if len(shown) < len(r.snippet):
        text += (f"\n(Snippet cut at {max_chars} characters; read from offset={end + 1} "
                 "to see the rest of the change.)")
    return text, listed, shown


def render_edit(r: EditResult, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    return _edit_view(r, max_chars)[0]


# -- glob, grep, ls -----------------------------------------------------------------


def _fit_rows(rows: list[str], room: int) -> int:
    """How many leading ``rows`` fit in ``room`` characters, joined by newlines."""
    used = -1
    for i, row in enumerate(rows):
        used += len(row) + 1
        if used > room:
            return i
    return len(rows)


def _listing(rows: list[str], footer: list[str], max_chars: int, what: str
             ) -> tuple[str, int]:
    """Rows then footer notes within ``max_chars``; the number of rows shown."""
    def text(n: int, notes: list[str]) -> str:
        body = "\n".join(rows[:n])
        tail = "\n".join(f"({note})" for note in notes)
        return f"{body}\n\n{tail}" if body and tail else body or tail

    full = text(len(rows), footer)
    if len(full) <= max_chars:
        return full, len(rows)
    notes = [n if len(n) <= _FOOTER_ROOM // 2 else n[:_FOOTER_ROOM // 2] for n in footer]
    room = max_chars - _FOOTER_ROOM - sum(len(n) + 3 for n in notes)
    n = _fit_rows(rows, max(0, room))
    cut = (f"Output truncated at {max_chars} characters: showing {n} of "
           f"{_plural(len(rows), what)}")
    return text(n, [cut, *notes]), n


def _glob_view(r: GlobResult, max_chars: int) -> tuple[str, list[str]]:
    limits = _Limits(max_chars)
    if not r.paths:
        return "No files found.", []
    rows = [_clip(p, limits.path) for p in r.paths]
    footer = []
    if r.truncated:
        footer.append(f"Showing the {len(r.paths)} newest matching files; more matched. "
                      "Narrow the pattern or pass a path to see the others.")
    text, n = _listing(rows, footer, max_chars, "path")
    return text, rows[:n]


def render_glob(r: GlobResult, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    return _glob_view(r, max_chars)[0]


_SKIP_WORDS = {"too_large": "over the size cap", "not_text": "not text (binary or not UTF-8)",
               "unreadable": "unreadable (changed or vanished while searched)"}


def _grep_rows(r: GrepResult, limits: _Limits) -> tuple[list[str], list[int]]:
    """The rows of a grep text, and for each row the index of the entry it shows (-1
    for a ``--`` separator)."""
    rows: list[str] = []
    index: list[int] = []
    if r.mode == "files_with_matches":
        return [_clip(p, limits.path) for p in r.files], list(range(len(r.files)))
    if r.mode == "count":
        items = list(r.counts.items())
        return ([f"{_clip(p, limits.path)}:{n}" for p, n in items], list(range(len(items))))
    grouped = any(m.context for m in r.matches)
    prev: GrepMatch | None = None
    for i, m in enumerate(r.matches):
        if grouped and prev is not None and (prev.path != m.path or m.line != prev.line + 1):
            rows.append("--")
            index.append(-1)
        sep = "-" if m.context else ":"
        rows.append(f"{_clip(m.path, limits.path)}{sep}{m.line}{sep}"
                    f"{_clip_line(m.text, limits.line, m.chars)}")
        index.append(i)
        prev = m
    return rows, index


def _grep_view(r: GrepResult, max_chars: int) -> tuple[str, int]:
    """The text of a grep, and how many entries it shows."""
    limits = _Limits(max_chars)
    what = {"files_with_matches": "file", "content": "line", "count": "count"}[r.mode]
    rows, index = _grep_rows(r, limits)
    footer = []
    if r.truncated:
        shown = len(r.files) if r.mode == "files_with_matches" else len(
            r.counts if r.mode == "count" else r.matches)
        footer.append(f"Showing the first {_plural(shown, what)} (by path); more matched. "
                      "Narrow the pattern, path or glob, or raise head_limit.")
    if r.skipped:
        total = sum(r.skipped.values())
        why = ", ".join(f"{n} {_SKIP_WORDS.get(k, k)}" for k, n in r.skipped.items())
        footer.append(f"Skipped {_plural(total, 'file')}: {why}.")
    if r.ignore_rules_not_applied:
        footer.append(f"{_plural(r.ignore_rules_not_applied, '.gitignore wildcard rule')} "
                      f"over the limit of {MAX_IGNORE_PATTERNS} per file not applied.")
    if not rows:
        head = f"No matches found in {_plural(r.files_searched, 'file')} searched."
        return "\n".join([head, *(f"({n})" for n in footer)]), 0
    text, n = _listing(rows, footer, max_chars, what)
    # A `--` left last by the cut is dropped by never counting it as an entry.
    shown = len([i for i in index[:n] if i >= 0])
    return text, shown


def render_grep(r: GrepResult, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    return _grep_view(r, max_chars)[0]


def _ls_view(r: ListResult, max_chars: int) -> tuple[str, int]:
    limits = _Limits(max_chars)
    if not r.entries:
        return f"(Empty directory: {_clip(r.path, limits.path)})", 0
    rows = [f"{_clip(e.name, limits.path)}/" if e.kind == "dir"
            else _clip(e.name, limits.path) + ("" if e.size is None else f"  ({e.size} bytes)")
            for e in r.entries]
    footer = []
    if r.truncated:
        footer.append(f"Showing the first {len(r.entries)} entries by name; the directory "
                      "has more. Use glob to find files in it.")
    return _listing(rows, footer, max_chars, "entry")


def render_ls(r: ListResult, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    return _ls_view(r, max_chars)[0]


def render_result(r: ToolResult, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    """Model text for a result."""
    if isinstance(r, ReadResult):
        return render_read(r, max_chars)
    if isinstance(r, WriteResult):
        return render_write(r, max_chars)
    if isinstance(r, GlobResult):
        return render_glob(r, max_chars)
    if isinstance(r, GrepResult):
        return render_grep(r, max_chars)
    if isinstance(r, ListResult):
        return render_ls(r, max_chars)
    if isinstance(r, PatchResult):
        return render_patch(r, max_chars)
    if isinstance(r, MediaResult):
        from toolfs.render.media import media_view

        return media_view(r, max_chars)[0]
    if isinstance(r, NotebookReadResult | NotebookEditResult):
        from toolfs.render import notebook as notebook_render  # it builds on this module

        if isinstance(r, NotebookReadResult):
            return notebook_render.render_notebook_read(r, max_chars)
        return notebook_render.render_notebook_edit(r, max_chars)
    return render_edit(r, max_chars)


def render_patch(r: PatchResult, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    """The Agents SDK's own result strings (``Created x``, ``Updated x``, ``Deleted x``,
    ``Updated x\nMoved x to y``): the texts apply_patch models were trained on."""
    limit = _Limits(max_chars).path
    path = _clip(r.path, limit)
    if r.action == "deleted":
        return f"Deleted {path}"
    if r.action == "created":
        return f"Created {path}"
    if r.moved_to is not None:
        return f"Updated {path}\nMoved {path} to {_clip(r.moved_to, limit)}"
    return f"Updated {path}"


# -- errors -------------------------------------------------------------------------


def render_error(e: FsError, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    """Model text for an error: code, message, what to do next; for a ``stale`` refusal
    the diff since the observed version comes between message and advice."""
    limits = _Limits(max_chars)
    where = f" ({_clip(e.path, limits.path)})" if e.path and e.path not in e.message else ""
    head = f"Error [{e.code}]{where}: {_clip_message(e.message, limits.message)}\n"
    return head + error_diff(e, max_chars - len(head) - len(e.advice) - 1) + e.advice


def error_diff(e: FsError, room: int) -> str:
    """The diff a ``stale`` refusal carries (``details["diff"]``), as the lines that go
    between its message and its advice, within ``room`` characters; ``""`` without one.
    A complete diff is shown whole (the policy keeps it within :func:`diff_budget`);
    one cut by the policy, or too long for ``room``, is cut at a line and says so."""
    diff = e.details.get("diff")
    if not isinstance(diff, str) or not diff:
        return ""
    if e.details.get("diff_complete") and len(diff) + 30 <= room:
        return "Changes since you read it:\n" + diff
    note = "[diff cut: the change is larger than this; read the file]\n"
    cut = diff[:max(0, room - len(note) - 40)]
    return "Changes since you read it (first part):\n" + cut[:cut.rfind("\n") + 1] + note


def diff_budget(max_chars: int) -> int:
    """The most characters of diff a ``stale`` refusal may carry for its whole diff to be
    shown within ``max_chars`` next to the longest message, path and advice (what a
    ``Workspace`` gives its policy as ``diff_chars``, at most the policy's default)."""
    limits = _Limits(max_chars)
    return max(0, max_chars - limits.message - limits.path - 300)
